"""The affine plan: cvxdp.plan.mean_gradient, cvxdp.run.mean_gradient, cvxdp.privacy.clipped_mean and
cvxdp.geometry.linear."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.datasets import linear_lower_bound
from cvxdp.error import ParameterError, PrivacyBudgetError
from cvxdp.geometry import Ball, Box, Ellipsoid, Polytope, Simplex
from cvxdp.geometry.linear import linear_minimizer
from cvxdp.plan.inputs import PublicInputs
from cvxdp.plan.mean_gradient import MECHANISM_LABEL, mean_gradient_clip, plan_mean_gradient
from cvxdp.privacy.clipped_mean import (
    SCALE_BITS,
    clip_rows,
    clipped_mean,
    exact_column_sums,
    mean_sensitivity,
    rounded_mean,
)
from cvxdp.privacy.ledger import PrivacyLedger
from cvxdp.privacy.random import SeededRandom
from cvxdp.run.executor import PartitionedExecutor
from cvxdp.run.mean_gradient import affine_gradients, clipped_gradient_sums, release_mean_gradient

warnings.filterwarnings("ignore", category=cvxdp.PrivacyLeakWarning)


def _affine_model(d: int = 3, radius: float = 1.0, domain: str = "ball") -> cvxdp.Model:
    w = cp.Variable(d)
    constraint = {"ball": cp.norm(w, 2) <= radius, "l1": cp.norm(w, 1) <= radius,
                  "box": cp.abs(w) <= radius}[domain]
    return cvxdp.Model(cvxdp.losses.affine(w), [constraint])


def _heavy_data(n: int, d: int = 3, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    X = rng.standard_t(4.5, size=(n, d)) + np.linspace(1.0, -0.5, d)
    return {"x": X, "y": rng.standard_normal(n)}


# -- the exact mean ---------------------------------------------------------------------------------

def _wild_rows(rng, m: int, d: int) -> np.ndarray:
    """Rows over the whole float range: huge, tiny, subnormal, zero, both signs."""
    x = rng.normal(size=(m, d)) * np.exp2(rng.integers(-1074, 1000, size=(m, d)).astype(float))
    x[rng.random((m, d)) < 0.1] = 0.0
    x[rng.random((m, d)) < 0.05] = 5e-324 * rng.integers(-3, 4)
    return np.clip(x, -1e300, 1e300)


def test_exact_column_sums_are_the_rational_sums_and_add_over_any_split():
    rng = np.random.default_rng(0)
    for _ in range(40):
        m, d = int(rng.integers(1, 120)), int(rng.integers(1, 4))
        x = _wild_rows(rng, m, d)
        sums = exact_column_sums(x)
        exact = [sum((Fraction(float(v)) for v in col), Fraction(0)) for col in x.T]
        assert [Fraction(s, 2**SCALE_BITS) for s in sums] == exact
        cut = int(rng.integers(0, m + 1))
        parts = [exact_column_sums(x[:cut]) if cut else [0] * d, exact_column_sums(x[cut:]) if cut < m
                 else [0] * d]
        assert [a + b for a, b in zip(*parts, strict=True)] == sums
        # the mean is the exact mean rounded once (and fsum's rounding of the sum, for the sum)
        mean = rounded_mean(sums, m)
        assert list(mean) == [float(e / m) for e in exact]
        assert [float(Fraction(s, 2**SCALE_BITS)) for s in sums] == [math.fsum(col) for col in x.T]


def test_exact_column_sums_refuses_non_finite_rows():
    with pytest.raises(ValueError, match="finite"):
        exact_column_sums(np.array([[1.0, np.nan]]))
    # a non-finite row clips to 0: the mean of (0, 0) and (0.6, 0.8)
    assert np.allclose(clipped_mean(clip_rows(np.array([[np.inf, 1.0], [3.0, 4.0]]), 1.0)), [0.3, 0.4],
                       rtol=1e-14, atol=0)


def test_neighbouring_clipped_means_differ_by_at_most_the_sensitivity_in_rationals():
    """One row replaced (its clipped value g against −g, the worst case) among rows of every scale."""
    rng = np.random.default_rng(1)
    for _ in range(150):
        n, d = int(rng.integers(2, 400)), int(rng.integers(1, 5))
        C = float(np.exp(rng.uniform(-30, 30)))
        G0 = rng.normal(size=(n, d)) * C * np.exp(rng.uniform(-3, 3, size=(n, 1)))
        G1 = G0.copy()
        g = rng.normal(size=d) * C * 10
        G0[0], G1[0] = g, -g
        m0, m1 = clipped_mean(clip_rows(G0, C)), clipped_mean(clip_rows(G1, C))
        gap2 = sum((Fraction(float(a)) - Fraction(float(b))) ** 2 for a, b in zip(m0, m1, strict=True))
        assert gap2 <= Fraction(mean_sensitivity(C, n)) ** 2
    # and the bound is not loose by more than its rounding: the flip of one row at norm C moves 2C/n
    n, C = 10, 1.0
    G0 = np.zeros((n, 1))
    G1 = G0.copy()
    G0[0], G1[0] = C * 10, -C * 10
    gap = abs(clipped_mean(clip_rows(G0, C))[0] - clipped_mean(clip_rows(G1, C))[0])
    assert gap == pytest.approx(2 * C / n, rel=1e-14) and gap <= mean_sensitivity(C, n)


def test_a_clipped_row_is_no_longer_than_C_even_when_C_over_its_norm_is_subnormal():
    """Review helper-36's pair: a row of norm 1.06e308 under C = 2.6e-16 — the factor C/||g|| is subnormal
    and rounded to 2⁻¹⁰⁷⁴, which left the row near 2C; scaling the unit row keeps it within C (checked in
    rationals), over every C from the floor to the float range's top."""
    C = 2.6165878484802636e-16
    [row] = clip_rows(np.array([[1.05920549e308, 0.0]]), C)
    assert sum(Fraction(float(t)) ** 2 for t in row) <= Fraction(C) ** 2
    assert float(np.linalg.norm(row)) == pytest.approx(C, rel=1e-14)
    rng = np.random.default_rng(7)
    for _ in range(400):
        d = int(rng.integers(1, 7))
        C = float(np.exp2(rng.uniform(-900, 1020)))
        scale = np.exp2(rng.uniform(-1074, 1023, size=(5, 1)))
        rows = np.clip(rng.normal(size=(5, d)) * scale, -1e308, 1e308)
        for g, out in zip(rows, clip_rows(rows, C), strict=True):
            assert sum(Fraction(float(t)) ** 2 for t in out) <= Fraction(C) ** 2
            if np.linalg.norm(g / np.max(np.abs(g))) * np.max(np.abs(g)) < 0.5 * C:
                assert np.array_equal(out, g)  # a short row is kept as it is


def test_a_clip_level_below_the_floor_is_refused_before_any_data():
    """Below 2⁻⁹⁰⁰ the mean's rounding stops being relative (review helper-36: a subnormal C let the
    neighbouring means differ by 1.99Δ): the planner, the GD baseline and objective perturbation refuse."""
    from cvxdp.baselines import noisy_clipped_gd
    from cvxdp.privacy.clipped_mean import MIN_CLIP, clip_level

    assert clip_level("C", MIN_CLIP) == MIN_CLIP
    with pytest.raises(ParameterError, match="below 2"):
        clip_level("C", MIN_CLIP / 2)
    with pytest.raises(ParameterError, match="not a finite positive number"):
        cvxdp.PrivateProblem(_affine_model()).plan(n=10, epsilon=1.0, moment_k=2.0, G_k=362 * 2.0**-1074)
    with pytest.raises(ParameterError, match="below 2"):
        noisy_clipped_gd(_affine_model(), _heavy_data(20), epsilon=1.0, C=1e-300, steps=1, random_state=0)


def test_the_clipped_mean_baselines_raise_or_warn_on_no_record_under_strict_numpy_settings():
    """Review helper-37: with ``np.seterr(all="raise")`` a record with a 1e-300 entry made clip_rows
    underflow (an exception on one neighbour only), and a C of 2⁻⁹⁰⁰ underflowed the GD step's C²; both
    baselines and the clip now run quietly, whatever the caller's numpy settings."""
    from cvxdp.baselines import noisy_clipped_gd, objective_perturbation

    w = cp.Variable(2)
    model = cvxdp.Model(cvxdp.losses.affine(w), [cp.norm(w, 2) <= 1.0])
    base = {"x": np.ones((20, 2)), "y": np.zeros(20)}
    other = {"x": base["x"].copy(), "y": base["y"].copy()}
    other["x"][0] = [1.0, 1e-300]
    logistic = cvxdp.Model(cvxdp.losses.logistic(w), [cp.norm(w, 2) <= 1.0])
    labels = np.where(np.arange(20) % 2 == 0, 1.0, -1.0)
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for data in (base, other):
            clip_rows(data["x"], 0.5)
            noisy_clipped_gd(model, data, epsilon=1.0, C=1.0, steps=3, random_state=0)
            objective_perturbation(logistic, {"x": data["x"], "y": labels}, epsilon=1.0, feature_bound=1.0,
                                   regularization=0.1, random_state=0)
        r = noisy_clipped_gd(model, base, epsilon=1.0, C=2.0**-900, steps=2, random_state=0)
    assert np.all(np.isfinite(r.w)) and math.isfinite(r.params["step_size"])


# -- the plan ---------------------------------------------------------------------------------------

def test_the_clip_level_minimizes_bias_plus_noise():
    """``C = G_k((k−1)nε/(2d))^{1/k}`` is the minimizer of ``G_k^k C^{1−k} + 2Cd/(nε)``: a grid finds
    nothing lower, and the value there is the closed form
    ``(2k/(k−1))((k−1)/2)^{1/k} G_k (d/(nε))^{1−1/k}``."""
    for n, d, eps, k, G in ((1000, 10, 1.0, 4.0, 1.0), (10**5, 3, 0.3, 2.5, 7.0), (500, 20, 4.0, 8.0, 0.2)):
        def cost(C, G=G, k=k, n=n, d=d, eps=eps):
            return G**k * C ** (1 - k) + 2 * C * d / (n * eps)

        C = mean_gradient_clip(n, d, eps, k, G)
        grid = C * np.exp(np.linspace(-3, 3, 2001))
        assert cost(C) <= np.min(cost(grid)) * (1 + 1e-12)
        closed = 2 * k / (k - 1) * ((k - 1) / 2) ** (1 / k) * G * (d / (n * eps)) ** (1 - 1 / k)
        assert cost(C) == pytest.approx(closed, rel=1e-12)


def test_the_plan_charges_the_mean_sensitivity_with_an_exact_noise_scale():
    plan = plan_mean_gradient(3000, 10, 0.7, 4.0, 2.0)
    assert plan.C == mean_gradient_clip(3000, 10, 0.7, 4.0, 2.0)
    assert plan.sensitivity == mean_sensitivity(plan.C, 3000)
    assert Fraction(plan.noise_scale) * Fraction(plan.epsilon) >= Fraction(plan.sensitivity)
    mech = plan.mechanism()
    assert (mech.sensitivity, mech.epsilon, mech.dim) == (plan.sensitivity, 0.7, 10)
    assert mech.scale == plan.noise_scale


def _inputs(n: int, **options) -> PublicInputs:
    kw = dict(d=3, D=2.0, structured=True, epsilon=1.0, moment_k=4.0, G_k=3.0, affine=True)
    kw.update(options)
    return PublicInputs.from_options(**kw).with_n(n)


def test_auto_runs_the_affine_plan_for_an_affine_loss():
    inp = _inputs(500)
    assert inp.algorithm == "mean-gradient" and inp.auto_algorithm and "affine" in inp.auto_reason
    assert inp.histogram_share == 0.0 and inp.tail_grid is None  # a public G_k: no histogram
    assert _inputs(10**6, G_2=1.0).algorithm == "mean-gradient"  # whatever n ε/d and the tail ratio
    assert _inputs(500, tail_share=0.0).algorithm == "mean-gradient"  # no histogram: nothing asked
    # G_k="auto": the histogram estimates it, with its default or a given share and range
    for option in (dict(), dict(tail_share=0.2), dict(tail_range=(0.1, 10.0))):
        est = _inputs(500, G_k="auto", **option)
        assert est.algorithm == "mean-gradient" and est.histogram_share == option.get("tail_share", 0.1)
    # not for another loss, or with an option only the localization algorithms read
    assert _inputs(500, affine=False).algorithm != "mean-gradient"
    for option in (dict(lam=0.1), dict(lambda_scale=2.0), dict(max_phases=2), dict(tail_share=0.2),
                   dict(tail_range=(0.1, 10.0)), dict(profile="paper"), dict(localize=False)):
        assert _inputs(5000, **option).algorithm != "mean-gradient", option


def test_the_affine_plan_refuses_what_it_cannot_run():
    with pytest.raises(ParameterError, match="affine in w"):
        _inputs(500, affine=False, algorithm="mean-gradient")
    with pytest.raises(ParameterError, match="lam, tail_share"):
        _inputs(500, lam=0.1, tail_share=0.2, algorithm="mean-gradient")
    v = cp.Variable(2)
    problem = cvxdp.PrivateProblem(cvxdp.Model(cvxdp.losses.absolute(v), [cp.norm(v, 2) <= 1.0]))
    with pytest.raises(ParameterError, match="affine in w"):
        problem.plan(n=100, epsilon=1.0, moment_k=4.0, G_k=1.0, algorithm="mean-gradient")
    for algorithm in ("mean-gradient", "auto"):  # not the grid of a histogram it would not run
        with pytest.raises(ParameterError, match="not a finite positive number"):
            cvxdp.PrivateProblem(_affine_model()).plan(n=100, epsilon=1.0, moment_k=4.0, G_k=1e308,
                                                       algorithm=algorithm)


def test_the_dry_run_prints_the_one_release():
    plan = cvxdp.PrivateProblem(_affine_model()).plan(n=2000, epsilon=1.0, moment_k=4.0, G_k=3.0)
    text = plan.describe()
    assert plan.gradient is not None and plan.batches == () and plan.releases == 1
    assert "noisy clipped mean" in text and f"C = {plan.gradient.C:.4g}" in text
    assert f"s = {plan.gradient.noise_scale:.4g}" in text and "linear minimizer" in text


# -- the run ----------------------------------------------------------------------------------------

def test_a_fit_is_one_charged_release_and_its_output_minimizes_the_released_mean():
    model = _affine_model()
    data = _heavy_data(800)
    r = cvxdp.PrivateProblem(model).solve(data, epsilon=1.0, moment_k=4.0, G_k=4.0, random_state=3)
    plan = r.release_plan.gradient
    assert r.algorithm == "mean-gradient" and r.steps == []
    [entry] = r.ledger.entries
    assert (entry.mechanism, entry.epsilon, entry.n_examples) == (MECHANISM_LABEL, 1.0, 800)
    assert (entry.sensitivity, entry.noise_scale) == (plan.sensitivity, plan.noise_scale)
    assert r.ledger.spent == 1.0 and "noisy clipped mean" in r.summary()
    # the same draw by hand: the output is the ball's linear minimizer of the released mean
    ledger = PrivacyLedger(800, 1.0)
    w, released = release_mean_gradient(model, model.bind(data), plan, ledger=ledger,
                                        source=SeededRandom(3))
    assert np.array_equal(w, r.w) and model.domain.contains(w)
    assert np.allclose(w, -released / np.linalg.norm(released), atol=1e-12)


def test_the_release_refuses_a_plan_made_for_other_data_or_an_overspent_ledger():
    model = _affine_model()
    ex = model.bind(_heavy_data(100))
    with pytest.raises(PrivacyBudgetError, match="another number of examples"):
        release_mean_gradient(model, ex, plan_mean_gradient(99, 3, 1.0, 4.0, 2.0),
                              ledger=PrivacyLedger(100, 1.0), source=SeededRandom(0))
    ledger = PrivacyLedger(100, 1.0)
    ledger.charge(0.5, np.arange(100), mechanism="earlier", batch="all")
    with pytest.raises(PrivacyBudgetError, match="exceeded"):
        release_mean_gradient(model, ex, plan_mean_gradient(100, 3, 1.0, 4.0, 2.0), ledger=ledger,
                              source=SeededRandom(0))


def test_each_examples_clipped_gradient_depends_on_that_example_only():
    """Change one example (to an extreme one): every other example's gradient and clipped gradient is the
    same to the last bit, and the exact sums move by that example's contribution alone."""
    model = _affine_model(d=4)
    data = _heavy_data(300, d=4, seed=5)
    changed = {k: v.copy() for k, v in data.items()}
    changed["x"][17] = [1e90, -3e-300, 2e50, -1e100]
    changed["y"][17] = -1e100
    g0, g1 = (affine_gradients(model.bind(d)) for d in (data, changed))
    keep = np.arange(300) != 17
    assert np.array_equal(g0[keep], g1[keep])
    assert np.allclose(g0, data["x"], rtol=4e-16, atol=0)  # the affine coefficients: the features
    C = 2.5
    c0, c1 = clip_rows(g0, C), clip_rows(g1, C)
    assert np.array_equal(c0[keep], c1[keep])
    s0, _ = clipped_gradient_sums(model.bind(data), C)
    s1, _ = clipped_gradient_sums(model.bind(changed), C)
    rows0, rows1 = exact_column_sums(c0[17:18]), exact_column_sums(c1[17:18])
    assert [a - r0 + r1 for a, r0, r1 in zip(s0, rows0, rows1, strict=True)] == s1


def test_partitioned_and_serial_fits_release_the_same_bits():
    model = _affine_model()
    data = _heavy_data(1000, seed=2)
    kw = dict(epsilon=1.0, moment_k=4.0, G_k=4.0)
    serial = cvxdp.PrivateProblem(model).solve(data, random_state=11, **kw)
    parted = cvxdp.PrivateProblem(model).solve(data, random_state=11, executor=PartitionedExecutor(4), **kw)
    assert np.array_equal(serial.w, parted.w)
    assert parted.ledger.entries == serial.ledger.entries


def test_the_excess_risk_is_below_the_plans_bound_and_has_the_rates_slope():
    """On the paper's lower-bound family (G_k = 1, the rare atom's mass p = 16 d/(nε)): the mean excess
    over seeds is below the plan's expected-excess bound at every n, and falls like n^{−(1−1/k)} (within
    0.15) — a shrunken fit (the λ of the clip rule) falls slower on this family."""
    d, k, eps = 10, 4.0, 1.0
    ns = (1000, 10_000, 100_000)
    means = []
    for n in ns:
        p = 16.0 * d / (n * eps)
        excess, bound = [], None
        for seed in range(12):
            task = linear_lower_bound(n=n, d=d, p=p, magnitude=p ** (-1.0 / k), n_test=1, seed=seed)
            w = cp.Variable(d)
            model = cvxdp.Model(cvxdp.losses.affine(w), [cp.norm(w, 2) <= 1.0])
            r = cvxdp.PrivateProblem(model).solve({"x": task.X_train, "y": task.y_train}, epsilon=eps,
                                                  moment_k=k, G_k=1.0, random_state=seed)
            excess.append(task.risk(r.w) - task.risk(task.w_star))
            bound = r.release_plan.gradient.bound(k, 1.0, p ** (0.5 - 1.0 / k), model.diameter)
        assert np.mean(excess) <= bound
        means.append(np.mean(excess))
    slope = np.polyfit(np.log(ns), np.log(means), 1)[0]
    assert abs(slope + (1.0 - 1.0 / k)) <= 0.15, slope


# -- the linear minimizer ---------------------------------------------------------------------------

@pytest.mark.parametrize("domain", [Ball(np.array([0.5, -1.0, 2.0]), 1.5), Simplex(3, 2.0),
                                    Simplex(3, 0.5, full=True),
                                    Box(np.array([-1.0, 0.0, 2.0]), np.array([1.0, 3.0, 2.5])),
                                    Polytope(np.vstack([np.eye(3), -np.eye(3), np.ones((1, 3))]),
                                             np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.5])),
                                    Ellipsoid(np.array([0.0, 1.0, -1.0]), np.diag([1.0, 4.0, 0.25]))])
def test_the_linear_minimizer_attains_the_support_function(domain):
    rng = np.random.default_rng(0)
    for _ in range(20):
        v = rng.normal(size=3) * np.exp(rng.uniform(-200, 200))
        w = linear_minimizer(domain, v)
        assert domain.contains(w)
        unit = v / np.linalg.norm(v)
        # <v, w> = min over W = −σ(−v)
        # the ellipsoid's minimizer is a conic solve, the polytope's support function one (HiGHS's vertex
        # is exact); the other closed forms agree to rounding
        tol = {Ellipsoid: 1e-7, Polytope: 1e-9}.get(type(domain), 1e-12)
        assert unit @ w == pytest.approx(-float(domain.support(-unit[None, :])[0]), abs=tol)
    centre = domain.make_feasible(domain.interior_point())
    assert np.array_equal(linear_minimizer(domain, np.zeros(3)), centre)
    with pytest.raises(ValueError, match="finite"):
        linear_minimizer(domain, np.array([np.nan, 0.0, 1.0]))


def test_a_polyhedral_domains_linear_minimizer_is_an_exact_vertex():
    """An ℓ1 ball (a ConvexSet whose conic rows are all linear) and an ℓ1 ball cut by an equality: the LP's
    vertex is returned as it is (a projection by a conic solve had pulled it 2.4e-6 inside: review
    helper-36), and attains the closed-form minimum ``−max_j |v_j|``."""
    from cvxdp.geometry import domain_from_constraints

    w = cp.Variable(4)
    ball = domain_from_constraints([cp.norm(w, 1) <= 1.0], w)
    rng = np.random.default_rng(3)
    for _ in range(20):
        v = rng.normal(size=4)
        x = linear_minimizer(ball, v)
        assert ball.contains(x) and v @ x == -np.max(np.abs(v))
        assert np.count_nonzero(x) == 1
    cut = domain_from_constraints([cp.norm(w, 1) <= 1.0, w[0] + w[1] == 0.2], w)
    x = linear_minimizer(cut, np.array([1.0, -1.0, 0.5, 0.0]))
    assert cut.contains(x) and np.allclose(x, [-0.4, 0.6, 0.0, 0.0], atol=1e-15)



@pytest.mark.parametrize("scale", [1e-8, 1e-4, 1.0, 1e6])
def test_the_linear_minimizer_is_accurate_at_any_scale_of_the_domain(scale):
    """Review helper-38: solvers' absolute tolerances and a projection of an ulp-outside vertex cost up to
    117% at small scales; in the bounding ball's coordinates a shifted ℓ1 ball (an LP) attains its closed
    form and an ℓ1 ball cut by a Euclidean ball (a conic solve) its unit-scale answer times the scale."""
    from cvxdp.geometry import domain_from_constraints

    w = cp.Variable(4)
    shift = np.array([0.5, -0.25, 0.0, 1.0]) * scale
    l1 = domain_from_constraints([cp.norm(w - shift, 1) <= scale], w)
    cut = domain_from_constraints([cp.norm(w, 1) <= scale, cp.norm(w, 2) <= 0.75 * scale], w)
    unit_cut = domain_from_constraints([cp.norm(w, 1) <= 1.0, cp.norm(w, 2) <= 0.75], w)
    rng = np.random.default_rng(5)
    for _ in range(8):
        v = rng.normal(size=4)
        x = linear_minimizer(l1, v)
        exact = v @ shift - scale * np.max(np.abs(v))
        # (to 1e-9 of the scale: a ConvexSet's own bounding ball is loose at 1e-8, diameter ≤ 0.004)
        assert l1.contains(x) and abs(v @ x - exact) <= 1e-9 * scale * np.abs(v).sum()
        y, y1 = linear_minimizer(cut, v), linear_minimizer(unit_cut, v)
        assert cut.contains(y) and v @ y == pytest.approx(scale * (v @ y1), rel=1e-8)


def test_with_an_estimated_moment_bound_the_histogram_and_the_mean_share_epsilon():
    """``G_k="auto"``: the tail histogram's release is charged first, ``Ĝ_k`` read off it sets ``C`` for
    the rest of ε, and the two shares add up to at most ε exactly; with too little data to see the tail
    the fit releases the domain's public centre (the histogram's branch, post-processing)."""
    d, n, k = 10, 10_000, 4.0
    p = 16.0 * d / n
    task = linear_lower_bound(n=n, d=d, p=p, magnitude=p ** (-1.0 / k), n_test=1, seed=0)
    w = cp.Variable(d)
    model = cvxdp.Model(cvxdp.losses.affine(w), [cp.norm(w, 2) <= 1.0])
    problem = cvxdp.PrivateProblem(model)
    dry = problem.plan(n=n, epsilon=1.0, moment_k=k, G_k="auto")
    assert dry.provisional and dry.gradient is None and "G_k and the clip level C come from" in dry.describe()
    r = problem.solve({"x": task.X_train, "y": task.y_train}, epsilon=1.0, moment_k=k, G_k="auto",
                      random_state=1)
    tail, mean = r.ledger.entries
    assert (tail.mechanism, mean.mechanism) == ("private tail histogram", MECHANISM_LABEL)
    assert Fraction(tail.epsilon) + Fraction(mean.epsilon) <= 1 and r.algorithm == "mean-gradient"
    assert r.release_plan.gradient.C == mean_gradient_clip(n, d, mean.epsilon, k, r.moment_bound)
    assert task.excess_risk(r.w) < 0.1 * task.excess_risk(np.zeros(d))
    tiny = {"x": task.X_train[:40], "y": task.y_train[:40]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cvxdp.UtilityWarning)
        centre = cvxdp.PrivateProblem(model).solve(tiny, epsilon=0.5, moment_k=k, G_k="auto", random_state=0)
    assert centre.release_plan.fallback == "centre" and np.array_equal(centre.w, np.zeros(d))
    assert [e.mechanism for e in centre.ledger.entries] == ["private tail histogram"]
    assert "no fit: the domain's centre" in centre.summary()
    # with a declared range, the plan is made for its top, and says so (review helper-39)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cvxdp.UtilityWarning)
        top = cvxdp.PrivateProblem(model).solve(tiny, epsilon=0.5, moment_k=k, G_k="auto",
                                                tail_range=(0.1, 1000.0), random_state=0)
    assert top.release_plan.fallback == "tail_range top" and top.moment_bound == 1000.0
    assert top.release_plan.gradient.C == mean_gradient_clip(40, d, top.ledger.entries[1].epsilon, k, 1000.0)
    assert "planned for the declared tail_range's top" in top.release_plan.describe()


def test_a_plan_whose_release_grid_would_overflow_is_refused_before_any_charge():
    """Review helper-39: a noise scale above 2¹⁰²³ made the snap's grid infinite and the release NaN after
    the charge; the planner refuses it (public inputs, or the released histogram, only)."""
    with pytest.raises(ParameterError, match="not a finite positive number"):
        cvxdp.PrivateProblem(_affine_model(d=1)).plan(n=10, epsilon=0.1, moment_k=2.0, G_k=7e307)

