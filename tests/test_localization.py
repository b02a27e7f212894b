"""Algorithms 1–3 and the profiles: the privacy arithmetic, the bias bounds, the schedule."""

from __future__ import annotations

import decimal
import math
from dataclasses import replace
from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest
from conftest import CountingSource
from hypothesis import given, settings
from hypothesis import strategies as st

import cvxdp
from cvxdp.erm import RegularizedERM
from cvxdp.error import CertificationError, PrivacyBudgetError
from cvxdp.plan.profiles import PaperProfile, TightProfile
from cvxdp.plan.schedule import allocation, choose_schedule, phase_schedule, round_count
from cvxdp.plan.tail_models import empirical_bias_bound, extension_bias_mean, extension_bias_second_moment
from cvxdp.privacy.ledger import PrivacyLedger
from cvxdp.run.population import majority_vote
from cvxdp.run.release import Charge, charge_round, release_round


@pytest.mark.parametrize("S", [1, 2, 3, 6])
@pytest.mark.parametrize("k", [2.0, 4.0, 8.0])
def test_allocation(S, k):
    theta = allocation(S, k)
    assert np.isclose(theta.sum(), 1.0) and np.all(theta > 0)
    assert np.all(np.diff(theta) >= 0)  # the largest share last
    if S > 1:
        assert np.allclose(theta[:-1] / theta[1:], 1.0 / (k + 1.0))


def test_round_count_formula():
    # S = ceil(log_{k+1} log(e D / R*)) with R* = (G/λ)(d/(mε))^{1−1/k}
    d, m, eps, lam, k, G, D = 10, 10**6, 1.0, 1.0, 4.0, 1.0, 10.0
    r_star = (G / lam) * (d / (m * eps)) ** 0.75
    expected = math.ceil(math.log(math.log(math.e * D / r_star)) / math.log(k + 1))
    assert round_count(d, m, eps, lam, k, G, D) == expected
    assert round_count(d, 10, eps, lam, k, G, 0.01) == 1


@settings(max_examples=60, deadline=None)
@given(k=st.floats(2.0, 10.0), G=st.floats(0.1, 10.0), C=st.floats(0.01, 50.0))
def test_sharp_bias_bound_dominates_every_law_and_beats_markov(k, G, C):
    """sup E(A − C)₊ over E A^k ≤ G^k: at most the paper's Markov integral, attained by two atoms."""
    bound = extension_bias_mean(C, k, G)
    markov = G**k / ((k - 1) * C ** (k - 1))
    assert bound <= markov * (1 + 1e-9)
    a = k * C / (k - 1)
    if a > G:
        p = (G / a) ** k
        assert math.isclose(bound, p * (a - C), rel_tol=1e-9)
    # any other law with the same k-th moment does no better: Pareto and lognormal scaled to G
    rng = np.random.default_rng(int(k * 1000 + C * 10))
    for sample in (rng.pareto(k + 0.5, 200_000) + 1.0, rng.lognormal(0, 0.7, 200_000)):
        A = sample * G / np.mean(sample**k) ** (1.0 / k)
        assert np.mean(np.maximum(A - C, 0)) <= bound * 1.02 + 1e-12


def test_second_moment_bound():
    k, G, C = 4.0, 2.0, 1.5
    bound = extension_bias_second_moment(C, k, G)
    rng = np.random.default_rng(1)
    A = rng.pareto(4.5, 400_000) + 1.0
    A *= G / np.mean(A**k) ** 0.25
    assert np.mean(np.maximum(A - C, 0) ** 2) <= bound
    assert math.isinf(extension_bias_second_moment(C, 2.0, G))


def test_empirical_bias_bound_holds_with_probability_1_minus_beta():
    """P((1/m) Σ (A_i − C)₊ > T) ≤ β, checked by simulation on an extremal two-atom law."""
    k, G, C, m, beta = 4.0, 1.0, 1.0, 200, 0.1
    a = k * C / (k - 1)
    p = (G / a) ** k
    T = empirical_bias_bound(C, k, G, m, beta)
    rng = np.random.default_rng(5)
    means = (rng.random((20_000, m)) < p).mean(axis=1) * (a - C)
    assert np.mean(means > T) <= beta


@settings(max_examples=80, deadline=None)
@given(R=st.floats(0.01, 10), lam=st.floats(1e-3, 10), m=st.integers(10, 10**6), d=st.integers(1, 50),
       eps=st.floats(1e-3, 10), beta=st.floats(1e-6, 0.4), k=st.floats(2.0, 8.0), G=st.floats(0.1, 50))
def test_every_profile_noise_is_private(R, lam, m, d, eps, beta, k, G):
    """``s·ε_j ≥ Δ ≥ 2C/(λm) + 2 sqrt(2α/λ)``, both in exact arithmetic (the root in 60 digits, rounded
    up): the noise covers the real sensitivity, not just its float formula."""
    for prof in (TightProfile(), PaperProfile()):
        plan = prof.plan(R=R, lam=lam, m=m, d=d, eps=eps, beta=beta, k=k, G_k=G)
        with decimal.localcontext() as ctx:
            ctx.prec, ctx.rounding = 60, decimal.ROUND_CEILING
            root = (2 * decimal.Decimal(plan.alpha) / decimal.Decimal(lam)).sqrt()
        real = Fraction(2) * Fraction(plan.C) / (Fraction(lam) * m) + 2 * Fraction(root)
        assert Fraction(plan.sensitivity) >= real
        assert Fraction(plan.noise_scale) * Fraction(eps) >= Fraction(plan.sensitivity)
        assert plan.sensitivity == pytest.approx(float(real), rel=1e-14)
        assert plan.radius_plus > 0 and plan.C > 0


def test_profiles_split_the_budget_as_published():
    thetas = allocation(3, 4.0)
    assert TightProfile().round_epsilons(2.0, thetas).sum() == pytest.approx(2.0)
    assert PaperProfile().round_epsilons(2.0, thetas).sum() == pytest.approx(1.0)
    assert PaperProfile().boosting_groups(8, 0.1) % 2 == 1


def test_schedule_is_public_and_disjoint():
    s = phase_schedule(10_000, 10, 1.0, 4.0, 5.0, 5.0, 4.0, groups=3)
    assert sum(s.sizes) <= 10_000
    assert all(a == 2 * b or a == 2 * b + 1 for a, b in zip(s.sizes, s.sizes[1:], strict=False))
    assert np.allclose(np.array(s.lambdas[1:]) / np.array(s.lambdas[:-1]), 8.0)


def test_truncated_schedule_spreads_every_example_over_its_phases():
    full = phase_schedule(10_000, 10, 1.0, 4.0, 5.0, 5.0, 4.0)
    for T in (1, 2, 3):
        s = phase_schedule(10_000, 10, 1.0, 4.0, 5.0, 5.0, 4.0, max_phases=T)
        assert s.phases == T and s.lambdas == full.lambdas[:T]
        assert 10_000 - T <= sum(s.sizes) <= 10_000  # nothing wasted, nothing reused
        assert all(abs(a - 2 * b) <= 2 for a, b in zip(s.sizes, s.sizes[1:], strict=False))
    assert phase_schedule(10_000, 10, 1.0, 4.0, 5.0, 5.0, 4.0, max_phases=1).sizes == (10_000,)
    chosen = choose_schedule(10_000, 10, 1.0, 4.0, 5.0, 5.0, 4.0, TightProfile())
    assert 10_000 - chosen.phases <= sum(chosen.sizes) <= 10_000


def test_fixed_clip_is_used_and_validated():
    """A public ``clip`` replaces the radius-minimizing ``C``; the radii stay the certified ones for it."""
    kw = dict(R=2.0, lam=0.5, m=500, d=3, eps=1.0, beta=0.01, k=4.0, G_k=3.0)
    free = TightProfile().plan(**kw)
    fixed = TightProfile(clip=free.C / 4).plan(**kw)
    assert fixed.C == free.C / 4
    assert fixed.noise_radius < free.noise_radius  # less noise ...
    assert fixed.bias_radius > free.bias_radius  # ... for a larger certified bias radius
    assert fixed.radius_plus >= free.radius_plus  # the free choice minimizes the radius
    assert TightProfile(clip=2.0).plan(**dict(kw, C=5.0)).C == 5.0  # an explicit C still wins
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="clip"):
            TightProfile(clip=bad)


def test_schedule_search_is_cached_per_clip():
    """Two profiles that differ only in ``clip`` must not share a cached schedule."""
    from cvxdp.plan.schedule import _choose

    args = (10_000, 10, 1.0, 4.0, 5.0, 5.0, 4.0)
    for clip in (None, 0.5, 40.0):
        cached = choose_schedule(*args, TightProfile(clip=clip))
        direct = _choose(*args, TightProfile(clip=clip))
        assert cached == direct
    assert choose_schedule(*args, TightProfile(clip=0.5)) != choose_schedule(*args, TightProfile(clip=40.0))


def test_schedule_search_accepts_a_profile_subclass_without_clip():
    """The cache rebuilds the profile from its type; a user's subclass need not take ``clip``."""

    class Conservative(TightProfile):
        def __init__(self, accuracy_share: float = 0.02) -> None:
            super().__init__(accuracy_share)

    from cvxdp.plan.schedule import _choose

    args = (10_000, 10, 1.0, 4.0, 5.0, 5.0, 4.0)
    chosen = choose_schedule(*args, Conservative())
    assert chosen == _choose(*args, Conservative())  # rebuilt with its own accuracy share
    assert chosen != choose_schedule(*args, TightProfile(0.5))


def test_schedule_growth_is_held_to_4_where_the_first_round_clips_far_above_G2(monkeypatch):
    """The rule of :func:`choose_schedule`: the proxy's choice, unless its first round's ``C`` is at
    least ``SLOW_GROWTH_FROM·G₂`` — then the best schedule of growth ``SLOW_GROWTH`` alone."""
    import cvxdp.plan.schedule as schedule
    from cvxdp.plan.schedule import SLOW_GROWTH, SLOW_GROWTH_FROM, _choose, _search_schedule, batch_rounds

    args = (100_000, 10, 1.0, 4.0, 5.0, 4.9, 4.0)  # n, d, ε, k, G_k, G₂, D

    def first_clip(sch, profile):
        return batch_rounds(profile, m=sch.sizes[0], d=10, epsilon=1.0, lam=sch.lambdas[0], k=4.0, G_k=5.0,
                            D=4.0, beta=1e-3)[0].C

    far, near = TightProfile(clip=8 * 4.9), TightProfile(clip=4.9)
    free = _search_schedule(*args, far)
    assert free.growth == 8.0 and first_clip(free, far) >= SLOW_GROWTH_FROM * 4.9
    chosen = choose_schedule(*args, far)
    slow = _search_schedule(*args, far, growths=(SLOW_GROWTH,))
    assert chosen.growth == SLOW_GROWTH and (chosen.sizes, chosen.lambdas) == (slow.sizes, slow.lambdas)
    assert chosen.reason.startswith("growth held to 4") and free.reason == slow.reason == ""
    assert first_clip(_search_schedule(*args, near), near) < SLOW_GROWTH_FROM * 4.9
    assert choose_schedule(*args, near) == _search_schedule(*args, near)
    # growths the caller fixed without 4 are searched as given; the proxy's own 4 carries no reason
    assert choose_schedule(*args, far, growths=(8.0,)) == _search_schedule(*args, far, growths=(8.0,))
    assert choose_schedule(*args, far, growths=(4.0,)).reason == ""

    # one phase has no growth to hold (C/G₂ ≈ 10 here): the proxy's schedule, unlabelled
    one = (300, 2, 1.0, 4.0, 3.0, 0.3, 4.0)
    assert _search_schedule(*one, TightProfile()).phases == 1
    assert choose_schedule(*one, TightProfile()) == _search_schedule(*one, TightProfile())
    # without a G₂ below G_k (none given: G₂ = G_k) the ratio says nothing about the bulk
    same = (100_000, 10, 1.0, 4.0, 5.0, 5.0, 4.0)
    assert _search_schedule(*same, far).growth == 8.0
    assert first_clip(_search_schedule(*same, far), far) >= SLOW_GROWTH_FROM * 5.0
    assert choose_schedule(*same, far) == _search_schedule(*same, far)

    # the comparison is C ≥ SLOW_GROWTH_FROM·G₂ (the worst-case profile's own C here): it holds just
    # below C/G₂ and not just above it; the cache follows the module's constant
    free = _search_schedule(*args, TightProfile())
    at = first_clip(free, TightProfile()) / 4.9
    assert free.growth == 8.0 and at >= SLOW_GROWTH_FROM
    try:
        for threshold, held in ((at * (1 - 1e-12), True), (at * (1 + 1e-12), False)):
            monkeypatch.setattr(schedule, "SLOW_GROWTH_FROM", threshold)
            schedule._cached_schedule.cache_clear()
            assert (choose_schedule(*args, TightProfile()).growth == SLOW_GROWTH) is held
            assert choose_schedule(*args, TightProfile()) == _choose(*args, TightProfile())
    finally:
        monkeypatch.undo()
        schedule._cached_schedule.cache_clear()


def test_schedule_growth_rule_keeps_the_proxy_below_two_and_a_half_times_G2():
    """The switch sits at ``C = 2.5·G₂`` with the module's own constant (no patch): a first round clipping
    below 2.5 × G₂ keeps the proxy's growth, at 2.5 × G₂ (the comparison is ``≥``) and above the growth is
    held to 4 (5 × G₂ too, where the switch stood before the lower-edge tail values)."""
    from cvxdp.plan.schedule import _search_schedule

    args = (100_000, 10, 0.3, 8.0, 5.0, 4.0, 4.0)  # n, d, ε, k, G_k, G₂, D
    for factor, growth in ((2.499, 8.0), (2.5, 4.0), (2.501, 4.0), (3.0, 4.0), (5.0, 4.0)):
        profile = TightProfile(clip=factor * 4.0)
        assert _search_schedule(*args, profile).growth == 8.0
        assert choose_schedule(*args, profile).growth == growth, factor


def test_schedule_growth_rule_reads_the_first_round_of_one_group(monkeypatch):
    """With boosting groups a phase's round sees ``n_t // groups`` examples, and its ``C`` (the
    worst-case profile's: it grows with the batch) is that batch's: here ``C/G₂`` is 14.9 for a group
    and 9.9 for the whole phase, and a threshold of 12 between them holds the growth."""
    import cvxdp.plan.schedule as schedule
    from cvxdp.plan.schedule import _search_schedule, batch_rounds

    args = (300_000, 10, 1.0, 4.0, 5.0, 4.0, 4.0)
    free = _search_schedule(*args, TightProfile(), groups=3)

    def ratio(m):
        return batch_rounds(TightProfile(), m=m, d=10, epsilon=1.0, lam=free.lambdas[0], k=4.0, G_k=5.0,
                            D=4.0, beta=1e-3)[0].C / 4.0

    assert free.growth == 8.0 and ratio(free.sizes[0]) < 12.0 <= ratio(free.sizes[0] // 3)
    try:
        monkeypatch.setattr(schedule, "SLOW_GROWTH_FROM", 12.0)
        schedule._cached_schedule.cache_clear()
        assert choose_schedule(*args, TightProfile(), groups=3).growth == 4.0
    finally:
        monkeypatch.undo()
        schedule._cached_schedule.cache_clear()


def test_dry_run_prints_the_schedule_and_why_its_growth_was_held():
    w = cp.Variable(10)
    problem = cvxdp.PrivateProblem(cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 2]))
    heavy = problem.plan(n=100_000, epsilon=1.0, moment_k=4.0, G_k=5.0, G_2=4.9, tail_share=0.0,
                         algorithm="population")
    assert heavy.schedule.growth == 4.0  # the worst-case profile's C is far above G₂
    assert "·4^(t−1)" in heavy.describe() and "growth held to 4: the proxy's own schedule" in heavy.describe()
    near = problem.plan(n=100_000, epsilon=1.0, moment_k=4.0, G_k=5.0, G_2=4.9, tail_share=0.0,
                        algorithm="population", profile=TightProfile(clip=4.9))
    assert near.schedule.reason == "" and "held" not in near.describe()
    assert f"·{near.schedule.growth:g}^(t−1)" in near.describe()


def test_majority_vote():
    pts = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [0.0, 0.1], [9.0, 9.0]])
    assert majority_vote(pts, 0.2) in (0, 1, 3)
    assert majority_vote(pts[:1], 0.2) == 0


def _small_erm(rng):
    w = cp.Variable(2)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w) <= 1])
    ex = model.bind({"x": rng.normal(size=(50, 2)), "y": rng.normal(size=50)})
    plan = TightProfile().plan(R=2.0, lam=0.5, m=50, d=2, eps=1.0, beta=0.1, k=4.0, G_k=2.0)
    return RegularizedERM(model, ex, model.domain, plan.C, 0.5, np.zeros(2)), plan


def test_overspending_release_is_refused_before_noise(rng):
    _, plan = _small_erm(rng)
    ledger = PrivacyLedger(50, 1.0)
    ledger.charge(0.9, np.arange(50), mechanism="earlier", batch="all")
    src = CountingSource(0)
    with pytest.raises(PrivacyBudgetError):
        charge_round(ledger, plan, np.arange(50), batch="all")
    assert src.draws == 0 and len(ledger.entries) == 1


def test_a_release_without_its_charge_is_refused_before_noise(rng):
    """``release_round`` needs an unused charge of its round that covers its mechanism exactly."""
    problem, plan = _small_erm(rng)
    ledger = PrivacyLedger(50, 1.0)
    short = Charge(ledger.charge(plan.epsilon / 2, np.arange(50), mechanism="too little", batch="all",
                                 sensitivity=plan.sensitivity, noise_scale=plan.noise_scale))
    src = CountingSource(0)
    with pytest.raises(PrivacyBudgetError, match="does not cover"):
        release_round(problem, plan, charge=short, source=src)
    half = replace(plan, epsilon=plan.epsilon / 2, noise_scale=2 * plan.noise_scale)
    fewer = charge_round(PrivacyLedger(50, 1.0), half, np.arange(49), batch="all")  # another batch
    with pytest.raises(PrivacyBudgetError, match="does not cover"):
        release_round(problem, half, charge=fewer, source=src)
    assert src.draws == 0
    entry = charge_round(ledger, half, np.arange(50), batch="all")
    w, cert = release_round(problem, half, charge=entry, source=src)
    assert src.draws > 0 and problem.model.domain.contains(w) and cert.gap <= plan.alpha
    draws = src.draws
    with pytest.raises(PrivacyBudgetError, match="used already"):  # one charge, one release
        release_round(problem, half, charge=entry, source=src)
    steeper = replace(problem, C=100.0 * problem.C)  # Δ was computed for the plan's C
    fresh = charge_round(PrivacyLedger(50, 1.0), plan, np.arange(50), batch="all")
    with pytest.raises(PrivacyBudgetError, match="not made for"):
        release_round(steeper, plan, charge=fresh, source=src)
    assert src.draws == draws


def test_uncertified_point_is_never_released(rng, monkeypatch):
    problem, plan = _small_erm(rng)

    def fail(*args, **kwargs):
        raise CertificationError("injected: no certificate")

    monkeypatch.setattr("cvxdp.run.release.solve_certified", fail)
    ledger = PrivacyLedger(50, 1.0)
    src = CountingSource(0)
    entry = charge_round(ledger, plan, np.arange(50), batch="all")
    with pytest.raises(CertificationError):
        release_round(problem, plan, charge=entry, source=src)
    assert src.draws == 0
