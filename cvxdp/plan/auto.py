"""The default ``algorithm="auto"``: a public choice of plan, from the loss's form, ``n ε / d``, ``G₂ / G_k``.

First, a loss affine in ``w`` (read off its expression) runs the affine plan,
:mod:`cvxdp.plan.mean_gradient` — one noisy clipped mean of the gradients and its linear minimizer over
``W``, its ``G_k`` public or estimated by the private tail histogram (``G_k="auto"``) — unless an option
only the localization algorithms read is given (:func:`localization_options`).
Every other loss chooses between two plans:

* **Algorithm 1** (``"population"``) with the tight profile's adaptive constants — each round's
  ``C`` minimizes a certified radius, λ and the phases minimize a public excess-risk proxy, and each
  phase is regularized toward the previous phase's release, so later phases correct earlier noise.
  Its searches follow worst-case bounds under the ``k``-th moment: on a heavy tail
  (``G_k ≫ G₂``) they pick a ``C`` far above the bulk of the examples (the bias radius
  ``sqrt(R T(C)/λ)`` assumes every clipped example pulls the minimizer the same way) and pay for it
  in noise until ``n ε / d`` is large.
* **Algorithm 3 with the clip rule** (``"recursive"``, :func:`clip_rule`) — Algorithm 3 on all the
  data, every round with ``C = G₂`` and ``λ = 4 C sqrt(d/(n ε_fit))/D``, the public rule of the
  clipped-output-perturbation baseline (for one release it minimizes ``λD²/8 + 2C²d/(λnε)``,
  regularization bias plus the noise's expected cost; on the benchmark's instances the radius
  recursion plans one round) — below ``n ε_fit / d =`` :data:`CLIP_FULL_FROM` at the lower level
  :func:`clip_level`, which grows with ``n ε / d`` as the worst-case bound's minimizer does.

``"auto"`` runs the clip rule when the user gave a public ``G_2`` with a public ``G_k``, the tail is
heavy (``G₂ / G_k ≤`` :func:`clip_tail_ratio`: 0.85 at ``k = 4``, wider below), ``n ε / d <``
:data:`POPULATION_FROM` and no option fixes the constants (:func:`uses_clip_rule`), and Algorithm 1
otherwise (without a public ``G₂`` there is no clip level to trust: ``G_2`` defaults to ``G_k``, and
``G_k="auto"`` estimates both from the histogram Algorithm 1 uses anyway) — or Algorithm 3 when a fixed
``lam`` asks for a single ERM (with the profile's own ``C``), or when ``n`` is too small for Algorithm
1's phases (with the clip rule where it applies, else the profile's constants), unless an option only
Algorithm 1 reads (``lambda_growth``, ``max_phases``, ``boosting_groups``) asks for it. The clip rule
then spends no default share of ε on the tail histogram
(:attr:`~cvxdp.plan.inputs.PublicInputs.histogram_share`); an explicit ``tail_share`` or ``tail_range``
keeps it, and ``C`` is lowered to its estimate ``Ĝ₂`` when that is smaller.

Both switches were measured, not derived (``benchmarks/bench_utility.py``, ``d = 10``, ``k = 4``, 5–15
seeds): on the heavy-tailed LAD instances (``G₂/G_k`` = 0.41 high-leverage, 0.73 Student-t, 0.5–0.83 on
the lower-bound family) the clip rule had the lower median excess risk at ``n ε / d ≤ 10³`` and, since
the tail histogram values its bins at their lower edges
(:meth:`~cvxdp.privacy.tail.TailProfile.values`), Algorithm 1 at ``n ε / d ≥ 3·10³`` — at ``n = 3·10⁴``,
ε = 1: high-leverage 0.015 against 0.016 (0.0055 once Algorithm 1's growth switch moved to
``C ≥ 2.5 G₂``, :func:`~cvxdp.plan.schedule.choose_schedule`), Student-t 0.0028 against 0.0032, the
lower-bound instance 0.027/0.0086/0.0041 against 0.036/0.017/0.0086 at ``k`` = 2.5/4/8, Student-t
``ν = 9`` at ``k = 8`` 0.0018 against 0.0024, and high-leverage at ``n = 10⁵``, ε = 0.3, 0.014 against
0.017; the one loss, Student-t ``ν = 3.5`` at ``k = 2.5``, 0.0049 against 0.0041 (clipped output
perturbation's rule: 0.0052), became a win when the growth switch moved to 2.5 G₂ (0.0025). At
``n ε / d = 10³`` the high-leverage tail still wants the clip rule (0.054 against 0.018; 0.024 with the
growth switch at 2.5 G₂), so the switch sits between, at 2·10³, on neither measured size; on the real
data sets (``G₂/G_k`` 0.85–0.995) Algorithm 1 was far better at every size tried (diamonds' LAD at
``n = 10³``, ``ε = 1``: 0.011 against 0.17 — its phases re-centre on their predecessors, while the clip
rule's single batch is pulled toward the domain's centre). Other losses and laws may cross elsewhere:
pass ``algorithm=`` to choose.

What the inputs ``"auto"`` reads cannot tell apart: a smaller λ than the clip rule's helps the affine
lower-bound family a great deal and hurts the LAD instances, at the same ``n ε / d`` and nearly the same
``G₂/G_k``. Measured with the clip rule's λ scaled by ½ and by ¼, ``C = G₂`` kept (5 seeds, ε = 1,
median excess risk, ``n`` = 10³, 3·10³, 10⁴): the lower-bound family at ``k = 4`` 0.042/0.057/0.033 →
0.0027/0.0039/0.021 (½) and 0.015/0.0021/0.00048 (¼; at ``n = 10⁴`` its ``G₂/G_k`` is 0.36), but the
high-leverage tail (0.41) 0.075/0.031/0.018 → 0.11/0.061/0.034 (½) and 0.35/0.16/0.073 (¼), and
Student-t 0.079/0.025/0.0094 → 0.39/0.15/0.053 (¼). Larger λ than the rule's was not measured. At an
interior point symmetric output noise costs nothing to first order in expectation; the second order is
the population risk's curvature times the noise's square, which grows as 1/λ². An affine loss has no
curvature (only the domain's edge charges the noise), so a small λ pays; the LAD instances' risks are
curved, so it does not. ``n``, ``d``, ε, ``G_k`` and ``G₂`` do not say which; the loss's form does (an
affine loss is public), so an affine loss now runs its own plan with no λ at all
(:mod:`cvxdp.plan.mean_gradient`): on the lower-bound family it has the rate's slope (−0.60, −0.72,
−0.87 for ``k`` = 2.5, 4, 8) and is 4–48× better than the localization default was there; the noisy
clipped mean at ``C = G₂`` is 2.5–7.4× better still on that family (its gradients are collinear, so
clipping costs the mean no direction) and 12–14× worse from ``n = 10⁴`` on its crossed variant, where
clipping turns the mean (``benchmarks/results/utility.md``). Choosing privately
between the rule's λ and a quarter of it (:func:`cvxdp.private_selection`, each fit at about ε/3.3) lost
on the high-leverage tail (0.29/0.12/0.058) and was mixed on the lower-bound family at ``k = 2.5``
(0.10/0.024/0.050 against the default's 0.056/0.089/0.062).

Privacy: the choice reads ``n`` (public under replace-one neighbouring), ``d``, ``ε``, ``G_k``,
``G_2`` and the options — never the data — so which plan runs is itself public; ``Ĝ₂`` is
post-processing of the charged tail release.  Both plans release through the same certified path
with their own sensitivity; nothing here changes a noise scale given ``C`` and ``λ``.
"""

from __future__ import annotations

import math

from cvxdp.error import ParameterError
from cvxdp.plan.profiles import Profile, TightProfile
from cvxdp.plan.schedule import phase_schedule

#: ``algorithm="auto"`` runs Algorithm 1 from this ``n ε / d`` on; below it, on a heavy tail, Algorithm 3
#: with :func:`clip_rule`.
POPULATION_FROM = 2000.0
#: The heavy-tail condition of the clip rule at ``k = 4``: a public ``G₂ / G_k`` at most this (at other
#: orders :func:`clip_tail_ratio`).
CLIP_TAIL_RATIO = 0.85
#: :func:`clip_level` clips at ``G₂`` from this ``n ε / d`` on, lower below it.
CLIP_FULL_FROM = 1000.0


def clip_level(n: int, d: int, epsilon: float, k: float, G_2: float) -> float:
    """The clip rule's ``C``: ``G₂`` from ``n ε / d ≥`` :data:`CLIP_FULL_FROM` on, and
    ``G₂ (n ε / (d · CLIP_FULL_FROM))^{1/(2k)}`` below.

    The exponent is the worst-case bound's.  One clipped release with :func:`clip_rule`'s ``λ`` pays
    ``C D sqrt(d/(nε))`` in regularization and noise (the ``λ``-minimized sum below) plus the clipping
    bias ``D E(||g|| − C)₊``, which a ``k``-th moment ``G_k`` bounds by ``D c_k G_k^k / C^{k−1}`` with
    ``c_k = (k−1)^{k−1}/k^k`` (the largest ``(x − C)₊ / x^k``, at ``x = kC/(k−1)``).  The sum is least at
    ``C* = G_k ((k−1) c_k)^{1/k} (nε/d)^{1/(2k)}``: as ``n ε / d`` grows the noise falls and the clip
    level must rise to keep the bias below it, by the power ``1/(2k)``.  The bound's *level* is far too
    high — it assumes every clipped example pulls the minimizer the same way (``C*`` is 3.3 ``G₂`` on
    the high-leverage instance at ``n ε / d = 100``), while the examples clipped on a LAD loss pull
    every way and largely cancel — so the rule keeps the bound's growth and takes its level from
    measurement: ``G₂`` at :data:`CLIP_FULL_FROM`, where the benchmark's instances stop gaining from a
    lower ``C``.

    Measured, not derived (``d = 10``, ε = 1 unless stated, 15 seeds — the benchmark's 0–4 and 10
    held out —, median excess risk, the rule at ``C = G₂`` → this level): high-leverage LAD at
    ``n`` = 10³ and 3·10³ 0.070 → 0.053 and 0.026 → 0.023; Student-t LAD ν = 5 0.073 → 0.068 and
    0.028 → 0.025; ν = 3.5 at ``k = 2.5``, ``n = 10³``, 0.081 → 0.077; ν = 9 at ``k = 8`` 0.054 → 0.054;
    the one loss the high-leverage instance at ``n = 3·10⁴``, ε = 0.1 (``n ε / d = 300``), 0.026 →
    0.027 (from seeds 0–4; the held-out seeds alone 0.023 → 0.019).  The held-out seeds agree elsewhere
    too (high-leverage at 10³: 0.062 → 0.048).  Unchanged from ``n ε / d = 1000`` on (the level is
    ``G₂`` there).  Anchored at :data:`POPULATION_FROM` (2000) instead, the level lost 6–8% on the
    high-leverage instance at ``n = 10⁴`` and at ε = 0.1 and gained up to 6% elsewhere — within the
    seeds' spread; 1000 keeps ``C = G₂`` where that was measured best (``n = 10⁴``).
    The exponent ``1/(2k − 1)`` (the noise costed at ``G₂``, not ``C``) gave figures within 4%.  A
    public function of ``n, d, ε, k, G₂``.
    """
    ratio = n * epsilon / (d * CLIP_FULL_FROM)
    if ratio >= 1.0:
        return float(G_2)
    return float(G_2) * ratio ** (1.0 / (2.0 * k))


def clip_rule(n: int, d: int, epsilon: float, D: float, G_2: float, k: float) -> tuple[float, float]:
    """The clip rule: ``C`` = :func:`clip_level` (``G₂`` from ``n ε / d ≥`` :data:`CLIP_FULL_FROM`) and
    ``λ = 4 C sqrt(d/(nε))/D``.

    ``λ`` minimizes ``λD²/8 + 2C²d/(λnε)`` — the regularization's bias on a domain of diameter ``D``
    plus ``C`` times the expected norm of the output noise of scale ``2C/(λnε)`` in ``d``
    dimensions —, whose least value is ``C D sqrt(d/(nε))``.  From ``n ε / d ≥ CLIP_FULL_FROM`` on it is
    the clipped-output-perturbation baseline's public rule (``C = G₂``); below, the same ``λ`` at the
    lower ``C``, so the noise scale ``2C/(λnε) = D / (2 sqrt(d n ε))`` does not depend on ``C``.  A function
    of public values only.
    """
    C = clip_level(n, d, epsilon, k, G_2)
    return C, 4.0 * C * math.sqrt(d / (n * epsilon)) / D


def uses_clip_rule(profile: Profile, *, lam: float | None, lambda_scale: float | None,
                   lambda_growth: float | None, max_phases: int | None, boosting_groups: int | None,
                   localize: bool) -> bool:
    """Whether ``"auto"`` may pick the clip-rule plan: only when no option fixes a constant it sets.

    A fixed ``λ``, a schedule option of Algorithm 1, ``localize=False``, a fixed ``clip``, the paper
    profile or any profile other than the plain :class:`TightProfile` (a subclass's own rounds must
    run as written) each ask for something else.
    """
    fixed = (lam, lambda_scale, lambda_growth, max_phases, boosting_groups)
    return (type(profile) is TightProfile and profile.clip is None and localize
            and all(v is None for v in fixed))


def localization_options(*, profile: Profile, lam: float | None, lambda_scale: float | None,
                         lambda_growth: float | None, max_phases: int | None, boosting_groups: int | None,
                         localize: bool, tail_share_given: bool, tail_range_given: bool) -> list[str]:
    """The options given that only the localization algorithms read (names, for a message): the affine
    plan (:mod:`cvxdp.plan.mean_gradient`) runs under ``"auto"`` only when this is empty.

    A profile other than the plain :class:`TightProfile`, a fixed ``clip``, ``localize=False``, any of the
    λ and schedule options, and — with a public ``G_k``, where the affine plan spends no budget on the tail
    histogram — a positive ``tail_share`` or a ``tail_range`` (``tail_share_given``, ``tail_range_given``)
    each ask for the paper's algorithms.
    """
    named = {"lam": lam, "lambda_scale": lambda_scale, "lambda_growth": lambda_growth,
             "max_phases": max_phases, "boosting_groups": boosting_groups}
    asked = [name for name, value in named.items() if value is not None]
    if not (type(profile) is TightProfile and profile.clip is None):
        asked.append("profile")
    if not localize:
        asked.append("localize")
    if tail_share_given:
        asked.append("tail_share")
    if tail_range_given:
        asked.append("tail_range")
    return asked


def clip_tail_ratio(k: float) -> float:
    """The largest public ``G₂ / G_k`` that declares a heavy tail at the moment order ``k``:
    ``max(0.85, 0.85^{2 − 4/k})`` for ``k > 2`` (:data:`CLIP_TAIL_RATIO` = 0.85 at ``k = 4``), none at
    ``k = 2``.

    Two moment bounds say how heavy a tail is only relative to their orders.  The law with two atoms,
    0 and ``a`` with probability ``p`` — the extremal law of the moment bounds the planner uses — has
    ``G₂/G_k = p^{1/2 − 1/k}``: the same ratio is a rarer, larger tail the closer ``k`` is to 2.  Read as
    that tail mass, ``p = (G₂/G_k)^{1/(1/2 − 1/k)}``, the cut ``G₂/G_k ≤ 0.85`` at ``k = 4`` is
    ``p ≤ 0.85⁴``, and the same mass at ``k`` is the ratio ``0.85^{2 − 4/k}`` (0.937 at ``k = 2.5``,
    0.897 at ``k = 3``).  Below ``k = 4`` the rule takes that wider cut; from ``k = 4`` on it keeps 0.85.

    Measured, not derived (``d = 10``, ε = 1, 5 seeds, median excess risk; public ``G_k``, ``G₂`` of
    the law or, on real data, of the training rows): on Student-t LAD below ``k = 4`` the clip rule was
    1.3–3× better than Algorithm 1 at every ``n`` from 10³ to 3·10⁴ where the wider cut moves the
    choice (``ν = 3.5, k = 2.5``, ratio 0.877: 0.079 against 0.17 at 10³, 0.0041 against 0.0068 at
    3·10⁴; ``ν = 5, k = 3``, 0.877: 0.079 against 0.10, 0.0032 against 0.0056), and the real data sets
    keep Algorithm 1 at ``k`` = 2.5 and 3 (their ratios 0.94–0.999).  Above ``k = 4`` the two-atom cut
    would be narrower (0.805 at ``k = 6``, 0.784 at ``k = 8``) and its effect mixed: it would move
    randhie at ``k = 6`` (ratio 0.847) to Algorithm 1, 2.3× better there, but also Student-t ``ν = 12``
    at ``k = 6`` and ``ν = 20`` at ``k = 8``, about 2× worse — so 0.85 stands there.  At ``k = 2``
    both bounds are on the same moment and say nothing about a tail.
    """
    if not k > 2.0:
        return 0.0
    return max(CLIP_TAIL_RATIO, CLIP_TAIL_RATIO ** (2.0 - 4.0 / k))


def heavy_tail(G_k: float | str, G_2: float | None, k: float) -> bool:
    """Whether public moment bounds declare a heavy tail: numeric ``G_k`` and ``G_2`` with
    ``G₂ / G_k ≤`` :func:`clip_tail_ratio` of ``k`` (``False`` without a public ``G_2``)."""
    if isinstance(G_k, str) or G_2 is None:
        return False
    return G_2 <= clip_tail_ratio(k) * G_k


def check_population_schedule(*, n: int, d: int, epsilon: float, D: float, moment_k: float, delta: float,
                              profile: Profile, boosting_groups: int | None) -> None:
    """Refuse (:class:`~cvxdp.error.ParameterError`) an ``n`` too small for Algorithm 1's halving
    schedule with the profile's (or the given) number of groups — from ``n, d, ε, δ`` alone."""
    groups = boosting_groups
    if groups is None:
        first = phase_schedule(n, d, epsilon, moment_k, 1.0, 1.0, D, 1)
        groups = profile.boosting_groups(first.phases, delta)
    phase_schedule(n, d, epsilon, moment_k, 1.0, 1.0, D, groups)


def _ratio_text(ratio: float) -> str:
    """``n ε / d`` to 6 digits, or more where 6 would round it onto the switch."""
    shown = f"{ratio:.6g}"
    if (float(shown) >= POPULATION_FROM) != (ratio >= POPULATION_FROM):
        shown = f"{ratio:.15g}"
    return shown


def choose_algorithm(*, n: int, d: int, epsilon: float, D: float, moment_k: float, delta: float,
                     profile: Profile, may_clip: bool, fixed_lam: bool = False,
                     boosting_groups: int | None = None, population_options: bool = False,
                     heavy: bool | None = None, public_G_k: bool = True,
                     affine: bool = False) -> tuple[str, bool, str]:
    """``(algorithm, clip_rule, reason)``: the plan ``"auto"`` runs for these public inputs, and why
    (the text :meth:`~cvxdp.plan.planner.ReleasePlan.describe` prints; public inputs only).

    * ``("mean-gradient", False)`` — the affine plan, :mod:`cvxdp.plan.mean_gradient` — when ``affine``
      (the loss is affine in ``w`` and no option of :func:`localization_options` was given);
    * ``("population", False)`` when ``population_options`` (an option only Algorithm 1 reads was
      given: it is asked for, and refused by :meth:`~cvxdp.plan.inputs.PublicInputs.with_n` if ``n``
      is too small for it);
    * ``("recursive", False)`` when ``fixed_lam`` (a fixed ``λ`` is a single ERM's: Algorithm 1 would
      not read it);
    * ``("recursive", True)`` — Algorithm 3 with :func:`clip_rule` — when ``may_clip`` (a public heavy
      tail, :func:`heavy_tail`, and no option fixing the constants, :func:`uses_clip_rule`) and
      ``n ε / d <`` :data:`POPULATION_FROM`;
    * ``("population", False)`` — Algorithm 1 — otherwise, when its halving schedule has a first phase
      for ``n`` (:func:`check_population_schedule`); if it has none, Algorithm 3 (with the clip rule
      when ``may_clip``).

    ``heavy`` (default: ``may_clip``) says whether the moment bounds declared a heavy tail, and
    ``public_G_k`` whether ``G_k`` was given as a number (not ``"auto"``); they only word the reason.
    """
    if affine:
        return "mean-gradient", False, ("the loss is affine in w: its risk is <E a(z), w> + const, so one "
                                        "noisy clipped mean of the gradients decides the model")
    heavy = may_clip if heavy is None else heavy
    ratio = n * epsilon / d
    shown = _ratio_text(ratio)
    if not heavy and not public_G_k:
        population_reason = "G_k is estimated (G_k='auto'), not public: no heavy tail declared to clip at"
    elif not heavy and not moment_k > 2.0:
        population_reason = "at k = 2 the public G_2 and G_k bound one moment: no heavy tail to clip at"
    elif not heavy:
        population_reason = f"no public G_2 ≤ {clip_tail_ratio(moment_k):.4g}·G_k (a heavy tail) to clip at"
    elif ratio >= POPULATION_FROM:
        population_reason = f"n·ε/d = {shown} ≥ {POPULATION_FROM:g}"
    else:
        population_reason = "an option fixes the adaptive plan's constants"
    if population_options:
        return "population", False, population_reason
    if fixed_lam:
        return "recursive", False, "a fixed lam is a single ERM's"
    if may_clip and ratio < POPULATION_FROM:
        return "recursive", True, (f"G_2/G_k ≤ {clip_tail_ratio(moment_k):.4g} and n·ε/d = {shown} < "
                                   f"{POPULATION_FROM:g}")
    try:
        check_population_schedule(n=n, d=d, epsilon=epsilon, D=D, moment_k=moment_k, delta=delta,
                                  profile=profile, boosting_groups=boosting_groups)
    except ParameterError:
        return "recursive", may_clip, f"n = {n} is too small for Algorithm 1's phases"
    return "population", False, population_reason


__all__ = ["CLIP_FULL_FROM", "CLIP_TAIL_RATIO", "POPULATION_FROM", "check_population_schedule",
           "choose_algorithm", "clip_level", "clip_rule", "clip_tail_ratio", "heavy_tail",
           "localization_options", "uses_clip_rule"]
