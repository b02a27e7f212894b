"""Steep records on regions without an exact path: a public per-record scaling (refusal-free features).

On a ball or a lens an example of any magnitude is bracketed exactly
(:mod:`cvxdp.extension.exact`).  Every other region (box, simplex, polytope, ellipsoid, ``W ∩ B``)
— and, on a ball, a max-affine record whose pieces are not parallel — goes through conic programs
in float64, whose margins grow with the example's terms: one record with features of ``10¹²``
leaves its bracket far wider than any ``α`` and the fit refuses — an observable that one record
decides.  There, a record whose slope on ``U`` exceeds

    S = SLOPE_FACTOR · max(C, 1)

is **scaled** by ``t_i = S / slope_i < 1`` before the ERM sees it: a piecewise-linear loss's
pieces ``(A_ij, b_ij)`` become ``(t_i A_ij, t_i b_ij)`` — the loss ``t_i f`` — and a generalized
linear example's ``(a_i, b_i)`` become ``(t_i a_i, t_i b_i)`` — the loss ``φ(t_i u)``.  The
slope is ``max_j ||A_ij||``, or ``||a_i||`` times the link's Lipschitz constant over the
argument's range on ``U``.

What it changes: only records steeper than ``S``, hundreds of times the extension's own
constant ``C``; for those, ``f_{C,U}`` is already pinned by ``C`` (the extension's minimizer sits
at the loss's valley or at the point of ``U`` nearest it, whatever the slope beyond ``C``), so
the scaled record's extension differs from the original's by about ``C² diam U / S``.

Privacy: ``t_i`` is a function of record ``i`` and the public ``C`` and ``U`` only, so the ERM
runs on ``Φ(D)`` for a per-record map ``Φ`` — neighbouring data sets map to neighbouring data
sets, and every guarantee of the release is that of ``Φ(D)``.  Applied by
:class:`~cvxdp.erm.problem.RegularizedERM` after the affine reduction (which first drops a huge
level exactly), on regions other than balls and lenses, for structured losses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cvxdp.extension.affine_reduction import argument_range
from cvxdp.geometry import Ball, Domain, Lens
from cvxdp.links import ShiftedSquareLink, SquareLink
from cvxdp.loss import Examples, GLMRepresentation
from cvxdp.structure import PiecewiseLinearStructure, SmoothGLMStructure

#: Records steeper than ``SLOPE_FACTOR · max(C, 1)`` on ``U`` are scaled down to that slope.  Each
#: scaled row carries float64 margins in proportion to ``S``; at ``2¹³`` a data set whose every row is
#: that steep missed ``α`` from about n = 10⁴ on (LAD on ``[-1, 1]⁶``: 42% of ``α`` at n = 3000; a
#: refusal one record could tip); at ``2⁸`` it takes 9% at n = 3·10⁴ (box and polytope) and at
#: n = 10⁴, d = 20, while ``f_{C,U}`` of a record that steep still moves by only ``~C² diam U / S``.
SLOPE_FACTOR = 2.0**8


@dataclass(frozen=True)
class RecordScaling:
    """The per-record argument factors ``t_i`` (``1``: unchanged), the mapped batch, and which rows moved.

    ``t_i ≤ 1`` except for a square-loss row with a shift above :func:`shift_limit`, whose argument
    may be scaled up as its shift is brought down (:func:`_scale_shifted_square`).
    """

    factors: np.ndarray
    examples: Examples
    mask: np.ndarray


def slope_limit(C: float) -> float:
    """``S = SLOPE_FACTOR · max(C, 1)``."""
    return SLOPE_FACTOR * max(float(C), 1.0)


def shift_limit(scale: float) -> float:
    """``T_max = 2³⁰ / sqrt(max(c, 1))``: the largest shift a :class:`ShiftedSquareLink` row keeps.

    Its conjugate ``c (π/(2c) − T)²`` cancels ``π/(2c)`` against ``T``, which costs about
    ``c (2ε T)²``; below ``T_max`` that stays under ``10⁻¹²``.
    """
    return 2.0**30 / np.sqrt(max(float(scale), 1.0))


def scale_steep_records(examples: Examples, region: Domain, C: float) -> RecordScaling:
    """Scale every record steeper than :func:`slope_limit` on ``region`` (see the module docstring).

    On balls and lenses the exact path takes every generalized-linear record, so only the
    piecewise-linear records that are not generalized linear (non-parallel pieces) are scaled
    there; generic losses are returned unchanged.
    """
    m = examples.m
    ones = np.ones(m)
    exact_region = isinstance(region, Ball | Lens)
    st = examples.loss.structure
    S = slope_limit(C)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if isinstance(st, PiecewiseLinearStructure):
            if exact_region:  # the exact path takes the generalized-linear rows; scale the others only
                others = ~examples.glm().is_glm
                if not np.any(others):  # no row to scale: the pieces are not read (they may be released)
                    return RecordScaling(ones, examples, np.zeros(m, dtype=bool))
            A, b = examples.pieces()
            slope = np.linalg.norm(A, axis=2).max(axis=1)
            if exact_region:
                slope = np.where(others, slope, 0.0)
        elif exact_region:
            return RecordScaling(ones, examples, np.zeros(m, dtype=bool))
        elif isinstance(st, SmoothGLMStructure):
            glm = examples.glm()
            if isinstance(glm.link, ShiftedSquareLink):
                return _scale_shifted_square(examples, glm, region, S)
            lo, hi = argument_range(region, glm.a, glm.b)
            slope = np.linalg.norm(glm.a, axis=1) * glm.link.lipschitz_on(lo, hi)
        else:
            return RecordScaling(ones, examples, np.zeros(m, dtype=bool))
        # a non-finite slope (an overflowing record) is scaled as the steepest: by S/max float
        slope = np.where(np.isfinite(slope), slope, np.finfo(float).max)
        factors = np.where(slope > S, S / slope, 1.0)
        if isinstance(st, SmoothGLMStructure) and isinstance(glm.link, SquareLink):
            factors = np.sqrt(factors)  # φ(t u) = t² φ(u): its slope on U falls by about t²
    steep = factors < 1.0
    if not np.any(steep):
        return RecordScaling(ones, examples, steep)
    out = Examples(examples.loss, examples.arrays, examples.m)
    if isinstance(st, PiecewiseLinearStructure):
        A2, b2 = A.copy(), b.copy()
        A2[steep] *= factors[steep, None, None]
        b2[steep] *= factors[steep, None]
        if exact_region:
            # only examples that are not generalized linear are scaled there: the others keep their
            # form, whatever rows go with them (found by review: re-derived from the pieces, a row's
            # form moved with a steep neighbour's presence)
            out.set_glm(examples.glm(), (A2, b2))
        else:
            out.set_pieces(A2, b2, changed=steep, before=examples.glm())
    else:
        a2, bv2 = glm.a.copy(), glm.b.copy()
        a2[steep] *= factors[steep, None]
        bv2[steep] *= factors[steep]
        out._cache["glm"] = GLMRepresentation(a2, bv2, glm.link, glm.is_glm)
    return RecordScaling(factors, out, steep)


def _scale_shifted_square(examples: Examples, glm: GLMRepresentation, region: Domain,
                          S: float) -> RecordScaling:
    """Record scaling for a square loss carried with its shifted link (``φ(u) = c u (u + 2T)``).

    Per row, with ``B = 2c ||a|| (max_U |u| + |T|)`` (a bound on the slope of ``φ(s u)`` over
    ``U`` divided by ``s``, for ``s ≤ 1``):

    * ``T = 0`` (an argument that changes sign on ``U``): as a plain square, ``u → sqrt(S/slope) u``;
    * ``|T| ≤ T_max`` (:func:`shift_limit`): ``u → (S/B) u`` with the same ``T`` when ``B > S``;
    * ``|T| > T_max``: the row becomes ``c u'(u' + 2T')`` with ``T' = ±T_max`` and ``u' = s u``,
      ``s = L / (2c ||a|| T_max)`` and ``L = min(S, 2c ||a|| |T|)`` its slope at ``u = 0`` (where
      the shift put the argument's near side), capped so ``s max|u| ≤ T_max``.  Below ``S`` the
      slope at ``u = 0`` is the original's and only the curvature grows, which changes the row on
      ``U`` by at most about ``S² diam(U)² / (4c T_max²)``.

    Every quantity is a function of the row and the public ``U``, ``S``, ``c``.
    """
    a, b, link = glm.a, glm.b, glm.link
    m = b.shape[0]
    c = link.scale
    T = np.broadcast_to(link.shift, (m,)).astype(float)
    T_max = shift_limit(c)
    a_norm = np.linalg.norm(a, axis=1)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        lo, hi = argument_range(region, a, b)
        u_max = np.maximum(np.abs(lo), np.abs(hi))
        slope = a_norm * link.lipschitz_on(lo, hi)
        slope = np.where(np.isfinite(slope), slope, np.finfo(float).max)
        B = 2.0 * c * a_norm * (u_max + np.abs(T))
        B = np.where(np.isfinite(B), B, np.finfo(float).max)
        plain = np.where(slope > S, np.sqrt(S / slope), 1.0)
        shifted = np.where(B > S, S / B, 1.0)
        L = np.minimum(S, 2.0 * c * a_norm * np.abs(T))
        remap = np.minimum(L / (2.0 * c * a_norm * T_max), T_max / u_max)
        huge = np.abs(T) > T_max
        factors = np.where(T == 0.0, plain, np.where(huge, remap, shifted))
        factors = np.where(np.isfinite(factors) & (factors > 0), factors, np.finfo(float).tiny)
    mapped = (factors != 1.0) | huge
    if not np.any(mapped):
        return RecordScaling(factors, examples, mapped)
    out = Examples(examples.loss, examples.arrays, examples.m)
    a2, b2 = a.copy(), b.copy()
    a2[mapped] *= factors[mapped, None]
    b2[mapped] *= factors[mapped]
    T2 = np.where(huge, np.sign(T) * T_max, T)
    out._cache["glm"] = GLMRepresentation(a2, b2, ShiftedSquareLink(c, T2), glm.is_glm)
    return RecordScaling(factors, out, mapped)


__all__ = ["SLOPE_FACTOR", "RecordScaling", "scale_steep_records", "shift_limit", "slope_limit"]
