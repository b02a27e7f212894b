"""The regularized extension ERM over examples held in partitions: oracle passes reduced from sums.

A :class:`PartitionedERM` is the problem of :class:`~cvxdp.erm.problem.RegularizedERM` — the same
``C``, ``λ``, ``w₀``, ``U`` and the same ``m`` examples — whose examples are split into partitions
by a public rule (contiguous blocks of rows, sizes from ``m`` and the partition count only).  Each
partition is a ``RegularizedERM`` of its own rows, built where it is evaluated (a Dask worker, or
this process): every per-example quantity — the affine reduction of a huge level, the public
scaling of a steep record, the offsets ``κ_i``, the certified brackets and minorants — is a
function of that example and the public inputs only, so it is the same in any partition.

One oracle pass at ``w`` maps :func:`partition_sums` over the partitions (through an
:class:`~cvxdp.run.executor.Executor`) and reduces their :class:`PassSums` here.  Only sums leave a
partition.  The solvers that need nothing else — the bundle method and the cutting-plane method —
run unchanged on it; the joint conic program (one program over every example) does not.

**Rounding, whatever the partitioning.**  A partition's sums come with a certified error bound
(:func:`~cvxdp.numerics.accurate_sum`, about ``ε`` of the value), which travels with them and is
charged at the driver; the driver's ``fsum`` of the partial sums errs by ``ε/2`` of the total, which
the certificate covers with ``4ε`` times the *absolute* sums (``Σ|β_i|``, ``Σ|g_i|`` per coordinate,
``Σ|upper_i|``).  Both bounds hold for every partitioning.

**Sensitivity, whatever the partitioning.**  The released point is certified to ``α`` for the
objective ``F`` of all ``m`` examples; Theorem 2.3's sensitivity is a property of ``F``'s exact
minimizer and ``α``, not of how the sums were formed, so the noise scale of the plan holds for any
partitioning (and any retry of a pass: a pass is a deterministic function of the partition and
``w``, so a re-run gives the same sums).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from cvxdp._validation import finite_array, positive_finite
from cvxdp.erm.problem import Cut, RegularizedERM
from cvxdp.geometry import Domain
from cvxdp.loss import Examples
from cvxdp.model import Model
from cvxdp.numerics import EPS, accurate_sum, rounding_margin


@dataclass(frozen=True)
class PassSums:
    """One partition's share of an oracle pass at ``w``: exactly rounded sums over its examples.

    ``upper`` sums the certified upper bounds of ``f_{C,U}(w, z_i) − κ_i``, ``g`` and ``beta`` the
    per-example minorants' slopes and intercepts, each within its ``*_err`` of the exact sum
    (:func:`~cvxdp.numerics.accurate_sum`); the ``*_abs`` fields sum absolute values (the rounding
    of the reduction at the driver is charged on them).  ``finite`` is False when a sum left the
    float range (the pass then gives no usable cut and an infinite upper bound).
    """

    m: int
    upper: float
    upper_abs: float
    g: np.ndarray
    g_abs: np.ndarray
    beta: float
    beta_abs: float
    finite: bool
    upper_err: float = 0.0
    g_err: np.ndarray | None = None
    beta_err: float = 0.0


def _fsum_columns(a: np.ndarray) -> np.ndarray:
    return np.array([math.fsum(col) for col in a.T])


def partition_sums(part: RegularizedERM, w: np.ndarray, tolerance: float) -> PassSums:
    """One oracle pass of a partition at ``w``: the certified per-example values, reduced to sums."""
    ev = part.extension.evaluate(w, part.examples, tolerance=tolerance, offsets=part.offsets)
    upper, g, beta = (np.asarray(ev.upper, float), np.asarray(ev.subgradient, float),
                      np.asarray(ev.intercept, float))
    d = g.shape[1]
    with np.errstate(invalid="ignore", over="ignore"):
        values = np.column_stack([upper, beta, g])
        sums, errors = accurate_sum(values)
        abs_sums, abs_errors = accurate_sum(np.abs(values))
    # the absolute sums only size the driver's rounding charge: rounded up by their own error
    abs_sums = abs_sums + abs_errors
    failed = PassSums(part.m, math.inf, math.inf, np.zeros(d), np.zeros(d), 0.0, 0.0, False)
    if not (np.all(np.isfinite(sums)) and np.all(np.isfinite(errors)) and np.all(np.isfinite(abs_sums))):
        return failed  # a sum beyond float range (or of infinities): no usable cut
    return PassSums(m=part.m, upper=float(sums[0]), upper_abs=float(abs_sums[0]), g=sums[2:],
                    g_abs=abs_sums[2:], beta=float(sums[1]), beta_abs=float(abs_sums[1]), finite=True,
                    upper_err=float(errors[0]), g_err=errors[2:], beta_err=float(errors[1]))


def contiguous_blocks(m: int, partitions: int) -> list[np.ndarray]:
    """The public partitioning: ``partitions`` contiguous blocks of near-equal size (a function of
    ``m`` and the count only; empty blocks are dropped)."""
    bounds = np.linspace(0, m, max(1, min(partitions, m)) + 1).round().astype(int)
    return [np.arange(a, b) for a, b in itertools.pairwise(bounds) if b > a]


def _build_part(model: Model, examples: Examples, region: Domain, C: float, lam: float,
                w0: np.ndarray) -> RegularizedERM:
    return RegularizedERM(model, examples, region, C, lam, w0)


def _pass(job: tuple) -> PassSums:
    part, w, tolerance = job
    return partition_sums(part, w, tolerance)


class PartitionedERM:
    """``min_{w∈U} (1/m) Σ f_{C,U}(w, z_i) + (λ/2)||w − w₀||²`` with the examples in partitions.

    ``executor`` runs the partitions' passes (:meth:`~cvxdp.run.executor.Executor.map`) and holds
    them between passes (:meth:`~cvxdp.run.executor.Executor.place`).  The public fields are those
    of :class:`~cvxdp.erm.problem.RegularizedERM`; the data never come back to this process.
    """

    def __init__(self, model: Model, examples: Examples, region: Domain, C: float, lam: float,
                 w0: np.ndarray, *, executor, partitions: int) -> None:
        self.model, self.region, self.w_domain = model, region, None
        self.executor = executor
        blocks = contiguous_blocks(examples.m, partitions)
        # each partition's problem is built where it lives: its per-example maps run there
        self.parts = executor.place(_build_part, [(model, examples.subset(idx), region, C, lam, w0)
                                                  for idx in blocks])
        self.C, self.lam = positive_finite("C", C), positive_finite("lambda", lam)
        self.w0 = finite_array("w0", w0, shape=(model.dim,))
        self._m = examples.m

    # the public part of the problem is RegularizedERM's, read from the same fields
    feasible_set = RegularizedERM.feasible_set
    dim = RegularizedERM.dim
    regularizer = RegularizedERM.regularizer
    lipschitz_bound = RegularizedERM.lipschitz_bound

    @property
    def m(self) -> int:
        return self._m

    def upper_and_cut(self, w: np.ndarray, tolerance: float) -> tuple[float, Cut]:
        """One pass over every partition, reduced: the certified upper bound of ``F(w)`` and the
        averaged minorant, with the reduction's rounding charged on the absolute sums."""
        w = np.asarray(w, float)
        sums = list(self.executor.map(_pass, [(part, w, tolerance) for part in self.parts]))
        d, m = self.dim, self.m
        if not all(s.finite for s in sums) or sum(s.m for s in sums) != m:
            return math.inf, Cut(g=np.zeros(d), beta=-math.inf)
        try:
            upper_mean = math.fsum(s.upper for s in sums) / m
            upper_abs = math.fsum(s.upper_abs for s in sums) / m
            g_bar = _fsum_columns(np.stack([s.g for s in sums])) / m
            g_abs = _fsum_columns(np.stack([s.g_abs for s in sums])) / m
            beta_bar = math.fsum(s.beta for s in sums) / m
            beta_abs = math.fsum(s.beta_abs for s in sums) / m
            # the partitions' own summation errors, rounded up (a few terms each)
            upper_err = math.fsum(s.upper_err for s in sums) / m * (1.0 + 4.0 * EPS)
            beta_err = math.fsum(s.beta_err for s in sums) / m * (1.0 + 4.0 * EPS)
            g_err = float(np.linalg.norm(_fsum_columns(np.stack([
                s.g_err if s.g_err is not None else np.zeros(d) for s in sums])))) / m * (1.0 + 4.0 * EPS)
        except (OverflowError, ValueError):
            return math.inf, Cut(g=np.zeros(d), beta=-math.inf)
        reg = self.regularizer(w)
        upper = upper_mean + reg + upper_err + float(rounding_margin(upper_abs, reg))
        reach = self.feasible_set.norm_bound()
        margin = beta_err + g_err * reach + 4.0 * EPS * (beta_abs + float(np.linalg.norm(g_abs)) * reach)
        beta = beta_bar - margin
        if not (math.isfinite(upper) and math.isfinite(beta) and np.all(np.isfinite(g_bar))):
            return (upper if math.isfinite(upper) else math.inf), Cut(g=np.zeros(d), beta=-math.inf)
        return upper, Cut(g=g_bar, beta=beta)


__all__ = ["PartitionedERM", "PassSums", "contiguous_blocks", "partition_sums"]
