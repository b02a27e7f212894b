"""The public inputs of a private fit, validated once: everything the plan may read.

A :class:`PublicInputs` holds the sizes ``n, d``, the domain's diameter ``D``, the budget ``ε``, the
moment bound ``(k, G_k, G_2)``, the utility failure probability ``δ`` and every option of
:meth:`PrivateProblem.solve <cvxdp.problem.PrivateProblem.solve>` that changes a constant of a
release.  It is frozen and hashable, and nothing in it is derived from the data: ``n`` is the
(public) size of the data set under replace-one neighbouring, and the rest comes from the user and
the model.  Validation is a function of these values alone, so a refusal here reveals nothing.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace

import numpy as np

from cvxdp._validation import MOMENT_MAX, at_least, positive_finite, privacy_epsilon, probability
from cvxdp.error import ParameterError, UncertifiableLossError
from cvxdp.plan.auto import (
    check_population_schedule,
    choose_algorithm,
    heavy_tail,
    localization_options,
    uses_clip_rule,
)
from cvxdp.plan.profiles import Profile, get_profile

ALGORITHMS = ("auto", "population", "recursive", "output-perturbation", "mean-gradient")


def _positive_int_or_none(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral) or value < 1:
        raise ParameterError(f"{name} must be a positive integer (or None), got {value!r}.")
    return int(value)


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise ParameterError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


#: At most this many octaves between ``tail_range``'s ends (2 bins each): a ratio of about 10^301.
MAX_TAIL_OCTAVES = 1000.0


@dataclass(frozen=True)
class PublicInputs:
    """Validated public inputs of one private fit (see :meth:`from_options` for their meaning).

    ``G_k == "auto"`` means the moment bound comes from the private tail release; ``tail_grid`` is
    the public ``(low, high)`` range of that histogram (``None`` when ``tail_share == 0``).
    ``n is None`` until the data's size is known (:meth:`with_n`).
    """

    d: int
    D: float
    epsilon: float
    moment_k: float
    G_k: float | str
    G_2: float | None
    delta: float
    algorithm: str
    profile: Profile
    localize: bool
    tail_share: float
    tail_grid: tuple[float, float] | None
    lambda_scale: float | None
    lambda_growth: float | None
    max_phases: int | None
    lam: float | None
    boosting_groups: int | None
    structured: bool
    n: int | None = None
    #: Whether ``tail_grid`` was given by the user (``tail_range``): a declared public range, whose top
    #: a fit with ``G_k="auto"`` may plan for when the histogram sees nothing (the default grid's top is
    #: no one's bound).
    declared_tail_range: bool = False
    #: Whether the plan is Algorithm 3 with the clip rule's ``C`` and ``λ`` (:mod:`cvxdp.plan.auto`);
    #: set only when ``algorithm="auto"`` is resolved by :meth:`with_n`.
    clip_rule: bool = False
    #: Whether ``algorithm`` was chosen by ``"auto"`` (from public inputs, :mod:`cvxdp.plan.auto`).
    auto_algorithm: bool = False
    #: Why ``"auto"`` chose ``algorithm`` (public inputs only; printed by the plan's ``describe``).
    auto_reason: str = ""
    #: Whether ``tail_share`` was passed (``False``: the default share above).
    tail_share_given: bool = False
    #: Whether the loss is affine in ``w`` (read off its expression: public); ``"auto"`` then runs the
    #: affine plan (:mod:`cvxdp.plan.mean_gradient`) unless an option asks for another.
    affine: bool = False
    #: The options given that only the localization algorithms read
    #: (:func:`~cvxdp.plan.auto.localization_options`).
    localization_asked: tuple[str, ...] = ()
    #: A public bound on the reach of every release box of Algorithm 2 in its release frame
    #: (:func:`~cvxdp.privacy.mechanisms.release_box_edge` of the domain's bounding ball), so a grid too
    #: fine for floating point is refused at planning, before the fit's charges
    #: (:func:`~cvxdp.privacy.mechanisms.grid_fits`); ``None``: checked at release only.
    box_edge: float | None = None

    @property
    def auto(self) -> bool:
        """Whether ``G_k`` is estimated by the private tail release."""
        return isinstance(self.G_k, str)

    @property
    def histogram_share(self) -> float:
        """The share of ε the private tail histogram spends: ``tail_share``, except 0 for the clip rule
        (:mod:`cvxdp.plan.auto`, chosen only with public ``G_k`` and ``G_2``) when neither
        ``tail_share`` nor ``tail_range`` was passed — the histogram would only estimate the ``G₂``
        already given, so its default share goes to the fit instead.  A function of public inputs."""
        if self.algorithm == "mean-gradient":  # a histogram only to estimate G_k="auto"
            return self.tail_share if self.auto else 0.0
        if self.clip_rule and not self.tail_share_given and not self.declared_tail_range:
            return 0.0
        return self.tail_share

    @property
    def tail_epsilon(self) -> float:
        """``ε`` of the private tail histogram (0 when there is none)."""
        return self.histogram_share * self.epsilon

    @classmethod
    def from_options(cls, *, d: int, D: float, structured: bool, epsilon: float, moment_k: float,
                     G_k: float | str, G_2: float | None = None, algorithm: str = "auto",
                     profile: str | Profile = "tight", delta: float = 0.1, localize: bool = True,
                     tail_share: float | None = None, tail_range: tuple[float, float] | None = None,
                     lambda_scale: float | None = None, lambda_growth: float | None = None,
                     max_phases: int | None = None, lam: float | None = None,
                     boosting_groups: int | None = None, n: int | None = None,
                     affine: bool = False, box_edge: float | None = None) -> PublicInputs:
        """Validate the options of :meth:`PrivateProblem.solve <cvxdp.problem.PrivateProblem.solve>`.

        ``d``, ``D``, ``structured`` (whether the loss has per-example Lipschitz constants) and
        ``affine`` (whether it is affine in ``w``) describe the model; the other arguments are
        documented on ``solve``.  Every refusal is a
        :class:`~cvxdp.error.ParameterError` (or an :class:`~cvxdp.error.UncertifiableLossError`
        for an option the loss cannot support) that depends on these values only.
        """
        eps = privacy_epsilon(epsilon)
        k = at_least("moment_k", moment_k, 2.0)
        if k > MOMENT_MAX:
            raise ParameterError(f"moment_k = {k:g} exceeds {MOMENT_MAX:g}; such a moment bound is a "
                                 "worst-case Lipschitz bound: pass k = 1000 with G_k = that bound.")
        auto = isinstance(G_k, str)
        if auto and G_k != "auto":
            raise ParameterError(f"G_k must be a positive number or 'auto', got {G_k!r}.")
        if not auto:
            if isinstance(G_k, numbers.Real) and not isinstance(G_k, bool) and math.isinf(G_k) and G_k > 0:
                raise ParameterError(
                    f"G_k is infinite: the moment_k = {k:g}-th moment of the per-example gradient norms must "
                    "be finite (for Student-t features with ν degrees of freedom, k < ν); choose a smaller "
                    "moment_k — cvxdp.moment_bounds.feature_moment_bound gives G_k for common laws.")
            G_k = positive_finite("G_k", G_k)
        if G_2 is not None:
            G_2 = positive_finite("G_2", G_2)
            if not auto and G_2 > G_k * (1 + 1e-12):
                raise ParameterError(f"G_2 = {G_2} exceeds G_k = {G_k}, impossible for k ≥ 2 "
                                     "(moments are monotone); check the moment bounds.")
        delta = probability("delta", delta)
        for name, value in (("lambda_scale", lambda_scale), ("lambda_growth", lambda_growth)):
            if value is not None:
                positive_finite(name, value)
        if lam is not None:
            lam = positive_finite("lam", lam)
            if algorithm == "population":
                raise ParameterError("lam fixes the λ of a single regularized ERM, which Algorithm 1 does "
                                     "not run (its schedule sets λ per phase): pass lambda_scale for "
                                     "Algorithm 1, or algorithm='recursive' (or 'auto') with lam.")
        max_phases = _positive_int_or_none("max_phases", max_phases)
        if algorithm not in ALGORITHMS:
            raise ParameterError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}.")
        prof = get_profile(profile)
        tail_share_given = tail_share is not None
        if tail_share is None:
            tail_share = 0.1 if (prof.name == "tight" and structured) or auto else 0.0
        if isinstance(tail_share, bool | np.bool_) or not isinstance(tail_share, numbers.Real) \
                or not 0.0 <= float(tail_share) < 1.0:
            raise ParameterError(f"tail_share must be a number in [0, 1) (the share of ε spent on the "
                                 f"private tail histogram), got {tail_share!r}.")
        tail_share = float(tail_share)
        grid = None
        if tail_range is not None:
            if tail_share == 0.0:
                raise ParameterError("tail_range sets the grid of the private tail histogram, which "
                                     "tail_share = 0 turns off; drop tail_range or pass tail_share > 0.")
            if not isinstance(tail_range, tuple | list) or len(tail_range) != 2:
                raise ParameterError(f"tail_range must be a pair (low, high), got {tail_range!r}.")
            low = positive_finite("tail_range low", tail_range[0])
            high = positive_finite("tail_range high", tail_range[1])
            if high <= low:
                raise ParameterError(f"tail_range needs low < high, got {tail_range!r}.")
            if math.log2(high) - math.log2(low) > MAX_TAIL_OCTAVES:
                raise ParameterError(f"tail_range spans more than 2^{MAX_TAIL_OCTAVES:g} (about 10^301); its "
                                     "histogram would need too many bins. Pass a public range from the "
                                     "data's units.")
            grid = (low, high)
        if auto and tail_share == 0.0:
            raise ParameterError("G_k='auto' needs a positive tail_share of ε to estimate it.")
        if tail_share > 0 and not structured:
            raise UncertifiableLossError("a private tail estimate needs per-example Lipschitz constants, "
                                         "which cvxdp has for structured losses only; pass G_k and "
                                         "tail_share=0.")
        boosting_groups = _positive_int_or_none("boosting_groups", boosting_groups)
        localize = _flag("localize", localize)
        # the histogram's options ask for the localization plans only with a public G_k (with G_k="auto"
        # the affine plan runs the histogram too, to estimate it)
        asked = localization_options(profile=prof, lam=lam, lambda_scale=lambda_scale,
                                     lambda_growth=lambda_growth, max_phases=max_phases,
                                     boosting_groups=boosting_groups, localize=localize,
                                     tail_share_given=tail_share_given and tail_share > 0 and not auto,
                                     tail_range_given=tail_range is not None and not auto)
        # with a public G_k the affine plan runs no histogram: no default grid to plan (or to refuse) for it
        affine_plan = not auto and (algorithm == "mean-gradient" or (algorithm == "auto" and affine
                                                                      and not asked))
        if tail_share > 0 and grid is None and not affine_plan:
            grid = (1e-6, 1e10) if auto else (1e-4 * G_k, 1e4 * G_k)
            if not (grid[0] > 0.0 and math.isfinite(grid[1])):
                raise ParameterError(f"G_k = {G_k!r} puts the tail histogram's default range (1e-4·G_k, "
                                     "1e4·G_k) outside the floating-point numbers; rescale the loss, pass a "
                                     "public tail_range in the data's units, or tail_share=0.")
        if algorithm == "mean-gradient":
            if not affine:
                raise ParameterError("algorithm='mean-gradient' needs a loss affine in w (<a(z), w> + b(z)); "
                                     "use 'auto' or one of the localization algorithms for this loss.")
            if asked:
                raise ParameterError(f"algorithm='mean-gradient' does not read {', '.join(asked)} "
                                     "(options of the localization algorithms); drop them or choose "
                                     "another algorithm.")
        inputs = cls(d=int(d), D=float(D), epsilon=eps, moment_k=k, G_k=G_k, G_2=G_2, delta=delta,
                     algorithm=algorithm, profile=prof, localize=localize, tail_share=tail_share,
                     tail_grid=grid, lambda_scale=lambda_scale, lambda_growth=lambda_growth,
                     max_phases=max_phases, lam=lam, boosting_groups=boosting_groups,
                     structured=bool(structured), declared_tail_range=tail_range is not None,
                     tail_share_given=tail_share_given, affine=bool(affine),
                     localization_asked=tuple(asked),
                     box_edge=None if box_edge is None else float(box_edge))
        return inputs if n is None else inputs.with_n(n)

    def with_n(self, n: int) -> PublicInputs:
        """These inputs for a data set of ``n`` examples; refuses an ``n`` too small for the algorithm.

        ``n`` is public (replace-one neighbours share it), so this refusal depends on public
        values only; for Algorithm 1 it checks that the halving schedule has a first phase.
        ``algorithm="auto"`` is resolved here, from ``n``, ``d``, ``ε``, ``G_k``, ``G_2`` and the options
        (:func:`~cvxdp.plan.auto.choose_algorithm`): public too.
        """
        if isinstance(n, bool) or not isinstance(n, int):
            raise ParameterError(f"n must be an integer number of examples, got {type(n).__name__}.")
        if n < max(10, 2 * self.d):
            raise ParameterError(f"n = {n} examples are too few; at least {max(10, 2 * self.d)} needed.")
        inputs = self
        if self.algorithm == "auto" or self.auto_algorithm:
            heavy = heavy_tail(self.G_k, self.G_2, self.moment_k)
            may_clip = heavy and uses_clip_rule(
                self.profile, lam=self.lam, lambda_scale=self.lambda_scale, lambda_growth=self.lambda_growth,
                max_phases=self.max_phases, boosting_groups=self.boosting_groups, localize=self.localize)
            algorithm, clip, reason = choose_algorithm(
                n=int(n), d=self.d, epsilon=self.epsilon, D=self.D, moment_k=self.moment_k, delta=self.delta,
                profile=self.profile, may_clip=may_clip, heavy=heavy,
                public_G_k=not isinstance(self.G_k, str), fixed_lam=self.lam is not None,
                boosting_groups=self.boosting_groups,
                affine=self.affine and not self.localization_asked,
                population_options=any(v is not None for v in (self.lambda_growth, self.max_phases,
                                                               self.boosting_groups)))
            inputs = replace(self, algorithm=algorithm, clip_rule=clip, auto_algorithm=True,
                             auto_reason=reason)
        if inputs.algorithm == "population":  # the planner's group count, from n, d and δ alone
            check_population_schedule(n=n, d=inputs.d, epsilon=inputs.epsilon, D=inputs.D,
                                      moment_k=inputs.moment_k, delta=inputs.delta, profile=inputs.profile,
                                      boosting_groups=inputs.boosting_groups)
        return replace(inputs, n=int(n))


__all__ = ["ALGORITHMS", "PublicInputs"]
