"""Empirical privacy audits: a statistical lower bound on the ε a mechanism really has.

Pure ε-DP promises ``P(M(D) ∈ S) ≤ e^ε P(M(D') ∈ S)`` for every event ``S`` and
neighbours ``D, D'``.  An audit runs ``M`` many times on each of a pair of
neighbours, picks an event ``S`` (a threshold on a one-dimensional statistic of
the output), and bounds the two probabilities with Clopper–Pearson intervals:

    ε ≥ log( TPR_lo / FPR_hi ),   and   ε ≥ log( (1 − FPR)_lo / (1 − TPR)_hi ),

each interval at level ``(1 − confidence)/2`` so the reported bound holds with
probability ``confidence``.  The statistic and threshold are chosen on a
*selection* half of the runs and the counts come from the other, held-out
half — choosing on the same runs would inflate the bound.

A sound mechanism must give a lower bound at most its claimed ε (up to the
audit's own failure probability); a mechanism whose noise is too small is
caught with a lower bound above its claim.  Audits only *falsify*: passing one
is evidence, not a proof.

Refusals are outputs too.  A cvxdp fit that cannot certify its accuracy raises
:class:`~cvxdp.error.CertificationError` and releases nothing — but *that it
refused* is observable, so the audit records it as the output ``⊥`` (a row of
NaNs) and its events range over ``R^d ∪ {⊥}``: every threshold event is tried
with ``⊥`` inside and outside it, and ``{⊥}`` is an event of its own.  A
mechanism that refuses more often on one neighbour than on the other is
charged for it.

Neighbour constructions (:func:`neighbouring_pair`) stress the heavy-tailed
setting: one example replaced by an extreme outlier (gradient 10³–10⁶ × typical),
by one that pushes the answer onto the domain's boundary, or by one with huge
(finite) features.  The shared examples make the rest of the objective linear
on ``W``, so the regularized minimizers of the two data sets are a full
sensitivity ``2C/(λm)`` apart and the audit has as much power as it can.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import cvxpy as cp
import numpy as np
from scipy import stats

from cvxdp._validation import positive_finite, positive_int, probability
from cvxdp.erm.problem import RegularizedERM
from cvxdp.erm.solver import ERMSettings, solve_certified
from cvxdp.error import CertificationError
from cvxdp.localization import get_profile, initial_lambda
from cvxdp.localization.output_perturbation import release_point
from cvxdp.mechanisms import L2LaplaceMechanism
from cvxdp.model import Model
from cvxdp.random import NoiseSource, SecureRandom, SeededRandom

Mechanism = Callable[[dict, NoiseSource], np.ndarray]


def clopper_pearson(successes: int, trials: int, alpha: float) -> tuple[float, float]:
    """Exact one-sided ``(lower, upper)`` bounds, each failing with probability ``alpha``."""
    k, n = int(successes), int(trials)
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))
    return lo, hi


def epsilon_from_counts(tp: int, fp: int, n1: int, n0: int, confidence: float) -> float:
    """The Clopper–Pearson lower bound on ε from one event's counts on each side."""
    a = (1.0 - confidence) / 2.0
    tpr_lo, _tpr_hi = clopper_pearson(tp, n1, a)
    _fpr_lo, fpr_hi = clopper_pearson(fp, n0, a)
    bounds = [0.0]
    # the event: TPR ≤ e^ε FPR
    if fpr_hi > 0 and tpr_lo > 0:
        bounds.append(math.log(tpr_lo / fpr_hi))
    # its complement, the other way round: 1 − FPR ≤ e^ε (1 − TPR)
    if fpr_hi < 1 and tpr_lo < 1:
        bounds.append(math.log(1.0 - fpr_hi) - math.log(1.0 - tpr_lo))
    return max(bounds)


def _statistics(o0: np.ndarray, o1: np.ndarray, refusals: bool = False
                ) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """Candidate one-dimensional statistics fitted on the selection outputs (refusals excluded).

    Each statistic comes in two variants that send a refusal ``⊥`` to ``+∞`` or
    ``−∞``, so threshold events can hold ``⊥`` or not.
    """
    f0, f1 = o0[np.isfinite(o0).all(axis=1)], o1[np.isfinite(o1).all(axis=1)]
    dim = o0.shape[1]
    c0 = np.median(f0, axis=0) if f0.size else np.zeros(dim)
    c1 = np.median(f1, axis=0) if f1.size else np.zeros(dim)
    v = c1 - c0
    nv = np.linalg.norm(v)
    v = v / nv if nv > 0 else np.eye(dim)[0]
    base = {
        "projection": lambda o: o @ v,
        "distance-difference": lambda o: np.linalg.norm(o - c0, axis=1) - np.linalg.norm(o - c1, axis=1),
    }
    if not refusals:
        return base
    out = {}
    for name, fn in base.items():
        for label, fill in (("refusal high", math.inf), ("refusal low", -math.inf)):
            out[f"{name}, {label}"] = _with_refusals(fn, fill)
    return out


def _with_refusals(fn: Callable[[np.ndarray], np.ndarray], fill: float) -> Callable[[np.ndarray], np.ndarray]:
    def stat(o: np.ndarray) -> np.ndarray:
        refused = ~np.isfinite(o).all(axis=1)
        vals = fn(np.where(refused[:, None], 0.0, o))
        return np.where(refused, fill, vals)

    return stat


def _best_event(s0: np.ndarray, s1: np.ndarray, confidence: float) -> tuple[float, bool, float]:
    """Threshold ``t`` and direction maximizing the lower bound on the selection runs.

    Candidate thresholds are quantiles of the finite values plus the largest one
    and one just below the smallest (so ``{s > max}`` and ``{s ≤ min⁻}`` isolate
    refusals sent to ``±∞``).
    """
    finite = np.concatenate([s0, s1])
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        finite = np.zeros(1)
    cands = np.unique(np.concatenate([np.quantile(finite, np.linspace(0.001, 0.999, 400)),
                                      [finite.max(), np.nextafter(finite.min(), -math.inf)]]))
    best = (-math.inf, cands[0], True)
    n0, n1 = s0.size, s1.size
    s0s, s1s = np.sort(s0), np.sort(s1)
    for t in cands:
        above0 = n0 - np.searchsorted(s0s, t, side="right")
        above1 = n1 - np.searchsorted(s1s, t, side="right")
        for upper, tp, fp in ((True, above1, above0), (False, n1 - above1, n0 - above0)):
            e = epsilon_from_counts(int(tp), int(fp), n1, n0, confidence)
            if e > best[0]:
                best = (e, float(t), upper)
    return best[1], best[2], best[0]


@dataclass
class AuditResult:
    """One audit's verdict.

    Attributes
    ----------
    epsilon_lower_bound:
        With probability ``confidence`` the mechanism's true ε is at least this.
    claimed_epsilon:
        What the mechanism claims.
    """

    mechanism: str
    neighbours: str
    claimed_epsilon: float
    epsilon_lower_bound: float
    confidence: float
    runs: int
    statistic: str
    threshold: float
    true_positive_rate: float
    false_positive_rate: float
    extra: dict = field(default_factory=dict)

    @property
    def violation(self) -> bool:
        """True when the audit proves (at ``confidence``) that the claim is false."""
        return self.epsilon_lower_bound > self.claimed_epsilon

    def summary(self) -> str:
        flag = "VIOLATION" if self.violation else "consistent"
        refusals = self.extra.get("refusals")
        refused = f", refused {refusals[0]}/{refusals[1]}" if refusals and any(refusals) else ""
        return (f"{self.mechanism:<34s} claimed ε = {self.claimed_epsilon:<6.3g} audited ε ≥ "
                f"{self.epsilon_lower_bound:6.3f} ({self.confidence:.0%}, {self.runs} runs/side, "
                f"{self.neighbours}{refused}) {flag}")


def audit(mechanism: Mechanism, data_0: dict, data_1: dict, *, claimed_epsilon: float, runs: int = 2000,
          confidence: float = 0.95, random_state: object = None, name: str = "mechanism",
          neighbours: str = "") -> AuditResult:
    """Audit ``mechanism`` on the neighbours ``data_0, data_1`` with ``runs`` executions per side.

    ``mechanism(data, source)`` must return the released vector, drawing all its
    randomness from ``source``; a :class:`~cvxdp.error.CertificationError` is
    recorded as the refusal ``⊥`` (see the module's notes) and counted per side
    in ``extra["refusals"]``.  Half the runs choose the statistic and event,
    the other half count.
    """
    runs = positive_int("runs", runs)
    if runs < 20:
        raise ValueError("an audit needs at least 20 runs per side")
    confidence = probability("confidence", confidence)
    positive_finite("claimed_epsilon", claimed_epsilon)
    master = SecureRandom() if random_state is None else SeededRandom(random_state)
    out0 = _run_many(mechanism, data_0, master, runs)
    out1 = _run_many(mechanism, data_1, master, runs)
    half = runs // 2
    sel0, ev0 = out0[:half], out0[half:]
    sel1, ev1 = out1[:half], out1[half:]
    any_refusal = bool(np.isnan(out0).any() or np.isnan(out1).any())
    best = None
    for name_stat, fn in _statistics(sel0, sel1, any_refusal).items():
        t, upper, score = _best_event(fn(sel0), fn(sel1), confidence)
        if best is None or score > best[0]:
            best = (score, name_stat, fn, t, upper)
    _, stat_name, fn, t, upper = best
    e0, e1 = fn(ev0), fn(ev1)
    hit0 = (e0 > t) if upper else (e0 <= t)
    hit1 = (e1 > t) if upper else (e1 <= t)
    tp, fp = int(hit1.sum()), int(hit0.sum())
    eps_lo = epsilon_from_counts(tp, fp, e1.size, e0.size, confidence)
    refusals = [int(np.isnan(out).any(axis=1).sum()) for out in (out0, out1)]
    return AuditResult(mechanism=name, neighbours=neighbours, claimed_epsilon=float(claimed_epsilon),
                       epsilon_lower_bound=eps_lo, confidence=confidence, runs=runs,
                       statistic=stat_name, threshold=t, true_positive_rate=tp / e1.size,
                       false_positive_rate=fp / e0.size, extra={"refusals": refusals})


def _run_many(mechanism: Mechanism, data: dict, source: NoiseSource, runs: int) -> np.ndarray:
    """``runs`` outputs as rows; a refusal (:class:`CertificationError`) is a row of NaNs."""
    rows: list[np.ndarray | None] = []
    for _ in range(runs):
        try:
            rows.append(np.atleast_1d(np.asarray(mechanism(data, source), dtype=float)))
        except CertificationError:
            rows.append(None)
    released = [r for r in rows if r is not None]
    if not released:
        raise CertificationError(f"the mechanism refused all {runs} runs; there is nothing to audit.")
    dim = released[0].shape
    return np.stack([np.full(dim, np.nan) if r is None else r for r in rows])


# -- neighbour constructions ---------------------------------------------------

NEIGHBOURS = ("outlier", "boundary", "huge-features")


def neighbouring_pair(kind: str = "outlier", n: int = 40, d: int = 1, magnitude: float = 1e4,
                      lam: float = 0.5, seed: int = 0) -> tuple[dict, dict]:
    """Two absolute-loss (LAD) data sets differing in one example, built for a strong audit.

    The ``n − 1`` shared examples have ``y = 1`` and small features, so their
    residuals stay positive on the unit ball and their losses are *linear*
    there; the regularized objectives of ``D`` and ``D'`` then differ only
    through the last example, a high-leverage point ``x = M e₁`` with
    ``y = +2M`` in ``D`` and ``y = −2M`` in ``D'``: its loss is linear with slope
    ``∓M e₁`` on the ball, and its C-capped gradient flips sign.  The two
    minimizers are a full ``2C/(λm)`` apart (the sensitivity) unless the domain
    clips them.  ``kind``:

    ``"outlier"``
        ``M = magnitude`` (10³–10⁶ × the shared gradients' 0.05–0.3);
    ``"boundary"``
        the shared examples pull the common minimizer onto the unit sphere
        (``Σ x_i = λ m e₁``, which needs the public ``lam``), so ``D``'s answer
        is on the domain's boundary and only ``D'``'s moves;
    ``"huge-features"``
        ``M = 1e8``: finite, far beyond any plausible scale.
    """
    if kind not in NEIGHBOURS:
        raise ValueError(f"kind must be one of {NEIGHBOURS}")
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.05, 0.3, size=(n, d)) * rng.choice([-1.0, 1.0], size=(n, d)) / math.sqrt(d)
    y = np.ones(n)
    if kind == "boundary":
        X[:-1] = 0.0
        X[:-1, 0] = lam * n / (n - 1)
    M = 1e8 if kind == "huge-features" else magnitude
    X[-1] = 0.0
    X[-1, 0] = M
    y0, y1 = y.copy(), y.copy()
    y0[-1], y1[-1] = 2.0 * M, -2.0 * M
    return {"x": X, "y": y0}, {"x": X.copy(), "y": y1}


def output_perturbation_mechanism(model: Model, *, epsilon: float, moment_k: float, G_k: float,
                                  profile: str = "tight", lam: float | None = None, delta: float = 0.1,
                                  noise_factor: float = 1.0, snap: bool = True,
                                  erm: ERMSettings | None = None) -> Mechanism:
    """cvxdp's one-shot extension output perturbation (``algorithm="output-perturbation"``) as a callable.

    Builds exactly the plan that :meth:`PrivateProblem.solve
    <cvxdp.problem.PrivateProblem.solve>` uses for that algorithm with
    ``tail_share=0`` (the public worst-case tail; the default private tail
    histogram is audited through the full pipeline instead) and releases
    through the same :func:`~cvxdp.localization.output_perturbation.release_point`.
    The certified minimizer is a deterministic function of the data, so it is
    computed once per data set and reused across runs — the output distribution
    is unchanged.  ``noise_factor < 1`` builds a deliberately *broken* mechanism
    (noise too small) to check that an audit has the power to catch one.
    """
    prof = get_profile(profile)
    W = model.domain
    cache: dict[int, tuple[np.ndarray, L2LaplaceMechanism]] = {}

    def prepare(data: dict) -> tuple[np.ndarray, L2LaplaceMechanism]:
        key = id(data)
        if key not in cache:
            ex = model.bind(data)
            n, d, D = ex.m, model.dim, model.diameter
            lam_used = lam if lam is not None else initial_lambda(n, d, epsilon, moment_k, G_k, G_k, D)
            eps_round = float(prof.round_epsilons(epsilon, np.ones(1))[0])
            plan = prof.plan(R=D, lam=lam_used, m=n, d=d, eps=eps_round, beta=delta / 2.0, k=moment_k,
                             G_k=G_k)
            w0 = W.make_feasible(W.interior_point())
            problem = RegularizedERM(model, ex, W, plan.C, lam_used, w0)
            w_tilde, _ = solve_certified(problem, plan.alpha, erm)
            scale = plan.noise_scale * noise_factor
            cache[key] = (w_tilde, L2LaplaceMechanism(plan.sensitivity, plan.sensitivity / scale, d))
        return cache[key]

    def mechanism(data: dict, source: NoiseSource) -> np.ndarray:
        w_tilde, mech = prepare(data)
        return release_point(w_tilde, mech, W, source, snap)

    mechanism.plan_for = prepare  # type: ignore[attr-defined]
    return mechanism


def lad_model(d: int = 1, radius: float = 1.0) -> Model:
    """The absolute-loss model on the ball of ``radius`` that :func:`neighbouring_pair` is made for."""
    from cvxdp import losses

    w = cp.Variable(d)
    return Model(losses.absolute(w), [cp.norm(w, 2) <= radius])


__all__ = ["NEIGHBOURS", "AuditResult", "audit", "clopper_pearson", "epsilon_from_counts",
           "lad_model", "neighbouring_pair", "output_perturbation_mechanism"]
