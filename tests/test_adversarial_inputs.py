"""The bad-input catalogue: every public entry point, every hostile or careless input.

Each case must raise a cvxdp exception (a ``CvxdpError`` that is also a
``ValueError`` or ``TypeError``) with no output — or, where the input is legal
but unwise, proceed with a documented :class:`PrivacyLeakWarning` and a sane
result.
"""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.audit import audit
from cvxdp.error import CvxdpError, PrivacyLeakWarning
from cvxdp.estimators import PrivateLADRegressor, PrivateLinearSVM, PrivateQuantileRegressor
from cvxdp.extension import LipschitzExtension
from cvxdp.geometry import domain_from_constraints
from cvxdp.privacy.ledger import PrivacyLedger
from cvxdp.privacy.mechanisms import L2LaplaceMechanism
from cvxdp.privacy.random import noise_source

pytestmark = pytest.mark.filterwarnings("ignore:seeded privacy noise:cvxdp.error.PrivacyLeakWarning")

RNG = np.random.default_rng(11)
X = RNG.standard_t(4, size=(300, 3))
Y = X @ np.array([0.5, -0.3, 0.2]) + RNG.normal(size=300)
LABELS = np.where(Y > 0, 1.0, -1.0)


def _model():
    w = cp.Variable(3)
    return cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 2])


def _solve(**override):
    kw = dict(epsilon=1.0, moment_k=4.0, G_k=5.0, random_state=0)
    kw.update(override)
    data = kw.pop("data", {"x": X, "y": Y})
    return cvxdp.PrivateProblem(_model()).solve(data, **kw)


def _refused(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        with pytest.raises(CvxdpError) as info:
            fn()
    assert isinstance(info.value, ValueError | TypeError)
    assert len(str(info.value)) > 15
    return info.value


EPSILONS = [0, -1, float("nan"), float("inf"), 1e-300, "1", None, True, [1.0]]


@pytest.mark.parametrize("eps", EPSILONS, ids=repr)
def test_epsilon_catalogue(eps):
    _refused(lambda: _solve(epsilon=eps))
    _refused(lambda: PrivateLADRegressor(epsilon=eps, G_k=5.0, random_state=0).fit(X, Y))
    _refused(lambda: PrivacyLedger(10, eps))
    _refused(lambda: L2LaplaceMechanism(1.0, eps, 3))


def test_huge_epsilon_proceeds_with_a_warning():
    with pytest.warns(PrivacyLeakWarning, match="no meaningful privacy"):
        res = _solve(epsilon=1e6, random_state=None)
    assert np.all(np.isfinite(res.w)) and _model().domain.contains(res.w)


def test_a_domain_far_from_zero_plans_and_fits_at_ordinary_epsilon():
    """Review helper-42: with the grid checked in absolute coordinates a ball of radius 1 at 10¹² was
    refused from ε ≈ 0.5 at n = 10⁵; released in a frame at the box (``release_frame``) the threshold no
    longer depends on where the domain sits."""
    w = cp.Variable(3)
    far = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w - 1e12, 2) <= 1])
    near = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 1])
    for n, eps in ((10**5, 1.0), (10**7, 100.0), (10**3, 1e9)):
        for model in (far, near):
            cvxdp.PrivateProblem(model).plan(n=n, epsilon=eps, moment_k=4.0, G_k=5.0)
    moderate = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w - 1e6, 2) <= 1])
    res = cvxdp.PrivateProblem(moderate).solve({"x": X, "y": Y + 3e6}, epsilon=10.0, moment_k=4.0, G_k=5.0,
                                              random_state=0)
    assert np.all(np.isfinite(res.w)) and np.linalg.norm(res.w - 1e6) <= 1 + 1e-6


@pytest.mark.parametrize("eps", [1e300, 1.7e308])
def test_an_epsilon_beyond_floating_point_is_refused_at_planning(eps):
    """Review helper-41: at ε = 1.7·10³⁰⁸ the release grid (≈10⁻³⁰⁸) overflowed ``clamped/Λ`` for points
    far enough out — one side of a neighbouring pair refused, the other released.  Now a public refusal of
    the plan (and, as a backstop, of the release before its noise is drawn)."""
    assert "floating-point-safe" in str(_refused(lambda: _solve(epsilon=eps)))
    assert "floating-point-safe" in str(_refused(
        lambda: cvxdp.PrivateProblem(_model()).plan(n=300, epsilon=eps, moment_k=4.0, G_k=5.0)))
    for cls in (PrivateLADRegressor, PrivateQuantileRegressor):
        acc = cvxdp.BudgetAccountant(1.7e308)
        _refused(lambda cls=cls, acc=acc: cls(epsilon=eps, G_k=5.0, random_state=0, accountant=acc).fit(X, Y))
        assert acc.spent == 0  # the private centring's dry run of the fit's plan refuses before the charge


@pytest.mark.parametrize("k", [1.9, -3, float("nan"), float("inf"), 1e9, "4"], ids=repr)
def test_moment_order_catalogue(k):
    _refused(lambda: _solve(moment_k=k))


@pytest.mark.parametrize("G", [0, -1, float("nan"), float("inf"), "5"], ids=repr)
def test_moment_bound_catalogue(G):
    _refused(lambda: _solve(G_k=G))
    _refused(lambda: _solve(G_k=5.0, G_2=G))


def test_extreme_but_legal_moment_bounds():
    for G in (1e-6, 1e6):
        res = _solve(G_k=G)
        assert np.all(np.isfinite(res.w)) and res.ledger.spent <= 1.0 + 1e-12


BAD_DATA = {
    "nan": {"x": np.where(np.arange(900).reshape(300, 3) == 5, np.nan, X), "y": Y},
    "inf": {"x": X, "y": np.where(np.arange(300) == 3, -np.inf, Y)},
    "huge": {"x": X * 1e150, "y": Y},
    "empty": {"x": np.zeros((0, 3)), "y": np.zeros(0)},
    "one-row": {"x": X[:1], "y": Y[:1]},
    "strings": {"x": X.astype(str), "y": Y},
    "objects": {"x": X.astype(object), "y": Y},
    "complex": {"x": X + 0j, "y": Y},
    "wrong-width": {"x": X[:, :2], "y": Y},
    "wrong-rank": {"x": X[None], "y": Y},
    "mismatched": {"x": X, "y": Y[:-1]},
    "missing": {"x": X},
    "extra": {"x": X, "y": Y, "z": Y},
    "scalar": {"x": 1.0, "y": 1.0},
}


@pytest.mark.parametrize("name", sorted(BAD_DATA))
def test_data_catalogue(name):
    _refused(lambda: _solve(data=BAD_DATA[name]))


def test_denormal_data_is_accepted():
    res = _solve(data={"x": X * 1e-310, "y": Y * 1e-310})
    assert np.all(np.isfinite(res.w))


@pytest.mark.parametrize("fit", [
    lambda: PrivateLADRegressor(G_k=5.0).fit(X[:, :, None], Y),
    lambda: PrivateLADRegressor(G_k=5.0).fit(X, Y[:10]),
    lambda: PrivateLADRegressor(G_k=5.0).fit(np.full_like(X, np.nan), Y),
    lambda: PrivateLinearSVM(G_k=5.0).fit(X, np.arange(300) % 3),
    lambda: PrivateLinearSVM(G_k=5.0).fit(X, np.where(np.arange(300) == 0, np.nan, LABELS)),
    lambda: PrivateQuantileRegressor(quantile=0.0, G_k=5.0).fit(X, Y),
    lambda: PrivateLADRegressor(G_k=5.0, radius=-1.0).fit(X, Y),
    lambda: PrivateLADRegressor(G_k=5.0, fit_intercept="yes").fit(X, Y),
    lambda: PrivateLADRegressor(G_k=5.0, random_state="seed").fit(X, Y),
])
def test_estimator_catalogue(fit):
    _refused(fit)


@pytest.mark.parametrize("labels", [np.where(LABELS > 0, 1.0, 0.0), LABELS * 2, LABELS + 0.5])
def test_labels_outside_the_expected_set(labels):
    w = cp.Variable(3)
    model = cvxdp.Model(cvxdp.losses.hinge(w), [cp.norm(w) <= 1])
    _refused(lambda: cvxdp.PrivateProblem(model).solve({"x": X, "y": labels}, epsilon=1, moment_k=4,
                                                       G_k=5.0))


@pytest.mark.parametrize("state", ["seed", 1.5, [1], -1, True, object()],
                         ids=lambda s: "object" if type(s) is object else repr(s))  # ids stable across runs
def test_random_state_catalogue(state):
    _refused(lambda: _solve(random_state=state))
    _refused(lambda: noise_source(state))


def test_losses_and_domains_catalogue():
    w = cp.Variable(3)
    x = cp.Parameter(3, name="x")
    y = cp.Parameter(name="y")
    for expr in (-cp.abs(x @ w), cp.sqrt(cp.abs(x @ w) + 1), cp.abs(y) * 2, y * cp.abs(x @ w)):
        _refused(lambda expr=expr: cvxdp.Loss(expr, w, data=[x, y]))
    loss = cvxdp.losses.absolute(w)
    for cons in ([w >= 0], [], [w >= 1, w <= 0], [cp.norm(w) <= -1], [cp.norm(w) >= 1]):
        _refused(lambda cons=cons: cvxdp.Model(loss, cons))
        _refused(lambda cons=cons: domain_from_constraints(cons, w))
    _refused(lambda: cvxdp.Model("loss", [cp.norm(w) <= 1]))


def test_oracle_and_audit_catalogue():
    model = _model()
    ex = model.bind({"x": X, "y": Y})
    for C in (0, -1, float("nan"), float("inf")):
        _refused(lambda C=C: LipschitzExtension(model, C))
    ext = LipschitzExtension(model, 1.0)
    _refused(lambda: ext.evaluate(np.full(3, np.inf), ex))
    _refused(lambda: ext.evaluate(np.zeros((2, 3)), ex))
    _refused(lambda: audit(lambda d, s: np.zeros(1), {}, {}, claimed_epsilon=float("nan"), runs=100))


@pytest.mark.parametrize("bad", [
    {"erm": "conic"}, {"tail_share": "abc"}, {"tail_share": "0.1"}, {"tail_share": True},
    {"tail_range": (1e-300, 1e300)}, {"localize": "no"}, {"max_phases": 2.0}, {"boosting_groups": 0},
    {"progress": 1}, {"G_k": 1e300}, {"G_k": 5e-324},
], ids=repr)
def test_option_catalogue(bad):
    """Each option is refused with a ParameterError that says what is accepted (no builtin errors)."""
    err = _refused(lambda: _solve(**bad))
    assert isinstance(err, cvxdp.ParameterError)


@pytest.mark.parametrize("bad", [{"cutting_plane_iterations": -5}, {"method": "newton"},
                                 {"oracle_tolerance": 2.0}, {"conic": "clarabel"}, {"refine": 1},
                                 {"subsample_rows": 0}, {"subsample_rows": 2.5}, {"subsample_rows": "1e6"}],
                         ids=repr)
def test_solver_settings_catalogue(bad):
    from cvxdp.erm import ERMSettings

    _refused(lambda: ERMSettings(**bad))


@pytest.mark.parametrize("ok", [{"max_phases": np.int64(2)}, {"boosting_groups": np.int32(1)},
                                {"tail_share": np.float32(0.2)}, {"epsilon": np.float64(1.0)},
                                {"lam": np.float32(0.5), "algorithm": "recursive"},
                                {"localize": np.False_}], ids=repr)
def test_numpy_scalars_are_accepted(ok):
    res = _solve(**ok)
    assert np.all(np.isfinite(res.w)) and res.ledger.spent <= 1.0
