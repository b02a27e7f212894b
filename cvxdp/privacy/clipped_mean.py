"""The mean of per-example vectors clipped to norm ``C``, and its sensitivity — in floating point.

Used by the affine plan (:mod:`cvxdp.plan.mean_gradient`) and the noisy clipped GD baseline
(:mod:`cvxdp.baselines.noisy_gd`).  Three pieces, each a fact the sensitivity argument reads:

* :func:`clip_rows` — a per-example map with output norm at most ``C`` in exact arithmetic;
* :func:`exact_column_sums` — each column's sum *exactly*, as an integer multiple of ``2⁻¹¹²⁶``, so
  sums of parts (partitions of a data-parallel fit) add up to the same integer whatever the split;
* :func:`rounded_mean` — one correctly rounded division of that exact sum by ``n``.

So, for ``C ≥`` :data:`MIN_CLIP` (a public floor the callers refuse below), the float mean is within
``u·C`` (``u = 2⁻⁵³``; plus ``2⁻¹⁰⁷⁵`` per coordinate where it is subnormal) of the exact mean of the
clipped rows, and the float means of neighbouring data sets (one row replaced) are within ``2C/n + 2uC``
of each other in ℓ2: :func:`mean_sensitivity` charges ``(2C/n)(1 + 2(n + 2)u)``, rounded up, whose slack
``4uC`` covers both.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from cvxdp._validation import positive_finite
from cvxdp.error import ParameterError

#: Every finite double is ``M · 2^(e − 53)`` with an integer ``|M| < 2⁵³`` and ``e ≥ −1073`` (``frexp``'s
#: exponent), so it is an integer multiple of ``2^−SCALE_BITS``.
SCALE_BITS = 1126
_HALF = 26  # M = hi·2²⁶ + lo with 0 ≤ lo < 2²⁶ and |hi| ≤ 2²⁷: float sums of either stay exact below
_CHUNK = 1 << 24  # rows per pass: |Σ hi| < 2²⁷·2²⁴ = 2⁵¹, exact in a double


#: The smallest clip level the clipped mean's sensitivity argument covers (public; refused below).  Above
#: it every clip factor and every shrunk coordinate's rounding is far below the ``(d + 16)·2⁻⁵²`` margin
#: of :func:`clip_rows` and the ``2uC`` slack of :func:`mean_sensitivity` (a subnormal result rounds by
#: up to ``2⁻¹⁰⁷⁵`` absolutely, not relatively).
MIN_CLIP = 2.0**-900


def clip_level(name: str, C: object) -> float:
    """``C`` validated as a clip level: a finite float at least :data:`MIN_CLIP` (public; refused with
    :class:`~cvxdp.error.ParameterError` otherwise)."""
    value = positive_finite(name, C)
    if not value >= MIN_CLIP:
        raise ParameterError(f"{name} = {value!r} is below 2^-900, where the clipped mean's rounding is no "
                             "longer relative; rescale the loss (a public rescaling of the data keeps "
                             "privacy) so the clip level is a moderate number.")
    return value


def clip_rows(grads: np.ndarray, C: float) -> np.ndarray:
    """``g_i · min(1, C/||g_i||)`` row by row; a row with a non-finite entry becomes ``0``.

    A function of each row alone with ``||output_i|| ≤ C`` in exact arithmetic for ``C ≥``
    :data:`MIN_CLIP`, so replacing one example moves the exact mean by at most ``2C/n`` whatever the
    rows are.  Each row is scaled by its largest entry first (``unit = g/peak``, entries in ``[−1, 1]``,
    norm in ``[1, √d]``), so no norm overflows; a row longer than ``C`` becomes
    ``unit · (C·shrink/||unit||)`` — a factor at least ``C·shrink/√d``, a normal number, so it carries
    its relative precision (the factor ``C/||g||`` itself can be subnormal, where it does not: a row of
    norm ``10³⁰⁸·C`` would come out near ``2C``).  ``shrink = 1 − (d + 16)·2⁻⁵²`` covers the rounding
    of ``unit``, its ``d``-term norm, the quotient and the product.  Rows no longer than ``C`` are
    returned unchanged: their computed norm is at most ``C·shrink``, so their exact norm is at most ``C``.
    """
    g = np.array(grads, dtype=float)
    g[~np.all(np.isfinite(g), axis=1)] = 0.0
    # a row's tiny entries underflow and a very long row's norm overflows: handled below, and never a
    # warning or an exception under the caller's numpy settings (one record would decide it)
    with np.errstate(all="ignore"):
        peak = np.max(np.abs(g), axis=1, keepdims=True)
        safe = np.where(peak > 0, peak, 1.0)
        unit = g / safe
        length = np.linalg.norm(unit, axis=1, keepdims=True)  # in [1, √d] (0 for a zero row)
        shrink = 1.0 - (g.shape[1] + 16) * 2.0**-52
        longer = (peak * length > C * shrink) & (peak > 0)  # kept rows: computed norm ≤ C·shrink
        factor = C * shrink / np.where(longer, length, 1.0)
        return np.where(longer, unit * factor, g)


def exact_column_sums(rows: np.ndarray) -> list[int]:
    """``N_j = 2^SCALE_BITS · Σ_i rows[i, j]`` exactly, one Python integer per column.

    Vectorized: each entry is split by ``frexp`` into an integer mantissa ``M`` and an exponent; ``M``
    is cut into a high and a low half whose sums per (column, exponent) are exact in a double (at most
    ``2²⁴`` rows per pass), and the bins are combined in integers.  The sum of the ``N_j`` of two sets
    of rows is the ``N_j`` of their union, so partitions' sums combine exactly.  Refuses (``ValueError``)
    a non-finite entry: callers clip first (:func:`clip_rows` sends such rows to ``0``).
    """
    x = np.asarray(rows, dtype=float)
    if x.ndim != 2:
        raise ValueError("exact_column_sums needs a 2-d array (rows × columns)")
    m, d = x.shape
    if not np.all(np.isfinite(x)):
        raise ValueError("exact_column_sums needs finite entries (clip the rows first)")
    totals = [0] * d
    for start in range(0, m, _CHUNK):
        part = x[start:start + _CHUNK]
        if part.size == 0:
            break
        mant, exp = np.frexp(part)
        M = (mant * 2.0**53).astype(np.int64)  # exact: |mant| < 1 has 53 significant bits
        hi = M >> _HALF
        lo = M - (hi << _HALF)
        low = int(exp.min())  # bins for the exponents present only (d × their span, not d × 2099)
        span = int(exp.max()) - low + 1
        where = ((exp - low) + (np.arange(d) * span)[None, :]).ravel()
        size = d * span
        sum_hi = np.bincount(where, weights=hi.ravel().astype(float), minlength=size).reshape(d, -1)
        sum_lo = np.bincount(where, weights=lo.ravel().astype(float), minlength=size).reshape(d, -1)
        shift = low + 1073  # bin b holds M·2^(b + low − 53) = M·2^(b + shift) / 2^SCALE_BITS; shift ≥ 0
        for j in range(d):
            for b in np.flatnonzero(sum_hi[j] != 0.0).tolist():
                totals[j] += int(sum_hi[j, b]) << (b + shift + _HALF)
            for b in np.flatnonzero(sum_lo[j] != 0.0).tolist():
                totals[j] += int(sum_lo[j, b]) << (b + shift)
    return totals


def rounded_mean(sums: list[int], n: int) -> np.ndarray:
    """``fl(N_j / (2^SCALE_BITS · n))`` per column: the exact mean, correctly rounded once."""
    denominator = n << SCALE_BITS
    return np.array([float(Fraction(s, denominator)) for s in sums], dtype=float)


def clipped_mean(clipped: np.ndarray) -> np.ndarray:
    """The mean of the rows, each coordinate the exact mean correctly rounded (within ``u·C`` of it
    for rows of norm at most ``C``)."""
    return rounded_mean(exact_column_sums(clipped), int(np.asarray(clipped).shape[0]))


def mean_sensitivity(C: float, n: int) -> float:
    """``(2C/n)(1 + 2(n + 2)u)``, rounded up: covers ``2C/n + 2uC`` and the formula's own rounding."""
    return float(np.nextafter(2.0 * C / n * (1.0 + 2.0 * (n + 2) * 2.0**-53), np.inf))


__all__ = ["MIN_CLIP", "SCALE_BITS", "clip_level", "clip_rows", "clipped_mean", "exact_column_sums",
           "mean_sensitivity", "rounded_mean"]
