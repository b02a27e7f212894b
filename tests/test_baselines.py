"""Baselines: pure ε-DP with data-independent noise, honest tuning, and the non-private ceiling."""

from __future__ import annotations

import importlib

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.audit import audit, lad_model, neighbouring_pair
from cvxdp.baselines import (
    audit_mechanisms,
    clipped_output_perturbation,
    noisy_clipped_gd,
    nonprivate_erm,
    objective_perturbation,
)
from cvxdp.baselines.tuning import (
    best_in_hindsight,
    hindsight_grid,
    noisy_gd_rule,
    objective_perturbation_rule,
    output_perturbation_rule,
)
from cvxdp.datasets import student_t_hinge, student_t_lad
from cvxdp.error import UncertifiableLossError

pytestmark = pytest.mark.filterwarnings("ignore::cvxdp.error.PrivacyLeakWarning")


def _lad(n=2000, d=3):
    task = student_t_lad(n=n, d=d, n_test=50_000, seed=2)
    w = cp.Variable(d)
    return task, cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w) <= 2.0])


def _neighbours(task):
    X2, y2 = task.X_train.copy(), task.y_train.copy()
    X2[0] = 1e6
    y2[0] = -1e7
    return {"x": task.X_train, "y": task.y_train}, {"x": X2, "y": y2}


def _record(res):
    return [(e.epsilon, e.sensitivity, e.noise_scale) for e in res.ledger.entries]


def test_noise_scales_independent_of_data():
    task, model = _lad()
    d0, d1 = _neighbours(task)
    for fn, kw in ((clipped_output_perturbation, {"C": 3.0, "lam": 0.1}),
                   (noisy_clipped_gd, {"C": 3.0, "steps": 20})):
        r0 = fn(model, d0, epsilon=1.0, random_state=0, **kw)
        r1 = fn(model, d1, epsilon=1.0, random_state=0, **kw)
        assert _record(r0) == _record(r1)
        assert r0.ledger.spent == pytest.approx(1.0) and r1.ledger.spent <= 1.0 + 1e-12
        assert model.domain.contains(r0.w) and model.domain.contains(r1.w)


def test_objective_perturbation_for_smooth_losses_only():
    task = student_t_hinge(n=3000, d=3, nu=5.0, separation=2.0, n_test=20_000, seed=1)
    w = cp.Variable(3)
    model = cvxdp.Model(cvxdp.losses.logistic(w), [cp.norm(w) <= 3.0])
    data = {"x": task.X_train, "y": task.y_train}
    rule = objective_perturbation_rule(3000, 3, 1.0, model.diameter, task.G(2.0))
    r = objective_perturbation(model, data, epsilon=1.0, random_state=0, **rule)
    acc = np.mean(np.sign(task.X_test @ r.w) == task.y_test)
    assert acc > 0.75 and r.ledger.spent == pytest.approx(1.0)
    d1 = dict(data)
    d1["x"] = data["x"].copy()
    d1["x"][0] = 1e5
    r1 = objective_perturbation(model, d1, epsilon=1.0, random_state=0, **rule)
    assert _record(r) == _record(r1)
    _, lad = _lad()
    with pytest.raises(UncertifiableLossError):
        objective_perturbation(lad, {"x": np.ones((50, 3)), "y": np.ones(50)}, epsilon=1.0,
                               feature_bound=1.0, regularization=0.1)


def test_public_rules_give_sensible_models():
    task, model = _lad(n=5_000)  # both below 1% of w = 0's excess here; noisy GD's passes grow with n
    data = {"x": task.X_train, "y": task.y_train}
    n, d, D, G2 = 5_000, 3, model.diameter, task.G(2.0)
    op = clipped_output_perturbation(model, data, epsilon=1.0, random_state=1,
                                     **output_perturbation_rule(n, d, 1.0, D, G2))
    gd = noisy_clipped_gd(model, data, epsilon=1.0, random_state=1, **noisy_gd_rule(n, d, 1.0, D, G2))
    trivial = task.excess_risk(np.zeros(d))
    assert task.excess_risk(op.w) < 0.3 * trivial and task.excess_risk(gd.w) < 0.3 * trivial


def test_hindsight_grid_is_labelled_and_contains_the_rule():
    rule = {"C": 2.0, "lam": 0.1}
    grid = hindsight_grid(rule)
    assert rule in grid and len(grid) == 21
    best, risk = best_in_hindsight([(g, abs(g["C"] - 1.0) + g["lam"]) for g in grid])
    assert best["C"] == 1.0 and risk == pytest.approx(best["lam"] + 0.0)


def test_nonprivate_erm_matches_cvxpy():
    task, model = _lad(n=500)
    ex = model.bind({"x": task.X_train, "y": task.y_train})
    w_ours = nonprivate_erm(model, ex)
    v = cp.Variable(3)
    cp.Problem(cp.Minimize(cp.sum(cp.abs(task.y_train - task.X_train @ v))),
               [cp.norm(v) <= 2.0]).solve(solver=cp.CLARABEL)
    assert np.allclose(w_ours, v.value, atol=1e-5)


def test_baselines_pass_a_reduced_audit():
    model = lad_model(1)
    d0, d1 = neighbouring_pair("outlier", n=40, d=1, magnitude=1e4)
    for name, mech in audit_mechanisms(model, epsilon=1.0, lam=0.5).items():
        r = audit(mech, d0, d1, claimed_epsilon=1.0, runs=500, random_state=3, name=name)
        assert not r.violation, r.summary()


def test_objective_perturbation_refuses_an_inexact_minimizer():
    """The privacy proof needs the exact minimizer: a point whose gradient does not certify it within
    the tolerance releases nothing — and a tolerance near the certificate's rounding floor is refused
    from public inputs (and the noise) alone, whatever the data."""
    import cvxpy as cp

    from cvxdp.error import CertificationError

    task = student_t_lad(n=400, d=3, nu=5.0, seed=1)
    w = cp.Variable(3)
    model = cvxdp.Model(cvxdp.losses.huber(w, 1.0), [cp.norm(w, 2) <= task.radius])
    data = {"x": task.X_train, "y": task.y_train}
    rule = objective_perturbation_rule(400, 3, 1.0, model.diameter, task.G(2.0))
    ok = objective_perturbation(model, data, epsilon=1.0, random_state=0, **rule)
    assert set(ok.params) == {"feature_bound", "regularization", "delta", "epsilon_prime", "tolerance"}
    for other in (data, {"x": np.zeros((400, 3)), "y": np.full(400, 1e100)}):
        with pytest.raises(CertificationError, match="rounding floor"):
            objective_perturbation(model, other, epsilon=1.0, random_state=0, tolerance=1e-30, **rule)
    op_module = importlib.import_module("cvxdp.baselines.objective_perturbation")
    a = np.clip(task.X_train, -1, 1)
    from cvxdp.links import HuberLink

    link = HuberLink(1.0)
    _, rough = op_module._polish(np.zeros(3), a, -task.y_train, link, 400.0, 0.1, np.zeros(3), steps=1)
    w_hat, fine = op_module._polish(np.zeros(3), a, -task.y_train, link, 400.0, 0.1, np.zeros(3))
    assert fine < 1e-12 < rough
    # the certificate bounds the distance to the exact minimizer: a Newton-polished reference point
    exact = w_hat - np.linalg.solve(
        (a.T * np.where(np.abs(a @ w_hat - task.y_train) <= 1, 2.0, 0.0)) @ a / 400 + 0.1 * np.eye(3),
        a.T @ link.derivative(a @ w_hat - task.y_train) / 400 + 0.1 * w_hat)
    assert np.linalg.norm(w_hat - exact) <= fine


@pytest.mark.parametrize("label", [3e6, -1e100])
def test_objective_perturbation_releases_on_both_sides_of_an_extreme_label(label):
    """Found by review: with Clarabel, one label of 3·10⁶ made the Huber problem 'infeasible' (refused
    in about 60% of runs) while its neighbour always released. The damped Newton method has no status to
    gate on and reaches its certificate whatever the labels; the public record is the same on both sides."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = X @ np.ones(3)
    y2 = y.copy()
    y2[0] = label
    w = cp.Variable(3)
    model = cvxdp.Model(cvxdp.losses.huber(w, 1.0), [cp.norm(w, 2) <= 3])
    for seed in range(5):
        r0, r1 = (objective_perturbation(model, {"x": X, "y": yy}, epsilon=1.0, feature_bound=2.0,
                                         regularization=0.1, random_state=seed) for yy in (y, y2))
        assert r0.params == r1.params
        assert r0.ledger.spent == r1.ledger.spent == 1.0


@pytest.mark.parametrize("label", [499.5, 568.0])
def test_objective_perturbation_newton_method_does_not_cycle(label):
    """Found by review: accepting a step because the gradient shrank (though J rose) let the iterates
    alternate between two points across Huber's kinks, and one record decided which data sets certified
    (refusals 3/200 vs 91/200 at n = 2000). J now only falls; both neighbours certify on every seed."""
    n = 2000
    w = cp.Variable(2)
    model = cvxdp.Model(cvxdp.losses.huber(w, 1.0), [cp.norm(w, 2) <= 1e9])

    def data(k):
        X, y = np.zeros((n, 2)), np.zeros(n)
        X[:k, 0], y[:k] = 1.0, label
        return {"x": X, "y": y}

    for seed in range(8):
        for k in (1000, 1001):
            objective_perturbation(model, data(k), epsilon=10.0, feature_bound=1.0, regularization=1e-3,
                                   random_state=seed, tolerance=1e-6)


def test_objective_perturbation_refuses_from_public_inputs_what_rounding_would_decide():
    """A tolerance near the certificate's rounding floor, and scales that overflow, are refused whatever
    the data (found by review: rows in Huber's quadratic region with labels ~ B||w*|| carried rounding
    17–170× the earlier public floor; a loss scale of 1e210 with B = 1e98 overflowed n·B·lip and
    released exactly 0 on one side)."""
    from cvxdp.baselines.objective_perturbation import certificate_floor
    from cvxdp.error import CertificationError, ParameterError

    w = cp.Variable(2)
    huber = cvxdp.Model(cvxdp.losses.huber(w, 1.0), [cp.norm(w, 2) <= 1e9])
    n = 20_000
    X, y = np.zeros((n, 2)), np.zeros(n)
    X[:, 0], y[:] = 1.0, 568.0
    X1, y1 = X.copy(), y.copy()
    X1[0], y1[0] = 0.0, 0.0
    for data in ({"x": X, "y": y}, {"x": X1, "y": y1}):
        with pytest.raises(CertificationError, match="rounding floor"):
            objective_perturbation(huber, data, epsilon=1.0, feature_bound=1.0, regularization=1e-6,
                                   random_state=0, tolerance=1.1652e-8)
    floor = certificate_floor(n, 2, 1.0, 2.0, 2.0, 3.0, 1e-6, 0.0)
    assert 4 * floor > 1.1652e-8 and certificate_floor(n, 2, 1.0, 2.0, 2.0, 3.0, 1e-2, 0.0) < floor
    scaled = cvxdp.Model(cvxdp.Loss(1e210 * cp.logistic(-huber.loss.placeholders["y"] * (
        huber.loss.placeholders["x"] @ w)), w, data=huber.loss.placeholders), [cp.norm(w, 2) <= 1.0])
    for data in ({"x": np.zeros((200, 2)), "y": np.ones(200)},
                 {"x": np.vstack([[1e98, 0.0], np.zeros((199, 2))]), "y": np.ones(200)}):
        with pytest.raises(ParameterError, match="overflows"):
            objective_perturbation(scaled, data, epsilon=1.0, feature_bound=1e98, regularization=0.1,
                                   random_state=0)


def test_link_change_is_the_exact_change_to_rounding():
    """``φ(u + δ) − φ(u)`` against 60-digit arithmetic, across and beyond Huber's kinks and where the
    logistic link saturates (found by review: ``log1p(σ(40)·expm1(−38)) = log1p(−1) = −∞``)."""
    from decimal import Decimal, getcontext

    from cvxdp.baselines.objective_perturbation import _link_change
    from cvxdp.links import HuberLink, LogisticLink

    getcontext().prec = 60
    rng = np.random.default_rng(5)
    u = np.concatenate([rng.normal(size=300) * 10 ** rng.uniform(-3, 3, 300), [40.0, 100.0, 36.0, -50.0]])
    du = np.concatenate([rng.normal(size=300) * 10 ** rng.uniform(-12, 2.5, 300),
                         [-38.0, -36.5, -38.0, -1.0]])
    eps = np.finfo(float).eps

    def softplus(x: Decimal) -> Decimal:
        return (1 + (-abs(x)).exp()).ln() + max(x, Decimal(0))

    logistic = LogisticLink(1.5)
    out = _link_change(logistic, u, du)
    assert np.all(np.isfinite(out))
    for ui, di, oi in zip(u, du, out, strict=True):
        v = Decimal(float(ui)) + Decimal(float(di))  # the exact sum: the change is of the move δ
        exact = Decimal("1.5") * (softplus(v) - softplus(Decimal(float(ui))))
        bound = Decimal(16 * eps) * (abs(exact) + abs(Decimal(float(di))) + Decimal("1e-300"))
        assert abs(Decimal(float(oi)) - exact) <= bound
    # far out with moves beyond expm1's range: u never cancels (a fourth review: 0 for ±800 at u = 1e20)
    far_u, far_du = np.array([1e20, 1e20, 1e19, -1e20]), np.array([-800.0, 800.0, -710.0, 800.0])
    assert np.allclose(_link_change(logistic, far_u, far_du), 1.5 * np.array([-800.0, 800.0, -710.0, 0.0]),
                       rtol=1e-15, atol=0.0)
    for M, c, uu, dd in [(2.0, 0.5, u, du),
                         # small moves across a kink at M = 1e10 (the same review: c M ulp(M) off)
                         (1e10, 1.0, np.array([1e10, 1e10 - 2**-20, -1e10, 1e10 + 1.0]),
                          np.array([2.9e-6, 3e-6, -2.9e-6, -1.5]))]:
        huber = HuberLink(M, c)
        out = _link_change(huber, uu, dd)
        for ui, di, oi in zip(uu, dd, out, strict=True):
            v, w0 = Decimal(float(ui)) + Decimal(float(di)), Decimal(float(ui))

            def h(x: Decimal, M: float = M, c: float = c) -> Decimal:
                Md = Decimal(M)
                return Decimal(c) * (x * x if abs(x) <= Md else 2 * Md * abs(x) - Md * Md)

            exact = h(v) - h(w0)
            scale = Decimal(abs(float(di))) * (abs(v) + abs(w0) + Decimal(M))
            assert abs(Decimal(float(oi)) - exact) <= Decimal(16 * eps) * (abs(exact) + scale)


def test_objective_perturbation_user_logistic_with_saturating_offsets_certifies_on_both_sides():
    """The review's pair: ``logistic(x w + c)`` with n − 1 rows (1, 30) and the last (1, 30) or (1, 40) —
    ``σ(40)`` rounds to 1, and the ``−∞`` change made the iterates cycle on one side only (refused 78–97%)."""
    n = 1000
    w = cp.Variable(1)
    x, c = cp.Parameter(1, name="x"), cp.Parameter(name="c")
    model = cvxdp.Model(cvxdp.Loss(cp.logistic(x @ w + c), w, data=[x, c]), [cp.norm(w, 2) <= 1e9])
    X, cc = np.ones((n, 1)), np.full(n, 30.0)
    cd = cc.copy()
    cd[-1] = 40.0
    for seed in range(10):
        for data in ({"x": X, "c": cc}, {"x": X, "c": cd}):
            objective_perturbation(model, data, epsilon=1.0, feature_bound=1.0, regularization=1e-3,
                                   random_state=seed)


def test_objective_perturbation_calibration_never_overspends():
    """``ε' + log(1 + 2c/(nμ) + c²/(nμ)²) ≤ ε`` with ``μ = Λ + Δ`` in 50-digit decimal arithmetic, over
    public settings on both branches; found by review: plain float landed above the exact ``ε'`` about
    half the time."""
    from decimal import Decimal, getcontext

    from cvxdp.baselines.objective_perturbation import calibration
    from cvxdp.error import ParameterError

    getcontext().prec = 50
    rng = np.random.default_rng(1)
    both = set()
    for _ in range(3000):
        eps = float(10 ** rng.uniform(-3, 1.5))
        c = float(10 ** rng.uniform(-3, 2))
        n = int(10 ** rng.uniform(1, 6))
        lam = float(10 ** rng.uniform(-5, 1))
        eps_prime, delta = calibration(eps, c, n, lam)
        E, C_, N, L = Decimal(eps), Decimal(c), Decimal(n), Decimal(lam)
        mu = L + Decimal(delta)
        # the proof's budget: ε' plus the Jacobian term at the regularization used is at most ε
        spent = Decimal(eps_prime) + (1 + 2 * C_ / (N * mu) + C_ * C_ / (N * N * mu * mu)).ln()
        assert eps_prime > 0 and spent <= E
        both.add("delta" if delta > 0 else "plain")
    assert both == {"plain", "delta"}
    # public settings where n²Λ² overflows: the c²/(nΛ)² term was dropped and ε' overspent (review)
    with pytest.raises(ParameterError, match="overflows"):  # n Λ = ∞ made r = 0 and ε' = ε (review)
        calibration(1.0, 1e308, 2, 1e308)
    for eps, c, n, lam in [(1.0, 1e148 * (1 + 2.0**-48), 10_000, 2e150), (1.0, 1e150, 10**6, 1e160)]:
        eps_prime, delta = calibration(eps, c, n, lam)
        E, C_, N, mu = Decimal(eps), Decimal(c), Decimal(n), Decimal(lam) + Decimal(delta)
        assert Decimal(eps_prime) + (1 + 2 * C_ / (N * mu) + C_ * C_ / (N * N * mu * mu)).ln() <= E


# ---------------------------------------------------------------------------------------------------
# Fail closed (issue 10, deliverable 4): no baseline releases a NaN certificate, point or noise sample.

class _RadiusSource(cvxdp.privacy.random.SeededRandom):
    """A seeded source whose ℓ2-Laplace radii are replaced by ``radius`` (a broken noise source)."""

    def __init__(self, seed, radius):
        super().__init__(seed)
        self.radius = radius

    def gamma(self, shape, scale, size):
        return np.full(size, self.radius)


def test_clipped_output_perturbation_fails_closed(monkeypatch):
    from cvxdp.error import CertificationError, ParameterError

    task, model = _lad(n=300, d=2)
    data = {"x": task.X_train, "y": task.y_train}
    for radius in (np.nan, np.inf):
        with pytest.raises(ParameterError, match="non-finite sample"):
            clipped_output_perturbation(model, data, epsilon=1.0, C=2.0, lam=0.5,
                                        random_state=_RadiusSource(0, radius))

    def nan_bound(problem, cuts):
        return np.nan, np.full(len(cuts), 1.0 / len(cuts))

    real_master = cvxdp.erm.bundle.bundle_master

    def nan_master(problem, cuts, kinks=None, prox=None):
        return real_master(problem, cuts, kinks, prox)._replace(lower=np.nan)

    monkeypatch.setattr("cvxdp.erm.solver.bundle_lower_bound", nan_bound)
    monkeypatch.setattr("cvxdp.erm.cutting_plane.bundle_lower_bound", nan_bound)
    monkeypatch.setattr("cvxdp.erm.bundle.bundle_master", nan_master)  # the default solver's bound
    with pytest.raises(CertificationError, match="nothing was released"):
        clipped_output_perturbation(model, data, epsilon=1.0, C=2.0, lam=0.5, random_state=0,
                                    erm=cvxdp.erm.ERMSettings(cutting_plane_iterations=20))


def test_noisy_gd_maps_a_non_finite_gradient_to_zero_and_refuses_nan_noise(monkeypatch):
    """A NaN per-example gradient is clipped to 0 by a per-example map (so the run equals the run with
    that gradient zeroed, bit for bit), never averaged into a NaN release; NaN noise is refused."""
    gd_module = importlib.import_module("cvxdp.baselines.noisy_gd")  # the package re-exports the function
    from cvxdp.error import ParameterError

    task, model = _lad(n=200, d=2)
    data = {"x": task.X_train, "y": task.y_train}
    real = gd_module.loss_subgradients

    def with_row0(value):
        def patched(examples, Y):
            g = np.array(real(examples, Y), dtype=float)
            g[0] = value
            return g
        return patched

    monkeypatch.setattr(gd_module, "loss_subgradients", with_row0(np.nan))
    r_nan = noisy_clipped_gd(model, data, epsilon=1.0, C=2.0, steps=4, random_state=3)
    monkeypatch.setattr(gd_module, "loss_subgradients", with_row0(0.0))
    r_zero = noisy_clipped_gd(model, data, epsilon=1.0, C=2.0, steps=4, random_state=3)
    assert np.all(np.isfinite(r_nan.w)) and np.array_equal(r_nan.w, r_zero.w)
    monkeypatch.setattr(gd_module, "loss_subgradients", real)
    with pytest.raises(ParameterError, match="non-finite sample"):
        noisy_clipped_gd(model, data, epsilon=1.0, C=2.0, steps=4, random_state=_RadiusSource(0, np.nan))
    # the clipping map: norms at most C, directions kept, no overflow to a zero row near the float range
    from cvxdp.baselines.noisy_gd import clip_rows

    g = np.array([[3.0, 4.0], [0.3, 0.4], [1e200, 1e200], [np.inf, 0.0], [np.nan, 1.0], [0.0, 0.0]])
    c = clip_rows(g, 2.0)
    assert np.allclose(np.linalg.norm(c, axis=1), [2.0, 0.5, 2.0, 0.0, 0.0, 0.0], rtol=1e-15)
    assert np.allclose(c[0], [1.2, 1.6]) and np.allclose(c[2], [np.sqrt(2.0), np.sqrt(2.0)])


def test_objective_perturbation_fails_closed(monkeypatch):
    from cvxdp.error import CertificationError, ParameterError

    op_module = importlib.import_module("cvxdp.baselines.objective_perturbation")

    task = student_t_lad(n=300, d=2, nu=5.0, seed=1)
    w = cp.Variable(2)
    model = cvxdp.Model(cvxdp.losses.huber(w, 1.0), [cp.norm(w, 2) <= task.radius])
    data = {"x": task.X_train, "y": task.y_train}
    rule = objective_perturbation_rule(300, 2, 1.0, model.diameter, task.G(2.0))
    with pytest.raises(ParameterError, match="non-finite sample"):
        objective_perturbation(model, data, epsilon=1.0, random_state=_RadiusSource(0, np.nan), **rule)
    # a NaN minimizer whose (injected) residual looks perfect is refused, not projected into W
    monkeypatch.setattr(op_module, "_polish", lambda w, *a, **k: (np.full_like(w, np.nan), 0.0))
    with pytest.raises(CertificationError, match="nothing was released"):
        objective_perturbation(model, data, epsilon=1.0, random_state=0, **rule)
    monkeypatch.setattr(op_module, "_polish", lambda w, *a, **k: (w, np.nan))
    with pytest.raises(CertificationError, match="nothing was released"):
        objective_perturbation(model, data, epsilon=1.0, random_state=0, **rule)


def test_best_in_hindsight_never_picks_a_nan_risk():
    grid = [({"C": 1.0}, np.nan), ({"C": 2.0}, 0.3), ({"C": 4.0}, 0.2)]
    assert best_in_hindsight(grid) == ({"C": 4.0}, 0.2)


def test_noisy_gd_mean_moves_by_at_most_its_sensitivity_in_exact_arithmetic():
    """The review's pair: one clipped row g against −g among zeros; the float means differ by at most
    the charged sensitivity, checked in rationals (the plain float mean and clip overshot by 1e-16)."""
    from fractions import Fraction

    from cvxdp.baselines.noisy_gd import clip_rows, clipped_mean, gd_sensitivity

    rng = np.random.default_rng(0)
    for _ in range(200):
        n, d = int(rng.integers(2, 2000)), int(rng.integers(1, 6))
        C = float(np.exp(rng.uniform(-5, 5)))
        g = rng.normal(size=d) * np.exp(rng.uniform(-3, 8))
        G0, G1 = np.zeros((n, d)), np.zeros((n, d))
        G0[0], G1[0] = g, -g
        if rng.random() < 0.5:
            other = rng.normal(size=(n - 1, d)) * C * 3
            G0[1:], G1[1:] = other, other
        m0, m1 = clipped_mean(clip_rows(G0, C)), clipped_mean(clip_rows(G1, C))
        gap2 = sum((Fraction(float(a)) - Fraction(float(b))) ** 2 for a, b in zip(m0, m1, strict=True))
        assert gap2 <= Fraction(gd_sensitivity(C, n)) ** 2
        rows = clip_rows(G0, C)
        assert all(sum(Fraction(float(t)) ** 2 for t in row) <= Fraction(C) ** 2 for row in rows)


def test_a_release_the_grid_would_refuse_is_refused_before_the_solve_and_the_charge(monkeypatch):
    """At an absurd ε the release grid is finer than floating point resolves across ``W``'s box (a public
    refusal, :func:`~cvxdp.privacy.mechanisms.grid_fits`).  The baselines decide it from the scale and the
    box alone, before any gradient, solve or charge — the refusal used to come after the ERM solve."""
    import cvxdp.baselines.noisy_gd as gd_module
    import cvxdp.run.release as release_module
    from cvxdp.error import ParameterError
    from cvxdp.privacy.ledger import PrivacyLedger
    from cvxdp.privacy.mechanisms import GRID_TOO_FINE

    def untouched(*_a, **_k):
        raise AssertionError("the data were read before a public refusal")

    task, model = _lad(n=200)
    data = {"x": task.X_train, "y": task.y_train}
    monkeypatch.setattr(release_module, "solve_certified", untouched)
    monkeypatch.setattr(gd_module, "loss_subgradients", untouched)
    monkeypatch.setattr(PrivacyLedger, "charge", untouched)
    with pytest.raises(ParameterError) as info:
        clipped_output_perturbation(model, data, epsilon=1e22, C=1.0, lam=1.0, random_state=0)
    assert str(info.value) == GRID_TOO_FINE
    with pytest.raises(ParameterError) as info:
        noisy_clipped_gd(model, data, epsilon=1e22, C=1.0, steps=3, random_state=0)
    assert str(info.value) == GRID_TOO_FINE
    monkeypatch.undo()
    assert np.all(np.isfinite(clipped_output_perturbation(model, data, epsilon=1e6, C=1.0, lam=1.0,
                                                          random_state=0).w))


def test_clipped_output_perturbation_solves_a_domain_far_from_zero():
    """Review helper-44: the extension's ball ``U`` grew with ``||c||``, so it held 0 and was never
    translated; on a ball of radius 10⁻³ at (10¹², −3·10¹²) the certified solve failed after the charge.
    ``U`` is now centred on ``W`` and the problem is solved in a public frame at ``c``."""
    c, r = np.array([1e12, -3e12]), 1e-3
    w = cp.Variable(2)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w - c, 2) <= r])
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 2))
    data = {"x": X, "y": X @ c + 0.1 * rng.standard_normal(60)}
    for d in (data, {"x": np.vstack([X[:-1], [1e6, -1e6]]), "y": np.r_[data["y"][:-1], -1e7]}):
        res = clipped_output_perturbation(model, d, epsilon=1.0, C=1.0, lam=1.0, random_state=0)
        assert model.domain.contains(res.w, tol=1e-9) and res.ledger.spent == 1.0
