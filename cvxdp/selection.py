"""Private selection among candidate fits: Liu–Talwar's random stopping, pure ε-DP in total.

Which configuration fits best — cvxdp's localization, one-shot clipped output perturbation, a fixed
``C``, or no fit at all (the public prior centre ``w₀``) — depends on the data; choosing by looking at
them is a release.  :func:`private_selection` chooses privately (Liu & Talwar, *Private selection
from private candidates*, STOC 2019, Theorem 3.4 — random stopping):

1. one **trial** ``Q`` picks a candidate uniformly at random (public randomness), fits it with
   ``ε_fit`` through its own release path (:meth:`PrivateProblem.solve
   <cvxdp.problem.PrivateProblem.solve>`, the clipped baseline, or no data for the prior), and
   releases a noisy **score** of the fitted point with ``ε_score`` (below); ``Q`` is
   ``ε_trial = ε_fit + ε_score``-DP by basic composition;
2. after each trial a coin with public probability ``γ`` decides to stop;
3. the output is the trial with the highest noisy score: its point, its candidate and its score.

**Privacy** (the theorem): the whole procedure is ``3 ε_trial``-DP for any ``γ ∈ (0, 1]``, with no
bound on the number of trials — provided only the best trial is revealed.  So
``ε_trial = ⌊ε/3⌋`` (exactly: ``3 ε_trial ≤ ε`` as rationals), the ledger records one entry of
``3 ε_trial`` on every example, and the result holds neither the number of trials nor the other
trials' outputs (the running time does reveal the number of trials: a side channel outside the
model, as for every fit).

**The score** of a point ``w`` is ``−(1/n) Σ_i clip(f(w, z_i) − f(w_ref, z_i), −B, B)`` with
``B = C_s D`` for the public score constant ``C_s`` (default ``G_2``), the domain's diameter ``D``
and a public reference point ``w_ref`` (the prior centre); a difference that is not a number counts
``0``.  Each term lies in ``[−B, B]`` whatever the record (the clip, not the loss, bounds it), so
replacing one record moves the sum by at most ``2B`` and the float mean by at most
``Δ_s = 2B/n (1 + 2⁻⁴⁰) + 4uB`` (the mean's rounding: an exactly rounded sum, then one division);
the score is released with Laplace noise of scale ``Δ_s/ε_score``, clamped to ``[−B, B]`` widened by
the snap grid and snapped (the floating-point defence of
:meth:`~cvxdp.privacy.mechanisms.L2LaplaceMechanism.release`).  For a ``C_s``-Lipschitz loss the
clip never binds, and the score is the empirical risk gained over ``w_ref``.

The price: each candidate is fitted with ``ε_fit ≈ (1 − score_share) ε/3``, about ``1/γ`` trials
are run, and with ``K`` candidates the best one is never drawn with probability
``γ(K − 1)/(1 + γ(K − 1))`` (the default ``γ = 1/(3K)``: ``(K − 1)/(4K − 1)``, 18% for three).
It pays where the candidates differ by more than that loss of budget — a configuration that can be
far off (``G_k="auto"`` on a small sample, a domain whose centre is a poor model) — and is not the
default of any fit (``benchmarks/bench_selection.py`` measures it).
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from cvxdp._validation import finite_array, positive_finite, privacy_epsilon
from cvxdp.error import ParameterError
from cvxdp.model import Model
from cvxdp.numerics import EPS
from cvxdp.plan import clear_plan_caches
from cvxdp.privacy.ledger import PrivacyLedger, budget_remainder, equal_share
from cvxdp.privacy.mechanisms import L2LaplaceMechanism
from cvxdp.privacy.random import NoiseSource, noise_source

MECHANISM_LABEL = "private selection (Liu–Talwar random stopping)"
KINDS = ("fit", "clipped-output-perturbation", "prior")
#: Options a candidate may not set: the selection's own, and those that print per trial (a trial's
#: output other than the chosen one's, and the count of trials, must stay unobserved).
RESERVED = ("epsilon", "random_state", "accountant", "diagnostics", "verbose", "progress", "solver",
            "executor")


@dataclass(frozen=True)
class Candidate:
    """One configuration to select from (public).

    ``kind``:

    * ``"fit"`` — :meth:`PrivateProblem.solve <cvxdp.problem.PrivateProblem.solve>` with ``options``
      (``algorithm``, ``profile``, ``lam``, ``G_k``, ``tail_share``, ...; ``epsilon`` and
      ``random_state`` are the selection's);
    * ``"clipped-output-perturbation"`` — the one-shot clipped baseline with ``options`` ``C`` and
      ``lam``, by default its public rule (:func:`~cvxdp.baselines.tuning.output_perturbation_rule`
      with ``G_2``);
    * ``"prior"`` — no fit: the public point ``options["point"]`` (default: the reference point).
    """

    name: str
    kind: str = "fit"
    options: Mapping = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ParameterError(f"a candidate's kind must be one of {KINDS}, got {self.kind!r}.")
        if not isinstance(self.name, str) or not self.name:
            raise ParameterError("every candidate needs a non-empty name.")
        reserved = set(RESERVED) & set(self.options)
        if reserved:
            raise ParameterError(f"a candidate's options may not set {sorted(reserved)}: the selection "
                                 "decides them (and nothing of a trial but the chosen one may be printed).")
        erm = self.options.get("erm")
        if erm is not None and getattr(getattr(erm, "conic", None), "verbose", False):
            raise ParameterError("a candidate's solver may not be verbose: every trial's log would be "
                                 "printed, the unchosen ones included.")
        allowed = {"prior": {"point"}, "clipped-output-perturbation": {"C", "lam"}}.get(self.kind)
        if allowed is not None and set(self.options) - allowed:
            raise ParameterError(f"a {self.kind!r} candidate takes only {sorted(allowed)}, got "
                                 f"{sorted(set(self.options) - allowed)}.")


@dataclass(frozen=True)
class SelectionPlan:
    """The public constants of a private selection: every ``ε``, ``γ`` and the score's bound and noise."""

    epsilon: float
    trial_epsilon: float
    fit_epsilon: float
    score_epsilon: float
    stop_probability: Fraction
    candidates: tuple[Candidate, ...]
    reference: np.ndarray
    score_bound: float
    score_sensitivity: float
    n: int

    @property
    def expected_trials(self) -> float:
        return float(1 / self.stop_probability)

    def score_mechanism(self) -> L2LaplaceMechanism:
        return L2LaplaceMechanism(self.score_sensitivity, self.score_epsilon, 1)

    def describe(self) -> str:
        names = ", ".join(f"{c.name} ({c.kind})" for c in self.candidates)
        return (f"private selection over {len(self.candidates)} candidates: {names}\n"
                f"  total ε = {self.epsilon:.6g} = 3 × trial ε {self.trial_epsilon:.6g} (Liu–Talwar)\n"
                f"  per trial: fit ε = {self.fit_epsilon:.6g}, score ε = {self.score_epsilon:.6g}\n"
                f"  stop after each trial with probability {self.stop_probability} "
                f"(expected {self.expected_trials:.3g} trials)\n"
                f"  score: clipped loss gain over the reference, bound ±{self.score_bound:.4g}, "
                f"sensitivity {self.score_sensitivity:.4g}, noise scale "
                f"{self.score_mechanism().scale:.4g}")


def selection_plan(model: Model, n: int, *, epsilon: float, candidates: Sequence[Candidate],
                   score_C: float, stop_probability: Fraction | float | None = None,
                   score_share: float = 0.1, reference: np.ndarray | None = None) -> SelectionPlan:
    """The :class:`SelectionPlan` for ``n`` examples — public inputs only, before any data.

    ``ε_trial`` is the largest float with ``3 ε_trial ≤ ε`` exactly; ``ε_score = fl(score_share ·
    ε_trial)`` and ``ε_fit`` the largest float with ``ε_fit + ε_score ≤ ε_trial`` exactly.
    ``stop_probability`` is taken as an exact rational (a float is converted exactly); ``None``:
    ``1/(3K)`` for ``K`` candidates.
    """
    eps = privacy_epsilon(epsilon)
    cands = tuple(candidates)
    if not cands or not all(isinstance(c, Candidate) for c in cands):
        raise ParameterError("private selection needs a non-empty list of cvxdp.selection.Candidate.")
    if len({c.name for c in cands}) != len(cands):
        raise ParameterError("candidates must have distinct names (the name of the one chosen is released).")
    gamma = Fraction(1, 3 * len(cands)) if stop_probability is None else Fraction(stop_probability)
    if not (0 < gamma <= 1):
        raise ParameterError("stop_probability must lie in (0, 1].")
    share = positive_finite("score_share", score_share)
    if not share < 1.0:
        raise ParameterError("score_share is the part of each trial's ε spent on its score: in (0, 1).")
    n = int(n)
    if n < 1:
        raise ParameterError("n must be a positive number of examples.")
    C_s = positive_finite("score_C", score_C)
    W = model.domain
    ref = W.make_feasible(W.interior_point() if reference is None else
                          finite_array("reference point", reference, shape=(model.dim,)))
    trial = equal_share(eps, 3)
    score_eps = trial * share
    fit_eps = budget_remainder(trial, score_eps)
    if not (fit_eps > 0.0 and score_eps > 0.0):
        raise ParameterError("ε is too small to split into a fit and a score for each trial.")
    bound = C_s * model.diameter * (1.0 + 4.0 * EPS)
    # the sum of n clipped terms must stay finite, and the terms normal floats (relative rounding)
    if not (2.0**-900 < bound and math.isfinite(4.0 * n * bound)):
        raise ParameterError("score_C times the domain's diameter is outside the range the score can be "
                             "summed in; choose a score_C nearer the loss's slope.")
    sensitivity = 2.0 * bound / n * (1.0 + 2.0**-40) + 4.0 * EPS * bound
    for cand in cands:  # the public options of every candidate, checked before any data
        if cand.kind == "prior" and "point" in cand.options:
            finite_array(f"prior point of {cand.name!r}", cand.options["point"], shape=(model.dim,))
        if cand.kind == "clipped-output-perturbation":
            for key in ("C", "lam"):
                if key in cand.options:
                    positive_finite(f"{key} of {cand.name!r}", cand.options[key])
    return SelectionPlan(epsilon=eps, trial_epsilon=trial, fit_epsilon=fit_eps, score_epsilon=score_eps,
                         stop_probability=gamma, candidates=cands, reference=ref, score_bound=bound,
                         score_sensitivity=sensitivity, n=n)


def clipped_gain(model: Model, examples, w: np.ndarray, reference: np.ndarray, bound: float,
                 reference_values: np.ndarray | None = None) -> float:
    """``(1/n) Σ clip(f(w, z_i) − f(w_ref, z_i), −B, B)`` (NaN terms count 0): what the score noises.

    ``reference_values``: ``f(w_ref, z_i)`` computed once for every trial (the same numbers either way).
    """
    with np.errstate(all="ignore"):
        ref = model.loss.values(reference, examples) if reference_values is None else reference_values
        diff = model.loss.values(np.asarray(w, float), examples) - ref
    diff = np.clip(np.where(np.isnan(diff), 0.0, diff), -bound, bound)
    return math.fsum(diff.tolist()) / examples.m


@dataclass
class SelectionResult:
    """The chosen trial: its released point, its candidate, its noisy score, and the selection's ledger.

    ``result`` is the chosen candidate's own result object (a
    :class:`~cvxdp.problem.PrivateResult`, a baseline result, or ``None`` for the prior): released in
    that trial, so covered by the guarantee.  The number of trials and the other trials are not kept.
    """

    w: np.ndarray
    candidate: Candidate
    score: float
    ledger: PrivacyLedger
    plan: SelectionPlan
    result: object = None


@contextlib.contextmanager
def _no_logging() -> Iterator[None]:
    """No log record of any library during a trial: like its warnings, a trial's log lines (cvxdp's DEBUG
    diagnostics, a solver's messages) and their count, the number of trials, must stay unobserved
    (found by review).  Process-wide, as the warning filters are, and restored after."""
    before = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(before)


def private_selection(model: Model, data: Mapping, *, epsilon: float, candidates: Sequence[Candidate],
                      moment_k: float = 4.0, G_k: float | str | None = None, G_2: float | None = None,
                      score_C: float | None = None, stop_probability: Fraction | float | None = None,
                      score_share: float = 0.1, reference: np.ndarray | None = None,
                      random_state: object = None) -> SelectionResult:
    """Choose among ``candidates`` privately and return the chosen fit (``ε``-DP in total).

    ``moment_k``, ``G_k``, ``G_2`` are passed to every ``"fit"`` candidate that does not set its own;
    ``score_C`` defaults to ``G_2``, else a numeric ``G_k``.  See the module's docstring for the
    argument; :func:`selection_plan` gives the plan without data.
    """
    from cvxdp.baselines import clipped_output_perturbation
    from cvxdp.baselines.output_perturbation import clipped_plan
    from cvxdp.baselines.tuning import output_perturbation_rule
    from cvxdp.problem import PrivateProblem, warn_if_debug_log

    if score_C is None:
        score_C = G_2 if G_2 is not None else (G_k if isinstance(G_k, int | float) else None)
        if score_C is None:
            raise ParameterError("pass score_C (a public bound on the loss's slope for the score), or a "
                                 "numeric G_2 or G_k.")
    examples = model.bind(data)
    plan = selection_plan(model, examples.m, epsilon=epsilon, candidates=candidates, score_C=score_C,
                          stop_probability=stop_probability, score_share=score_share, reference=reference)
    D, d, n = model.diameter, model.dim, examples.m
    g2 = G_2 if G_2 is not None else (G_k if isinstance(G_k, int | float) else score_C)

    def op_params(cand: Candidate) -> dict:
        """A clipped-OP candidate's public ``C`` and ``λ``: its options, else the public rule's."""
        rule = output_perturbation_rule(n, d, plan.fit_epsilon, D, g2)
        return {"C": cand.options.get("C", rule["C"]), "lam": cand.options.get("lam", rule["lam"])}

    # every candidate's plan (its options, its release grid) and the score's grid are checked on the public
    # inputs before the charge and any noise: a refusal fails here, not in the trial that happens to draw it
    for cand in plan.candidates:
        if cand.kind == "fit":
            PrivateProblem(model).plan(n=n, epsilon=plan.fit_epsilon,
                                       **{"moment_k": moment_k, "G_k": G_k, "G_2": G_2, **cand.options})
        elif cand.kind == "clipped-output-perturbation":
            clipped_plan(model, n, epsilon=plan.fit_epsilon, **op_params(cand))
    source = noise_source(random_state)
    mech = plan.score_mechanism()
    box = (np.array([-plan.score_bound]), np.array([plan.score_bound]))
    mech.check_box(box)
    ledger = PrivacyLedger(examples.m, plan.epsilon)
    ledger.charge(3.0 * plan.trial_epsilon, np.arange(examples.m), mechanism=MECHANISM_LABEL, batch="all",
                  sensitivity=plan.score_sensitivity, noise_scale=mech.scale,
                  note=f"{len(plan.candidates)} candidates, γ = {plan.stop_probability}")
    with np.errstate(all="ignore"):
        reference_values = model.loss.values(plan.reference, examples)

    def trial(fit_source: NoiseSource) -> tuple[np.ndarray, Candidate, object]:
        cand = plan.candidates[source.randbelow(len(plan.candidates))]
        if cand.kind == "prior":
            point = cand.options.get("point", plan.reference)
            point = finite_array("prior point", point, shape=(d,))
            return np.array(model.domain.make_feasible(point), copy=True), cand, None
        if cand.kind == "clipped-output-perturbation":
            res = clipped_output_perturbation(model, data, epsilon=plan.fit_epsilon, random_state=fit_source,
                                              **op_params(cand))
            return res.w, cand, res
        options = {"moment_k": moment_k, "G_k": G_k, "G_2": G_2, **cand.options}
        res = PrivateProblem(model).solve(data, epsilon=plan.fit_epsilon, random_state=fit_source, **options)
        return res.w, cand, res

    best: tuple[float, np.ndarray, Candidate, object] | None = None
    num, den = plan.stop_probability.numerator, plan.stop_probability.denominator
    warn_if_debug_log()
    try:
        while True:
            fit_source, score_source = source.spawn(2)
            # nothing of a trial but the chosen one may be observed (the theorem's premise): its warnings,
            # and their count, which is the number of trials, are kept in; so are float exceptions a
            # user's np.seterr(all="raise") would turn into a one-sided error (found by review)
            with warnings.catch_warnings(), np.errstate(all="ignore"), _no_logging():
                warnings.simplefilter("ignore")
                w, cand, res = trial(fit_source)
                gain = clipped_gain(model, examples, w, plan.reference, plan.score_bound, reference_values)
                score = -float(mech.release(np.array([gain]), score_source, box)[0])
            if best is None or score > best[0]:
                best = (score, w, cand, res)
            if source.bernoulli(num, den):
                break
    except BaseException as exc:
        # a trial that raises (a refusal, an interrupt) must not carry the other trials out in its
        # traceback: this frame held the best trial so far and the last one's un-noised score
        best = w = res = cand = gain = score = None
        raise exc.with_traceback(None) from None
    finally:
        # the planner's caches are keyed on moment bounds: an unchosen trial's private estimate of G_k,
        # and the count of such entries, must not stay in this process (found by review)
        clear_plan_caches()
    ledger.verify()
    score, w, cand, res = best
    return SelectionResult(w=np.asarray(w, float), candidate=cand, score=score, ledger=ledger, plan=plan,
                           result=res)


__all__ = ["KINDS", "MECHANISM_LABEL", "Candidate", "SelectionPlan", "SelectionResult", "clipped_gain",
           "private_selection", "selection_plan"]
