"""The planner: public inputs (and the tail release, where the design reads it) → every release's constants.

:class:`Planner` turns :class:`~cvxdp.plan.inputs.PublicInputs` into a :class:`ReleasePlan`:

* the private tail histogram (:class:`TailReleasePlan`), when ``tail_share > 0``;
* the fit's budget ``ε_fit`` (``ε`` minus the histogram's share, rounded down so the two add up to at
  most ``ε`` exactly);
* Algorithm 1's schedule (batch sizes ``n_t``, ``λ_t``, ``J`` groups) or the single batch of
  Algorithms 2–3;
* per batch (:class:`BatchPlan`), its rounds (:class:`~cvxdp.plan.profiles.RoundPlan`): ``ε_j``,
  ``β_j``, ``C``, ``λ``, ``α``, sensitivity ``Δ``, noise scale ``s``, the radius ``R_j`` of ``U_j``
  and the next radius ``R⁺_j`` — from the one radius recursion,
  :func:`~cvxdp.plan.schedule.plan_rounds`.

Privacy argument, read off the plan: every round of a batch reads that batch only and its ``ε_j``
add up to at most ``ε_fit`` (:func:`~cvxdp.plan.schedule.allocation`); batches of Algorithm 1 are
disjoint (a public random partition), so each example is charged the histogram's ``ε`` plus at most
``ε_fit``; every constant is a function of public inputs and the released histogram.  The ledger
is charged from this plan before the fit draws any noise.

Where the plan reads the tail release (``tail_share > 0``: ``C``, the schedule and the radii use the
released histogram; ``G_k="auto"``: also ``G_k``), a plan made before the release (the dry run
:meth:`PrivateProblem.plan <cvxdp.problem.PrivateProblem.plan>`) is *provisional*: it shows the
public worst case and says which constants the release will set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from cvxdp._validation import EPSILON_MIN
from cvxdp.error import CvxdpError, ParameterError
from cvxdp.plan.auto import CLIP_FULL_FROM, clip_rule
from cvxdp.plan.inputs import PublicInputs
from cvxdp.plan.mean_gradient import MeanGradientPlan, plan_mean_gradient
from cvxdp.plan.profiles import RoundPlan, TightProfile
from cvxdp.plan.schedule import (
    PhaseSchedule,
    batch_rounds,
    choose_schedule,
    choose_single_lambda,
    initial_lambda,
    phase_schedule,
    spread_over_phases,
)
from cvxdp.plan.tail_models import CombinedTail
from cvxdp.privacy.clipped_mean import MIN_CLIP
from cvxdp.privacy.ledger import budget_remainder
from cvxdp.privacy.mechanisms import (
    GRID_BITS,
    GRID_TOO_FINE,
    DiscreteLaplaceCounts,
    grid_fits,
    snap_granularity,
)
from cvxdp.privacy.tail import TailProfile, histogram_bins

ALGORITHM_NAMES = {
    "population": "population localization (Algorithm 1 over Algorithm 3 over Algorithm 2)",
    "recursive": "recursive localization (Algorithm 3 over Algorithm 2) on all the data",
    "output-perturbation": "one round of localized output perturbation (Algorithm 2) on U = W",
    "mean-gradient": "one noisy clipped mean of an affine loss's gradients, then its linear minimizer over W",
}


@dataclass(frozen=True)
class TailReleasePlan:
    """The private tail histogram: ``ε``, its public geometric grid, and its count mechanism.

    ``moment_bounds``: the fit's declared ``(k, G_k)`` (and ``(2, G₂)`` when given) — empty with
    ``G_k="auto"``; the lone-bin rule of the counts' post-processing reads them
    (:func:`~cvxdp.privacy.tail.room_under_moments`).
    """

    epsilon: float
    low: float
    high: float
    bins_per_octave: int = 2
    beta: float = 0.1
    moment_bounds: tuple[tuple[float, float], ...] = ()

    @property
    def bins(self) -> int:
        """Fine bins ``J + 2`` (below the grid, ``J`` geometric bins, above it)."""
        return histogram_bins(self.low, self.high, self.bins_per_octave) + 2

    def mechanism(self) -> DiscreteLaplaceCounts:
        """Replacing one example moves one count down and one up: ℓ1 sensitivity 2."""
        return DiscreteLaplaceCounts(2.0, self.epsilon, self.bins)


@dataclass(frozen=True)
class BatchPlan:
    """One call of Algorithm 3 (or 2): a batch of the examples and its rounds.

    The batch is ``order[offset : offset + size]`` of the public random permutation of Algorithm 1
    (``label`` ``"phase t/group g"``) or all the examples (``label`` ``"all"``).
    """

    phase: int
    group: int
    label: str
    offset: int
    size: int
    lam: float
    epsilon: float
    beta: float
    rounds: tuple[RoundPlan, ...]

    @property
    def final_radius(self) -> float:
        return self.rounds[-1].radius_plus


@dataclass(frozen=True)
class ReleasePlan:
    """Every release of a fit, with its public constants (see the module docstring).

    ``provisional`` plans were made before the tail release they depend on; ``batches`` is empty
    when even ``G_k`` comes from that release (``G_k="auto"``) and, after it, when that release saw
    nothing and the fit falls back to the domain's centre (``fallback``).
    """

    inputs: PublicInputs
    tail: TailReleasePlan | None
    epsilon_fit: float
    G_k: float
    G_2: float
    schedule: PhaseSchedule | None
    batches: tuple[BatchPlan, ...]
    provisional: bool = False
    profile_name: str = field(default="")
    #: ``None``, or how a fit with ``G_k="auto"`` went on when its tail histogram saw nothing:
    #: ``"centre"`` (no fit: the domain's public centre is released) or ``"tail_range top"`` (planned
    #: for the declared range's top as a public ``G_k``).  See :meth:`Planner.plan`.
    fallback: str | None = None
    #: The affine plan's one release (:mod:`cvxdp.plan.mean_gradient`), else ``None``; it has no batches.
    gradient: MeanGradientPlan | None = None

    @property
    def partitioned(self) -> bool:
        """Whether the batches are parts of a public random partition (Algorithm 1)."""
        return self.inputs.algorithm == "population"

    @property
    def rounds(self) -> list[tuple[BatchPlan, RoundPlan]]:
        return [(b, r) for b in self.batches for r in b.rounds]

    @property
    def releases(self) -> int:
        """How many mechanism calls the fit makes (the histogram included)."""
        return len(self.rounds) + (self.tail is not None) + (self.gradient is not None)

    def phase_batches(self) -> list[list[BatchPlan]]:
        """The batches grouped by phase, in order (one phase for the single-batch algorithms)."""
        phases: dict[int, list[BatchPlan]] = {}
        for b in self.batches:
            phases.setdefault(b.phase, []).append(b)
        return [phases[t] for t in sorted(phases)]

    def describe(self) -> str:
        """Publishable text: each release's ε, sensitivity Δ, noise scale s and radius, with a legend.

        Everything printed is a public input or a function of public inputs (and, after the fit,
        of the released tail histogram): it may be published with the model.
        """
        inp = self.inputs
        affine = inp.algorithm == "mean-gradient"  # the affine plan reads no profile
        profile = "" if affine else f", profile {self.profile_name}"
        lines = [f"release plan: {ALGORITHM_NAMES[inp.algorithm]}{profile}"
                 + (", the clip rule: C = G₂ (or the tail release's Ĝ₂ if lower) times "
                    f"min(1, (n ε_fit/({CLIP_FULL_FROM:g} d))^(1/(2k))), λ = 4C·sqrt(d/(n ε_fit))/D"
                    if inp.clip_rule else ""),
                 *([f"  chosen by algorithm='auto': {inp.auto_reason}"] if inp.auto_algorithm else []),
                 f"  ε = {inp.epsilon:.6g} in total on n = {inp.n} examples; d = {inp.d}, domain diameter "
                 f"D = {inp.D:.4g}; moment bound k = {inp.moment_k:g}, "
                 + ("G_k from the tail release" if inp.auto and self.provisional
                    else "no G_k (the tail release gave no scale)" if self.fallback == "centre"
                    else f"G_k = {self.G_k:.4g}")]
        if self.tail is not None:
            t = self.tail
            lines.append(f"  release 1: private tail histogram, ε = {t.epsilon:.4g} on every example, "
                         f"{t.bins} counts on [{t.low:.3g}, {t.high:.3g}], ℓ1 Δ = 2, discrete Laplace "
                         f"scale {float(t.mechanism().scale):.4g}")
        if self.fallback == "centre":
            lines.append("  the tail histogram saw nothing above its noise: no fit; the domain's public "
                         "centre is released and the fit's budget is not spent")
        elif self.fallback == "tail_range top":
            lines.append(f"  the tail histogram saw nothing above its noise: planned for the declared "
                         f"tail_range's top, G_k = {self.G_k:.4g}, as a public bound")
        if self.provisional:
            constants = "G_k and the clip level C" if affine else "G_k, C, λ, the schedule and the radii"
            lines.append("  PROVISIONAL: " + (
                f"{constants} come from the tail release; only its ε and the "
                f"fit's ε = {self.epsilon_fit:.6g} per example are fixed before it (if it sees nothing "
                "above its noise, the fit "
                + ("plans for the declared tail_range's top" if inp.declared_tail_range
                   else "releases the domain's centre") + ")." if not self.batches else
                "C, λ, the schedule and the radii below assume the public worst-case tail; in the fit "
                "they come from the tail release (its ε and the fit's ε per example are fixed)."))
        if self.gradient is not None:
            g = self.gradient
            lines.append(f"  release {1 + (self.tail is not None)}: the mean of the per-example gradients "
                         f"clipped to C = {g.C:.4g} "
                         f"(C = G_k((k−1)nε/(2d))^(1/k)), ε = {g.epsilon:.4g} on every example, "
                         f"Δ = {g.sensitivity:.4g}, s = {g.noise_scale:.4g}; the model is its linear "
                         "minimizer over W (post-processing)")
        if self.batches:
            disjoint = ("disjoint batches (a public random partition, parallel composition): each "
                        "example is read by one batch" if self.partitioned else "one batch: all examples")
            lines.append(f"  then ε_fit = {self.epsilon_fit:.6g} per batch over {len(self.batches)} "
                         f"batch(es), {disjoint}; {self.releases} releases in all")
        if self.schedule is not None:
            sch = self.schedule
            lines.append(f"  Algorithm 1's schedule: {sch.phases} phase(s), λ_t = {sch.lambdas[0]:.4g}·"
                         f"{sch.growth:g}^(t−1), {sch.groups} group(s) per phase"
                         + (f" ({sch.reason})" if sch.reason else ""))
        number = 1 + (self.tail is not None)
        for b in self.batches:
            lines.append(f"  {b.label}: m = {b.size}, λ = {b.lam:.4g}, ε = {b.epsilon:.4g}, "
                         f"{len(b.rounds)} round(s)")
            for r in b.rounds:
                C = f"C = {r.C:.4g}"
                if self.adaptive_clip:
                    C += (" (worst case; the tail release sets it)" if self.provisional
                          else " (from the tail release)")
                lines.append(f"    release {number}: round {r.round}, ε = {r.epsilon:.4g}, {C}, "
                             f"α = {r.alpha:.3g}, Δ = {r.sensitivity:.4g}, s = {r.noise_scale:.4g}, "
                             f"R = {r.radius:.4g}, R⁺ = {r.radius_plus:.4g}")
                number += 1
        lines.append("  legend: ε the release's privacy cost; Δ its ℓ2 sensitivity; s the ℓ2-Laplace "
                     "noise scale (s ≥ Δ/ε); α the certified optimization accuracy; R the diameter bound "
                     "of the round's set U; R⁺ the radius of the next round's ball. Released weights (the "
                     "affine plan: its mean) are snapped to a grid of spacing the power of two ≥ s, in a "
                     "public frame at the domain's box (a floating-point defence; see SECURITY.md).")
        return "\n".join(lines)

    @property
    def adaptive_clip(self) -> bool:
        """Whether each round's ``C`` is chosen with the released tail histogram."""
        return self.tail is not None and isinstance(self.inputs.profile, TightProfile) \
            and self.inputs.profile.clip is None and self.fallback is None and not self.inputs.clip_rule


class Planner:
    """Build the :class:`ReleasePlan` of a fit from its public inputs (and the tail release)."""

    def __init__(self, inputs: PublicInputs) -> None:
        if inputs.n is None:
            raise ValueError("plan with inputs.with_n(n): the number of examples is needed")
        self.inputs = inputs

    def tail_release(self) -> TailReleasePlan | None:
        """The histogram's plan, or ``None`` when its share is 0 (:attr:`PublicInputs.histogram_share`)."""
        inp = self.inputs
        if inp.histogram_share <= 0:
            return None
        low, high = inp.tail_grid
        declared: tuple[tuple[float, float], ...] = ()
        if not inp.auto:
            declared = ((inp.moment_k, inp.G_k),) + (() if inp.G_2 is None else ((2.0, inp.G_2),))
        plan = TailReleasePlan(epsilon=inp.tail_epsilon, low=low, high=high, moment_bounds=declared)
        try:  # the count mechanism's own checks, at planning: a public refusal before any charge
            plan.mechanism()
        except ParameterError as exc:
            raise ParameterError(f"the private tail histogram's share of ε ({plan.epsilon:g}) cannot be "
                                 f"released: {exc} Raise epsilon or tail_share.") from None
        return plan

    def plan(self, tail: TailProfile | None = None) -> ReleasePlan:
        """The plan given the released ``tail`` (``None``: before the release, or when there is none).

        With ``G_k="auto"`` and a histogram that saw nothing above its noise (``tail.seen`` false) there
        is no estimate to plan for.  Planning for the stand-in (every example above the grid, at
        ``2·10¹⁰`` on the default grid) scales ``C`` and ``λ`` together, so every round's regularized
        minimizer is pinned at its centre ``w₀`` (the domain's public interior point) and the fit
        releases ``w₀`` plus noise — measured worse than ``w₀`` itself on small real data.  The plan
        falls back instead:

        * with a declared ``tail_range``: to its top as a public ``G_k`` (and ``G_2``, unless given) —
          the same plan as a fit given that bound, the histogram's share already spent;
        * otherwise (the default grid's top bounds nothing anyone declared): to no fit at all — ``w₀``
          is released and the fit's share of ε is not spent.  This removes the noise the stand-in's
          fit would add to ``w₀``: for a convex risk ``f`` and mean-zero noise ``b``,
          ``E f(w₀ + b) ≥ f(w₀)`` (Jensen) — up to the clamping, snapping and projection of the
          release, which keep its mean near, not exactly at, ``w₀``.

        Privacy: ``tail.seen`` is a function of the released noisy counts, the range's being declared
        and its top are public, so the branch is post-processing of a charged release.
        """
        inp = self.inputs
        tail_plan = self.tail_release()
        provisional = tail_plan is not None and tail is None
        eps_fit = inp.epsilon
        if tail_plan is not None:
            eps_fit = budget_remainder(inp.epsilon, tail_plan.epsilon)  # both add up to ≤ ε exactly
        G_k, G_2, profile = inp.G_k, inp.G_2, inp.profile
        fallback = None
        if tail is not None and inp.auto and not tail.seen:
            if not inp.declared_tail_range:
                return ReleasePlan(inputs=inp, tail=tail_plan, epsilon_fit=eps_fit, G_k=math.nan,
                                   G_2=math.nan, schedule=None, batches=(), provisional=False,
                                   profile_name=profile.name, fallback="centre")
            fallback, G_k = "tail_range top", float(tail_plan.high)
            G_2 = min(G_2, G_k) if G_2 is not None else G_k
            tail = None  # the stand-in is not planned for
        if tail is not None:
            if inp.auto:
                G_k = tail.moment(inp.moment_k)
                G_2 = min(G_2, G_k) if G_2 is not None else tail.moment(2.0)
            profile = profile.with_tail(CombinedTail(tail, inp.moment_k, G_k))
        if isinstance(G_k, str):  # "auto" before the release: nothing numeric to plan yet
            # but the affine plan's grid can be checked for every C: its scale s ≥ 2C/(nε) puts the box
            # ±C within nε/2 grid steps of 0, so below 2⁵² the release's check passes whatever C is
            if inp.algorithm == "mean-gradient" and not inp.n * eps_fit / 2.0 * (1.0 + 2.0**-40) + 1.0 \
                    < 2.0**GRID_BITS:
                raise ParameterError(GRID_TOO_FINE)
            return ReleasePlan(inputs=inp, tail=tail_plan, epsilon_fit=eps_fit, G_k=math.nan, G_2=math.nan,
                               schedule=None, batches=(), provisional=True, profile_name=profile.name)
        G_2 = G_k if G_2 is None else min(G_2, G_k)
        if inp.algorithm == "mean-gradient":
            try:  # a moment bound at the ends of the float range overflows C or its sensitivity
                gradient = plan_mean_gradient(inp.n, inp.d, eps_fit, inp.moment_k, G_k)
            except CvxdpError:
                raise ParameterError(_NOT_FINITE) from None
            except (ZeroDivisionError, OverflowError, ValueError) as exc:
                raise ParameterError(_NOT_FINITE) from exc
            # the release's box [−C − Λ, C + Λ] and its grid Λ ≥ s must be finite too (review helper-39:
            # s above 2¹⁰²³ made Λ infinite and the snapped release NaN, after both charges)
            values = (gradient.C, gradient.sensitivity, gradient.noise_scale,
                      gradient.C + float(snap_granularity(gradient.noise_scale)))
            if not (all(math.isfinite(v) and v > 0 for v in values) and gradient.C >= MIN_CLIP):
                raise ParameterError(_NOT_FINITE)
            if not grid_fits(gradient.noise_scale, gradient.box):  # an ε so large its grid is below floats
                raise ParameterError(GRID_TOO_FINE)
            return ReleasePlan(inputs=inp, tail=tail_plan, epsilon_fit=eps_fit, G_k=float(G_k),
                               G_2=float(G_2), schedule=None, batches=(), provisional=False,
                               profile_name=profile.name, fallback=fallback, gradient=gradient)
        lam = None
        try:  # a moment bound at the ends of the float range (a subnormal G_k) can divide by zero
            if inp.clip_rule:  # its level can round a subnormal G₂ to C = 0, which the profile refuses
                profile, lam = self._clip_rule(profile, eps_fit, G_2, tail)
            if inp.algorithm == "population":
                schedule, batches = self._population(profile, eps_fit, G_k, G_2)
            else:
                schedule, batches = None, (self._single(profile, eps_fit, G_k, G_2, lam),)
        except CvxdpError:  # our own refusals (ParameterError is a ValueError) keep their messages
            raise
        except (ZeroDivisionError, OverflowError, ValueError) as exc:  # ValueError: math.log of 0
            raise ParameterError(_NOT_FINITE) from exc
        _require_finite(batches, inp.box_edge)
        return ReleasePlan(inputs=inp, tail=tail_plan, epsilon_fit=eps_fit, G_k=float(G_k), G_2=float(G_2),
                           schedule=schedule, batches=batches, provisional=provisional,
                           profile_name=profile.name, fallback=fallback)

    def _population(self, profile, eps: float, G_k: float, G_2: float):
        inp = self.inputs
        n, d, k, D = inp.n, inp.d, inp.moment_k, inp.D
        groups = inp.boosting_groups
        if groups is None:
            provisional = phase_schedule(n, d, eps, k, G_k, G_2, D, 1)
            groups = profile.boosting_groups(provisional.phases, inp.delta)
        if isinstance(profile, TightProfile) and inp.lambda_scale is None and inp.lambda_growth is None:
            schedule = choose_schedule(n, d, eps, k, G_k, G_2, D, profile, groups=groups,
                                       beta=schedule_beta(inp.delta, groups))
            if inp.max_phases is not None and schedule.phases > inp.max_phases:
                cut = inp.max_phases
                schedule = spread_over_phases(replace(schedule, sizes=schedule.sizes[:cut],
                                                      lambdas=schedule.lambdas[:cut]), n)
        else:
            schedule = phase_schedule(n, d, eps, k, G_k, G_2, D, groups,
                                      lambda_scale=inp.lambda_scale or 1.0,
                                      growth=inp.lambda_growth or 8.0, max_phases=inp.max_phases)
        beta = inp.delta / (2.0 * schedule.phases * groups * 2.0)
        batches = []
        start = 0
        for t, (n_t, lam) in enumerate(zip(schedule.sizes, schedule.lambdas, strict=True), start=1):
            offset = start
            for g, size in enumerate(_split_sizes(n_t, schedule.groups)):
                rounds = batch_rounds(profile, m=size, d=d, epsilon=eps, lam=lam, k=k, G_k=G_k, D=D,
                                      beta=beta, localize=inp.localize)
                batches.append(BatchPlan(phase=t, group=g, label=f"phase{t}/group{g}", offset=offset,
                                         size=size, lam=lam, epsilon=eps, beta=beta, rounds=rounds))
                offset += size
            start += n_t
        return schedule, tuple(batches)

    def _clip_rule(self, profile, eps: float, G_2: float, tail: TailProfile | None):
        """The profile and ``λ`` of the clip-rule plan (:func:`cvxdp.plan.auto.clip_rule`): ``G₂``, lowered
        to the tail histogram's ``Ĝ₂`` when it saw the tail, scaled by the rule's public level
        (:func:`~cvxdp.plan.auto.clip_level`) at ``n ε_fit / d``, and ``λ = 4 C sqrt(d/(n ε_fit))/D``.

        Privacy: ``G₂`` is public, ``Ĝ₂`` post-processing of the charged tail release; before that
        release (a provisional plan) ``C`` is the public ``G₂`` at that level.
        """
        inp = self.inputs
        C = G_2
        if tail is not None and tail.seen:
            estimate = tail.moment(2.0)
            if math.isfinite(estimate) and estimate > 0:
                C = min(C, estimate)
        C, lam = clip_rule(inp.n, inp.d, eps, inp.D, C, inp.moment_k)
        return TightProfile(profile.kappa, tail=profile.tail, clip=C), lam

    def _single(self, profile, eps: float, G_k: float, G_2: float, lam: float | None = None) -> BatchPlan:
        inp = self.inputs
        n, d, k, D = inp.n, inp.d, inp.moment_k, inp.D
        localize = inp.localize and inp.algorithm == "recursive"
        beta = inp.delta / 2.0
        if lam is None:  # the clip rule's λ, else the user's, the rate's or the profile's choice
            if inp.lam is not None:
                lam = inp.lam
            elif inp.lambda_scale is not None or not isinstance(profile, TightProfile):
                lam = initial_lambda(n, d, eps, k, G_k, G_2, D, inp.lambda_scale or 1.0)
            else:
                lam = choose_single_lambda(n, d, eps, k, G_k, G_2, D, profile, beta=beta, localize=localize)
        rounds = batch_rounds(profile, m=n, d=d, epsilon=eps, lam=lam, k=k, G_k=G_k, D=D, beta=beta,
                              localize=localize)
        return BatchPlan(phase=0, group=0, label="all", offset=0, size=n, lam=lam, epsilon=eps, beta=beta,
                         rounds=rounds)


def schedule_beta(delta: float, groups: int) -> float:
    """The failure probability the tight profile's schedule search gives each phase's radius bound:
    ``δ/(40 J)`` for ``J`` groups (the public excess-risk proxy of
    :func:`~cvxdp.plan.schedule.schedule_proxy` is evaluated at it)."""
    return delta / (4.0 * groups * 10.0)


_NOT_FINITE = ("the plan has a constant that is not a finite positive number (the moment bound or the "
               "schedule overflowed or underflowed); nothing of the fit itself was charged or released (a "
               "private tail histogram, if one ran, was). Pass a moment bound of a moderate scale (rescale "
               "the loss), a smaller moment_k or a public G_k.")


def _require_finite(batches: tuple[BatchPlan, ...], box_edge: float | None = None) -> None:
    """Fail closed before any charge of the fit: every constant of every round finite and positive, every
    round's ε at least the mechanisms' floor ``EPSILON_MIN``, and (given the public ``box_edge`` of
    :class:`~cvxdp.plan.inputs.PublicInputs`) every release's grid coarser than the floats of its box
    (:func:`~cvxdp.privacy.mechanisms.grid_fits`).

    A function of the plan (public inputs and the released histogram), so the refusal is too.
    """
    for b in batches:
        for r in b.rounds:
            values = (r.C, r.alpha, r.sensitivity, r.noise_scale, r.radius_plus, r.epsilon, r.lam)
            if not all(math.isfinite(v) and v > 0 for v in values):
                raise ParameterError(_NOT_FINITE)
            if r.epsilon < EPSILON_MIN:  # the release's mechanism would refuse it, after the charge
                raise ParameterError(
                    f"a release of the plan gets ε = {r.epsilon:.17g}, below {EPSILON_MIN:g} (ε is split "
                    "over the releases and rounded down, so the total never exceeds it); nothing was "
                    "charged for the fit. Choose a larger epsilon.")
            if box_edge is not None and not grid_fits(r.noise_scale, box_edge):
                raise ParameterError(GRID_TOO_FINE)


def _split_sizes(total: int, parts: int) -> list[int]:
    """The sizes ``np.array_split`` gives ``total`` items in ``parts`` (the first ``total % parts`` +1)."""
    q, r = divmod(total, parts)
    return [q + 1] * r + [q] * (parts - r)


__all__ = ["BatchPlan", "Planner", "ReleasePlan", "TailReleasePlan", "schedule_beta"]
