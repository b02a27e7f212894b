"""The declarative model: CVXPY variable attributes become (or are refused as) domain constraints."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.error import DomainError, UnboundedDomainError
from cvxdp.geometry import Box


def test_bounds_alone_make_a_box():
    w = cp.Variable(3, bounds=[-1, 2])
    model = cvxdp.Model(cvxdp.losses.absolute(w), [])
    assert isinstance(model.domain, Box)
    assert model.domain.contains(np.array([-1.0, 2.0, 0.5])) and not model.domain.contains(np.full(3, 2.5))


def test_sign_attributes_join_the_constraints():
    w = cp.Variable(3, nonneg=True)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 1])
    assert model.domain.contains(np.array([0.5, 0.0, 0.5]))
    assert not model.domain.contains(np.array([0.5, -0.2, 0.5]))  # the attribute was dropped before
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    res = cvxdp.PrivateProblem(model).solve({"x": X, "y": X @ np.array([0.3, -0.4, 0.1])}, epsilon=1.0,
                                            moment_k=4, G_k=3.0, tail_share=0.0,
                                            algorithm="output-perturbation")
    assert np.all(res.w >= 0.0) and model.domain.contains(res.w)
    v = cp.Variable(2, nonpos=True)
    signed = cvxdp.Model(cvxdp.losses.absolute(v), [cp.norm(v, 2) <= 1])
    assert not signed.domain.contains(np.full(2, 0.1))


def test_no_domain_shape_warns_of_a_certificate_gap():
    """A ball cut by several half-spaces (an orthant, a box) was the one shape whose face-active optima
    could refuse; its distance bound is now tight there (tests/test_geometry_certified.py), so no
    domain warns any more."""
    import warnings

    w = cp.Variable(3)
    for cons in ([cp.norm(w) <= 1], [cp.norm(w) <= 1, w >= 0, w <= 1], [cp.norm(w) <= 1, w[0] >= 0],
                 [w >= 0, w <= 1], [cp.norm(w) <= 1, w >= 0],
                 [cp.norm(w) <= 1, w[0] >= 0, w[1] + w[2] <= 0.5]):
        with warnings.catch_warnings():
            warnings.simplefilter("error", cvxdp.PrivacyLeakWarning)
            cvxdp.Model(cvxdp.losses.absolute(w), cons)


@pytest.mark.parametrize("attr", ["integer", "boolean"])
def test_integer_and_boolean_variables_are_refused(attr):
    w = cp.Variable(3, **{attr: True})
    with pytest.raises(DomainError, match=f"{attr}=True"):
        cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 1])


def test_no_constraints_and_no_bounds_is_still_unbounded():
    w = cp.Variable(2, nonneg=True)  # a half-space is not bounded
    with pytest.raises(UnboundedDomainError):
        cvxdp.Model(cvxdp.losses.absolute(w), [])


def test_infinite_bounds_are_open_sides_and_contradictions_are_refused():
    w = cp.Variable(2, bounds=[np.array([-1.0, -np.inf]), np.array([1.0, 0.0])])
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 2])
    assert model.domain.contains(np.array([0.5, -1.5])) and not model.domain.contains(np.array([0.5, 0.5]))
    v = cp.Variable(2, nonneg=True, nonpos=True)
    with pytest.raises(DomainError, match="single point"):
        cvxdp.Model(cvxdp.losses.absolute(v), [cp.norm(v, 2) <= 1])


def test_no_model_warns_of_a_label_outlier_refusal_any_more():
    """A squared loss off a ball used to warn (PrivacyLeakWarning) that a huge label could make it refuse;
    its level is now dropped exactly (cvxdp.extension.affine_reduction), so no domain warns."""
    import warnings

    w = cp.Variable(2)
    for loss, cons in ((cvxdp.losses.squared(w), [w >= -1, w <= 1]),
                       (cvxdp.losses.squared(w), [cp.norm(w, 2) <= 1]),
                       (cvxdp.losses.absolute(w), [w >= -1, w <= 1]),
                       (cvxdp.losses.huber(w), [w >= -1, w <= 1])):
        with warnings.catch_warnings():
            warnings.simplefilter("error", cvxdp.PrivacyLeakWarning)
            cvxdp.Model(loss, cons)


def test_a_domain_too_large_to_certify_is_refused_before_any_data():
    """A ball of radius 1e15 (and a box [-7e11, 7e11]² with hinge) let one record of features 1e100 make
    the fit refuse after its charges (found by review).  The limit is public: the model is refused at
    construction, before any data, whatever the data."""
    w = cp.Variable(2)
    cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 1e11])
    for constraints in ([cp.norm(w, 2) <= 1e15], [cp.norm(w, 2) <= 1e12], [w >= -7e11, w <= 7e11],
                        [cp.norm(w - 1e101, 2) <= 1.0]):
        with pytest.raises(DomainError, match="too large"):
            cvxdp.Model(cvxdp.losses.absolute(w), constraints)


def test_a_record_with_coefficients_near_the_float_limit_releases():
    """``|s r t (y − <x, w>)|`` with ``s = r = t = 1e100``: finite coefficients of about 1e300, within the
    data domain; the exact path's precision from ``1e300 / tolerance`` overflowed ``math.ceil`` (an
    ``OverflowError`` after the charges, found by review).  Both neighbours release."""
    rng = np.random.default_rng(0)
    w = cp.Variable(2)
    x, y = cp.Parameter(2, name="x"), cp.Parameter(name="y")
    s, r, t = cp.Parameter(name="s"), cp.Parameter(name="r"), cp.Parameter(name="t")
    model = cvxdp.Model(cvxdp.Loss(cp.abs(s * r * t * (y - x @ w)), w, data=[x, y, s, r, t]),
                        [cp.norm(w, 2) <= 1.0])
    n = 40
    X = rng.standard_normal((n, 2))
    data = {"x": X, "y": X @ [0.5, -0.5] + 0.3 * rng.standard_normal(n), "s": np.ones(n), "r": np.ones(n),
            "t": np.ones(n)}
    big = {k: v.copy() for k, v in data.items()}
    big["s"][-1] = big["r"][-1] = big["t"][-1] = 1e100
    for d in (data, big):
        res = cvxdp.PrivateProblem(model).solve(d, epsilon=1.0, moment_k=4.0, G_k=3.0, random_state=0)
        assert np.all(np.isfinite(res.w))
