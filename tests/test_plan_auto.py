"""``algorithm="auto"`` (cvxdp.plan.auto): a public choice of plan, and the clip rule's constants."""

from __future__ import annotations

import math
import warnings

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.plan.auto import (
    CLIP_FULL_FROM,
    CLIP_TAIL_RATIO,
    POPULATION_FROM,
    choose_algorithm,
    clip_level,
    clip_rule,
    clip_tail_ratio,
    heavy_tail,
    uses_clip_rule,
)
from cvxdp.plan.inputs import PublicInputs
from cvxdp.plan.profiles import TightProfile, get_profile


def _model(d: int = 3, radius: float = 2.0):
    w = cp.Variable(d)
    return cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= radius])


def _data(n: int, d: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(5.0, size=(n, d))
    return {"x": X, "y": X @ np.linspace(0.5, -0.5, d) + rng.standard_t(3.0, size=n)}


def _inputs(n: int, **options) -> PublicInputs:
    kw = dict(d=3, D=4.0, structured=True, epsilon=1.0, moment_k=4.0, G_k=3.0, G_2=1.0)
    kw.update(options)
    return PublicInputs.from_options(**kw).with_n(n)


def test_the_switch_is_at_n_epsilon_over_d():
    """Below ``POPULATION_FROM`` the clip rule, from it on Algorithm 1 (a function of n, d, ε only)."""
    d, eps = 3, 0.5
    below = math.ceil(POPULATION_FROM * d / eps) - 1
    at = math.ceil(POPULATION_FROM * d / eps)
    assert below * eps / d < POPULATION_FROM <= at * eps / d
    low = _inputs(below, epsilon=eps)
    high = _inputs(at, epsilon=eps)
    assert (low.algorithm, low.clip_rule, low.auto_algorithm) == ("recursive", True, True)
    assert (high.algorithm, high.clip_rule, high.auto_algorithm) == ("population", False, True)
    # re-resolving for another n keeps the choice a function of that n
    assert high.with_n(below).algorithm == "recursive" and low.with_n(at).algorithm == "population"


class _HalfBudgetProfile(TightProfile):
    """A user's profile that spends half of each batch's ε: it must run as written."""

    name = "half"

    def round_epsilons(self, epsilon, thetas):
        return super().round_epsilons(epsilon / 2.0, thetas)


@pytest.mark.parametrize("option", [{"lambda_scale": 2.0}, {"lambda_growth": 4.0},
                                    {"max_phases": 2}, {"boosting_groups": 3}, {"localize": False},
                                    {"profile": "paper"}, {"profile": TightProfile(clip=1.0)},
                                    {"profile": _HalfBudgetProfile()}])
def test_an_option_that_fixes_the_adaptive_constants_keeps_algorithm_1(option):
    assert _inputs(3000).clip_rule  # n ε/d = 1000: the clip rule without the option
    inp = _inputs(3000, **option)
    assert inp.algorithm == "population" and not inp.clip_rule


def test_an_option_only_algorithm_1_reads_is_refused_where_it_cannot_run():
    """boosting_groups, max_phases or lambda_growth ask for Algorithm 1: "auto" does not fall back to a
    plan that would ignore them, so a too-small n is refused as "population" would refuse it."""
    with pytest.raises(cvxdp.error.ParameterError, match="too few for the schedule"):
        _inputs(3000, boosting_groups=999)
    assert _inputs(30, d=10, epsilon=1e4).algorithm == "recursive"
    with pytest.raises(cvxdp.error.ParameterError, match="too few for the schedule"):
        _inputs(30, d=10, epsilon=1e4, max_phases=1)


def test_lam_with_algorithm_1_is_refused():
    """Algorithm 1's schedule sets λ per phase; a fixed lam would be silently ignored there."""
    with pytest.raises(cvxdp.error.ParameterError, match="lambda_scale"):
        _inputs(30_000, algorithm="population", lam=0.3)


def test_the_reason_never_rounds_onto_the_switch():
    """n ε/d just below the switch prints below it (6 significant digits would print 2000 < 2000)."""
    plan = cvxdp.PrivateProblem(_model(d=1)).plan(n=1_999_999, epsilon=1e-3, moment_k=4, G_k=3.0, G_2=1.0)
    text = plan.describe()
    assert plan.inputs.clip_rule and "2000 < 2000" not in text and "1999.999" in text


def test_a_fixed_lam_runs_algorithm_3_with_it():
    """Algorithm 1 never reads ``lam``: "auto" with a fixed λ is the single ERM that does."""
    inp = _inputs(20_000, lam=0.3)
    assert (inp.algorithm, inp.clip_rule) == ("recursive", False)
    plan = cvxdp.PrivateProblem(_model()).plan(n=20_000, epsilon=1.0, moment_k=4, G_k=3.0, lam=0.3,
                                               tail_share=0.0)
    assert {b.lam for b in plan.batches} == {0.3} and "a fixed lam" in plan.describe()


def test_a_user_profile_subclass_runs_its_own_rounds():
    model, data = _model(), _data(600)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = cvxdp.PrivateProblem(model).solve(data, epsilon=1.0, moment_k=4, G_k=3.0, G_2=1.0,
                                              profile=_HalfBudgetProfile(), tail_share=0.0, random_state=0)
    assert r.profile == "half" and not r.release_plan.inputs.clip_rule
    assert sum(s.epsilon for s in r.steps if s.phase == r.steps[0].phase) <= 0.5 + 1e-12


def test_without_a_public_heavy_tail_auto_is_algorithm_1():
    """No public G_2, G_k="auto", or G₂/G_k above the cut: the adaptive plan at any n (the default before
    "auto" existed, float for float: see the golden case auto-without-G2)."""
    for options in ({"G_2": None}, {"G_k": "auto"}, {"G_k": "auto", "G_2": 1.0},
                    {"G_2": 3.0 * CLIP_TAIL_RATIO * 1.001}):
        inp = _inputs(3000, **options)
        assert inp.algorithm == "population" and not inp.clip_rule and inp.auto_algorithm, options
        assert inp.histogram_share == 0.1
    assert _inputs(3000, G_2=3.0 * CLIP_TAIL_RATIO).clip_rule
    assert heavy_tail(3.0, 3.0 * CLIP_TAIL_RATIO, 4.0)
    assert not heavy_tail(3.0, None, 4.0) and not heavy_tail("auto", 1.0, 4.0)
    plan = cvxdp.PrivateProblem(_model()).plan(n=3000, epsilon=1.0, moment_k=4, G_k=3.0, tail_share=0.0)
    assert plan.inputs.algorithm == "population" and "no public G_2" in plan.describe()
    estimated = cvxdp.PrivateProblem(_model()).plan(n=3000, epsilon=1.0, moment_k=4, G_k="auto", G_2=1e-5)
    assert "G_k is estimated (G_k='auto'), not public" in estimated.describe()


def test_the_heavy_tail_cut_reads_the_ratio_as_a_two_atom_tail_mass():
    """``G₂/G_k = p^{1/2 − 1/k}`` for the law with an atom of mass ``p``: below ``k = 4`` the cut is the
    ratio of the same mass as 0.85 at ``k = 4`` (``0.85^{2 − 4/k}``), from ``k = 4`` on it stays 0.85;
    at ``k = 2`` the two bounds are one moment and no tail is declared."""
    assert clip_tail_ratio(4.0) == CLIP_TAIL_RATIO == 0.85  # the k = 4 cut, float for float
    for k in (2.1, 2.5, 3.0, 3.9):
        cut = clip_tail_ratio(k)
        mass = cut ** (1.0 / (0.5 - 1.0 / k))
        assert cut > CLIP_TAIL_RATIO and math.isclose(mass, CLIP_TAIL_RATIO**4, rel_tol=1e-12), k
    assert clip_tail_ratio(6.0) == clip_tail_ratio(8.0) == clip_tail_ratio(1000.0) == CLIP_TAIL_RATIO
    assert clip_tail_ratio(2.0) == 0.0 and not heavy_tail(3.0, 1e-9, 2.0)
    at_two = cvxdp.PrivateProblem(_model()).plan(n=3000, epsilon=1.0, moment_k=2.0, G_k=3.0, G_2=1.0,
                                                 tail_share=0.0)
    assert "at k = 2 the public G_2 and G_k bound one moment" in at_two.describe()
    # Student-t ν = 3.5 with k = 2.5 (G₂/G_k = 0.877): heavy now, and auto clips there
    assert heavy_tail(1.0, 0.877, 2.5) and not heavy_tail(1.0, 0.877, 4.0)
    inp = _inputs(3000, moment_k=2.5, G_k=1.0, G_2=0.9)
    assert inp.clip_rule and inp.algorithm == "recursive"
    plan = cvxdp.PrivateProblem(_model()).plan(n=3000, epsilon=1.0, moment_k=2.5, G_k=1.0, G_2=0.9,
                                               tail_share=0.0)
    assert "G_2/G_k ≤ 0.9371 and n·ε/d = 1000 < 2000" in plan.describe()
    above = cvxdp.PrivateProblem(_model()).plan(n=3000, epsilon=1.0, moment_k=2.5, G_k=1.0, G_2=0.95,
                                                tail_share=0.0)
    assert above.inputs.algorithm == "population" and "no public G_2 ≤ 0.9371·G_k" in above.describe()


def test_explicit_algorithms_are_not_resolved():
    for algorithm in ("population", "recursive", "output-perturbation"):
        inp = _inputs(3000, algorithm=algorithm)
        assert inp.algorithm == algorithm and not inp.clip_rule and not inp.auto_algorithm


def test_algorithm_1_too_large_for_n_falls_to_the_clip_rule():
    """A huge ε puts a small n above the switch, but Algorithm 1's halving schedule has no phase there."""
    assert choose_algorithm(n=30, d=10, epsilon=1e4, D=4.0, moment_k=4.0, delta=0.1,
                            profile=get_profile("tight"), may_clip=True) == (
        "recursive", True, "n = 30 is too small for Algorithm 1's phases")
    with pytest.raises(cvxdp.error.ParameterError, match="too few for the schedule"):
        _inputs(30, d=10, epsilon=1e4, algorithm="population")
    plan = cvxdp.PrivateProblem(_model(d=10)).plan(n=30, epsilon=1e4, moment_k=4, G_k=3.0, G_2=1.0)
    assert plan.inputs.clip_rule and "too small for Algorithm 1" in plan.describe()
    # without a heavy tail (or with the paper profile) too: Algorithm 3 with its own constants
    for options in ({}, {"profile": "paper"}):
        plan = cvxdp.PrivateProblem(_model(d=10)).plan(n=30, epsilon=1.0, moment_k=4, G_k=3.0, **options)
        assert plan.inputs.algorithm == "recursive" and not plan.inputs.clip_rule
        assert "too small for Algorithm 1" in plan.describe()


def test_uses_clip_rule_only_for_the_default_tight_profile():
    assert uses_clip_rule(get_profile("tight"), lam=None, lambda_scale=None, lambda_growth=None,
                          max_phases=None, boosting_groups=None, localize=True)
    assert not uses_clip_rule(get_profile("paper"), lam=None, lambda_scale=None, lambda_growth=None,
                              max_phases=None, boosting_groups=None, localize=True)


def test_clip_rule_minimizes_the_baselines_bound():
    """``λ = 4C sqrt(d/(nε))/D`` minimizes ``λD²/8 + 2C²d/(λnε)`` (checked on a grid) at the rule's ``C``,
    below the full level too, and equals the clipped-output-perturbation baseline's public rule from
    ``n ε / d = CLIP_FULL_FROM`` on."""
    from cvxdp.baselines.tuning import output_perturbation_rule

    d, eps, D, G2 = 7, 0.7, 3.0, 2.5
    for n in (500, 5000, 10_000, 50_000):
        C, lam = clip_rule(n, d, eps, D, G2, 4.0)
        grid = lam * np.exp(np.linspace(-1, 1, 401))
        bound = grid * D**2 / 8 + 2 * C**2 * d / (grid * n * eps)
        assert abs(grid[np.argmin(bound)] / lam - 1) < 0.01
        # its least value is C D sqrt(d/(nε)); the noise scale 2C/(λnε) does not depend on C
        assert math.isclose(bound.min(), C * D * math.sqrt(d / (n * eps)), rel_tol=1e-4)
        assert math.isclose(2 * C / (lam * n * eps), D / (2 * math.sqrt(d * n * eps)), rel_tol=1e-12)
        full = n * eps / d >= CLIP_FULL_FROM
        assert (C == G2) is full
        assert (output_perturbation_rule(n, d, eps, D, G2) == {"C": C, "lam": lam}) is full


def test_clip_level_is_G2_from_the_anchor_and_grows_as_the_bound_below():
    """``G₂ min(1, (nε/(d N))^{1/(2k)})``: at most ``G₂``, continuous at the anchor, nondecreasing in
    ``n`` and ``ε``, and ``G₂`` from ``n ε / d = N`` on at every ``k``."""
    d, G2 = 10, 3.0
    for k in (2.5, 4.0, 8.0, 1000.0):
        ns = np.unique(np.geomspace(1, 10**6, 400).astype(int))
        levels = np.array([clip_level(int(n), d, 1.0, k, G2) for n in ns])
        assert np.all(np.diff(levels) >= 0) and np.all(levels <= G2) and np.all(levels > 0)
        assert np.all(levels[ns * 1.0 / d >= CLIP_FULL_FROM] == G2)
        below = ns * 1.0 / d < CLIP_FULL_FROM
        expected = G2 * (ns[below] / (d * CLIP_FULL_FROM)) ** (1 / (2 * k))
        assert np.allclose(levels[below], expected, rtol=1e-13)
        anchor = int(CLIP_FULL_FROM * d)
        assert clip_level(anchor, d, 1.0, k, G2) == G2
        assert 0.999 * G2 < clip_level(anchor - 1, d, 1.0, k, G2) < G2
        for eps in (0.1, 0.3, 1.0):
            assert clip_level(3000, d, eps, k, G2) <= clip_level(3000, d, 2 * eps, k, G2)


def test_the_clip_level_grows_as_the_worst_case_bounds_minimizer():
    """The level's growth in ``n ε / d`` is the worst-case bound's: one release pays ``C D sqrt(d/(nε))``
    (regularization and noise at the rule's λ) plus the clipping bias ``D E(X − C)₊`` with
    ``E(X − C)₊ ≤ c_k E X^k / C^{k−1}``, ``c_k = (k−1)^{k−1}/k^k`` (equality at the two-atom law with its
    atom at ``kC/(k−1)``); the sum's minimizer is ``G_k ((k−1) c_k)^{1/k} (nε/d)^{1/(2k)}``."""
    from scipy.optimize import minimize_scalar

    rng = np.random.default_rng(3)
    for k in (2.5, 4.0, 8.0):
        c_k = (k - 1) ** (k - 1) / k**k
        C = 1.7
        # the tail bound: E(X − C)₊ ≤ c_k E X^k / C^{k−1} on random nonnegative laws, tight at the atom
        for _ in range(50):
            x = rng.pareto(k + 0.5, size=2000) * rng.uniform(0.5, 5)
            assert np.mean(np.maximum(x - C, 0)) <= c_k * np.mean(x**k) / C ** (k - 1) * (1 + 1e-12)
        atom = k * C / (k - 1)
        assert math.isclose(atom - C, c_k * atom**k / C ** (k - 1), rel_tol=1e-12)
        # the minimizer of the bound and its growth in nε/d
        d, D, G_k = 10, 4.0, 5.0
        minimizers = []
        for n in (1_000, 10_000):
            def bound(logC, n=n, k=k, c_k=c_k, d=d, D=D, G_k=G_k):
                C = math.exp(logC)
                return C * D * math.sqrt(d / n) + D * c_k * G_k**k / C ** (k - 1)
            logC = minimize_scalar(bound, bounds=(-10, 20), method="bounded", options={"xatol": 1e-12}).x
            minimizers.append(math.exp(logC))
            closed = G_k * ((k - 1) * c_k) ** (1 / k) * (n / d) ** (1 / (2 * k))
            assert math.isclose(minimizers[-1], closed, rel_tol=1e-6)
        growth = minimizers[1] / minimizers[0]
        assert math.isclose(growth, clip_level(1_000, d, 1.0, k, 1.0) / clip_level(100, d, 1.0, k, 1.0),
                            rel_tol=1e-6)


def test_public_plan_uses_G2_and_the_rule_lambda_in_every_round():
    n, d, eps, D = 3000, 3, 1.0, 4.0
    for G_2 in (1.0, 1.7):
        C = G_2
        plan = cvxdp.PrivateProblem(_model()).plan(n=n, epsilon=eps, moment_k=4, G_k=3.0, G_2=G_2)
        assert plan.inputs.clip_rule and not plan.provisional and len(plan.batches) == 1
        (batch,) = plan.batches
        assert batch.size == n and batch.lam == 4.0 * C * math.sqrt(d / (n * eps)) / D
        assert all(r.C == C for r in batch.rounds)
        text = plan.describe()
        assert "the clip rule" in text and f"n·ε/d = {n * eps / d:.4g} < {POPULATION_FROM:g}" in text
        assert plan.tail is None and plan.epsilon_fit == eps


def test_fit_with_the_tail_release_clips_at_its_G2_estimate():
    """``C = min(G₂, Ĝ₂)`` with Ĝ₂ the released histogram's second moment; ``λ`` from ``ε_fit``."""
    from cvxdp.privacy.tail import TailProfile

    model, data = _model(), _data(3000)
    seen = {}
    original = TailProfile.moment

    def spy(self, k):
        value = original(self, k)
        seen.setdefault(k, value)
        return value

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        TailProfile.moment = spy
        try:
            r = cvxdp.PrivateProblem(model).solve(data, epsilon=1.0, moment_k=4, G_k=30.0, G_2=20.0,
                                                  tail_share=0.1, random_state=4)
        finally:
            TailProfile.moment = original
    plan = r.release_plan
    assert r.algorithm == "recursive" and plan.inputs.clip_rule and plan.tail is not None
    assert not plan.adaptive_clip and "Ĝ₂ if lower" in plan.describe()
    C = min(20.0, seen[2.0])
    assert C < 20.0  # the histogram sees this tail at n = 3000
    C = clip_level(3000, 3, plan.epsilon_fit, 4.0, C)  # n ε_fit / d = 900: the level below G₂
    assert {s.plan.C for s in r.steps} == {C}
    assert plan.batches[0].lam == 4.0 * C * math.sqrt(3 / (3000 * plan.epsilon_fit)) / model.diameter
    assert r.ledger.spent <= 1.0


def test_the_choice_and_the_plan_do_not_read_the_data():
    """Two data sets of the same n that differ in every row: the same algorithm; with tail_share = 0
    the same constants in every round (the plan is public)."""
    model = _model()
    kw = dict(epsilon=1.0, moment_k=4, G_k=3.0, G_2=1.0, random_state=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r1 = cvxdp.PrivateProblem(model).solve(_data(600, seed=1), **kw)
        r2 = cvxdp.PrivateProblem(model).solve(_data(600, seed=2), **kw)
    assert r1.algorithm == r2.algorithm == "recursive"
    assert [s.plan for s in r1.steps] == [s.plan for s in r2.steps]


def test_the_clip_rule_spends_nothing_on_the_histogram_unless_asked():
    """The clip rule runs only with public G_k and G_2, so its default histogram would only estimate the
    G₂ given: it spends no share; an explicit tail_share or tail_range keeps it."""
    model = _model()
    plan = cvxdp.PrivateProblem(model).plan
    kw = dict(n=3000, epsilon=1.0, moment_k=4, G_k=3.0, G_2=1.5)
    bare = plan(**kw)
    assert bare.tail is None and bare.epsilon_fit == 1.0 and not bare.provisional
    assert {r.C for _, r in bare.rounds} == {1.5}
    for extra in ({"tail_share": 0.1}, {"tail_range": (0.1, 100.0)}):
        assert plan(**kw, **extra).tail is not None, extra
    # Algorithm 1 keeps its histogram (it sets every round's C there)
    assert plan(**{**kw, "n": 30_000}).tail is not None
    inp = _inputs(3000, G_2=1.5)
    assert inp.tail_share == 0.1 and inp.histogram_share == 0.0
    assert inp.with_n(30_000).histogram_share == 0.1


def test_a_clip_level_that_rounds_to_zero_is_a_parameter_error_before_any_charge():
    """A subnormal public ``G₂`` times the rule's level below 1 can round ``C`` to 0: the plan refuses
    with the planner's own ParameterError (a function of public inputs), as it does for any constant
    that is not finite and positive — not the profile's bare ValueError — and ``solve``, which plans
    before it binds any data, refuses the same way."""
    model = _model()
    kw = dict(epsilon=1e-3, moment_k=4.0, G_k=1e-300, G_2=5e-324)
    with pytest.raises(cvxdp.error.ParameterError, match="finite"):
        cvxdp.PrivateProblem(model).plan(n=40, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(cvxdp.error.ParameterError, match="finite"):
            cvxdp.PrivateProblem(model).solve(_data(40), random_state=0, **kw)
    # from n ε / d = 1000 on the level is 1 and keeps the subnormal G₂ itself
    assert clip_level(3000, 3, 1.0, 4.0, 5e-324) == 5e-324
