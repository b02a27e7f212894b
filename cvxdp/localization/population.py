"""Algorithm 1 — population localization (after Asi–Liu–Tian 2024 and Feldman–Koren–Talwar 2020).

Reduces stochastic convex optimization to a sequence of regularized ERMs on
*disjoint* batches:

* phases ``t = 1..T`` use ``n_t = ⌊n/2^t⌋`` fresh examples (a public random
  partition; ``T`` as large as the per-call minimum size allows) — rescaled by
  ``1/(1 − 2^{−T})`` when the schedule stops earlier, so no example is wasted
  (:func:`spread_over_phases`);
* regularization ``λ_t = 8^{t−1} λ₁`` with
  ``λ₁ = (1/D)[G_k (d/(nε))^{1−1/k} + G_2/√n]`` (times a public ``scale``);
* center ``w₀`` = the previous phase's output (first: the center of ``W``);
* each phase's batch is split into ``J`` groups; Algorithm 3 runs on each and
  the output is a candidate with more than ``J/2`` others within ``2 r_t``
  (majority-vote boosting; ``r_t`` the public final radius), else the one with
  most neighbours.

Privacy: every example belongs to one group of one phase, each Algorithm 3 call
is ε-DP for its group, and the later phases only see earlier *outputs* — so
by parallel composition over disjoint batches (which holds adaptively) the
whole run is ε-DP.  The boosting vote is post-processing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from cvxdp.erm.solver import ERMSettings
from cvxdp.error import CertificationError, ParameterError
from cvxdp.ledger import PrivacyLedger
from cvxdp.localization.output_perturbation import LocalizationStep
from cvxdp.localization.profiles import Profile
from cvxdp.localization.recursive import recursive_localization
from cvxdp.loss import Examples
from cvxdp.model import Model
from cvxdp.random import NoiseSource


@dataclass(frozen=True)
class PhaseSchedule:
    """The public schedule of Algorithm 1."""

    sizes: tuple[int, ...]
    lambdas: tuple[float, ...]
    groups: int
    lambda_1: float
    growth: float = 8.0
    proxy: float = float("nan")

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


def phase_radius(profile, *, m: int, d: int, epsilon: float, lam: float, k: float, G_k: float, D: float,
                 beta: float, max_rounds: int = 8) -> float:
    """The public final radius ``R_S`` of Algorithm 3 on one batch (simulated from the profile's plans)."""
    from cvxdp.localization.recursive import allocation

    S = profile.rounds(d=d, m=m, epsilon=epsilon, lam=lam, k=k, G_k=G_k, D=D, beta=beta,
                       max_rounds=max_rounds)
    thetas = allocation(S, k)
    eps_j = profile.round_epsilons(epsilon, thetas)
    R = D
    final = D
    for j in range(S):
        plan = profile.plan(R=R, lam=lam, m=m, d=d, eps=float(eps_j[j]), beta=float(beta * thetas[j]),
                            k=k, G_k=G_k)
        final = plan.radius_plus
        R = min(2.0 * final, D)
    return float(min(final, D))


def schedule_proxy(schedule: PhaseSchedule, profile, *, d: int, epsilon: float, k: float, G_k: float,
                   G_2: float, D: float, beta: float) -> list[float]:
    """The telescoped excess-risk bound after each phase ``T' ≤ T`` (public).

    With ``ŵ_t`` the exact regularized minimizer of phase ``t`` and ``R_t`` the
    public radius of its private output, regularized-ERM stability
    (``2G₂²/(λn)``) and the telescoping ``F(ŵ_t) − F(ŵ_{t−1})`` give

        F(w_T) − F* ≲ λ₁ (D/2)²/2 + Σ_t 2G₂²/(λ_t n_t) + Σ_{t≥2} λ_t R_{t−1}²/2 + G₂ R_T.
    """
    out = []
    total = schedule.lambdas[0] * (D / 2.0) ** 2 / 2.0
    prev_R = None
    for n_t, lam in zip(schedule.sizes, schedule.lambdas, strict=True):
        m = n_t // schedule.groups
        R = phase_radius(profile, m=m, d=d, epsilon=epsilon, lam=lam, k=k, G_k=G_k, D=D, beta=beta)
        total += 2.0 * G_2 * G_2 / (lam * n_t)
        if prev_R is not None:
            total += lam * prev_R * prev_R / 2.0
        out.append(total + G_2 * R)
        prev_R = R
    return out


def choose_schedule(n: int, d: int, epsilon: float, k: float, G_k: float, G_2: float, D: float,
                    profile, *, groups: int = 1, beta: float = 1e-3,
                    scales: tuple[float, ...] = tuple(np.logspace(-1, 2, 10)),
                    growths: tuple[float, ...] = (2.0, 4.0, 8.0)) -> PhaseSchedule:
    """The schedule (``λ₁`` scale, growth, number of phases) minimizing :func:`schedule_proxy`.

    A search over public quantities only; the paper's schedule (growth 8,
    scale 1, all phases) is one of the candidates.  Results for profiles
    without a private tail estimate depend only on the arguments and are cached.
    """
    if getattr(profile, "tail", None) is None:
        return _cached_schedule(n, d, epsilon, k, G_k, G_2, D, type(profile), getattr(profile, "kappa", 0.0),
                                getattr(profile, "clip", None), groups, beta, scales, growths)
    return _search_schedule(n, d, epsilon, k, G_k, G_2, D, profile, groups=groups, beta=beta,
                            scales=scales, growths=growths)


@lru_cache(maxsize=256)
def _cached_schedule(n, d, epsilon, k, G_k, G_2, D, profile_type, kappa, clip, groups, beta, scales, growths):
    if not kappa:
        profile = profile_type()
    else:  # only TightProfile knows clip; a user's subclass with kappa need not
        profile = profile_type(kappa) if clip is None else profile_type(kappa, clip=clip)
    return _search_schedule(n, d, epsilon, k, G_k, G_2, D, profile, groups=groups, beta=beta,
                            scales=scales, growths=growths)


def _search_schedule(n: int, d: int, epsilon: float, k: float, G_k: float, G_2: float, D: float,
                     profile, *, groups: int = 1, beta: float = 1e-3,
                    scales: tuple[float, ...] = tuple(np.logspace(-1, 2, 10)),
                    growths: tuple[float, ...] = (2.0, 4.0, 8.0)) -> PhaseSchedule:
    best: PhaseSchedule | None = None
    for growth in growths:
        for scale in scales:
            full = phase_schedule(n, d, epsilon, k, G_k, G_2, D, groups, lambda_scale=float(scale),
                                  growth=growth)
            proxies = schedule_proxy(full, profile, d=d, epsilon=epsilon, k=k, G_k=G_k, G_2=G_2, D=D,
                                     beta=beta)
            T = int(np.argmin(proxies)) + 1
            if best is None or proxies[T - 1] < best.proxy:
                best = PhaseSchedule(sizes=full.sizes[:T], lambdas=full.lambdas[:T], groups=groups,
                                     lambda_1=full.lambda_1, growth=growth, proxy=float(proxies[T - 1]))
    assert best is not None
    if sum(best.sizes) < n - best.phases:
        # the search compared halving prefixes; the chosen one gets every example and its own proxy
        best = spread_over_phases(best, n)
        proxy = schedule_proxy(best, profile, d=d, epsilon=epsilon, k=k, G_k=G_k, G_2=G_2, D=D, beta=beta)
        best = replace(best, proxy=float(proxy[-1]))
    return best


def majority_vote(candidates: np.ndarray, radius: float) -> int:
    """Index of a candidate with more than half of the others within ``2·radius``.

    Falls back to the candidate with the most such neighbours.  Uses only the
    private candidates and a public radius: post-processing.

    Fails closed: a non-finite candidate is never chosen and is nobody's neighbour
    (NaN distances compare False, but ``argmax`` must not fall back to it); if no
    candidate is finite, :class:`~cvxdp.error.CertificationError` — a function of
    the released candidates alone, so post-processing too.  A radius that is not a
    finite number ``≥ 0`` (public) is a :class:`~cvxdp.error.ParameterError`.
    """
    radius = float(radius)
    if not (math.isfinite(radius) and radius >= 0.0):
        raise ParameterError("the majority vote needs a finite radius >= 0 (a public radius).")
    candidates = np.asarray(candidates, dtype=float)
    J = candidates.shape[0]
    finite = np.all(np.isfinite(candidates.reshape(J, -1)), axis=1)
    if not finite.any():
        raise CertificationError("no candidate of the majority vote is finite; nothing was released.")
    if J == 1:
        return 0
    dist = np.linalg.norm(candidates[:, None, :] - candidates[None, :, :], axis=-1)
    near = (dist <= 2.0 * radius) & finite[:, None] & finite[None, :]
    close = np.where(finite, near.sum(axis=1) - 1, -1)  # a finite candidate is near itself
    winners = np.nonzero(finite & (close > (J - 1) / 2.0))[0]
    return int(winners[0]) if winners.size else int(np.argmax(close))


@dataclass
class PopulationResult:
    w: np.ndarray
    steps: list[LocalizationStep]
    schedule: PhaseSchedule


def population_localization(model: Model, examples: Examples, *, epsilon: float, k: float, G_k: float,
                            G_2: float, schedule: PhaseSchedule, beta: float, profile: Profile,
                            ledger: PrivacyLedger, source: NoiseSource, erm: ERMSettings | None = None,
                            localize: bool = True, progress=None) -> PopulationResult:
    """Algorithm 1 with Algorithm 3 as the phase solver."""
    W = model.domain
    n = examples.m
    order = np.argsort(source.uniform(n))  # a public random partition, independent of the data
    w0 = W.make_feasible(W.interior_point())
    start = 0
    steps: list[LocalizationStep] = []
    for t, (n_t, lam) in enumerate(zip(schedule.sizes, schedule.lambdas, strict=True), start=1):
        batch = order[start:start + n_t]
        start += n_t
        groups = np.array_split(batch, schedule.groups)
        candidates = []
        radii = []
        for g, idx in enumerate(groups):
            res = recursive_localization(
                model, examples.subset(idx), epsilon=epsilon, lam=lam, w0=w0, k=k, G_k=G_k,
                beta=beta, profile=profile, ledger=ledger, batch=f"phase{t}/group{g}",
                batch_indices=idx, source=source, erm=erm, localize=localize, phase=t, group=g)
            steps.extend(res.steps)
            candidates.append(res.center)
            radii.append(res.final_radius)
            if progress is not None:
                progress.update(1)
        w0 = candidates[majority_vote(np.array(candidates), float(np.max(radii)))]  # NaN-propagating max
    return PopulationResult(w=w0, steps=steps, schedule=schedule)
