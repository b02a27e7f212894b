"""The data layer of the affine plan: clipped gradients → exact mean → one release → ``argmin <m̃, w>``.

:func:`release_mean_gradient` binds the data of an affine-loss fit to noise
(:mod:`cvxdp.plan.mean_gradient` states the plan, its utility bound and its privacy argument):

1. the ledger is charged the plan's ``ε`` on every example (refused, exactly, if it would overspend);
2. each example's gradient is its affine coefficient vector (:func:`affine_gradients`, recovered per
   example), clipped to the plan's ``C`` (:func:`~cvxdp.privacy.clipped_mean.clip_rows`);
3. the columns are summed exactly — where the rows live for a data-parallel fit
   (:func:`partition_clipped_sums`; only the integer sums travel) — and divided by ``n`` once;
4. the mean is released through the plan's mechanism, snapped inside the public box ``[−C, C]^d``;
5. the output is :func:`~cvxdp.geometry.linear.linear_minimizer` of the release over ``W``.

Only the released mean and its linear minimizer leave this module.
"""

from __future__ import annotations

import numpy as np

from cvxdp.error import PrivacyBudgetError
from cvxdp.geometry.linear import linear_minimizer
from cvxdp.loss import Examples
from cvxdp.model import Model
from cvxdp.plan.mean_gradient import MECHANISM_LABEL, MeanGradientPlan
from cvxdp.privacy.clipped_mean import clip_rows, exact_column_sums, rounded_mean
from cvxdp.privacy.ledger import PrivacyLedger
from cvxdp.privacy.random import NoiseSource
from cvxdp.run.partitions import Partition, Partitions
from cvxdp.structure import is_affine


def affine_gradients(examples: Examples) -> np.ndarray:
    """``(m, d)``: each example's gradient ``a_i`` of an affine loss ``<a_i, w> + b_i``.

    Read off the loss's one piece (:meth:`Examples.pieces <cvxdp.loss.Examples.pieces>`), whose
    coefficients are recovered example by example — each row depends on its own example only, to the
    last bit.
    """
    if not is_affine(examples.loss.structure):
        raise TypeError("affine_gradients needs a loss that is affine in w (one linear piece)")
    A, _ = examples.pieces()
    return A[:, 0, :]


def _example_sums(examples: Examples, C: float) -> list[int]:
    """The exact column sums of the examples' gradients clipped to ``C``."""
    return exact_column_sums(clip_rows(affine_gradients(examples), C))


def partition_clipped_sums(part: Partition, C: float) -> list[int]:
    """A partition's exact column sums of its clipped gradients (runs where the partition lives)."""
    return _example_sums(part.examples, C)


def clipped_gradient_sums(examples: Examples | Partitions, C: float) -> tuple[list[int], int]:
    """The exact column sums of every example's clipped gradient (``2^SCALE_BITS`` times the sum, as
    integers) and ``n``: the same integers however the rows are partitioned."""
    if isinstance(examples, Partitions):
        parts = examples.map(partition_clipped_sums, C)
        return [sum(column) for column in zip(*parts, strict=True)], examples.n
    return _example_sums(examples, C), examples.m


def release_mean_gradient(model: Model, examples: Examples | Partitions, plan: MeanGradientPlan, *,
                          ledger: PrivacyLedger, source: NoiseSource) -> tuple[np.ndarray, np.ndarray]:
    """Charge, clip, average, release, minimize: returns ``(ŵ, m̃)``, both public (ε-DP).

    The charge comes first, so an overspending plan is refused before the data are read; the
    mechanism refuses a non-finite mean or noise (a clipped mean is finite by construction).
    """
    n = examples.n if isinstance(examples, Partitions) else examples.m
    if plan.n != n or plan.dim != model.dim:
        raise PrivacyBudgetError("the affine plan was made for another number of examples or dimension; "
                                 "nothing was released.")
    mech = plan.mechanism()
    ledger.charge(plan.epsilon, np.arange(n), mechanism=MECHANISM_LABEL, batch="all",
                  sensitivity=plan.sensitivity, noise_scale=plan.noise_scale,
                  note=f"C={plan.C:.3g}")
    sums, m = clipped_gradient_sums(examples, plan.C)
    mean = rounded_mean(sums, m)
    box = (np.full(plan.dim, -plan.box), np.full(plan.dim, plan.box))
    released = mech.release(mean, source, box)
    del mean, sums
    return linear_minimizer(model.domain, released), released


__all__ = ["affine_gradients", "clipped_gradient_sums", "partition_clipped_sums", "release_mean_gradient"]
