"""The certified ERM solver: certificates that hold against references, and faults that never leak."""

from __future__ import annotations

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
from cvxdp.erm.problem import evaluate_upper
from cvxdp.error import CertificationError
from cvxdp.geometry import localize


def _problem(rng, loss="hinge", m=80, d=3, C=1.2, lam=0.1, region="lens", domain="ball"):
    w = cp.Variable(d)
    cons = [cp.norm(w, 2) <= 1.5] if domain == "ball" else [w >= -1, w <= 1]
    model = cvxdp.Model(getattr(cvxdp.losses, loss)(w), cons)
    data = glm_data(rng, m, d)
    ex = model.bind(data)
    U = model.domain if region == "W" else localize(model.domain,
                                                    model.domain.make_feasible(np.full(d, 0.5)), 0.8)
    return RegularizedERM(model, ex, U, C=C, lam=lam, w0=np.full(d, 0.1)), data


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
def test_certificate_holds_against_reference(loss, region, rng):
    problem, data = _problem(rng, loss=loss, region=region)
    alpha = 1e-8
    w, cert = solve_certified(problem, alpha)
    assert cert.certified and cert.gap <= alpha
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
    w, cert = solve_certified(problem, alpha)  # refinement by the cutting-plane method
    assert "cutting-plane" in cert.method
    assert evaluate_upper(problem, w, 1e-12)[0] - ref <= alpha + 1e-8
    with pytest.raises(CertificationError, match="nothing was released"):
        solve_certified(problem, alpha, ERMSettings(refine=False))


def test_garbage_solver_output_raises(rng, monkeypatch):
    problem, _ = _problem(rng, m=30)

    def broken(prob, settings):
        sol = joint_module.solve_joint(prob, settings)
        sol.w = prob.region.make_feasible(np.full(prob.dim, 1e6))
        sol.cut.beta = -1e9
        return sol

    monkeypatch.setattr("cvxdp.erm.solver.solve_joint", broken)
    with pytest.raises(CertificationError):
        solve_certified(problem, 1e-9, ERMSettings(cutting_plane_iterations=20))


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
    # and a far too small iteration cap is refused, not released
    with pytest.raises(CertificationError, match="stopping rule"):
        solve_certified(problem, alpha, ERMSettings(method="adaptive-subgradient",
                                                    subgradient_iterations=50))


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
