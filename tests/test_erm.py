"""The certified ERM solver: certificates that hold against references, and faults that never leak."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest
from conftest import glm_data

import cvxdp
from cvxdp.conic.program import ConicSettings
from cvxdp.erm import (
    ERMSettings,
    RegularizedERM,
    adaptive_subgradient,
    bundle_lower_bound,
    iteration_bound,
    light_mask,
    solve_certified,
)
from cvxdp.erm import joint as joint_module
from cvxdp.erm.problem import Cut, evaluate_upper, model_minimum
from cvxdp.error import CertificationError
from cvxdp.extension import LipschitzExtension
from cvxdp.geometry import Ball, Box, Ellipsoid, Intersection, LocalizedDomain, Simplex, localize
from cvxdp.geometry.certified import distance_lower_bound


def _problem(rng, loss="hinge", m=80, d=3, C=1.2, lam=0.1, region="lens", domain="ball"):
    w = cp.Variable(d)
    cons = [cp.norm(w, 2) <= 1.5] if domain == "ball" else [w >= -1, w <= 1]
    model = cvxdp.Model(getattr(cvxdp.losses, loss)(w), cons)
    data = glm_data(rng, m, d)
    ex = model.bind(data)
    U = model.domain if region == "W" else localize(model.domain,
                                                    model.domain.make_feasible(np.full(d, 0.5)), 0.8)
    return RegularizedERM(model, ex, U, C=C, lam=lam, w0=np.full(d, 0.1)), data


def kink_model(problem: RegularizedERM, rng: np.random.Generator, radius: float = 10.0, cuts: int = 3,
               near: float | None = None) -> tuple:
    """The rows whose kink meets ``B(w, radius)`` for a feasible ``w`` near ``w₀``, and ``cuts`` cuts that
    leave them out, at random feasible points (within ``near`` of ``w`` when given)."""
    from cvxdp.erm.problem import evaluate_upper

    w = problem.region.make_feasible(problem.w0[None, :] + 0.05)[0]
    kinks = problem.kink_rows(w, radius, 10_000)
    centre = np.zeros(problem.dim) if near is None else w
    scale = 1.0 if near is None else near
    points = [problem.region.make_feasible(centre[None, :] + scale * rng.normal(size=(1, problem.dim)))[0]
              for _ in range(cuts)]
    return w, kinks, [evaluate_upper(problem, p, 1e-12, kinks.index)[1] for p in points]


def reference_minimum(problem: RegularizedERM, data: dict) -> float:
    """min_U (1/m) Σ f_{C,U}(w, z_i) + (λ/2)||w − w₀||² via Lemma 2.6 in CVXPY (tight tolerances)."""
    _model, m, d = problem.model, problem.m, problem.dim
    w = cp.Variable(d)
    Y = cp.Variable((m, d))
    X, yl = data["x"], data["y"]
    glm = problem.examples.glm()
    a, b, link = glm
    u = cp.sum(cp.multiply(a, Y), axis=1) + b
    if isinstance(link, cvxdp.links.PiecewiseLinearLink):
        k, e = np.broadcast_to(link.slopes, (m, 2)), np.broadcast_to(link.intercepts, (m, 2))
        f = cp.maximum(cp.multiply(k[:, 0], u) + e[:, 0], cp.multiply(k[:, 1], u) + e[:, 1])
    else:
        f = link.scale * cp.logistic(u)
    cons = problem.region.constraints(w)
    cons += [c for i in range(m) for c in problem.region.constraints(Y[i])]
    obj = cp.sum(f + problem.C * cp.norm(Y - np.ones((m, 1)) @ cp.reshape(w, (1, d), order="F"), 2,
                                         axis=1)) / m
    obj = obj + problem.lam / 2 * cp.sum_squares(w - problem.w0)
    prob = cp.Problem(cp.Minimize(obj), cons)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    del X, yl
    return float(prob.value)


@pytest.mark.parametrize("loss", ["hinge", "absolute", "logistic"])
@pytest.mark.parametrize("region", ["W", "lens"])
@pytest.mark.parametrize("method", ["conic", "bundle"])
def test_certificate_holds_against_reference(loss, region, method, rng):
    """The joint program (with its ladder) and the bundle method alone (no refinement) reach α, and
    their bounds bracket the true minimum."""
    problem, data = _problem(rng, loss=loss, region=region)
    alpha = 1e-8
    settings = ERMSettings() if method == "conic" else ERMSettings(method="bundle", refine=False)
    w, cert = solve_certified(problem, alpha, settings)
    assert cert.certified and cert.gap <= alpha
    assert method == "conic" or cert.method.startswith("bundle (")
    assert problem.region.contains(w)
    ref = reference_minimum(problem, data)
    assert cert.lower <= ref + 1e-7
    upper, _ = evaluate_upper(problem, w, 1e-12)
    assert upper - ref <= alpha + 1e-7


def test_light_examples_are_C_lipschitz_on_the_region(rng):
    problem, _ = _problem(rng, m=200, C=2.0)
    light = light_mask(problem)
    assert 0 < light.sum() < problem.m
    U = problem.region
    P = U.make_feasible(rng.normal(size=(400, problem.dim)))
    Q = U.make_feasible(rng.normal(size=(400, problem.dim)))
    sub = problem.examples.subset(np.nonzero(light)[0])
    loss = problem.model.loss
    for i in range(sub.m):
        one = sub.subset(np.full(400, i))
        diff = np.abs(loss.values(P, one) - loss.values(Q, one))
        assert np.all(diff <= problem.C * np.linalg.norm(P - Q, axis=1) + 1e-12)


def test_bundle_lower_bound_is_below_the_minimum(rng):
    problem, data = _problem(rng, m=60)
    ref = reference_minimum(problem, data)
    cuts = [evaluate_upper(problem, problem.region.make_feasible(rng.normal(size=problem.dim)), 1e-12)[1]
            for _ in range(6)]
    lower, theta = bundle_lower_bound(problem, cuts)
    assert lower <= ref + 1e-9
    assert np.isclose(theta.sum(), 1.0) and np.all(theta >= 0)


def test_inaccurate_solver_is_refined_or_refused(rng, monkeypatch):
    """Inject a joint solver whose point is far from optimal: the ladder must not release it."""
    problem, data = _problem(rng, m=60)
    ref = reference_minimum(problem, data)
    real = joint_module.solve_joint

    def sloppy(prob, settings):
        sol = real(prob, settings)
        sol.w = prob.region.make_feasible(sol.w + 0.05)
        return sol

    monkeypatch.setattr("cvxdp.erm.solver.solve_joint", sloppy)
    alpha = 1e-7
    w, cert = solve_certified(problem, alpha, ERMSettings(method="conic"))  # refined by cutting planes
    assert "cutting-plane" in cert.method
    assert evaluate_upper(problem, w, 1e-12)[0] - ref <= alpha + 1e-8
    with pytest.raises(CertificationError, match="nothing was released"):
        solve_certified(problem, alpha, ERMSettings(method="conic", refine=False))


def test_garbage_solver_output_raises(rng, monkeypatch):
    problem, _ = _problem(rng, m=30)

    def broken(prob, settings):
        sol = joint_module.solve_joint(prob, settings)
        sol.w = prob.region.make_feasible(np.full(prob.dim, 1e6))
        sol.cut.beta = -1e9
        return sol

    monkeypatch.setattr("cvxdp.erm.solver.solve_joint", broken)
    with pytest.raises(CertificationError):
        solve_certified(problem, 1e-9, ERMSettings(method="conic", cutting_plane_iterations=20))


def test_algorithm_4_reaches_alpha_on_a_known_optimum(rng):
    """Proposition 2.8: at the stopping rule the average iterate is an α-minimizer."""
    problem, data = _problem(rng, loss="absolute", m=3, d=2, C=1.0, lam=0.5)
    problem.region = localize(problem.model.domain, problem.model.domain.make_feasible(np.full(2, 0.4)),
                              0.35)
    problem.__post_init__()
    ref = reference_minimum(problem, data)
    alpha = 0.05
    res = adaptive_subgradient(problem, alpha, max_iterations=200_000)
    assert res.converged and res.iterations > 10
    assert evaluate_upper(problem, res.w, 1e-12)[0] - ref <= alpha
    # a far too small iteration cap is a data-dependent event, so it must not be a refusal: the
    # unfinished iterate is certified like any proposal and refined by the cutting-plane method...
    tight = 0.01  # 10 steps do not reach it: the iterate's evaluated gap misses this α
    capped = adaptive_subgradient(problem, tight, max_iterations=10)
    assert not capped.converged
    w, cert = solve_certified(problem, tight, ERMSettings(method="adaptive-subgradient",
                                                          subgradient_iterations=10))
    assert "cutting-plane refinement" in cert.method and cert.gap <= tight
    assert evaluate_upper(problem, w, 1e-12)[0] - ref <= tight
    # ...and without refinement it is refused, never released uncertified
    with pytest.raises(CertificationError):
        solve_certified(problem, tight, ERMSettings(method="adaptive-subgradient",
                                                    subgradient_iterations=10, refine=False))


def test_cutting_plane_mode_within_its_a_priori_bound(rng):
    problem, data = _problem(rng, m=40, d=2)
    alpha = 1e-6
    w, cert = solve_certified(problem, alpha, ERMSettings(method="cutting-plane",
                                                          cutting_plane_iterations=100_000))
    _c, r = problem.region.bounding_ball()
    assert cert.iteration_bound == iteration_bound(2, r * (1 + 1e-9), problem.lipschitz_bound(), alpha / 2)
    assert cert.iterations <= cert.iteration_bound
    assert cert.certified
    assert evaluate_upper(problem, w, 1e-12)[0] - reference_minimum(problem, data) <= alpha + 1e-8


def test_conic_settings_tightened():
    s = ConicSettings(tol=1e-8).tightened(100)
    assert s.tol == pytest.approx(1e-10) and s.max_iter == 400


# ---------------------------------------------------------------------------------------------------
# Fail closed: NaN and vacuous (−∞) bounds never lead to a release (issue 10, deliverable 4)


def _nan_bounds(monkeypatch, *modules):
    """Every bundle lower bound seen by ``modules`` is NaN (the 0·(−∞) fault of a vacuous cut)."""
    def nan_bound(problem, cuts):
        return math.nan, np.full(len(cuts), 1.0 / len(cuts))

    for mod in modules:
        monkeypatch.setattr(f"cvxdp.erm.{mod}.bundle_lower_bound", nan_bound)


def test_model_minimum_and_distance_bound_fail_closed(rng):
    problem, _ = _problem(rng, m=20)
    g = np.full(problem.dim, 0.3)
    assert math.isfinite(model_minimum(problem, g, 0.5))
    for beta in (-math.inf, math.inf, math.nan):
        assert model_minimum(problem, g, beta) == -math.inf
    bad = g.copy()
    bad[0] = math.nan
    assert model_minimum(problem, bad, 0.5) == -math.inf
    # a NaN query point gives the vacuous distance 0, never NaN, on every kind of region
    d, c = problem.dim, np.zeros(problem.dim)
    ball = Ball(c, 1.0)
    regions = (problem.region, ball, Box(-np.ones(d), np.ones(d)), Ellipsoid(c, np.diag([1.0, 2.0, 3.0])),
               Simplex(d), LocalizedDomain(Box(-np.ones(d), np.ones(d)), c, 0.5), Intersection([ball, ball]))
    for region in regions:
        assert distance_lower_bound(region, np.array([math.nan, 1.0, 2.0])) == 0.0, region
        far = distance_lower_bound(region, np.full(d, 5.0))
        assert far > 0.0 and math.isfinite(far)


def test_bundle_lower_bound_drops_vacuous_cuts(rng):
    """A cut with β = −∞ (an oracle that could not certify a minorant) gets θ_j = 0, and 0·(−∞) = NaN
    must not reach the bound: it equals the bound of the usable cuts alone, and is never NaN."""
    problem, data = _problem(rng, m=40)
    ref = reference_minimum(problem, data)
    good = [evaluate_upper(problem, problem.region.make_feasible(rng.normal(size=problem.dim)), 1e-12)[1]
            for _ in range(3)]
    vacuous = Cut(g=np.zeros(problem.dim), beta=-math.inf)
    nan_cut = Cut(g=np.full(problem.dim, math.nan), beta=0.0)
    alone, _ = bundle_lower_bound(problem, good)
    mixed, theta = bundle_lower_bound(problem, [vacuous, *good[:2], nan_cut, good[2]])
    assert math.isfinite(mixed) and mixed <= ref + 1e-9
    assert mixed == pytest.approx(alone, abs=1e-9)
    assert theta[0] == 0.0 and theta[3] == 0.0 and np.isclose(theta.sum(), 1.0)
    one, theta1 = bundle_lower_bound(problem, [vacuous, good[0]])
    assert one == model_minimum(problem, good[0].g, good[0].beta) and list(theta1) == [0.0, 1.0]
    nothing, theta0 = bundle_lower_bound(problem, [vacuous, vacuous])
    assert nothing == -math.inf and not theta0.any()


def test_log_sum_exp_loss_with_a_vacuous_joint_cut_is_certified_not_nan():
    """The generic (conic-dual) path: with a cp.log_sum_exp loss the joint program's repaired dual
    fails for a few examples, its cut is vacuous (β = −∞) and gets weight 0 next to the oracle's cut.
    The old bundle returned 0·(−∞) = NaN, the NaN gap passed ``gap > α`` and the point was released
    uncertified; now the bound comes from the usable cut and holds against a CVXPY reference."""
    from cvxdp.erm.joint import solve_joint

    rng = np.random.default_rng(2)
    d, m = 3, 30
    w = cp.Variable(d)
    x = cp.Parameter(d, name="x")
    model = cvxdp.Model(cvxdp.Loss(cp.log_sum_exp(cp.hstack([x @ w, 2 * w[0], 0])), w, data=[x]),
                        [cp.norm(w, 1) <= 1.5])
    X = 10.0 * rng.standard_t(3, size=(m, d))
    problem = RegularizedERM(model, model.bind({"x": X}), model.domain, C=1.0, lam=0.3, w0=np.zeros(d))
    alpha = 1e-6
    sol = solve_joint(problem, ERMSettings().conic)
    assert sol.cut.beta == -math.inf, "the scenario needs a vacuous joint cut (solver behaviour changed?)"
    _, oracle_cut = evaluate_upper(problem, sol.w, 0.02 * alpha)
    lower, theta = bundle_lower_bound(problem, [sol.cut, oracle_cut])
    assert math.isfinite(lower) and theta[0] == 0.0
    w_hat, cert = solve_certified(problem, alpha)
    assert math.isfinite(cert.lower) and math.isfinite(cert.gap) and cert.gap <= alpha
    # reference: Lemma 2.6's joint program in CVXPY
    W, Y = cp.Variable(d), cp.Variable((m, d))
    terms = [cp.log_sum_exp(cp.hstack([X[i] @ Y[i], 2 * Y[i, 0], 0])) + cp.norm(W - Y[i]) for i in range(m)]
    cons = [cp.norm(W, 1) <= 1.5] + [cp.norm(Y[i], 1) <= 1.5 for i in range(m)]
    ref = cp.Problem(cp.Minimize(sum(terms) / m + 0.15 * cp.sum_squares(W)), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    assert cert.lower <= ref.value + 1e-8
    assert evaluate_upper(problem, w_hat, 1e-9)[0] - ref.value <= alpha + 1e-8


def test_conic_path_nan_bound_refines_or_refuses(rng, monkeypatch):
    """NaN lower bounds on the conic ladder: never released; the cutting-plane refinement (whose own
    bounds are sound here) certifies, and without refinement nothing is released."""
    problem, data = _problem(rng, loss="absolute", m=30, d=2)
    ref = reference_minimum(problem, data)
    alpha = 1e-6
    _nan_bounds(monkeypatch, "solver")
    with pytest.raises(CertificationError, match="nothing was released"):
        solve_certified(problem, alpha, ERMSettings(method="conic", refine=False))
    w, cert = solve_certified(problem, alpha, ERMSettings(method="conic"))
    assert "cutting-plane" in cert.method and math.isfinite(cert.gap) and cert.gap <= alpha
    assert evaluate_upper(problem, w, 1e-12)[0] - ref <= alpha + 1e-9
    _nan_bounds(monkeypatch, "cutting_plane")
    with pytest.raises(CertificationError, match="nothing was released"):
        solve_certified(problem, alpha, ERMSettings(method="conic", cutting_plane_iterations=30))


def test_cutting_plane_path_nan_upper_bounds_are_refused(rng, monkeypatch):
    """An oracle whose certified upper bounds come back NaN: the cutting-plane method never finds a
    "best" center, its fallback point has a NaN gap, and that gap must refuse, not release."""
    problem, _ = _problem(rng, loss="absolute", m=20, d=2)
    real = LipschitzExtension.evaluate

    def nan_upper(self, *args, **kwargs):
        ev = real(self, *args, **kwargs)
        ev.upper = ev.upper.copy()
        ev.upper[0] = math.nan
        return ev

    monkeypatch.setattr(LipschitzExtension, "evaluate", nan_upper)
    with pytest.raises(CertificationError, match="nothing was released"):
        solve_certified(problem, 1e-6, ERMSettings(method="cutting-plane", cutting_plane_iterations=40))


def test_adaptive_subgradient_releases_only_an_evaluated_certificate(rng, monkeypatch):
    """Algorithm 4's stopping rule is not a certificate: a point that met the rule (here, injected: a
    far-off point reported as converged) is released only if its evaluated gap is ≤ α, the reported
    gap is that evaluated gap (not min(gap, α)), and a NaN bound never passes."""
    from cvxdp.erm.adaptive_subgradient import AdaptiveSubgradientResult

    problem, data = _problem(rng, loss="absolute", m=20, d=2)
    ref = reference_minimum(problem, data)
    alpha = 1e-6
    far = problem.region.make_feasible(problem.region.bounding_ball()[0] + 10.0)

    def fake(prob, a, max_iterations=100_000, start=None):
        return AdaptiveSubgradientResult(w=far.copy(), iterations=5, converged=True, bound_iterations=None,
                                         seconds=0.0)

    monkeypatch.setattr("cvxdp.erm.solver.adaptive_subgradient", fake)
    assert evaluate_upper(problem, far, 1e-12)[0] - ref > 100 * alpha  # the injected point is poor
    with pytest.raises(CertificationError, match="nothing was released"):
        solve_certified(problem, alpha, ERMSettings(method="adaptive-subgradient", refine=False))
    w, cert = solve_certified(problem, alpha, ERMSettings(method="adaptive-subgradient"))
    assert "cutting-plane" in cert.method and cert.gap == cert.upper - cert.lower and cert.gap <= alpha
    assert evaluate_upper(problem, w, 1e-12)[0] - ref <= alpha + 1e-9
    _nan_bounds(monkeypatch, "solver", "cutting_plane")
    with pytest.raises(CertificationError, match="nothing was released"):
        solve_certified(problem, alpha, ERMSettings(method="adaptive-subgradient", refine=False))
    with pytest.raises(CertificationError, match="nothing was released"):
        solve_certified(problem, alpha, ERMSettings(method="adaptive-subgradient",
                                                    cutting_plane_iterations=30))


def test_certified_gap_fails_closed():
    from cvxdp.erm.solver import certified_gap

    assert certified_gap(1.0, 0.5, np.zeros(2)) == 0.5
    for upper, lower in ((math.nan, 0.0), (1.0, math.nan), (math.inf, math.inf), (-math.inf, 0.0),
                         (0.0, math.inf), (0.0, 1.0)):
        assert certified_gap(upper, lower, np.zeros(2)) == math.inf
    assert certified_gap(1.0, 0.5, np.array([0.0, math.nan])) == math.inf


def test_distance_to_an_unbounded_polyhedron_part_is_bounded_by_its_half_spaces():
    """A ball cut by an orthant: the orthant's bounding ball is infinite, and the intersection's distance
    bound skipped it (0), so a face-active optimum could never be certified (found by review)."""
    from cvxdp.geometry import Ball, Intersection
    from cvxdp.geometry.recognize import domain_from_constraints

    w = cp.Variable(3)
    region = domain_from_constraints([cp.norm(w, 2) <= 1, w >= 0], w)
    assert isinstance(region, Intersection)
    x = np.array([-0.3, 0.2, 0.1])
    assert distance_lower_bound(Ball(np.zeros(3), 1.0), x) == 0.0  # inside the ball part
    assert 0.3 * (1 - 1e-12) <= distance_lower_bound(region, x) <= 0.3  # one violated row: exact
