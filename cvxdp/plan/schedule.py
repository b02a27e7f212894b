"""The public schedules of Algorithms 1 and 3: batch sizes, λ, the ε/β allocation and the radius recursion.

Everything here is a function of public inputs (``n, d, D, ε, k, G_k, G_2, β``, the profile and a
tail model that is public or an earlier charged release); nothing reads the data.  The radius
recursion of Algorithm 3 exists once, in :func:`plan_rounds`; the round counts, the final radius of
a phase and the schedule search all call it, and so does the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache

import numpy as np

from cvxdp.error import ParameterError
from cvxdp.numerics import float_down


@dataclass(frozen=True)
class PhaseSchedule:
    """The public schedule of Algorithm 1."""

    sizes: tuple[int, ...]
    lambdas: tuple[float, ...]
    groups: int
    lambda_1: float
    growth: float = 8.0
    proxy: float = float("nan")
    #: Why the growth is what it is, where a rule (not the proxy) set it; ``""`` otherwise.
    reason: str = ""

    @property
    def phases(self) -> int:
        return len(self.sizes)


def initial_lambda(n: int, d: int, epsilon: float, k: float, G_k: float, G_2: float, D: float,
                   scale: float = 1.0) -> float:
    """``λ₁ = scale · (1/D)[G_k (d/(nε))^{1−1/k} + G_2/√n]``."""
    return scale * (G_k * (d / (n * epsilon)) ** (1.0 - 1.0 / k) + G_2 / math.sqrt(n)) / D


def phase_schedule(n: int, d: int, epsilon: float, k: float, G_k: float, G_2: float, D: float,
                   groups: int = 1, min_group_size: int | None = None, lambda_scale: float = 1.0,
                   max_phases: int | None = None, growth: float = 8.0) -> PhaseSchedule:
    """Batch sizes and regularization of every phase (public: depends on ``n`` only, not the data)."""
    min_size = min_group_size or max(10, 2 * d)
    sizes: list[int] = []
    cut = False
    t = 1
    while True:
        n_t = n // 2**t
        if n_t // groups < min_size:
            break
        if max_phases is not None and len(sizes) >= max_phases:
            cut = True
            break
        sizes.append(n_t)
        t += 1
    if not sizes:
        need = 2 * groups * min_size
        raise ParameterError(
            f"n = {n} examples are too few for the schedule: Algorithm 1 needs at least {need} "
            f"(half the data in phase 1, {groups} group(s) of at least {min_size}); collect more "
            "data or use algorithm='recursive'."
        )
    lam1 = initial_lambda(n, d, epsilon, k, G_k, G_2, D, lambda_scale)
    lambdas = tuple(lam1 * growth ** i for i in range(len(sizes)))
    schedule = PhaseSchedule(sizes=tuple(sizes), lambdas=lambdas, groups=groups, lambda_1=lam1, growth=growth)
    if cut:
        schedule = spread_over_phases(schedule, n)  # cut short: do not leave examples unused
    return schedule


def spread_over_phases(schedule: PhaseSchedule, n: int) -> PhaseSchedule:
    """The same schedule with the batches rescaled to use all ``n`` examples.

    Truncating the paper's halving sizes ``n/2^t`` to ``T`` phases leaves
    ``n/2^T`` examples unused — half the data when ``T = 1``.  Rescaling to
    ``n_t = ⌊n 2^{−t}/(1 − 2^{−T})⌋`` keeps the halving ratios and the disjointness
    of the batches (so the privacy argument is unchanged) and only enlarges
    every batch, which shrinks every public radius.
    """
    T = schedule.phases
    scale = 1.0 / (1.0 - 2.0 ** (-T))
    sizes = tuple(math.floor(n * 2.0 ** (-t) * scale) for t in range(1, T + 1))
    return replace(schedule, sizes=sizes)


def round_count(d: int, m: int, epsilon: float, lam: float, k: float, G_k: float, D: float,
                max_rounds: int = 8) -> int:
    """``S = ⌈log_{k+1} log(e D / R_⋆)⌉`` (at least 1, at most ``max_rounds``)."""
    r_star = (G_k / lam) * (d / (m * epsilon)) ** (1.0 - 1.0 / k)
    if D <= r_star:
        return 1
    inner = math.log(math.e * D / r_star)
    S = math.ceil(math.log(inner) / math.log(k + 1.0)) if inner > 1 else 1
    return int(min(max(S, 1), max_rounds))


def allocation(S: int, k: float) -> np.ndarray:
    """``θ_j = (1 − a) a^{S−1−j} / (1 − a^S)`` with ``a = 1/(k+1)``; sums to one, less one ulp.

    The shares ``θ_0 … θ_{S−2}`` are the formula's floats; the largest, ``θ_{S−1}``, is
    the exact remainder ``(1 − 2⁻⁵³) − Σ_{j<S−1} θ_j`` rounded down.  So, exactly in
    rational arithmetic, ``Σ θ_j ≤ 1 − u`` with ``u = 2⁻⁵³``, and for *every* float
    ``ε`` the float products satisfy ``Σ_j fl(ε θ_j) ≤ (1 + u) ε Σ θ_j ≤ (1 − u²) ε < ε``
    (each product is correctly rounded, within a factor ``1 + u`` of ``ε θ_j``, as long
    as it is a normal float: ``ε ≥ 10⁻¹⁰`` and ``θ_j ≥ (k + 1)^{−S}`` keep it far above
    ``10⁻³⁰⁰`` for ``k ≤ 1000``, ``S ≤ 8``).  The rounds' charges therefore add up to at most
    the batch's budget in exact arithmetic, which is what the ledger checks; the
    budget left unspent is below ``2⁻⁵²·ε``.
    """
    a = 1.0 / (k + 1.0)
    j = np.arange(S)
    theta = (1.0 - a) * a ** (S - 1 - j) / (1.0 - a**S)
    below_one = Fraction(1) - Fraction(1, 2**53)
    theta[-1] = float_down(below_one - sum((Fraction(float(t)) for t in theta[:-1]), Fraction(0)))
    return theta


def plan_rounds(profile, *, S: int, m: int, d: int, epsilon: float, lam: float, k: float, G_k: float,
                D: float, beta: float) -> tuple:
    """The round plans of Algorithm 3 with ``S`` rounds on one batch: the one radius recursion.

    Round ``j`` gets ``ε_j`` from the profile's split of ``epsilon`` by :func:`allocation`,
    ``β_j = β θ_j``, and the diameter bound ``R_0 = D``, ``R_{j+1} = min(2 R⁺_j, D)``: the next set
    ``W ∩ B(w_loc,j, R⁺_j)`` has diameter at most both.  Every term is public, so the plan of every
    round is fixed before the data are read; the run uses exactly these plans.
    """
    thetas = allocation(S, k)
    eps_j = profile.round_epsilons(epsilon, thetas)
    R = D
    plans = []
    for j in range(S):
        plan = profile.plan(R=R, lam=lam, m=m, d=d, eps=float(eps_j[j]), beta=float(beta * thetas[j]),
                            k=k, G_k=G_k)
        plans.append(replace(plan, round=j))
        R = min(2.0 * plan.radius_plus, D)
    return tuple(plans)


def batch_rounds(profile, *, m: int, d: int, epsilon: float, lam: float, k: float, G_k: float, D: float,
                 beta: float, localize: bool = True, max_rounds: int = 8) -> tuple:
    """The round plans of Algorithm 3 on one batch: ``S`` from the profile (one round unlocalized)."""
    S = profile.rounds(d=d, m=m, epsilon=epsilon, lam=lam, k=k, G_k=G_k, D=D, beta=beta,
                       max_rounds=max_rounds) if localize else 1
    return plan_rounds(profile, S=S, m=m, d=d, epsilon=epsilon, lam=lam, k=k, G_k=G_k, D=D, beta=beta)


def phase_radii(profile, ms: np.ndarray, lams: np.ndarray, *, d: int, epsilon: float, k: float,
                G_k: float, D: float, beta: float, localize: bool = True) -> np.ndarray:
    """The public final radius ``min(R⁺_S, D)`` of Algorithm 3 for every ``(m, λ)`` pair
    (:meth:`Profile.final_radii <cvxdp.plan.profiles.Profile.final_radii>`, vectorized where the
    profile can)."""
    return profile.final_radii(np.asarray(ms, float), np.asarray(lams, float), d=d, epsilon=epsilon, k=k,
                               G_k=G_k, D=D, beta=beta, localize=localize)


def schedule_proxy(schedule: PhaseSchedule, profile, *, d: int, epsilon: float, k: float, G_k: float,
                   G_2: float, D: float, beta: float, radii: dict | None = None) -> list[float]:
    """The telescoped excess-risk bound after each phase ``T' ≤ T`` (public).

    With ``ŵ_t`` the exact regularized minimizer of phase ``t`` and ``R_t`` the
    public radius of its private output, regularized-ERM stability
    (``2G₂²/(λn)``) and the telescoping ``F(ŵ_t) − F(ŵ_{t−1})`` give

        F(w_T) − F* ≲ λ₁ (D/2)²/2 + Σ_t 2G₂²/(λ_t n_t) + Σ_{t≥2} λ_t R_{t−1}²/2 + G₂ R_T.

    ``radii`` maps ``(m, λ)`` to the phase radius when the caller computed them in bulk.
    """
    if radii is None:
        radii = _radii_of([schedule], profile, d=d, epsilon=epsilon, k=k, G_k=G_k, D=D, beta=beta)
    out = []
    total = schedule.lambdas[0] * (D / 2.0) ** 2 / 2.0
    prev_R = None
    for n_t, lam in zip(schedule.sizes, schedule.lambdas, strict=True):
        R = radii[(n_t // schedule.groups, lam)]
        total += 2.0 * G_2 * G_2 / (lam * n_t)
        if prev_R is not None:
            total += lam * prev_R * prev_R / 2.0
        out.append(total + G_2 * R)
        prev_R = R
    return out


def _radii_of(schedules: list[PhaseSchedule], profile, **public) -> dict:
    """The phase radius of every ``(m, λ)`` of ``schedules``, computed in one vectorized call."""
    pairs = list(dict.fromkeys((n_t // sch.groups, lam) for sch in schedules
                               for n_t, lam in zip(sch.sizes, sch.lambdas, strict=True)))
    values = phase_radii(profile, np.array([m for m, _ in pairs], float), np.array([lam for _, lam in pairs]),
                         **public)
    return {pair: float(v) for pair, v in zip(pairs, values, strict=True)}


#: The schedule search's candidates: ``λ₁`` as these multiples of the rate's, and these growths.
SEARCH_SCALES = tuple(float(s) for s in np.logspace(-1, 2, 10))
SEARCH_GROWTHS = (2.0, 4.0, 8.0)
#: The λ growth of Algorithm 1 where its first round clips far above the bulk (:func:`choose_schedule`).
SLOW_GROWTH = 4.0
#: The first round's ``C / G₂`` from which the schedule search keeps to :data:`SLOW_GROWTH` (5 when the
#: tail histogram valued its bins at their upper edges; measured again on the lower-edge plans).
SLOW_GROWTH_FROM = 2.5


def choose_schedule(n: int, d: int, epsilon: float, k: float, G_k: float, G_2: float, D: float,
                    profile, *, groups: int = 1, beta: float = 1e-3,
                    scales: tuple[float, ...] = SEARCH_SCALES,
                    growths: tuple[float, ...] = SEARCH_GROWTHS) -> PhaseSchedule:
    """The schedule (``λ₁`` scale, growth, number of phases) minimizing :func:`schedule_proxy`, with
    the growth held to :data:`SLOW_GROWTH` where the first round clips far above the bulk.

    The proxy is a worst case without curvature: it credits a later phase with no correction of the
    earlier phases' noise, so it favours the fastest growth (8), after which the phases from the third
    on barely move from their centres (measured on the high-leverage instance at ``n = 10⁵``: the
    excess risk stops falling after phase 3 of 6).  Where the first round of the proxy's choice puts
    ``C`` at least :data:`SLOW_GROWTH_FROM` times ``G₂`` — phase 1's noise scales with ``C``, the
    curvature that corrects it with the bulk of the examples, whose scale ``G₂`` measures — the
    search is repeated over growth :data:`SLOW_GROWTH` alone, so that later phases keep correcting.
    Only where ``G₂ < G_k``: a ``G₂`` that is merely ``G_k`` (none was given) says nothing about the
    bulk, and the ratio would then measure the worst-case profile alone.  (Measured there too: on
    ``t₃`` features with a declared ``G_k = 3`` — the scale benchmark's data — the rule would have made
    the 10⁵-row fits 4–10× slower, a final localized round evaluating its widest rows in exact
    arithmetic — 3.6× once the exact path summed its products as integers.)

    Measured, not derived (``benchmarks/bench_utility.py``'s instances, ``d = 10``, ε = 1, 9–15
    seeds, median excess risk, growth 8 → 4; first-round ``C/G₂`` in brackets, as planned when the tail
    histogram still valued its bins at their upper edges): high-leverage LAD
    ``n = 10⁵`` (8.3) 0.0068 → 0.0030 and ``n = 3·10⁴`` (5.7) 0.016 → 0.011 (9 seeds; 0.0145 over 15,
    level with the clip rule ``"auto"`` runs there); Student-t ``ν = 3.5``
    ``n = 10⁵`` (5.4) 0.0022 → 0.0013; the lower-bound instance ``n = 10⁵`` (33) 0.0063 → 0.0059.
    Below that switch the sign varies: Student-t ``ν = 5`` at ``n = 10⁵`` (4.7) 0.0013 → 0.0014,
    ``ν = 3.5`` at ``n = 3·10⁴`` (3.8) 0.0038 → 0.0040 and at ``10⁴`` (2.7) 0.011 → 0.0084, ``ν = 9``
    at ``n = 10⁵`` (2.8) 0.00055 → 0.00070, and the real data sets (1.2–1.9) up to 2.3× worse.

    Those ratios were read when the tail histogram valued each bin at its upper edge, and the switch stood
    at 5. Valued at their lower edges (:meth:`~cvxdp.privacy.tail.TailProfile.values`) the bins plan a
    ``C`` about one bin ratio (√2) lower — about, because ``C`` lies on the planner's grid (steps of 6%)
    and under the public worst case, and where a histogram drops the whole tail it can fall much further
    — so the histogram-planned ratios above fell by about √2 (Student-t ``ν = 3.5`` at ``n = 3·10⁴``:
    3.8 → 2.65), and the switch was measured again on the lower-edge plans (growth 8 → 4, median excess
    risk, 15 seeds unless stated; ratio in brackets). No consistent gain below 2.5: Student-t ``ν = 9``
    at ``n = 3·10⁴`` (2.0) 0.00174 → 0.00167 and at ``10⁵`` (2.0) 0.00035 → 0.00033 (5 seeds), ``ν = 5``
    at ``n = 3·10⁴`` (2.3) 0.00224 → 0.00229, randhie at ε = 4 (2.4) level, and growth 4 hurts the real
    data sets below 2 (CPSSW8's τ = 0.9 at full size, 1.7: 0.0102 → 0.0132 excess test loss). Gains from
    2.65 on: Student-t ``ν = 3.5`` at ``n = 3·10⁴`` (2.65) 0.00395 → 0.00212, Algorithm 1 on the
    high-leverage instance at ``n = 10⁴`` (3.0) 0.054 → 0.024 (5 seeds; ``"auto"`` runs the clip rule
    there), high-leverage ``n = 3·10⁴`` (4.1) 0.0095 → 0.0079 (seeds 0–4: 0.0150 → 0.0055) and Student-t
    ``ν = 3.5`` at ``n = 10⁵`` (3.9) 0.00117 → 0.00064 (5 seeds) — with one loss, Student-t ``ν = 5`` at
    ``n = 10⁵`` (3.4) 0.00069 → 0.00078. So the switch sits at 2.5, between the last ratio without a
    consistent gain and the first with a clear one (Student-t ``ν = 3.5`` at ``n = 10⁴``, 2.7 in the
    list above and not measured again, runs the clip rule under ``"auto"``). Unchanged by it: the
    lower-bound instance (k = 2.5, 4, 8 at ``n ≥ 3·10⁴``: ratios above 10), high-leverage at ε = 3 and
    10 (above 5), and every large real data set at every size measured (below 2).

    A search over public quantities only (``C`` is the profile's plan from public inputs and, with a
    tail model, the charged tail release); the paper's schedule (growth 8, scale 1, all phases) is
    one of the candidates.  Results for profiles without a private tail estimate depend only on the
    arguments and are cached.
    """
    if getattr(profile, "tail", None) is None:  # a profile without a released tail is a hashable value
        return _cached_schedule(n, d, epsilon, k, G_k, G_2, D, profile, groups, beta, scales, growths)
    return _choose(n, d, epsilon, k, G_k, G_2, D, profile, groups=groups, beta=beta, scales=scales,
                   growths=growths)


@lru_cache(maxsize=256)
def _cached_schedule(n, d, epsilon, k, G_k, G_2, D, profile, groups, beta, scales, growths):
    return _choose(n, d, epsilon, k, G_k, G_2, D, profile, groups=groups, beta=beta, scales=scales,
                   growths=growths)


def _choose(n: int, d: int, epsilon: float, k: float, G_k: float, G_2: float, D: float, profile, *,
            groups: int = 1, beta: float = 1e-3, scales: tuple[float, ...] = SEARCH_SCALES,
            growths: tuple[float, ...] = SEARCH_GROWTHS) -> PhaseSchedule:
    """:func:`choose_schedule` without its cache (the same defaults)."""
    best = _search_schedule(n, d, epsilon, k, G_k, G_2, D, profile, groups=groups, beta=beta, scales=scales,
                            growths=growths)
    if SLOW_GROWTH not in growths or best.growth == SLOW_GROWTH or best.phases == 1:  # nothing to hold
        return best
    first = batch_rounds(profile, m=best.sizes[0] // groups, d=d, epsilon=epsilon, lam=best.lambdas[0], k=k,
                         G_k=G_k, D=D, beta=beta)[0]
    if not (G_2 < G_k and first.C >= SLOW_GROWTH_FROM * G_2):  # NaN keeps the proxy's choice
        return best
    slow = _search_schedule(n, d, epsilon, k, G_k, G_2, D, profile, groups=groups, beta=beta, scales=scales,
                            growths=(SLOW_GROWTH,))
    # the test ran on the proxy's own schedule (growth 8 or 2, uncut, localized), not on the plan that runs
    return replace(slow, reason=f"growth held to {SLOW_GROWTH:g}: the proxy's own schedule would clip its "
                                f"first round at C ≥ {SLOW_GROWTH_FROM:g}·G₂")


def _search_schedule(n: int, d: int, epsilon: float, k: float, G_k: float, G_2: float, D: float,
                     profile, *, groups: int = 1, beta: float = 1e-3,
                    scales: tuple[float, ...] = SEARCH_SCALES,
                    growths: tuple[float, ...] = SEARCH_GROWTHS) -> PhaseSchedule:
    public = {"d": d, "epsilon": epsilon, "k": k, "G_k": G_k, "D": D, "beta": beta}
    candidates = [(growth, phase_schedule(n, d, epsilon, k, G_k, G_2, D, groups, lambda_scale=float(scale),
                                          growth=growth))
                  for growth in growths for scale in scales]
    radii = _radii_of([full for _, full in candidates], profile, **public)
    best: PhaseSchedule | None = None
    for growth, full in candidates:
        proxies = schedule_proxy(full, profile, G_2=G_2, radii=radii, **public)
        T = int(np.argmin(proxies)) + 1
        if best is None or proxies[T - 1] < best.proxy:
            best = PhaseSchedule(sizes=full.sizes[:T], lambdas=full.lambdas[:T], groups=groups,
                                 lambda_1=full.lambda_1, growth=growth, proxy=float(proxies[T - 1]))
    assert best is not None
    if sum(best.sizes) < n - best.phases:
        # the search compared halving prefixes; the chosen one gets every example and its own proxy
        best = spread_over_phases(best, n)
        proxy = schedule_proxy(best, profile, G_2=G_2, **public)
        best = replace(best, proxy=float(proxy[-1]))
    return best


def choose_single_lambda(n: int, d: int, epsilon: float, k: float, G_k: float, G_2: float, D: float,
                         profile, *, beta: float, localize: bool = True) -> float:
    """``λ`` for a single regularized ERM minimizing ``λ(D/2)²/2 + 2G₂²/(λn) + G₂ R(λ)`` (public)."""
    lams = [float(scale) * initial_lambda(n, d, epsilon, k, G_k, G_2, D) for scale in np.logspace(-1, 2, 13)]
    radii = phase_radii(profile, np.full(len(lams), float(n)), np.array(lams), d=d, epsilon=epsilon, k=k,
                        G_k=G_k, D=D, beta=beta, localize=localize)
    best_val, best_lam = math.inf, initial_lambda(n, d, epsilon, k, G_k, G_2, D)
    for lam, R in zip(lams, radii, strict=True):
        val = lam * (D / 2.0) ** 2 / 2.0 + 2.0 * G_2 * G_2 / (lam * n) + G_2 * float(R)
        if val < best_val:
            best_val, best_lam = val, lam
    return best_lam


__all__ = ["SEARCH_GROWTHS", "SEARCH_SCALES", "SLOW_GROWTH", "SLOW_GROWTH_FROM", "PhaseSchedule",
           "allocation", "batch_rounds", "choose_schedule", "choose_single_lambda", "initial_lambda",
           "phase_radii", "phase_schedule", "plan_rounds", "round_count", "schedule_proxy",
           "spread_over_phases"]
