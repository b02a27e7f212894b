"""The declarative loss: checks, data binding, structure recognition, batched evaluation."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cvxdp
from cvxdp.error import DataError, ModelError, NonConvexLossError
from cvxdp.evaluation import UnsupportedAtom, evaluate, evaluate_per_example
from cvxdp.links import HuberLink, LogisticLink, PiecewiseLinearLink, SquareLink
from cvxdp.loss import Examples


def _xy(d=3):
    w = cp.Variable(d)
    return w, cp.Parameter(d, name="x"), cp.Parameter(name="y")


def _reference(expr, leaves, m):
    return evaluate_per_example(expr, leaves, m)


@pytest.mark.parametrize("make, kind", [
    (lambda w, x, y: cp.pos(1 - y * (x @ w)), "piecewise-linear"),
    (lambda w, x, y: cp.abs(y - x @ w), "piecewise-linear"),
    (lambda w, x, y: cp.maximum(0.2 * (y - x @ w), -0.8 * (y - x @ w)), "piecewise-linear"),
    (lambda w, x, y: 0.5 * cp.abs(y - x @ w) + 0.3 * (y - x @ w), "piecewise-linear"),
    (lambda w, x, y: cp.neg(x @ w - y), "piecewise-linear"),
    (lambda w, x, y: cp.max(cp.hstack([x @ w, y * w[0], 1 - w[1]])), "piecewise-linear"),
    (lambda w, x, y: cp.huber(y - x @ w, 2.0), "smooth-glm"),
    (lambda w, x, y: 3 * cp.square(y - x @ w), "smooth-glm"),
    (lambda w, x, y: cp.logistic(-y * (x @ w)), "smooth-glm"),
    (lambda w, x, y: cp.log_sum_exp(cp.hstack([x @ w, y * w[0]])), "generic"),
    (lambda w, x, y: cp.norm(w - x, 2), "generic"),
])
def test_structure_recognition_and_numeric_form(make, kind, rng):
    w, x, y = _xy()
    expr = make(w, x, y)
    loss = cvxdp.Loss(expr, w, data=[x, y])
    assert loss.structure.kind == kind
    m = 25
    X, Y = rng.standard_t(3, size=(m, 3)), np.sign(rng.normal(size=m))
    ex = loss.bind({"x": X, "y": Y})
    P = rng.normal(size=(m, 3))
    ref = _reference(expr, {w: P, x: X, y: Y}, m)
    assert np.allclose(loss.values(P, ex), ref, atol=1e-12)
    if kind == "piecewise-linear":
        A, b = ex.pieces()
        assert np.allclose(np.max(np.einsum("mjd,md->mj", A, P) + b, axis=1), ref, atol=1e-12)
    glm = ex.glm()
    assert (glm is None) == (kind == "generic")
    if glm is not None:
        a, b, link = glm
        ok = glm.is_glm  # the link form is the loss exactly where it applies
        assert np.allclose(link.value(np.einsum("md,md->m", a, P) + b)[ok], ref[ok], atol=1e-12)
        # parallel pieces (a GLM) for every loss here but the max over non-parallel slopes
        assert np.all(ok) == (type(expr).__name__ != "max")


def test_affine_data_survive_labels_far_larger_than_features():
    """A label 1e17 beside unit features: one difference at y = e_k rounds the slope to 0.

    The recovered pieces must be the loss's own, ``±(<x_i, w> − y_i)``, to the last
    bits, for ordinary and extreme examples alike, and the per-example Lipschitz
    constant must be ``||x_i||``, not 0.
    """
    from cvxdp.privacy.tail import lipschitz_constants

    w = cp.Variable(2)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 1.0])
    X = np.array([[1.0, 2.0], [3.0, -0.5], [1e-3, 7.0], [0.0, 1.0], [1e90, -1e90]])
    y = np.array([1e17, 0.5, -3e15, 2.0**60, 1.0])
    assert (y[0] + X[0, 0]) - y[0] == 0.0  # what a single difference at y = e_1 recovers
    A, b = model.bind({"x": X, "y": y}).pieces()
    sign = -b / y[:, None]  # piece j is sign_ij (<x_i, w> − y_i)
    assert np.all(np.sort(sign, axis=1) == [-1.0, 1.0])
    np.testing.assert_allclose(A, sign[:, :, None] * X[:, None, :], rtol=1e-12, atol=0)
    np.testing.assert_allclose(lipschitz_constants(model, model.bind({"x": X, "y": y})),
                               np.linalg.norm(X, axis=1), rtol=1e-12)


def test_recovered_affine_data_depend_on_their_own_example_only(rng):
    """Refining one example (a zero feature beside a label) must not touch any other's data.

    The sensitivity arguments need each example's recovered ``(a, b)`` to be a function of
    that example alone, to the last bit.
    """
    w = cp.Variable(3)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 1.0])
    X = rng.uniform(0.1, 1.0, size=(200, 3))
    y = rng.uniform(-10.0, 10.0, size=200)
    A1, b1 = model.bind({"x": X, "y": y}).pieces()
    X2, y2 = X.copy(), y.copy()
    X2[-1], y2[-1] = [0.0, 1e-3, 2.0], 1e17  # forces every refinement step for this example
    A2, b2 = model.bind({"x": X2, "y": y2}).pieces()
    assert np.array_equal(A1[:-1], A2[:-1]) and np.array_equal(b1[:-1], b2[:-1])
    # every coefficient to 2^-40 of the example's largest
    np.testing.assert_allclose(np.abs(A2[-1]), np.tile([0.0, 1e-3, 2.0], (2, 1)), rtol=0, atol=2.0**-39)


def test_affine_recovery_skips_steps_that_overflow():
    """``s r (y − <x, w>)`` with a slope 1e277 under a constant 2^70 times larger.

    The step 2^52 recovers the slope to ~1e-10 but not to its 2^-40 target, so the next
    step, 2^104, is tried — and overflows.  Only the finite estimate may be kept: an
    infinite or NaN coefficient would poison every certificate of that example.
    """
    w = cp.Variable(2)
    x, y = cp.Parameter(2, name="x"), cp.Parameter(name="y")
    s, r = cp.Parameter(name="s"), cp.Parameter(name="r")
    loss = cvxdp.Loss(cp.abs(s * r * (y - x @ w)), w, data=[x, y, s, r])
    data = {"x": np.array([[1e77, 0.0], [1.0, 2.0]]), "y": np.array([1e77 * 2.0**70, 3.0]),
            "s": np.array([1e100, 1.0]), "r": np.array([1e100, 1.0])}
    assert not np.isfinite(1e277 * 2.0**104)
    A, b = loss.bind(data).pieces()
    assert np.all(np.isfinite(A)) and np.all(np.isfinite(b))
    np.testing.assert_allclose(np.abs(A[0, :, 0]), 1e277, rtol=1e-8)
    assert np.all(A[0, :, 1] == 0.0)
    np.testing.assert_allclose(np.abs(A[1]), [[1.0, 2.0], [1.0, 2.0]], rtol=1e-15)


def test_glm_links_of_canned_losses():
    w = cp.Variable(2)
    rng = np.random.default_rng(0)
    data = {"x": rng.normal(size=(4, 2)), "y": np.array([1.0, -1.0, 1.0, -1.0])}
    expect = {
        "hinge": PiecewiseLinearLink, "absolute": PiecewiseLinearLink,
        "pinball": PiecewiseLinearLink, "affine": PiecewiseLinearLink, "huber": HuberLink,
        "squared": SquareLink, "logistic": LogisticLink,
    }
    for name, cls in expect.items():
        loss = getattr(cvxdp.losses, name)(w)
        assert isinstance(loss.bind(data).glm()[2], cls), name


def test_max_affine_loss(rng):
    w = cp.Variable(3)
    loss = cvxdp.losses.max_affine(w, 4)
    A, b = rng.normal(size=(6, 4, 3)), rng.normal(size=(6, 4))
    ex = loss.bind({"A": A, "b": b})
    P = rng.normal(size=(6, 3))
    assert np.allclose(loss.values(P, ex), np.max(np.einsum("mjd,md->mj", A, P) + b, axis=1))
    assert not ex.glm().is_glm.any()  # pieces are not parallel


def test_glm_form_is_decided_per_example_and_survives_subsets(rng):
    """``is_glm`` is each example's own verdict; subsets keep each row's form, bit for bit.

    Replacing one example by one with non-parallel pieces flips that example only (the old
    test was ``np.all`` over the data set, which moved every example's Lipschitz constant and
    oracle path).
    """
    w = cp.Variable(3)
    loss = cvxdp.losses.max_affine(w, 2)
    m = 12
    A = rng.normal(size=(m, 2, 1)) * rng.normal(size=(m, 1, 3))  # parallel pieces: a GLM each
    b = rng.normal(size=(m, 2))
    A[4] = rng.normal(size=(2, 3))  # ... but this one
    A[7] = 0.0  # constant pieces count as parallel
    ex = loss.bind({"A": A, "b": b})
    glm = ex.glm()
    assert np.array_equal(glm.is_glm, np.arange(m) != 4)
    P = rng.normal(size=(m, 3))
    ok = glm.is_glm
    vals = np.max(np.einsum("mjd,md->mj", *ex.pieces()[:1], P) + ex.pieces()[1], axis=1)
    np.testing.assert_allclose(glm.link.value(np.einsum("md,md->m", glm.a, P))[ok], vals[ok], rtol=1e-12)
    idx = np.array([9, 4, 0, 7])
    sub = ex.subset(idx).glm()
    assert np.array_equal(sub.is_glm, glm.is_glm[idx]) and np.array_equal(sub.a, glm.a[idx])
    assert np.array_equal(sub.link.slopes, glm.link.slopes[idx])
    fresh = loss.bind({"A": A[idx], "b": b[idx]}).glm()  # computed on the subset alone: same bits
    assert np.array_equal(fresh.a, sub.a) and np.array_equal(fresh.link.intercepts, sub.link.intercepts)
    a_, b_, link_ = glm  # unpacks like the old (a, b, link) triple
    assert a_ is glm.a and b_ is glm.b and link_ is glm.link and glm[2] is glm.link


@pytest.mark.parametrize("block", [1, 5, 64])
def test_glm_form_has_the_same_bits_in_any_row_block(rng, monkeypatch, block):
    """The form is built ``FORM_BLOCK`` rows at a time (its temporaries set a fit's peak memory); every
    row's ``(â, κ, is_glm)`` must be the bits of the whole-batch computation, blocks of one row included,
    with rows at the scales the scaled norms exist for, non-finite rows and constant rows among them."""
    import cvxdp.loss as loss_module

    m, J, d = 203, 3, 6
    x = rng.standard_t(2, size=(m, d)) * 10.0 ** rng.integers(-150, 150, size=(m, 1))
    A = rng.normal(size=(m, J))[:, :, None] * x[:, None, :]
    A[::9] += 1e-13 * rng.normal(size=A[::9].shape) * np.abs(A[::9]).max(axis=(1, 2))[:, None, None]
    A[3], A[5, 0, 0], A[6, 1, 2], A[8], A[10] = 0.0, np.nan, np.inf, rng.normal(size=(J, d)), 1e300
    b = rng.normal(size=(m, J))
    whole = loss_module._glm_of_pieces(A, b)  # one block: FORM_BLOCK exceeds m
    assert loss_module.FORM_BLOCK > m
    monkeypatch.setattr(loss_module, "FORM_BLOCK", block)
    blocked = loss_module._glm_of_pieces(A, b)
    for u, v in [(whole.a, blocked.a), (whole.link.slopes, blocked.link.slopes),
                 (whole.link.intercepts, blocked.link.intercepts), (whole.is_glm, blocked.is_glm)]:
        assert np.array_equal(u, v, equal_nan=True)
    assert not whole.is_glm[8] and not whole.is_glm[6] and whole.is_glm[3]
    assert not whole.is_glm[5]  # a NaN coefficient fails the parallel test too (scaled norms map it to 0)


def test_pieces_of_an_all_glm_batch_are_read_off_the_form_when_asked(rng):
    """A batch whose every example is generalized linear keeps its form only (the pieces would hold
    ``J + 1`` times the features); asked for, the pieces are the form's, the same bits as a batch with
    one other example gives for those rows, and a subset's pieces are the subset of the batch's."""
    w = cp.Variable(4)
    loss = cvxdp.losses.max_affine(w, 2)
    m = 9
    A = rng.normal(size=(m, 2, 1)) * rng.normal(size=(m, 1, 4))
    b = rng.normal(size=(m, 2))
    ex = loss.bind({"A": A, "b": b})
    assert bool(np.all(ex.glm().is_glm)) and "pieces" not in ex._cache
    P, q = ex.pieces()
    mixed_A = A.copy()
    mixed_A[0] = rng.normal(size=(2, 4))  # not generalized linear: the batch keeps pieces
    mixed = loss.bind({"A": mixed_A, "b": b})
    assert not mixed.glm().is_glm[0] and "pieces" in mixed._cache
    Pm, qm = mixed.pieces()
    assert np.array_equal(P[1:], Pm[1:]) and np.array_equal(q[1:], qm[1:])
    np.testing.assert_allclose(Pm[0], mixed_A[0], rtol=1e-12)  # its own recovered pieces, not a stand-in
    idx = np.array([7, 2, 5])
    fresh = loss.bind({"A": A, "b": b}).subset(idx)
    assert np.array_equal(fresh.pieces()[0], P[idx]) and np.array_equal(fresh.pieces()[1], q[idx])


@pytest.mark.parametrize("make, error", [
    (lambda w, x, y: -cp.abs(x @ w), NonConvexLossError),
    (lambda w, x, y: cp.sqrt(cp.abs(x @ w) + 1), NonConvexLossError),
    (lambda w, x, y: y * cp.abs(x @ w), NonConvexLossError),
    (lambda w, x, y: cp.abs(y) + 1, ModelError),
    (lambda w, x, y: cp.abs(x @ w - cp.Variable()), ModelError),
    (lambda w, x, y: cp.abs(x @ w) + cp.Parameter(name="z", value=1.0), ModelError),
    (lambda w, x, y: cp.abs(x * y - w), ModelError),
])
def test_bad_losses(make, error):
    w, x, y = _xy()
    with pytest.raises(error) as info:
        cvxdp.Loss(make(w, x, y), w, data=[x, y])
    assert len(str(info.value)) > 30


def test_bad_variable_and_expression():
    with pytest.raises(ModelError):
        cvxdp.Loss(cp.abs(cp.sum(cp.Variable((2, 2)))), cp.Variable((2, 2)))
    with pytest.raises(ModelError):
        cvxdp.Loss("not an expression", cp.Variable(2))


@pytest.mark.parametrize("data, message", [
    ({"x": np.ones((4, 3))}, "no data"),
    ({"x": np.ones((4, 3)), "y": np.ones(5)}, "examples"),
    ({"x": np.ones((4, 2)), "y": np.ones(4)}, "shape"),
    ({"x": np.full((4, 3), np.nan), "y": np.ones(4)}, "NaN"),
    ({"x": np.full((4, 3), np.inf), "y": np.ones(4)}, "infinite"),
    ({"x": np.ones((0, 3)), "y": np.ones(0)}, "empty"),
    ({"x": np.ones((4, 3)), "y": np.ones(4), "z": np.ones(4)}, "unknown"),
    ({"x": [["a"] * 3] * 4, "y": np.ones(4)}, "numeric"),
    ({"x": np.ones((4, 3)) + 1j, "y": np.ones(4)}, "real"),
    ({"x": np.ones((4, 3)), "y": np.array([1.0, 0.0, 1.0, -1.0])}, "labels"),
    ({"x": np.ones(3), "y": 1.0}, "shape"),
])
def test_bad_data(data, message):
    w = cp.Variable(3)
    loss = cvxdp.losses.hinge(w)
    with pytest.raises(DataError, match=message):
        loss.bind(data)


def test_parameter_attributes_are_enforced():
    w = cp.Variable(2)
    s = cp.Parameter(nonneg=True, name="s")
    x = cp.Parameter(2, name="x")
    loss = cvxdp.Loss(s * cp.abs(x @ w), w, data=[x, s])
    with pytest.raises(DataError, match="nonneg"):
        loss.bind({"x": np.ones((3, 2)), "s": np.array([1.0, -1.0, 2.0])})


def test_unsupported_atom_falls_back_to_cvxpy(rng):
    w, x, y = _xy(2)
    expr = cp.kl_div(x @ w + 10, 1) + cp.abs(y)
    with pytest.raises(UnsupportedAtom):
        evaluate(expr, {w: np.zeros((1, 2)), x: np.ones((1, 2)), y: np.ones(1)})
    loss = cvxdp.Loss(expr, w, data=[x, y])
    X, Y = rng.normal(size=(5, 2)), rng.normal(size=5)
    P = rng.normal(size=(5, 2))
    ex = loss.bind({"x": X, "y": Y})
    assert np.allclose(loss.values(P, ex), _reference(expr, {w: P, x: X, y: Y}, 5))


ATOMS = [
    lambda w, X, v: cp.sum(cp.abs(X @ w - v)),
    lambda w, X, v: cp.max(X @ w) + cp.min(X @ w - v),
    lambda w, X, v: cp.norm(X @ w, 1) + cp.norm(X @ w - v, "inf") + cp.norm(X.T @ v - w, 3),
    lambda w, X, v: cp.sum_squares(X @ w) / 3 + cp.quad_over_lin(w, 2.0),
    lambda w, X, v: cp.log_sum_exp(cp.hstack([X @ w, v])) + cp.sum_largest(X @ w, 2),
    lambda w, X, v: cp.sum(cp.huber(X @ w - v, 0.5)) + cp.sum(cp.logistic(X @ w)),
    lambda w, X, v: cp.quad_form(w, np.diag([1.0, 2.0, 3.0])) + cp.sum(cp.exp(w)),
    lambda w, X, v: cp.sum(cp.maximum(X @ w, v, 0)) - cp.sum(cp.minimum(w, 1)),
    lambda w, X, v: cp.sum(cp.multiply(v, X @ w)) + cp.sum(cp.vstack([w, w])[1, :]),
    lambda w, X, v: cp.sum(cp.reshape(cp.hstack([w, w]), (2, 3), order="F")[1]) + (X @ w)[0],
    lambda w, X, v: cp.sum(cp.power(cp.abs(X @ w) + 1, 1.5)) + cp.sum(cp.inv_pos(w[0] + 5)),
]


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), which=st.integers(0, len(ATOMS) - 1),
       m=st.integers(1, 6))
def test_batched_evaluation_matches_cvxpy(seed, which, m):
    rng = np.random.default_rng(seed)
    w = cp.Variable(3)
    X = cp.Parameter((2, 3))
    v = cp.Parameter(2)
    expr = ATOMS[which](w, X, v)
    leaves = {w: rng.normal(size=(m, 3)), X: rng.normal(size=(m, 2, 3)),
              v: rng.normal(size=(m, 2))}
    batched = evaluate(expr, leaves).reshape(-1)
    assert np.allclose(np.broadcast_to(batched, (m,)), _reference(expr, leaves, m).reshape(-1),
                       rtol=1e-12, atol=1e-12)


def test_label_refusal_quotes_no_label_from_the_data():
    w = cp.Variable(2)
    loss = cvxdp.losses.hinge(w)
    with pytest.raises(cvxdp.error.DataError) as info:
        loss.bind({"x": np.ones((3, 2)), "y": np.array([1.0, -1.0, 7.25])})
    assert "7.25" not in str(info.value) and "-1 or +1" in str(info.value)


def test_two_placeholders_with_one_name_are_explained():
    w = cp.Variable(2)
    x1, x2 = cp.Parameter(2, name="x"), cp.Parameter(2, name="x")
    with pytest.raises(cvxdp.ModelError, match="share the name 'x'"):
        cvxdp.Loss(cp.abs(x1 @ w) + cp.abs(x2 @ w), w, data=[x1, x2])


def test_a_column_variable_is_explained():
    w = cp.Variable((2, 1))
    x = cp.Parameter((1, 2), name="x")
    with pytest.raises(cvxdp.ModelError, match=r"cp.Variable\(d\)"):
        cvxdp.Loss(cp.abs(x @ w)[0, 0], w, data=[x])


def test_the_per_example_fallback_leaves_no_data_on_the_placeholders():
    """Found by review: a loss without a batched rule (``kl_div``) is evaluated example by example, and
    its placeholders kept the last example's values afterwards — data stored on the user's model."""
    w = cp.Variable(1)
    x, y = cp.Parameter(1, name="x"), cp.Parameter(name="y")
    loss = cvxdp.Loss(cp.kl_div(2.0 + x @ w, 1.0) + 0 * y, w, data={"x": x, "y": y})
    assert not loss._batchable
    ex = loss.bind({"x": np.array([[0.1], [0.2], [0.123]]), "y": np.array([1.0, 2.0, 98765.0])})
    loss.values(np.array([0.5]), ex)
    assert x.value is None and y.value is None and w.value is None


@pytest.mark.parametrize("make", [cvxdp.losses.hinge, cvxdp.losses.absolute,
                                  lambda w: cvxdp.losses.pinball(w, 0.3),
                                  lambda w: cvxdp.losses.pinball(w, 0.9)])
def test_a_shared_argument_gives_the_form_of_the_pieces(make):
    """Hinge, absolute value and pinball are a public link of one affine argument: the form read off the
    argument's coefficients is the form the pieces' parallel test gives (the same direction — the steepest
    piece's —, slopes and levels to rounding), on rows at every scale: subnormal, huge, zero, a label of
    10¹⁷."""
    from cvxdp.loss import _glm_of_pieces
    from cvxdp.structure import affine_coefficients

    rng = np.random.default_rng(21)
    w = cp.Variable(4)
    loss = make(w)
    shared = loss.structure.shared
    assert shared is not None and len(shared.slopes) == 2
    X = rng.standard_t(3.0, size=(60, 4))
    y = np.where(rng.random(60) < 0.5, 1.0, -1.0) * (1.0 if make is cvxdp.losses.hinge else 3.0)
    X[0] *= 1e-310
    X[1] *= 1e90
    X[2] = 0.0
    if make is not cvxdp.losses.hinge:
        y[3] = 1e17
    ex = loss.bind({"x": X, "y": y})
    form = ex.glm()
    reference = _glm_of_pieces(*affine_coefficients(loss.structure.pieces, w, ex.arrays, ex.m))
    assert np.all(form.is_glm) and np.all(reference.is_glm)
    # the subnormal row's differences carry fewer bits than its features: 1e-12 between the two
    np.testing.assert_allclose(form.a, reference.a, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(form.link.slopes, reference.link.slopes, rtol=1e-12, atol=0)
    np.testing.assert_allclose(form.link.intercepts, reference.link.intercepts, rtol=1e-15, atol=0)
    P = rng.normal(size=(ex.m, 4))
    np.testing.assert_allclose(form.link.value(np.einsum("md,md->m", form.a, P)),
                               loss.values(P, ex), rtol=1e-13, atol=1e-300)


def test_a_record_whose_coefficients_overflow_is_outside_the_data_domain():
    """``|s r t (y − <x, w>)|`` with ``s r t x = 10⁴⁰⁰``: each value is finite and at most ``10¹⁰⁰``, but the
    record's coefficients overflow, so no certificate can exist for it.  Binding refuses it — a
    precondition of the data domain decided from that record alone, before any release, with a message
    that carries no data-derived number — instead of a fit refusing later (after the tail histogram) on
    the strength of one record.  Without that record the rest binds, and each row's form has the bits
    it has in any batch."""
    w = cp.Variable(2)
    x, y = cp.Parameter(2, name="x"), cp.Parameter(name="y")
    s, r, t = cp.Parameter(name="s"), cp.Parameter(name="r"), cp.Parameter(name="t")
    loss = cvxdp.Loss(cp.abs(s * r * t * (y - x @ w)), w, data=[x, y, s, r, t])
    assert loss.structure.shared is not None
    data = {"x": np.array([[1.0, 2.0], [1e100, -1.0], [0.5, 0.25]]), "y": np.array([1.0, 2.0, -3.0]),
            "s": np.array([1.0, 1e100, 2.0]), "r": np.array([1.0, 1e100, 1.0]),
            "t": np.array([1.0, 1e100, 1.0])}
    with pytest.raises(DataError, match="outside the data domain") as caught:
        loss.bind(data)
    assert "1e+100" not in str(caught.value) and "400" not in str(caught.value)
    for rows in ([1], [0, 1], [1, 2]):  # any data set holding the record, whatever else it holds
        with pytest.raises(DataError, match="outside the data domain"):
            loss.bind({k: v[rows] for k, v in data.items()})
    rest = loss.bind({k: v[[0, 2]] for k, v in data.items()}).glm()
    for i, row in enumerate([0, 2]):
        alone = loss.bind({k: v[[row]] for k, v in data.items()}).glm()
        assert rest.a[i].tobytes() == alone.a[0].tobytes()
        assert rest.link.slopes[i].tobytes() == alone.link.slopes[0].tobytes()


def test_pieces_that_share_no_argument_keep_the_parallel_test():
    """A maximum of two different affine expressions, or of an argument and a data-dependent constant,
    has no public link: the pieces' own test decides (``shared`` is ``None``)."""
    w = cp.Variable(2)
    x, y = cp.Parameter(2, name="x"), cp.Parameter(name="y")
    assert cvxdp.Loss(cp.maximum(y - x @ w, x @ w), w, data=[x, y]).structure.shared is None
    assert cvxdp.Loss(cp.maximum(y - x @ w, y), w, data=[x, y]).structure.shared is None
    both = cvxdp.Loss(cp.maximum(2.0 * (y - x @ w), -(y - x @ w), 1.5), w, data=[x, y]).structure.shared
    assert both is None  # two distinct expression objects y − x@w: identity, not equality, is read
    u = y - x @ w
    three = cvxdp.Loss(cp.maximum(2.0 * u, -u, 1.5), w, data=[x, y]).structure.shared
    assert three is not None and three.slopes == (2.0, -1.0, 0.0) and three.intercepts == (0.0, 0.0, 1.5)


def test_scaled_norms_neither_overflow_nor_underflow():
    """The plain root of the sum of squares where it is safe, the norm scaled by the row's largest entry
    where a square could overflow or underflow; each row from its own values."""
    from cvxdp.loss import _scaled_norms

    rng = np.random.default_rng(4)
    V = rng.standard_t(3.0, size=(8, 6))
    V[1] *= 1e200
    V[2] *= 1e-200
    V[3] = 0.0
    V[4, 2] = np.nan
    V[5, 0] = np.inf
    V[6] = 5e-324  # subnormal entries only
    got = _scaled_norms(V)
    for i in (0, 1, 2, 7):
        scale = np.abs(V[i]).max()
        assert got[i] == pytest.approx(scale * np.linalg.norm(V[i] / scale), rel=8 * np.finfo(float).eps)
    # a NaN row maps to 0, as it always did: every caller tests the entries' finiteness itself
    assert got[3] == 0.0 and got[4] == 0.0 and got[5] == np.inf
    assert got[6] == pytest.approx(5e-324 * np.sqrt(6.0), rel=0.5)  # 2.47e-323 is where the subnormals fall
    alone = _scaled_norms(V[[0, 7]])
    assert alone.tobytes() == got[[0, 7]].tobytes()


def test_a_subnormal_record_prints_nothing_and_raises_nothing():
    """``x = (10⁻³¹⁰, 0)`` keeps its true slope in the shared-argument form, and the two-piece link's
    quotient overflows on it: that must not surface as a numpy warning or a ``FloatingPointError`` — one
    record would decide whether a line appears (found by review through ``estimate_moment_bound``)."""
    import warnings

    from cvxdp.privacy.ledger import PrivacyLedger
    from cvxdp.privacy.random import SecureRandom
    from cvxdp.privacy.tail import estimate_moment_bound

    rng = np.random.default_rng(2)
    w = cp.Variable(2)
    model = cvxdp.Model(cvxdp.losses.hinge(w), [cp.norm(w, 2) <= 1.0])
    X = rng.normal(size=(500, 2))
    X[5] = [1e-310, 0.0]
    data = {"x": X, "y": np.where(rng.random(500) < 0.5, 1.0, -1.0)}
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        model.bind(data).glm()
        estimate_moment_bound(model, data, k=4.0, epsilon=1.0, ledger=PrivacyLedger(500, 1.0),
                              source=SecureRandom())


def test_forms_of_long_rows_have_the_same_bits_alone_and_in_a_batch():
    """Beyond 8192 entries ``np.einsum`` rounds a lone row differently from a row of a batch; the norms and
    slopes of the form are sums of products instead, so a row's form is the same computed alone (as a
    data-dependent subset can leave it) or with others (found by review at d = 10⁴)."""
    from cvxdp.loss import _glm_of_pieces, _scaled_norms

    rng = np.random.default_rng(6)
    d = 8193
    # at 10⁴ entries a bare einsum's slopes differ for these rows (at 8193 its norms already do, below)
    A = rng.normal(size=(3, 1, 10_000)) * rng.uniform(0.5, 2.0, size=(3, 1, 1))
    b = rng.normal(size=(3, 1))
    together, alone = _glm_of_pieces(A, b), _glm_of_pieces(A[:1], b[:1])
    assert together.a[:1].tobytes() == alone.a.tobytes()
    assert together.link.slopes[:1].tobytes() == alone.link.slopes.tobytes()
    V = rng.normal(size=(4, d))
    assert _scaled_norms(V)[:1].tobytes() == _scaled_norms(V[:1]).tobytes()


def test_a_shared_argument_row_whose_slope_overflows_is_not_generalized_linear():
    """``|10¹⁰ (y − s t <x, w>)|`` with ``s t x = 10³⁰⁰``: the coefficient is finite, its slope ``10¹⁰ ·
    10³⁰⁰`` is not — the row must fail the gate, not carry an infinite slope (found by review).  Binding
    refuses such a record (outside the data domain); the gate itself is checked on examples built
    without that precondition."""
    w = cp.Variable(2)
    x, y = cp.Parameter(2, name="x"), cp.Parameter(name="y")
    s, t = cp.Parameter(name="s"), cp.Parameter(name="t")
    loss = cvxdp.Loss(cp.abs(1e10 * (y - s * (t * (x @ w)))), w, data=[x, y, s, t])
    assert loss.structure.shared is not None
    data = {"x": np.array([[1.0, 2.0], [1e100, 0.0]]), "y": np.array([1.0, 2.0]),
            "s": np.array([1.0, 1e100]), "t": np.array([1.0, 1e100])}
    with pytest.raises(DataError, match="outside the data domain"):
        loss.bind(data)
    arrays = {p: np.ascontiguousarray(data[name], dtype=float) for name, p in loss.placeholders.items()}
    form = Examples(loss=loss, arrays=arrays, m=2).glm()
    assert np.array_equal(form.is_glm, [True, False])


def test_the_forms_row_norms_are_computed_once_and_carried_bit_for_bit(rng):
    """``GLMRepresentation.a_norm()`` is ``row_norm(a)``; a subset and a form with other levels carry the
    norms already taken, and they are the bits a fresh ``row_norm`` of the subset's rows gives (rows of
    norm 1e-300, 2e100 and 0 included)."""
    from cvxdp.numerics import row_norm

    w = cp.Variable(4)
    X = rng.standard_t(3.0, size=(300, 4))
    X[0], X[1], X[2] = 1e-300, 1e100, 0.0
    ex = cvxdp.Model(cvxdp.losses.hinge(w), [cp.norm(w, 2) <= 1.0]).bind(
        {"x": X, "y": np.where(rng.random(300) < 0.5, -1.0, 1.0)})
    glm = ex.glm()
    norms = glm.a_norm()
    assert glm.a_norm() is norms
    np.testing.assert_array_equal(norms, row_norm(glm.a))
    idx = rng.permutation(300)[:120]
    sub = ex.subset(idx).glm()
    assert sub._a_norm is not None  # carried, not recomputed
    np.testing.assert_array_equal(sub.a_norm().view(np.int64), row_norm(sub.a).view(np.int64))
    moved = glm.with_levels(glm.b + 1.0, glm.link)
    assert moved.a is glm.a and moved.a_norm() is norms
