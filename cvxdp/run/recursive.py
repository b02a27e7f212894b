"""Algorithm 3 — recursive localization, run on one batch from its :class:`~cvxdp.plan.planner.BatchPlan`.

The plan fixes ``S`` rounds with ``ε_j = ε θ_j`` (tight; ``(ε/2) θ_j`` paper), ``θ_j`` the geometric
allocation of :func:`~cvxdp.plan.schedule.allocation` (the largest share last), ``β_j = β θ_j`` and
the radii.  ``U₀ = W``; round ``j`` runs Algorithm 2 (:func:`~cvxdp.run.release.release_round`) on
``U_j`` and sets ``U_{j+1} = W ∩ B(w_loc,j, R⁺_j)``, shrinking the set, and with it the extension's
bias, roughly as ``R_{j+1} ≈ R_⋆ (R_j/R_⋆)^{1/(k+1)}``.  The output is the last center.

Privacy: every round reads the same batch, so the ``ε_j`` add up (sequential composition) to at
most the batch's budget; every ``U_j`` is built from earlier released centers and public radii.
A one-round plan on ``U = W`` is the plain-extension ablation (``localize=False``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from cvxdp.erm.solver import ERMSettings
from cvxdp.erm.translation import regularized_erm
from cvxdp.geometry import localize
from cvxdp.loss import Examples
from cvxdp.model import Model
from cvxdp.plan.planner import BatchPlan
from cvxdp.privacy.random import NoiseSource
from cvxdp.run.executor import Executor
from cvxdp.run.partitions import Partitions
from cvxdp.run.release import Charge, LocalizationStep, release_round


@dataclass
class BatchResult:
    """The last center of Algorithm 3 on one batch, and its steps."""

    center: np.ndarray
    steps: list[LocalizationStep]


def recursive_localization(model: Model, examples: Examples | Partitions, batch: BatchPlan, *,
                           w0: np.ndarray, charges: list[Charge], source: NoiseSource,
                           erm: ERMSettings | None = None, passes: Executor | None = None) -> BatchResult:
    """Algorithm 3 on ``examples`` (the batch's rows) with the rounds of ``batch``, regularized to ``w0``.

    ``examples`` held in partitions (:class:`~cvxdp.run.partitions.Partitions`, or with ``passes``, a
    data-parallel executor that splits them) run each round's oracle passes where the rows are
    (:class:`~cvxdp.erm.partitioned.PartitionedERM`, solved by the bundle method, which needs only their
    sums); the round's noise is drawn here.
    """
    W = model.domain
    parted = passes is not None or isinstance(examples, Partitions)
    if parted and (erm is None or erm.method in ("auto", "conic")):
        erm = replace(erm or ERMSettings(), method="bundle")  # the joint program needs every example
    region = W
    steps: list[LocalizationStep] = []
    center = W.make_feasible(np.asarray(w0, float))
    for j, (plan, charge) in enumerate(zip(batch.rounds, charges, strict=True)):
        # in coordinates centred near U when U is far from the origin (cvxdp.erm.translation)
        problem = regularized_erm(model, examples, region, plan.C, batch.lam, w0, executor=passes,
                                  partitions=None if passes is None else passes.partitions, alpha=plan.alpha)
        center, cert = release_round(problem, plan, charge=charge, source=source, erm=erm)
        steps.append(LocalizationStep(phase=batch.phase, group=batch.group, round=plan.round, m=plan.m,
                                      radius=plan.radius, lam=batch.lam, epsilon=plan.epsilon,
                                      beta=plan.beta, plan=plan, center=center, certificate=cert))
        if j < len(batch.rounds) - 1:
            region = localize(W, center, plan.radius_plus)
    return BatchResult(center=center, steps=steps)


__all__ = ["BatchResult", "recursive_localization"]
