"""The regularized extension ERM over examples held in partitions: oracle passes reduced from sums.

A :class:`PartitionedERM` is the problem of :class:`~cvxdp.erm.problem.RegularizedERM` — the same
``C``, ``λ``, ``w₀``, ``U`` and the same ``m`` examples — whose examples live in partitions
(:class:`~cvxdp.run.partitions.Partitions`: a batch's rows on each Dask worker, or blocks in this
process).  Each partition is a ``RegularizedERM`` of its own rows, built where they live: every
per-example quantity — the translation to a public origin, the affine reduction of a huge level,
the public scaling of a steep record, the offsets ``κ_i``, the closed-form or searched brackets
and minorants — is a function of that example and the public inputs only, so it is the same in any
partition.

One oracle pass at ``w`` maps :meth:`RegularizedERM.pass_sums
<cvxdp.erm.problem.RegularizedERM.pass_sums>` over the partitions and reduces their
:class:`~cvxdp.erm.problem.PassSums` here (:func:`~cvxdp.erm.problem.reduce_pass`).  Only sums leave
a partition — and, for the bundle method's kink rows (:mod:`cvxdp.erm.kinks`), the two pieces of at
most a few thousand rows.  The solvers that need nothing else — the bundle method and the
cutting-plane method — run unchanged on it; the joint conic program (one program over every example)
does not.

**Rounding, whatever the partitioning.**  A partition's sums come with certified error bounds
(:func:`~cvxdp.numerics.accurate_sum`), which travel with them; the driver sums the partial sums the
same way and adds the bounds.  So every reduced sum is certified for every partitioning.

**Sensitivity, whatever the partitioning.**  The released point is certified to ``α`` for the
objective ``F`` of all ``m`` examples; Theorem 2.3's sensitivity is a property of ``F``'s exact
minimizer and ``α``, not of how the sums were formed, so the noise scale of the plan holds for any
partitioning (and any retry of a pass: a pass is a deterministic function of the partition and
``w``, so a re-run gives the same sums).
"""

from __future__ import annotations

import copy
import itertools

import numpy as np

from cvxdp._validation import finite_array, positive_finite
from cvxdp.erm.kinks import KinkRows
from cvxdp.erm.problem import Cut, PassSums, RegularizedERM, reduce_pass
from cvxdp.erm.smoothed_start import SmoothedSums
from cvxdp.geometry import Domain
from cvxdp.model import Model


def contiguous_blocks(m: int, partitions: int) -> list[np.ndarray]:
    """A public partitioning: ``partitions`` contiguous blocks of near-equal size (a function of ``m``
    and the count only; empty blocks are dropped)."""
    bounds = np.linspace(0, m, max(1, min(partitions, m)) + 1).round().astype(int)
    return [np.arange(a, b) for a, b in itertools.pairwise(bounds) if b > a]


def _build_part(part, region: Domain, C: float, lam: float, w0: np.ndarray,
                origin: np.ndarray | None) -> RegularizedERM:
    """A partition's problem, made where its rows are (translated there when the region is far out)."""
    examples = part.examples
    if origin is not None:
        from cvxdp.erm.translation import translate_examples
        from cvxdp.geometry import Ball, Lens

        examples = translate_examples(examples, origin, isinstance(region, Ball | Lens))
    return RegularizedERM(part.model, examples, region, C, lam, w0)


def _pass(part: RegularizedERM, w: np.ndarray, tolerance: float, exclude: np.ndarray | None) -> PassSums:
    return part.pass_sums(w, tolerance, exclude)


def _subsample(part: RegularizedERM, stride: int) -> RegularizedERM:
    return part.subsample(stride)


def _smoothed(part: RegularizedERM, w: np.ndarray, mu: float, stride: int = 1) -> SmoothedSums | None:
    # total on the worker: the start is only a route, and a failed task would be logged there (found by
    # review) where the driver's fallback hides nothing
    try:
        return part.smoothed_sums(w, mu, stride)
    except Exception:
        return None


def _kinks(part: RegularizedERM, w: np.ndarray, radius: float, cap: int) -> KinkRows | None:
    return part.kink_rows(w, radius, cap)


class PartitionedERM:
    """``min_{w∈U} (1/m) Σ f_{C,U}(w, z_i) + (λ/2)||w − w₀||²`` with the examples in partitions.

    ``parts`` (:class:`~cvxdp.run.partitions.Partitions`) are the rows, where they live; each
    partition's problem is made there, in ``v = w − origin`` when an origin is given (the caller's
    :class:`~cvxdp.erm.translation.TranslatedERM` then holds this problem).  The public fields are
    those of :class:`~cvxdp.erm.problem.RegularizedERM`; the data never come to this process.
    """

    def __init__(self, model: Model, parts, region: Domain, C: float, lam: float, w0: np.ndarray, *,
                 origin: np.ndarray | None = None) -> None:
        self.model, self.region, self.w_domain = model, region, None
        self.C, self.lam = positive_finite("C", C), positive_finite("lambda", lam)
        self.w0 = finite_array("w0", w0, shape=(model.dim,))
        self.parts = parts.place(_build_part, region, self.C, self.lam, self.w0, origin, sizes=parts.sizes)
        self._m = parts.n
        self._starts = np.array(parts.starts, dtype=np.int64)

    # the public part of the problem is RegularizedERM's, read from the same fields
    feasible_set = RegularizedERM.feasible_set
    dim = RegularizedERM.dim
    regularizer = RegularizedERM.regularizer
    lipschitz_bound = RegularizedERM.lipschitz_bound

    @property
    def m(self) -> int:
        return self._m

    def _local(self, exclude: np.ndarray | None) -> list:
        """Global row indices split into each partition's own."""
        if exclude is None:
            return [None] * len(self.parts.sizes)
        exclude = np.asarray(exclude, dtype=np.int64)
        ends = self._starts + np.array(self.parts.sizes, dtype=np.int64)
        return [exclude[(exclude >= a) & (exclude < b)] - a for a, b in zip(self._starts, ends, strict=True)]

    def upper_and_cut(self, w: np.ndarray, tolerance: float, exclude: np.ndarray | None = None
                      ) -> tuple[float, Cut]:
        """One pass over every partition, reduced here: the certified upper bound of ``F(w)`` and the
        averaged minorant (leaving the rows ``exclude`` out of it, as
        :meth:`RegularizedERM.upper_and_cut <cvxdp.erm.problem.RegularizedERM.upper_and_cut>`)."""
        w = np.asarray(w, float)
        sums = self.parts.map_each(_pass, [(w, tolerance, local) for local in self._local(exclude)])
        return reduce_pass(self, sums, w)

    def pass_with_rows(self, w: np.ndarray, tolerance: float, rows: np.ndarray
                       ) -> tuple[float, Cut, np.ndarray, np.ndarray]:
        """:meth:`upper_and_cut` with ``rows`` (ascending) left out of the cut, and their own minorants."""
        w = np.asarray(w, float)
        sums = self.parts.map_each(_pass, [(w, tolerance, local) for local in self._local(rows)])
        upper, cut = reduce_pass(self, sums, w)
        d = self.dim
        g = np.concatenate([s.rows_g if s.rows_g is not None else np.zeros((0, d)) for s in sums])
        beta = np.concatenate([s.rows_beta if s.rows_beta is not None else np.zeros(0) for s in sums])
        return upper, cut, g, beta

    def subsample(self, stride: int) -> PartitionedERM:
        """The same problem on every ``stride``-th row of each partition, made where the rows are (the
        bundle method's starting point only: :meth:`RegularizedERM.subsample
        <cvxdp.erm.problem.RegularizedERM.subsample>`)."""
        sizes = [len(range(0, size, int(stride))) for size in self.parts.sizes]
        sub = copy.copy(self)  # the public fields shared; only the rows change
        sub.parts = self.parts.place(_subsample, int(stride), sizes=sizes)
        sub._m = sum(sizes)
        sub._starts = np.array(sub.parts.starts, dtype=np.int64)
        return sub

    def smoothed_sums(self, w: np.ndarray, mu: float, stride: int = 1) -> SmoothedSums | None:
        """The smoothed objective's sums of every partition (over every ``stride``-th of its rows), added
        here (the bundle method's start: :mod:`cvxdp.erm.smoothed_start`); ``None`` if the smoothing does
        not apply."""
        parts = self.parts.map(_smoothed, np.asarray(w, float), float(mu), int(stride))
        if not parts or any(p is None for p in parts):
            return None
        return SmoothedSums.total(parts)

    def kink_rows(self, w: np.ndarray, radius: float, cap: int) -> KinkRows | None:
        """The kink rows of every partition (:meth:`RegularizedERM.kink_rows
        <cvxdp.erm.problem.RegularizedERM.kink_rows>`), with their indices in this problem's rows."""
        found = self.parts.map(_kinks, np.asarray(w, float), float(radius), int(cap))
        if any(f is None for f in found):
            return None
        merged = KinkRows.concatenate([f.shifted(int(s)) for f, s in zip(found, self._starts, strict=True)],
                                      self.dim)
        if merged.truncated or merged.count > cap:
            merged.truncated = True
        return merged


__all__ = ["PartitionedERM", "contiguous_blocks"]
