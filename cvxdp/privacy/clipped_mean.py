"""The mean of per-example vectors clipped to norm ``C``, and its sensitivity — in floating point.

Used by the affine plan (:mod:`cvxdp.plan.mean_gradient`) and the noisy clipped GD baseline
(:mod:`cvxdp.baselines.noisy_gd`).  Three pieces, each a fact the sensitivity argument reads:

* :func:`clip_rows` — a per-example map with output norm at most ``C`` in exact arithmetic;
* :func:`exact_column_sums` — each column's sum *exactly*, as an integer multiple of ``2⁻¹¹²⁶``, so
  sums of parts (partitions of a data-parallel fit) add up to the same integer whatever the split;
* :func:`rounded_mean` — one correctly rounded division of that exact sum by ``n``.

So the float mean is within ``u·C`` (``u = 2⁻⁵³``) of the exact mean of the clipped rows, and the float
means of neighbouring data sets (one row replaced) are within ``2C/n + 2uC`` of each other in ℓ2:
:func:`mean_sensitivity` charges ``(2C/n)(1 + 2(n + 2)u)``, rounded up, which covers it.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

#: Every finite double is ``M · 2^(e − 53)`` with an integer ``|M| < 2⁵³`` and ``e ≥ −1073`` (``frexp``'s
#: exponent), so it is an integer multiple of ``2^−SCALE_BITS``.
SCALE_BITS = 1126
_EXPONENT_BINS = 2098 + 1  # e + 1073 ∈ [0, 2097] for finite doubles; one spare
_HALF = 26  # M = hi·2²⁶ + lo with 0 ≤ lo < 2²⁶ and |hi| ≤ 2²⁷: float sums of either stay exact below
_CHUNK = 1 << 24  # rows per pass: |Σ hi| < 2²⁷·2²⁴ = 2⁵¹, exact in a double


def clip_rows(grads: np.ndarray, C: float) -> np.ndarray:
    """``g_i · min(1, C/||g_i||)`` row by row; a row with a non-finite entry becomes ``0``.

    A function of each row alone with ``||output_i|| ≤ C`` in exact arithmetic (the factor is shrunk
    by ``(d + 16)·2⁻⁵²``, more than the rounding of a ``d``-term norm, the quotient and the product),
    so replacing one example moves the exact mean by at most ``2C/n`` whatever the rows are; norms
    are computed after scaling by the row's largest entry, so rows near the float range do not
    overflow to ``∞`` (and clip to ``0``).
    """
    g = np.array(grads, dtype=float)
    g[~np.all(np.isfinite(g), axis=1)] = 0.0
    peak = np.max(np.abs(g), axis=1, keepdims=True)
    safe = np.where(peak > 0, peak, 1.0)
    norms = peak * np.linalg.norm(g / safe, axis=1, keepdims=True)
    shrink = 1.0 - (g.shape[1] + 16) * 2.0**-52
    with np.errstate(over="ignore"):  # a tiny row under a huge C: the factor is 1 (no warning a row decides)
        return g * np.minimum(1.0, C * shrink / np.maximum(norms, 1e-300))


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
    offsets = (np.arange(d) * _EXPONENT_BINS)[None, :]
    for start in range(0, m, _CHUNK):
        part = x[start:start + _CHUNK]
        mant, exp = np.frexp(part)
        M = (mant * 2.0**53).astype(np.int64)  # exact: |mant| < 1 has 53 significant bits
        hi = M >> _HALF
        lo = M - (hi << _HALF)
        where = ((exp + 1073) + offsets).ravel()
        size = d * _EXPONENT_BINS
        sum_hi = np.bincount(where, weights=hi.ravel().astype(float), minlength=size).reshape(d, -1)
        sum_lo = np.bincount(where, weights=lo.ravel().astype(float), minlength=size).reshape(d, -1)
        for j in range(d):
            for s in np.flatnonzero(sum_hi[j] != 0.0).tolist():
                totals[j] += int(sum_hi[j, s]) << (s + _HALF)
            for s in np.flatnonzero(sum_lo[j] != 0.0).tolist():
                totals[j] += int(sum_lo[j, s]) << s
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


__all__ = ["SCALE_BITS", "clip_rows", "clipped_mean", "exact_column_sums", "mean_sensitivity",
           "rounded_mean"]
