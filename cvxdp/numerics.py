"""Float64 facts every certified bound relies on: the unit roundoff, rounding margins, directed rounding.

Everything that turns a float computation into a *certified* inequality charges its rounding with
these helpers, so the margins live in one place below every module that certifies (the extension's
brackets, the ERM certificates, the per-example Lipschitz constants of the tail histogram) and the
ledger's exact arithmetic.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

EPS = float(np.finfo(float).eps)


def rounding_margin(*terms: np.ndarray) -> np.ndarray:
    """A safe bound on the float64 rounding error of a sum of the given terms.

    ``64 ε Σ|t|`` covers the few dozen operations behind each term with room
    to spare; we also add ``1e-300`` so the margin is never exactly zero.
    """
    total = np.zeros(())
    for t in terms:
        total = total + np.abs(np.asarray(t, float))
    return 64.0 * EPS * total + 1e-300


def argument_rounding(d: int, a_norm: np.ndarray, y_norm: np.ndarray, b_abs: np.ndarray) -> np.ndarray:
    """A bound on the float64 error of ``u = <a, y> + b`` (``d`` terms, then one addition).

    The classical bound for a length-``d`` dot product is ``γ_d Σ|a_j y_j| ≤ γ_d ||a|| ||y||``
    (``γ_d ≈ d ε``); the offset adds ``ε |u|``.  We charge ``(d + 2) ε (||a|| ||y|| + |b|)``.
    Unlike a margin relative to ``|u|``, this stays valid when ``<a, y>`` and ``b`` cancel —
    a well-fitted example with huge features or labels.
    """
    return (d + 2.0) * EPS * (np.asarray(a_norm) * np.asarray(y_norm) + np.abs(b_abs))


def float_down(q: Fraction) -> float:
    """The largest float ``≤ q`` (``q`` finite, within the float range)."""
    f = float(q)  # correctly rounded to nearest
    if Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def float_up(q: Fraction) -> float:
    """The smallest float ``≥ q`` (``q`` finite, within the float range)."""
    f = float(q)
    if Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def accurate_sum(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column sums of ``x`` (over axis 0) with a certified bound on their error, vectorized.

    Returns ``(s, err)`` with ``|s − Σ_i x_i| ≤ err`` per column, ``err ≈ ε |s|`` plus a remainder
    far below it — as accurate as :func:`math.fsum` (``ε/2 |s|``) up to a factor two, at the cost
    of a dozen numpy passes instead of a Python loop over the rows.

    How: with ``m`` rows and ``|x_i| < 2^E``, each row is split on the grid of ``2^s``,
    ``s = E − B`` with ``B = 52 − ⌈log₂(m + 1)⌉`` bits (Dekker's ``(x + σ) − σ``,
    ``σ = 1.5·2^{s+52}``, which rounds ``x`` to a multiple of ``2^s``): the parts are multiples of
    ``2^s`` below ``2^{E+1}`` in modulus, so their sum has at most 53 significant bits and is
    *exact* in any order, and ``x − hi`` is exact with ``|x − hi| ≤ 2^{s−1}``.  Two such levels
    leave a remainder below ``2^{E−2B}`` per row, summed in float and charged with the classical
    bound ``γ_m Σ|r_i|``; the exact level sums and that remainder are combined by a correctly
    rounded ``fsum`` per column.  Non-finite input gives a non-finite sum and ``err = +∞``.

    The result does not depend on the order of the rows except through the charged remainder, so
    sums of partitions reduced at a driver obey the same bound per partition.
    """
    a = np.asarray(x, dtype=float)
    vector = a.ndim == 1
    if vector:
        a = a[:, None]
    m, k = a.shape
    if m == 0:
        zeros = np.zeros(k)
        return (zeros[0], zeros[0]) if vector else (zeros, zeros.copy())
    with np.errstate(invalid="ignore", over="ignore"):
        amax = np.max(np.abs(a), axis=0)
    sums = np.zeros(k)
    err = np.zeros(k)
    bad = ~np.isfinite(amax)
    # near the top of the float range the splitting constant would overflow: exactly rounded sums
    huge = ~bad & (amax >= 2.0**960)
    cols = np.nonzero(~bad & ~huge & (amax > 0))[0]
    if bad.any():
        with np.errstate(invalid="ignore", over="ignore"):
            sums[bad] = np.sum(a[:, bad], axis=0)
        err[bad] = np.inf
    for col in np.nonzero(huge)[0]:
        try:
            sums[col] = math.fsum(a[:, col])
            err[col] = EPS * abs(sums[col])
        except OverflowError:
            sums[col], err[col] = np.inf, np.inf
    if cols.size:
        r = a[:, cols] if cols.size < k else a.copy()
        bits = 52 - math.ceil(math.log2(m + 1))
        if bits < 8:
            raise ValueError("accurate_sum: too many rows for one call; sum partitions and reduce.")
        _, E = np.frexp(amax[cols])  # |x_i| < 2^E
        E = E.astype(np.int64)
        parts = []
        for _level in range(2):
            s = np.maximum(E - bits, -1074)
            # σ = 1.5 · 2^{s+52}: fl(fl(x + σ) − σ) is x rounded to a multiple of 2^s (|x| ≤ 2^{s+51})
            sigma = np.ldexp(1.5, s + 52)
            with np.errstate(over="ignore"):
                hi = (r + sigma) - sigma
            parts.append(np.sum(hi, axis=0))  # exact: multiples of 2^s summing to < 2^{s+53}
            r = r - hi  # exact, |r| ≤ 2^{s−1}
            E = s
        rest = np.sum(r, axis=0)
        rest_abs = np.sum(np.abs(r), axis=0)
        for j, col in enumerate(cols):
            total = math.fsum((float(parts[0][j]), float(parts[1][j]), float(rest[j])))
            sums[col] = total
            # fsum's rounding (ε/2 |total| of the exact sum of its inputs, doubled for safety) and the
            # remainder's float sum (γ_m Σ|r|, Σ|r| itself rounded: doubled)
            err[col] = EPS * abs(total) + 2.0 * (m + 1) * EPS * float(rest_abs[j]) + 1e-300
    if vector:
        return sums[0], err[0]
    return sums, err


#: Rows per block of :func:`weighted_row_sum` (its error bound grows with the block's length).
ROW_BLOCK = 16


def row_scales(a: np.ndarray) -> np.ndarray:
    """``max_j |a_ij|`` per row: the size :func:`weighted_row_sum` charges each row's products on."""
    with np.errstate(invalid="ignore"):
        return np.max(np.abs(a), axis=1) if a.shape[1] else np.zeros(a.shape[0])


def weighted_row_sum(a: np.ndarray, c: np.ndarray, scales: np.ndarray,
                     block: int = ROW_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """``Σ_i c_i a_i`` over the rows of ``a`` (``(m, d)``) with a certified error bound per coordinate.

    Each block of ``block`` rows is one length-``block`` dot product per coordinate, whose float
    error is at most ``γ_block Σ_i |c_i a_ij| ≤ γ_block Σ_i |c_i| s_i`` in any order of summation
    (``γ_k = kε/(1 − kε)``, Higham's Theorem 3.1; ``s_i = max_j |a_ij|`` from :func:`row_scales`, so
    a row with a huge ``a`` and a tiny ``c`` costs only its own product); the block results are
    then summed by :func:`accurate_sum`.  Non-finite input gives an infinite bound.
    """
    m, d = a.shape
    c = np.asarray(c, dtype=float)
    full = m // block
    parts = []
    gamma = block * EPS / (1.0 - block * EPS)
    with np.errstate(invalid="ignore", over="ignore"):
        if full:
            cb = c[: full * block].reshape(full, block)
            parts.append(np.einsum("bkd,bk->bd", a[: full * block].reshape(full, block, d), cb))
        if full * block < m:
            parts.append(np.einsum("kd,k->d", a[full * block:], c[full * block:])[None, :])
        if not parts:
            return np.zeros(d), np.zeros(d)
        total, err = accurate_sum(np.concatenate(parts))
        # Σ|c_i| s_i in float errs by at most m ε of itself: rounded up; a product that underflows errs
        # absolutely, by at most 2⁻¹⁰⁷⁴ each, beyond any relative bound (found by review)
        products = float(np.dot(np.abs(c), scales)) * (1.0 + (m + 4.0) * EPS)
        err = err + gamma * products + (m + 1.0) * 2.0**-1074
    return total, np.where(np.isfinite(err), err, np.inf)


#: The longest contraction numpy's ``einsum`` rounds the same way whatever the batch around the row
#: (the size of its iterator's buffer).
EINSUM_SAFE_LENGTH = 8192

#: Elements of the product :func:`row_dot` forms at once for rows longer than ``EINSUM_SAFE_LENGTH``.
_PRODUCT_BLOCK = 1 << 21


def row_dot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``Σ_j x[..., j] y[..., j]`` for every row (leading axes broadcast), each value a function of its
    own row's entries alone: the same bits whether the row is alone, in a batch, or in a subset of one.

    Per-example quantities (arguments ``<a_i, w>``, supports, coordinates in a row's subspace) are
    taken with this, never with a bare ``einsum`` or a matrix product, because numpy does not promise
    that: a BLAS product blocks by the batch, ``einsum`` splits a row longer than its 8192-element
    buffer where the batch's shape puts the split, and a Fortran-ordered operand changes the order of
    summation at any length (all measured, numpy 2.4; ``tests/test_numerics.py`` keeps the check).
    Here operands are made C-ordered, rows up to ``EINSUM_SAFE_LENGTH`` go to ``einsum`` (which sums
    a contiguous row in one pass), and longer rows are summed by ``np.sum`` of the products, whose
    pairwise reduction runs along each contiguous row on its own, in blocks of rows that bound the
    temporary (the blocking cannot change a row's bits).
    """
    x = np.ascontiguousarray(x, dtype=float)
    y = np.ascontiguousarray(y, dtype=float)
    shape = np.broadcast_shapes(x.shape, y.shape)
    if shape[-1] <= EINSUM_SAFE_LENGTH:
        return np.einsum("...j,...j->...", x, y)
    if len(shape) == 1:
        return np.sum(np.multiply(x, y, order="C"))
    if math.prod(shape) == 0:
        return np.zeros(shape[:-1])
    if len(shape) > 2 and shape[0] == 1:  # block along the next axis instead (bounds the temporary)
        def drop(arr: np.ndarray) -> np.ndarray:
            return arr[0] if arr.ndim == len(shape) else arr

        return row_dot(drop(x), drop(y))[None]
    rows = max(1, _PRODUCT_BLOCK // math.prod(shape[1:]))
    if shape[0] <= rows:
        return np.sum(np.multiply(x, y, order="C"), axis=-1)

    def part(arr: np.ndarray, start: int) -> np.ndarray:
        varies = arr.ndim == len(shape) and arr.shape[0] != 1
        return arr[start:start + rows] if varies else arr

    out = np.empty(shape[:-1])
    for start in range(0, shape[0], rows):
        out[start:start + rows] = np.sum(np.multiply(part(x, start), part(y, start), order="C"), axis=-1)
    return out


def row_combine(c: np.ndarray, M: np.ndarray) -> np.ndarray:
    """``Σ_k c[..., k] M[..., k, :]`` for every row: ``M`` is one ``(K, d)`` matrix shared by all rows
    or one per row; the per-row matrix product ``c @ M`` with :func:`row_dot`'s promise (a BLAS product
    rounds a row by its position and the batch's size).  ``einsum`` keeps a row's bits for C-ordered
    operands when ``K`` fits its buffer; longer sums go through :func:`row_dot`."""
    c = np.ascontiguousarray(c, dtype=float)
    M = np.ascontiguousarray(M, dtype=float)
    if c.shape[-1] <= EINSUM_SAFE_LENGTH:
        return np.einsum("...k,...kd->...d", c, M)
    return row_dot(c[..., None, :], np.swapaxes(M, -1, -2))


def row_norm(x: np.ndarray) -> np.ndarray:
    """``||x[..., :]||₂`` for every row, a function of that row alone (C order: a Fortran-ordered array
    is reduced across rows, which changes the order of summation; see :func:`row_dot`)."""
    return np.linalg.norm(np.ascontiguousarray(x, dtype=float), axis=-1)


#: Columns up to which :func:`row_max`, :func:`row_min` and :func:`row_all` go column by column.
SHORT_ROW = 16


def _by_columns(x: np.ndarray, ufunc: np.ufunc, reduction) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim == 0 or not 0 < x.shape[-1] <= SHORT_ROW:
        return reduction(x, axis=-1)  # numpy's own result (or its error for a scalar or an empty axis)
    out = np.array(x[..., 0], copy=True)
    for j in range(1, x.shape[-1]):
        ufunc(out, x[..., j], out=out)
    return out


def row_max(x: np.ndarray) -> np.ndarray:
    """``max_j x[..., j]`` for every row (NaN propagates, as ``np.max``).

    A row of a few pieces (a link's slopes, a piece's levels) is reduced column by column with
    ``np.maximum``: numpy's reduction along a short last axis costs about 60 ns per row — 3.5 ms for the
    two columns of 5·10⁴ rows, against 0.04 ms this way.  Each row's value is its own entries' maximum
    either way (ties between ``−0`` and ``+0`` aside, which no caller reads)."""
    return _by_columns(x, np.maximum, np.max)


def row_min(x: np.ndarray) -> np.ndarray:
    """``min_j x[..., j]`` for every row (NaN propagates), column by column as :func:`row_max`."""
    return _by_columns(x, np.minimum, np.min)


def row_all(x: np.ndarray) -> np.ndarray:
    """Whether every entry of each row is true, column by column as :func:`row_max`."""
    return _by_columns(np.asarray(x, dtype=bool), np.logical_and, np.all)


__all__ = ["EINSUM_SAFE_LENGTH", "EPS", "ROW_BLOCK", "SHORT_ROW", "accurate_sum", "argument_rounding",
           "float_down", "float_up", "rounding_margin", "row_all", "row_combine", "row_dot", "row_max",
           "row_min", "row_norm", "row_scales", "weighted_row_sum"]
