"""The bundle master program by its dual (``cvxdp.erm.master_dual``): strong duality, the Newton step as an
identity, fail-closed returns, and the certificate's independence of the proposal."""

from __future__ import annotations

import types

import numpy as np
import pytest
from test_erm import _problem, kink_model, reference_minimum

import cvxdp.erm.problem as problem_module
from cvxdp.erm import bundle_master
from cvxdp.erm.master_dual import _kkt_solver, product_simplex_master
from cvxdp.geometry import Ball


def _instance(rng, k=4, nk=60, J=3, d=5, m=500, lam=0.3, radius=1e3, prox=True):
    """A random master program: cuts ``(G, B)``, kink rows' pieces ``(K, J, d)``, a ball ``U``."""
    problem = types.SimpleNamespace(lam=lam, m=m, w0=rng.normal(size=d) * 0.3,
                                    feasible_set=Ball(np.zeros(d), radius))
    G, B = rng.normal(size=(k, d)), rng.normal(size=k)
    kink_g, kink_beta = rng.normal(size=(nk, J, d)) * 3.0, rng.normal(size=(nk, J))
    p = (0.7 * lam, rng.normal(size=d) * 0.2) if prox else None
    return problem, G, B, kink_g, kink_beta, p


def _primal(problem, G, B, kink_g, kink_beta, prox, w):
    """The master program's objective at ``w`` (the maximum of the cuts, the kink rows' maxima, both
    proximal terms)."""
    value = np.max(G @ w + B) + np.sum(np.max(kink_g @ w + kink_beta, axis=1)) / problem.m
    value += 0.5 * problem.lam * np.sum((w - problem.w0) ** 2)
    if prox is not None:
        value += 0.5 * prox[0] * np.sum((w - prox[1]) ** 2)
    return value


def _dual(problem, G, B, kink_g, kink_beta, prox, theta, rho):
    """The dual objective at weights ``(θ, ρ)``: ``min_w`` of the Lagrangian, in closed form."""
    mu, wp = (0.0, np.zeros_like(problem.w0)) if prox is None else (prox[0], prox[1])
    Lam = problem.lam + mu
    c = (problem.lam * problem.w0 + mu * wp) / Lam
    v = G.T @ theta + np.einsum("kj,kjd->d", rho, kink_g) / problem.m
    beta = theta @ B + np.sum(rho * kink_beta) / problem.m
    w = c - v / Lam
    return (v @ w + beta + 0.5 * problem.lam * np.sum((w - problem.w0) ** 2)
            + 0.5 * mu * np.sum((w - wp) ** 2))


@pytest.mark.parametrize("prox", [True, False])
@pytest.mark.parametrize("shape", [(1, 1, 2), (4, 60, 3), (9, 400, 7)])
def test_strong_duality_at_the_returned_weights(rng, prox, shape):
    """The returned point and weights close the duality gap (the point is the Lagrangian's minimizer for
    the weights, and no other point does better): primal value = dual value to rounding, and a
    random perturbation of the point only raises the primal (the test has power)."""
    k, nk, J = shape
    problem, G, B, kg, kb, p = _instance(rng, k=k, nk=nk, J=J, prox=prox)
    theta, rho, w = product_simplex_master(problem, G, B, kg, kb, p)
    assert theta.shape == (k,) and rho.shape == (nk, J)
    assert np.all(theta >= 0) and np.all(rho >= 0)
    assert np.allclose(theta.sum(), 1.0, atol=1e-12) and np.allclose(rho.sum(axis=1), 1.0, atol=1e-12)
    primal = _primal(problem, G, B, kg, kb, p, w)
    dual = _dual(problem, G, B, kg, kb, p, theta, rho)
    scale = 1.0 + abs(primal)
    assert primal - dual >= -1e-9 * scale  # weak duality
    assert primal - dual <= 1e-8 * scale  # and the gap closed
    for _ in range(20):
        assert _primal(problem, G, B, kg, kb, p, w + 1e-3 * rng.normal(size=w.size)) >= primal - 1e-12


@pytest.mark.parametrize("spread", [3, 15])
def test_kkt_solver_solves_the_newton_system(rng, spread):
    """The Woodbury solve (with its refinement step) solves ``[[UUᵀ + D, Eᵀ], [E, 0]]``: it equals a dense
    solve where that one is accurate (diagonals within 10^±3), and where the diagonals span thirty orders
    of magnitude, as near the end of the interior-point method, its normwise backward error is at rounding
    level (a wrong solve is off by order one)."""
    k, J, nk, d = 3, 4, 25, 6
    U_t, U_r = rng.normal(size=(k, d)), rng.normal(size=(J * nk, d))
    D_t = 10.0 ** rng.uniform(-spread, spread, size=k)
    D_r = 10.0 ** rng.uniform(-spread, spread, size=(J, nk))
    a_t, a_r = rng.normal(size=k), rng.normal(size=(J, nk))
    b_t, b_r = float(rng.normal()), rng.normal(size=nk)
    (dx_t, dx_r), (dnu_t, dnu_r) = _kkt_solver((U_t, U_r), (D_t, D_r))((a_t, a_r), (b_t, b_r))
    N = k + J * nk
    Ufull = np.vstack([U_t, U_r])
    block = np.concatenate([np.zeros(k, int), 1 + np.tile(np.arange(nk), J)])
    E = np.zeros((nk + 1, N))
    E[block, np.arange(N)] = 1.0
    K = np.zeros((N + nk + 1, N + nk + 1))
    K[:N, :N] = Ufull @ Ufull.T + np.diag(np.concatenate([D_t, D_r.ravel()]))
    K[:N, N:] = E.T
    K[N:, :N] = E
    rhs = np.concatenate([a_t, a_r.ravel(), [b_t], b_r])
    got = np.concatenate([dx_t, dx_r.ravel(), [dnu_t], dnu_r])
    norm = np.linalg.norm  # normwise backward error, ∞-norms
    assert norm(K @ got - rhs, np.inf) <= 1e-13 * (norm(K, np.inf) * norm(got, np.inf) + norm(rhs, np.inf))
    if spread <= 3:
        assert np.allclose(got, np.linalg.solve(K, rhs), rtol=1e-9, atol=1e-12)


def test_a_minimizer_outside_U_or_non_finite_data_gives_no_proposal(rng):
    """``None`` — the conic program then solves the master — when the constraint ``w ∈ U`` is active, or
    when any slope or value is not finite."""
    problem, G, B, kg, kb, p = _instance(rng, radius=1e3)
    *_, w = product_simplex_master(problem, G, B, kg, kb, p)
    tight = types.SimpleNamespace(**{**vars(problem), "feasible_set": Ball(np.zeros(w.size),
                                                                           0.5 * np.linalg.norm(w))})
    assert product_simplex_master(tight, G, B, kg, kb, p) is None
    for bad in (np.nan, np.inf):
        kb2 = kb.copy()
        kb2[3, 1] = bad
        assert product_simplex_master(problem, G, B, kg, kb2, p) is None
        G2 = G.copy()
        G2[0, 0] = bad
        assert product_simplex_master(problem, G2, B, kg, kb, p) is None


def test_the_dual_master_agrees_with_the_conic_master(rng, monkeypatch):
    """On a real kink model the dual's certified bound matches the conic solver's (to its tolerance) and
    its proposal is the same point, so the bundle method's route does not change."""
    problem, data = _problem(rng, loss="absolute", m=300, region="W", C=6.0)
    w, kinks, cuts = kink_model(problem, rng, radius=3.0, cuts=4, near=0.1)
    assert kinks.count > 20
    calls = []
    real = problem_module.product_simplex_master

    def spy(*args):
        out = real(*args)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(problem_module, "product_simplex_master", spy)
    prox = (problem.lam, w)
    dual = bundle_master(problem, cuts, kinks, prox)
    assert calls == [True]  # the dual solved it (the minimizer is inside U)
    monkeypatch.setattr(problem_module, "product_simplex_master", lambda *a: None)
    conic = bundle_master(problem, cuts, kinks, prox)
    assert abs(dual.lower - conic.lower) <= 1e-9 * (1.0 + abs(conic.lower))
    assert np.linalg.norm(dual.point - conic.point) <= 1e-6
    assert dual.lower <= reference_minimum(problem, data) + 1e-9


def test_a_badly_scaled_program_is_handed_to_the_conic_solver(monkeypatch):
    """The interior-point method stops by a rule in scaled units; with λ = 10⁻⁶ and slopes of 3·10⁴ the
    scale is 10¹³ and it stopped with a gap of order one (its bound −8·10⁻⁷ where the conic master's is
    3.5·10⁻⁵; found by review).  A proposal must close the gap in the program's own units, so this one
    goes to the conic solver, whose bound the master then returns."""
    from cvxdp.erm.kinks import KinkRows
    from cvxdp.erm.problem import Cut

    d = 2
    problem = types.SimpleNamespace(lam=1e-6, m=1, w0=np.zeros(d), dim=d, feasible_set=Ball(np.zeros(d), 1e3))
    cuts = [Cut(g=np.array([1.0, 0.0]), beta=0.0), Cut(g=np.array([-1.0, 0.0]), beta=0.0)]
    kink_g = np.array([[[3e4, 1e4], [-3e4, -1e4]], [[1e4, -2e4], [-1e4, 2e4]]])
    kink_beta = np.array([[1.0, -1.0], [0.5, -0.5]])
    kinks = KinkRows(np.arange(2), kink_g, kink_beta)
    G, B = np.stack([c.g for c in cuts]), np.array([c.beta for c in cuts])
    assert product_simplex_master(problem, G, B, kink_g, kink_beta, None) is None
    conic_only = []
    real = problem_module.product_simplex_master
    monkeypatch.setattr(problem_module, "product_simplex_master", lambda *a: conic_only.append(1))
    conic = bundle_master(problem, cuts, kinks)
    monkeypatch.setattr(problem_module, "product_simplex_master", real)
    both = bundle_master(problem, cuts, kinks)
    assert conic_only and both.lower == conic.lower and both.lower > 1e-5


@pytest.mark.parametrize("garbage", ["huge", "negative", "zero", "one-hot"])
def test_a_lying_dual_master_cannot_make_a_false_bound(rng, monkeypatch, garbage):
    """The dual is a proposal: any weights it returns are projected onto their simplices and the bound is
    evaluated and charged by the caller, so garbage weights still give a bound below the true minimum."""
    problem, data = _problem(rng, loss="hinge", m=200, region="W", C=6.0)
    ref = reference_minimum(problem, data)
    w, kinks, cuts = kink_model(problem, rng)
    assert kinks.count > 20

    def lying(problem_, G, B, kink_g, kink_beta, prox):
        shape = (G.shape[0],), kink_beta.shape
        make = {"huge": lambda s: 1e6 * np.abs(rng.normal(size=s)),
                "negative": lambda s: -np.abs(rng.normal(size=s)),
                "zero": np.zeros,
                "one-hot": lambda s: np.eye(s[-1])[rng.integers(s[-1], size=s[:-1])] if len(s) > 1
                else np.eye(s[0])[0]}[garbage]
        return make(shape[0]), make(shape[1]), problem_.w0.copy()

    monkeypatch.setattr(problem_module, "product_simplex_master", lying)
    assert bundle_master(problem, cuts, kinks, (problem.lam, w)).lower <= ref + 1e-9
