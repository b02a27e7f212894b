"""The bundle method (``cvxdp.erm.bundle``): certified like every release path, from aggregated output."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from test_erm import _problem, kink_model, reference_minimum

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
    _, kinks, cuts = kink_model(problem, rng, cuts=4)
    assert kinks.count > 20
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


def _far_squared_problem(rng, m: int = 101):
    """A squared loss on a box whose labels sit far above the model: one sign on U, so each row is
    stored reduced, as a shifted square with its own level shift (:mod:`cvxdp.extension.affine_reduction`)."""
    import cvxpy as cp

    import cvxdp
    from cvxdp.erm.problem import RegularizedERM

    d = 3
    w = cp.Variable(d)
    model = cvxdp.Model(cvxdp.losses.squared(w), [w >= -1, w <= 1])
    X = rng.normal(size=(m, d))
    y = X @ np.array([0.3, -0.2, 0.1]) + rng.normal(size=m) + 20.0
    return RegularizedERM(model, model.bind({"x": X, "y": y}), model.domain, C=50.0, lam=0.1, w0=np.zeros(d))


def _link_state(link) -> dict:
    return {key: np.asarray(value) for key, value in vars(link).items()}


@pytest.mark.parametrize("case", ["absolute-lens", "hinge-box", "squared-far-box"])
def test_a_subsample_takes_every_stride_th_row_of_the_problem(rng, case):
    """The subsample is chosen by position: rows 0, s, 2s, … of the problem as stored, with the same public
    fields, each row's generalized-linear form (its link's parameters too) and offset ``κ_i`` the same
    bits.  Found by review: rebuilding the rows ran the reduction again, which recomputed a far squared
    row's level shift from its already shifted label — another function."""
    if case == "squared-far-box":
        problem = _far_squared_problem(rng)
    else:
        loss, region = case.split("-")
        problem, _ = _problem(rng, loss=loss, m=101, domain="ball" if region == "lens" else "box",
                              region="lens" if region == "lens" else "W")
    before = problem.offsets  # computed before: the subsample slices them
    sub = problem.subsample(8)
    rows = np.arange(0, 101, 8)
    assert sub.m == rows.size == 13
    assert (sub.C, sub.lam, sub.region) == (problem.C, problem.lam, problem.region)
    assert sub.w_domain is problem.w_domain
    assert np.array_equal(sub.w0, problem.w0)
    full, part = problem.examples.glm(), sub.examples.glm()
    assert np.array_equal(part.a, full.a[rows]) and np.array_equal(part.b, full.b[rows])
    assert np.array_equal(part.is_glm, full.is_glm[rows])
    want, got = _link_state(full.link.subset(rows)), _link_state(part.link)
    assert want.keys() == got.keys()
    for key in want:
        shape = np.broadcast_shapes(got[key].shape, want[key].shape)
        assert np.array_equal(np.broadcast_to(got[key], shape), np.broadcast_to(want[key], shape))
    if case == "squared-far-box":  # the shifts are the rows' own, not recomputed (the test has power)
        assert np.all(np.abs(np.broadcast_to(got["shift"], (13,))) > 1.0)
    assert np.array_equal(sub.offsets, before[rows])
    fresh = problem.subsample(8)  # and offsets computed on the subsample are the rows' own
    assert np.array_equal(fresh.offsets, problem.offsets[rows])


def _first_full_point(monkeypatch, m: int) -> list:
    """Spy on the passes: the points at which a problem of ``m`` rows is evaluated, in order."""
    points: list = []
    real = bundle_module.evaluate_upper

    def spy(problem_, w, tolerance, exclude=None):
        if problem_.m == m:
            points.append(np.array(w, copy=True))
        return real(problem_, w, tolerance, exclude)

    monkeypatch.setattr(bundle_module, "evaluate_upper", spy)
    return points


def test_a_subsample_start_changes_the_route_not_the_certificate(rng, monkeypatch):
    """A large problem first solves every 8th row to 100α and starts from that point: its first pass is
    there, the certificate still reaches α for all rows, and the point is within the strong-convexity
    distance ``sqrt(2 gap₁/λ) + sqrt(2 gap₂/λ)`` of the cold run's (both are α-minimizers of one F)."""
    problem, _ = _problem(rng, loss="absolute", m=1600)
    alpha = 1e-8
    cold = bundle_method(problem, alpha, problem.w0, warm_start=False)
    monkeypatch.setattr(bundle_module, "WARM_ROWS", 1000)
    sub = bundle_method(problem.subsample(bundle_module.WARM_STRIDE), bundle_module.WARM_SLACK * alpha,
                        problem.w0, max_iterations=bundle_module.WARM_PASSES, oracle_tolerance=alpha / 20.0)
    points = _first_full_point(monkeypatch, problem.m)
    warm = bundle_method(problem, alpha, problem.w0)
    assert cold.warm_passes == 0 and warm.warm_passes == sub.iterations > 0
    np.testing.assert_allclose(points[0], sub.w, rtol=0, atol=1e-12)
    assert float(np.linalg.norm(points[0] - problem.w0)) > 1e-3  # the start moved: the test has power
    for res in (cold, warm):
        assert res.upper - res.lower <= alpha
    bound = math.sqrt(2 * (cold.upper - cold.lower) / problem.lam) + math.sqrt(
        2 * (warm.upper - warm.lower) / problem.lam)
    assert float(np.linalg.norm(cold.w - warm.w)) <= bound * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize("error", ["SolverError", "CertificationError", "ValueError", "FloatingPointError"])
def test_a_failing_subsample_leaves_the_start_where_it_was(rng, monkeypatch, error):
    """The subsample only proposes a start: if its run fails, whatever the exception, the full run
    starts at ``start`` and is certified as always (no refusal that the full run alone would not make)."""
    import builtins

    import cvxdp.error as errors

    problem, _ = _problem(rng, loss="hinge", m=1200)
    monkeypatch.setattr(bundle_module, "WARM_ROWS", 1000)
    real = bundle_module.evaluate_upper
    tried, points = [], []
    exc_type = getattr(errors, error, None) or getattr(builtins, error)

    def failing(problem_, w, tolerance, exclude=None):
        if problem_.m < problem.m:
            tried.append(problem_.m)
            raise exc_type("the subsample's pass failed")
        points.append(np.array(w, copy=True))
        return real(problem_, w, tolerance, exclude)

    monkeypatch.setattr(bundle_module, "evaluate_upper", failing)
    res = bundle_method(problem, 1e-8, problem.w0)
    assert tried == [150]  # the subsample was tried, and failed on its first pass
    assert res.warm_passes == 0 and res.upper - res.lower <= 1e-8
    np.testing.assert_array_equal(points[0], bundle_method(problem, 1e-8, problem.w0, warm_start=False,
                                                           max_iterations=1).w)


def test_a_non_finite_subsample_point_leaves_the_start_where_it_was(rng, monkeypatch):
    """A subsample run whose best point is not finite is not used as the start."""
    problem, _ = _problem(rng, loss="absolute", m=1200)
    monkeypatch.setattr(bundle_module, "WARM_ROWS", 1000)
    real = bundle_module.bundle_method

    def poisoned(problem_, alpha, start, **kw):
        res = real(problem_, alpha, start, **kw)
        if problem_.m < problem.m:
            res.w = np.full_like(res.w, np.nan)
        return res

    monkeypatch.setattr(bundle_module, "bundle_method", poisoned)
    points = _first_full_point(monkeypatch, problem.m)
    res = real(problem, 1e-8, problem.w0)
    assert res.warm_passes > 0 and res.upper - res.lower <= 1e-8
    np.testing.assert_array_equal(points[0], real(problem, 1e-8, problem.w0, warm_start=False,
                                                  max_iterations=1).w)
