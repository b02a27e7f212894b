"""Algorithm 1 — population localization (after Asi–Liu–Tian 2024 and Feldman–Koren–Talwar 2020).

Reduces stochastic convex optimization to a sequence of regularized ERMs on
*disjoint* batches:

* phases ``t = 1..T`` use ``n_t = ⌊n/2^t⌋`` fresh examples (a public random
  partition; ``T`` as large as the per-call minimum size allows) — rescaled by
  ``1/(1 − 2^{−T})`` when the schedule stops earlier, so no example is wasted
  (:func:`~cvxdp.plan.schedule.spread_over_phases`);
* regularization ``λ_t = 8^{t−1} λ₁`` with
  ``λ₁ = (1/D)[G_k (d/(nε))^{1−1/k} + G_2/√n]`` (times a public ``scale``);
* center ``w₀`` = the previous phase's output (first: the center of ``W``);
* each phase's batch is split into ``J`` groups; Algorithm 3 runs on each and
  the output is a candidate with more than ``J/2`` others within ``2 r_t``
  (majority-vote boosting; ``r_t`` the public final radius), else the one with
  most neighbours.

The schedule, every group's rounds and the ledger's charges come from the
:class:`~cvxdp.plan.planner.ReleasePlan`; this module only runs it.  The groups of a
phase are independent given the phase's centre, so an executor
(:mod:`cvxdp.run.executor`) may run them in parallel, each with its own noise source.

Privacy: every example belongs to one group of one phase, each Algorithm 3 call
is ε-DP for its group, and the later phases only see earlier *outputs* — so
by parallel composition over disjoint batches (which holds adaptively) the
whole run is ε-DP.  The boosting vote is post-processing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cvxdp.erm.solver import ERMSettings
from cvxdp.error import CertificationError, ParameterError
from cvxdp.loss import Examples
from cvxdp.model import Model
from cvxdp.plan.planner import BatchPlan, ReleasePlan
from cvxdp.privacy.random import NoiseSource
from cvxdp.run.executor import Executor, SerialExecutor
from cvxdp.run.recursive import BatchResult, recursive_localization
from cvxdp.run.release import Charge, LocalizationStep


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
class GroupJob:
    """One group of a phase: its rows, its plan, the phase's centre, its charges and its noise source."""

    model: Model
    examples: Examples
    batch: BatchPlan
    w0: np.ndarray
    charges: list[Charge]
    source: NoiseSource
    erm: ERMSettings | None
    passes: Executor | None = None


def run_group(job: GroupJob) -> BatchResult:
    """Algorithm 3 on one group (a module-level function, so a process pool can pickle it)."""
    return recursive_localization(job.model, job.examples, job.batch, w0=job.w0, charges=job.charges,
                                  source=job.source, erm=job.erm, passes=job.passes)


@dataclass
class PopulationResult:
    w: np.ndarray
    steps: list[LocalizationStep]


def population_localization(model: Model, plan: ReleasePlan, *, rows_of, charges: dict, sources: dict,
                            erm: ERMSettings | None = None, executor: Executor | None = None,
                            progress=None) -> PopulationResult:
    """Run the phases of ``plan`` (Algorithm 1; one phase of one batch for Algorithms 2–3).

    ``rows_of(batch)`` gives a batch's examples (the public partition: an
    :class:`~cvxdp.loss.Examples` held here, or :class:`~cvxdp.run.partitions.Partitions` where an
    executor runs them), ``charges`` and ``sources`` its ledger entries and noise source per
    ``(phase, group)``.  Each phase's groups go through
    ``executor``; the next centre is the majority vote of their outputs with the public radius
    ``max_g R⁺`` of the phase (post-processing).
    """
    executor = executor or SerialExecutor()
    # a data-parallel backend runs the oracle passes; the groups (their solves and noise) stay here
    passes = executor if executor.data_parallel else None
    groups = SerialExecutor() if executor.data_parallel else executor
    W = model.domain
    w0 = W.make_feasible(W.interior_point())
    steps: list[LocalizationStep] = []
    for phase in plan.phase_batches():
        jobs = []
        for b in phase:
            jobs.append(GroupJob(model, rows_of(b), b, w0, charges[(b.phase, b.group)],
                                 sources[(b.phase, b.group)], erm, passes))
        candidates = []
        for result in groups.map(run_group, jobs):
            steps.extend(result.steps)
            candidates.append(result.center)
            if progress is not None:
                progress.update(1)
        radius = float(np.max([b.final_radius for b in phase]))  # NaN-propagating: the vote refuses NaN
        w0 = candidates[majority_vote(np.array(candidates), radius)]
    return PopulationResult(w=w0, steps=steps)


__all__ = ["GroupJob", "PopulationResult", "majority_vote", "population_localization", "run_group"]
