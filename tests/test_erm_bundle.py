"""The bundle method (``cvxdp.erm.bundle``): certified like every release path, from aggregated output."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from test_erm import _problem, reference_minimum

import cvxdp.erm.bundle as bundle_module
from cvxdp.erm import ERMSettings, bundle_master, bundle_method, solve_certified
from cvxdp.erm.problem import evaluate_upper
from cvxdp.error import CertificationError, ParameterError


def test_bundle_and_conic_agree_within_strong_convexity(rng):
    """Two certified α-minimizers of a λ-strongly convex F lie within sqrt(2·(gap₁ + gap₂)/λ)·... of each
    other: ||w₁ − w₂|| ≤ sqrt(2 gap₁/λ) + sqrt(2 gap₂/λ)."""
    problem, _ = _problem(rng, loss="absolute", m=120)
    alpha = 1e-8
    w1, c1 = solve_certified(problem, alpha, ERMSettings(method="bundle", refine=False))
    w2, c2 = solve_certified(problem, alpha, ERMSettings(method="conic"))
    bound = math.sqrt(2 * c1.gap / problem.lam) + math.sqrt(2 * c2.gap / problem.lam)
    assert float(np.linalg.norm(w1 - w2)) <= bound * (1 + 1e-9) + 1e-12


def test_bounded_memory_keeps_the_model_from_falling(rng):
    """With 2 cuts of memory plus the aggregate (and the newest cut) α is still met, and the master's
    minimum does not fall beyond the master solver's accuracy: the aggregate ``Σθ ℓ`` alone already
    has the previous minimum.  (Without the aggregate this run stalls at a gap of 2e-4.)  The plain
    BMRM step: a proximal term moves the weights, and the kink rows restart the cuts."""
    problem, _ = _problem(rng, loss="hinge", m=60)
    lowers = []
    real = bundle_module.bundle_master

    def spy(problem_, cuts, kinks=None, prox=None):
        assert len(cuts) <= 2 + 2 and kinks is None and prox is None
        master = real(problem_, cuts)
        lowers.append(master.lower)
        return master

    bundle_module.bundle_master = spy
    try:
        res = bundle_method(problem, 1e-7, problem.w0, memory=2, max_iterations=400, prox=None,
                            kink_cap=None)
    finally:
        bundle_module.bundle_master = real
    assert res.upper - res.lower <= 1e-7
    assert len(lowers) > 8  # the cap was reached and the aggregate took over
    for before, after in itertools.pairwise(lowers):
        assert after >= before - 1e-7 * (1.0 + abs(before))


@pytest.mark.parametrize("lie", ["nan", "far", "none"])
def test_a_lying_master_program_cannot_make_a_false_certificate(rng, monkeypatch, lie):
    """The master only proposes: points outside U, NaN points or none stop the run with what is
    certified; the release gate then refuses or the certificate is true."""
    problem, data = _problem(rng, loss="absolute", m=60)
    real = bundle_master

    def lying(problem_, cuts, kinks=None, prox=None):
        m = real(problem_, cuts, kinks, prox)
        far = m.point + 50.0 if m.point is not None else None
        point = {"nan": np.full(problem_.dim, math.nan), "far": far, "none": None}[lie]
        return m._replace(point=point, lower=m.lower)

    monkeypatch.setattr(bundle_module, "bundle_master", lying)
    ref = reference_minimum(problem, data)
    try:
        w, cert = solve_certified(problem, 1e-8, ERMSettings(method="bundle", refine=False,
                                                             bundle_iterations=30))
    except CertificationError:
        return
    upper, _ = evaluate_upper(problem, w, 1e-12)
    assert cert.lower <= ref + 1e-7 and upper - ref <= 1e-8 + 1e-7


def test_bundle_iterations_are_validated():
    with pytest.raises(ParameterError, match="bundle_iterations"):
        ERMSettings(method="bundle", bundle_iterations=0)


@pytest.mark.parametrize("loss", ["absolute", "hinge"])
def test_kink_rows_and_the_proximal_term_certify_in_fewer_passes(rng, loss):
    """The kink rows (exact in the master) and the proximal step certify α — a true certificate against the
    CVXPY reference — in fewer passes than plain BMRM (power: the plain run needs more)."""
    problem, data = _problem(rng, loss=loss, m=400)
    ref = reference_minimum(problem, data)
    alpha = 1e-9
    plain = bundle_method(problem, alpha, problem.w0, prox=None, kink_cap=None)
    fast = bundle_method(problem, alpha, problem.w0)
    for res in (plain, fast):
        assert res.upper - res.lower <= alpha and res.lower <= ref + 1e-8
        assert evaluate_upper(problem, res.w, 1e-12)[0] - ref <= alpha + 1e-8
    assert fast.iterations < plain.iterations


def test_kink_model_bound_is_valid_for_any_weights(rng, monkeypatch):
    """The master with kink rows is a proposal: garbage multipliers (any θ, any ρ) still give a lower bound
    below the true minimum, since each kink row's weights are projected onto its own simplex."""
    from cvxdp.conic import program as program_module
    from cvxdp.erm.problem import bundle_master as master

    problem, data = _problem(rng, loss="absolute", m=200)
    ref = reference_minimum(problem, data)
    w = problem.region.make_feasible(problem.w0[None, :] + 0.05)[0]
    kinks = problem.kink_rows(w, 10.0, 10_000)
    assert kinks.count > 20
    cuts = [evaluate_upper(problem, problem.region.make_feasible(rng.normal(size=(1, problem.dim)))[0],
                           1e-12, kinks.index)[1] for _ in range(4)]
    honest = master(problem, cuts, kinks)
    assert honest.lower <= ref + 1e-9
    real_solve = program_module.solve
    for scale in (1e3, -1.0, 0.0):
        def garbage(prog, settings=None, scale=scale):
            sol = real_solve(prog, settings)
            sol.z = scale * np.abs(rng.normal(size=sol.z.shape))
            return sol

        monkeypatch.setattr(program_module, "solve", garbage)
        assert master(problem, cuts, kinks).lower <= ref + 1e-9
    monkeypatch.setattr(program_module, "solve", real_solve)
    assert honest.lower >= ref - 1.0  # the honest bound is a sensible one (the test has power)
