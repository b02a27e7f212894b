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
def test_kink_rows_and_the_proximal_step_certify_in_no_more_passes(rng, loss, monkeypatch):
    """The kink rows (their pieces and their own minorants in the master) and the proximal step certify α —
    a true certificate against the CVXPY reference, like plain BMRM's — in no more passes (the pass
    counts at scale are bench_erm_solvers').  C is above most rows' slopes, as the private tail
    histogram picks it."""
    problem, data = _problem(rng, loss=loss, m=400, C=6.0)
    ref = reference_minimum(problem, data)
    alpha = 1e-9
    calls: list[int] = []
    real = bundle_module.bundle_master

    def spy(problem_, cuts, kinks=None, prox=None):
        calls.append(0 if kinks is None else kinks.count)
        return real(problem_, cuts, kinks, prox)

    monkeypatch.setattr(bundle_module, "bundle_master", spy)
    plain = bundle_method(problem, alpha, problem.w0, prox=None, kink_cap=None)
    assert not any(calls)
    calls.clear()
    fast = bundle_method(problem, alpha, problem.w0)
    for res in (plain, fast):
        assert res.upper - res.lower <= alpha and res.lower <= ref + 1e-8
        assert evaluate_upper(problem, res.w, 1e-12)[0] - ref <= alpha + 1e-8
    assert any(calls)  # the kink rows entered the model
    assert fast.iterations <= plain.iterations


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


def test_a_steep_kink_row_whose_foot_leaves_U_does_not_stall_the_bound():
    """Found by review: a kink row steeper than C whose foot point leaves U (here on a lens) is above both
    of its clipped pieces at the minimizer; modelled by them alone, and left out of the cuts, it held the
    master's bound 1.4·10⁻⁶ below the minimum for good (40 passes, α = 10⁻⁶).  Its own minorants, returned
    by each pass, close its model: certified in a few passes.  (144 LAD rows, d = 3, from the review.)"""
    import pathlib

    import cvxpy as cp

    from cvxdp import Model, losses
    from cvxdp.erm.problem import RegularizedERM
    from cvxdp.geometry import localize

    f = np.load(pathlib.Path(__file__).parent / "golden" / "kink_stall.npz")
    w = cp.Variable(3)
    model = Model(losses.absolute(w), [cp.norm(w, 2) <= 1.0])
    region = localize(model.domain, f["center"], float(f["radius"]))
    problem = RegularizedERM(model, model.bind({"x": f["X"], "y": f["y"]}), region, float(f["C"]),
                             float(f["lam"]), region.interior_point())
    res = bundle_method(problem, 1e-6, problem.w0, max_iterations=40, oracle_tolerance=2e-8)
    assert res.upper - res.lower <= 1e-6 and res.iterations < 20
