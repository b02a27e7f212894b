"""Examples that are affine on ``U`` with a huge level: that level dropped, exactly (refusal-free labels).

An example whose loss is one affine piece on the whole region,

    f(y, z_i) = <s_i, y> + κ_i     for every y ∈ U,

has the Lipschitz extension ``f_{C,U}(w, z_i) = f̃_{C,U}(w, z_i) + κ_i`` for *any* loss ``f̃``
that equals ``<s_i, y> + κ_i − κ̃_i`` on ``U`` — the extension reads ``f`` on ``U`` only, and a
constant moves no minimizer and no gap.  A label of ``10¹⁰`` in a least-absolute-deviation or
pinball example, or in a Huber example in its linear part, is such a level.  The regularized ERM
(:class:`~cvxdp.erm.problem.RegularizedERM`) therefore *substitutes* each such example by one of
the same slope and a small level (:meth:`AffineReduction.apply`), whose terms are of the size of
its slope times ``U`` whatever the label; every path — closed form, exact, conic, the joint
program of Lemma 2.6 — then certifies it like an ordinary example.

Per example, the test and the substitute:

* **piecewise-linear losses** (``max_j <A_ij, y> + b_ij`` as recovered from the expression):
  the piece ``j`` largest at the region's interior point dominates every other piece on all of
  ``U``: ``b_ij − b_il ≥ σ_U(A_il − A_ij)`` for all ``l``, with the difference bounded below and
  ``σ_U`` above including their float rounding.  Substitute: every piece becomes
  ``<A_ij, y> + 0`` (so ``κ_i = b_ij``).
* **Huber links** ``c·huber(u, M)``, ``u = <a_i, y> + b_i``: ``u ≥ M`` on all of ``U``
  (``b_i + min_U <a_i, y> ≥ M``, rounded safely), or ``u ≤ −M``; there ``f`` is
  ``c(±2M u − M²)``.  Substitute: the label ``b_i`` replaced by the float ``b'_i`` nearest
  the region that keeps ``u`` in the same linear part (tested like ``b_i``), so
  ``κ_i = ±2Mc (b_i − b'_i)``.
* and the level must dominate: ``|κ_i| > 2¹² (1 + C diam U + ||s_i|| max_U ||y||)``, so an
  ordinary example keeps its ordinary path.
* **logistic links** beyond ``±64`` on all of ``U`` — not exactly affine, so a public per-record map
  below ``c e^{−64}`` rather than an exact substitute (:func:`_logistic_level`).

A squared loss is not affine, but its level comes out just as exactly.  **Square links**
``c u²``, ``u = <a_i, y> + b_i``, on a region without the exact path (not a ball or lens): when
``u`` keeps one sign on ``U`` (``b_i + min_U <a_i, y> > 0``, rounded safely, or the mirror
case), take the float ``T_i = fl(b_i + e_i)``, ``e_i`` the bound of ``<a_i, y>`` on the near side,
and ``b'_i = fl(b_i − T_i)``; when that subtraction is exact (checked with an error-free sum), for
every ``y``

    c (<a_i, y> + b_i)² = c u' (u' + 2T_i) + c T_i²,        u' = <a_i, y> + b'_i,

so the example is carried with the link :class:`~cvxdp.links.ShiftedSquareLink` (shift ``T_i``)
and label ``b'_i``, and ``κ_i = c T_i²``.  What is left is of the size of ``2c|T_i|`` times the
argument's variation on ``U`` — the example's slope times ``U`` — where ``c u²`` had the level
``c b_i²`` of a ``10¹⁰`` label (``10²⁰``, far beyond what float64 brackets to ``α``).  Rows
whose argument changes sign on ``U`` keep ``T_i = 0`` (the same function); every square-link
batch on such a region is carried this way, so no row's representation hangs on another's.

The subtraction is inexact only when ``|e_i| ≫ |b_i|`` — a region far from the origin against
huge features, where the level is the features', not the label's.  Such a row (``rounded``) is
still shifted, with its label moved by the rounding ``|fl(b_i − T_i) − (b_i − T_i)| ≤ ε/2 |b_i −
T_i|`` — a public per-record map, as the record scaling is — which moves its loss on ``U`` by at
most its slope times ``ε/2 · max_U |<a_i, y>| / ||a_i||``, ``10⁻¹⁶`` of the slope times ``U``'s
reach; left unshifted it kept a level of ``c e_i²`` that float64 cannot bracket (found by review:
copies of a record with features of ``10²⁷`` on ``[1, 3]³`` made the fit refuse).

Privacy: each test and substitute reads example ``i``'s own coefficients and the public ``U`` and
``C`` only, so whether an example is substituted, and by what, moves with that example alone;
the substitute equals the example's loss on ``U`` up to the constant ``κ_i`` (exactly, in the
loss's recovered coefficients), so the objective's minimizers, its gaps and the sensitivity
argument are those of the original data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import numpy as np

from cvxdp.geometry import Ball, Domain, Lens
from cvxdp.geometry.certified import per_row_support_upper, per_row_support_upper_both, support_rounding
from cvxdp.links import HuberLink, Link, LogisticLink, PiecewiseLinearLink, ShiftedSquareLink, SquareLink
from cvxdp.loss import Examples, GLMRepresentation
from cvxdp.numerics import EPS, row_all, row_dot, row_norm
from cvxdp.structure import PiecewiseLinearStructure, SmoothGLMStructure

#: An example is substituted only if its level exceeds its variation on ``U`` by this factor.
LEVEL_FACTOR = 2.0**12
#: A logistic row whose argument stays beyond ``±LOGISTIC_TAIL`` on ``U`` is affine (or zero) there up
#: to ``e^{−64}`` of its scale (:func:`_logistic_level`).
LOGISTIC_TAIL = 64.0
#: ... and is carried once its level exceeds this many times its variation: a row that far in its tail
#: is affine or zero whatever its level, and at ``2¹²`` a band of rows (levels up to ``3·10⁹`` after
#: the record scaling) still refused (found by review).
LOGISTIC_LEVEL_FACTOR = 2.0


@dataclass(frozen=True)
class AffineReduction:
    """Which examples are substituted (``mask``), the constants ``κ_i`` dropped, and the substitute data.

    :attr:`offsets` is an ``object`` array of :class:`~fractions.Fraction` (``0`` where ``mask`` is
    false; a square loss's ``c T_i²`` and a logistic row's ``c(b_i − b'_i)`` are made when first
    read — no bound reads them, so a fit never pays for them); ``pieces`` is the substituted ``(A, b)`` of a
    piecewise-linear loss, ``labels`` the substituted ``b`` of a Huber or square loss's
    generalized-linear form (``None`` when not that kind), ``link`` a square loss's shifted link,
    ``directions`` the substituted ``a`` (a logistic row beyond its negative tail becomes constant), and
    ``rounded`` the rows whose substitute is not exact — a square-loss row whose label ``b − T`` was
    rounded, a logistic row beyond its tail (:func:`_logistic_level`): public per-record maps.
    """

    mask: np.ndarray
    given_offsets: np.ndarray | Callable[[], np.ndarray]
    pieces: tuple[np.ndarray, np.ndarray] | None = None
    labels: np.ndarray | None = None
    link: Link | None = None
    rounded: np.ndarray | None = None
    directions: np.ndarray | None = None

    @cached_property
    def offsets(self) -> np.ndarray:
        """The constants ``κ_i`` dropped per example (exact rationals; made when first read where
        ``given_offsets`` is a function — no bound reads them, so a fit never pays their Python loop)."""
        return self.given_offsets() if callable(self.given_offsets) else self.given_offsets

    def apply(self, examples: Examples) -> Examples:
        """``examples`` with the substituted rows' structure replaced (the raw arrays are kept).

        The substitute lives in the batch's cached numeric structure (``pieces`` / ``glm``), which
        is what every certified path reads; subsets inherit it.  Unchanged when nothing is reduced,
        except a square-link batch, which is always carried with its shifted link.
        """
        if not np.any(self.mask) and self.link is None:
            return examples
        out = Examples(examples.loss, examples.arrays, examples.m)
        if self.pieces is not None and self.labels is None and self.link is None:
            # substituted pieces; the substituted rows' form is derived from them, the others' kept
            out.set_pieces(*self.pieces, changed=self.mask, before=examples.glm())
            return out
        # a generalized-linear substitute; on a ball, a piecewise-linear batch's other examples keep
        # their own (substituted) pieces, and every row's form is its own, not re-derived
        glm = examples.glm()
        link = glm.link if self.link is None else self.link
        labels = glm.b if self.labels is None else self.labels
        out.set_glm(glm.with_levels(labels, link) if self.directions is None
                    else GLMRepresentation(self.directions, labels, link, glm.is_glm), self.pieces)
        return out


def _support_bound(region: Domain, V: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """An upper bound on ``σ_U(v)`` for the exact ``v`` the float rows ``V`` were computed from.

    ``scale`` bounds the norms of the terms ``v`` was formed from; that rounding and the
    formula's are charged with :func:`~cvxdp.extension.certificates.support_rounding`.  A region
    with equality constraints accepts points within its feasibility tolerance ``t`` (per row), so
    the bound is taken over ``U`` widened by ``4 (√d + 1) t`` in norm.
    """
    d = V.shape[-1]
    widen = 4.0 * (np.sqrt(d) + 1.0) * region.feasibility_tolerance()
    with np.errstate(invalid="ignore", over="ignore"):
        try:  # each row from itself (a polytope's LP would couple the rows); a failure: no reduction
            sig = (per_row_support_upper(region, V) + support_rounding(region, d, scale)
                   + widen * row_norm(V))
        except Exception:  # any failure of the bound fails closed: the row is not reduced
            return np.full(V.shape[:-1], np.inf)
    return np.where(np.isfinite(sig), sig, np.inf)


def _support_bound_both(region: Domain, V: np.ndarray, scale: np.ndarray, norms: np.ndarray | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
    """``(_support_bound(region, V, scale), _support_bound(region, −V, scale))``, the same bits: the terms
    the two share (a ball's inner product and norm, the rounding charge, the widening) computed once
    (:func:`~cvxdp.geometry.certified.per_row_support_upper_both`); ``norms`` is ``row_norm(V)`` where the
    caller has it (the same bits)."""
    d = V.shape[-1]
    widen = 4.0 * (np.sqrt(d) + 1.0) * region.feasibility_tolerance()
    with np.errstate(invalid="ignore", over="ignore"):
        try:  # as _support_bound: each row from itself; a failure fails closed
            norms = row_norm(V) if norms is None else norms
            up, down = per_row_support_upper_both(region, V, norms)
            charge = support_rounding(region, d, scale)
            wide = widen * norms
            sig_up, sig_down = (up + charge) + wide, (down + charge) + wide
        except Exception:
            inf = np.full(V.shape[:-1], np.inf)
            return inf, inf.copy()
    return np.where(np.isfinite(sig_up), sig_up, np.inf), np.where(np.isfinite(sig_down), sig_down, np.inf)


def _dominant(level: np.ndarray, slope_norm: np.ndarray, C: float, region: Domain,
              factor: float = LEVEL_FACTOR) -> np.ndarray:
    variation = 1.0 + C * region.diameter + slope_norm * region.norm_bound()
    with np.errstate(invalid="ignore", over="ignore"):
        return np.abs(level) > factor * variation


def argument_range(region: Domain, a: np.ndarray, b: np.ndarray, a_norm: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Bounds ``lo ≤ <a_i, y> + b_i ≤ hi`` for all ``y ∈ U``, rounding included (``a_norm``:
    ``row_norm(a)`` where the caller has it, the same bits)."""
    a_norm = row_norm(a) if a_norm is None else a_norm
    with np.errstate(invalid="ignore", over="ignore"):
        top, bottom = _support_bound_both(region, a, a_norm, a_norm)
        bottom = -bottom
        lo = bottom + b - 2.0 * EPS * (np.abs(bottom) + np.abs(b))
        hi = top + b + 2.0 * EPS * (np.abs(top) + np.abs(b))
    return np.where(np.isfinite(lo), lo, -np.inf), np.where(np.isfinite(hi), hi, np.inf)


def _piecewise_by_pieces(examples: Examples, region: Domain, C: float,
                         rows: np.ndarray | None = None) -> AffineReduction:
    """The piecewise-linear test and substitute on the recovered pieces (see the module docstring), for
    the examples ``rows`` (default: all; each row's test reads its own pieces only, row by row)."""
    m = examples.m
    mask = np.zeros(m, dtype=bool)
    offsets = np.zeros(m, dtype=object)
    A_all, b_all = examples.pieces()
    picked = np.arange(m) if rows is None else np.asarray(rows)
    A, b = (A_all, b_all) if rows is None else (A_all[picked], b_all[picked])
    m_sub = picked.size
    if m_sub:
        finite = np.all(np.isfinite(A), axis=(1, 2)) & np.all(np.isfinite(b), axis=1)
        A0 = np.where(finite[:, None, None], A, 0.0)
        b0 = np.where(finite[:, None], b, 0.0)
        sub = np.arange(m_sub)
        with np.errstate(invalid="ignore", over="ignore"):
            j = np.argmax(row_dot(A0, region.interior_point()) + b0, axis=1)
            Aj, bj = A0[sub, j], b0[sub, j]
            V = A0 - Aj[:, None, :]  # (m, J, d): piece l minus piece j
            norms = row_norm(A0)
            scale = row_norm(V) + norms + norms[sub, j][:, None]
            d = A.shape[2]
            sig = _support_bound(region, V.reshape(-1, d), scale.reshape(-1)).reshape(b0.shape)
            diff_low = (bj[:, None] - b0) - 2.0 * EPS * (np.abs(bj)[:, None] + np.abs(b0))
            dominates = (diff_low >= sig) | (np.arange(b0.shape[1])[None, :] == j[:, None])
        mask[picked] = finite & np.all(dominates, axis=1) & _dominant(bj, norms[sub, j], C, region)
    if not np.any(mask):
        return AffineReduction(mask, offsets)
    hit = mask[picked]
    A_new, b_new = A_all.copy(), b_all.copy()
    A_new[picked[hit]] = Aj[hit][:, None, :]
    b_new[picked[hit]] = 0.0
    for i, level in zip(picked[hit], bj[hit], strict=True):
        offsets[i] = Fraction(float(level))
    return AffineReduction(mask, offsets, pieces=(A_new, b_new))


def _piecewise_on_balls(examples: Examples, region: Domain, C: float) -> AffineReduction:
    """The piecewise-linear test and substitute on a ball or lens: generalized-linear examples in
    their generalized-linear form (the function every path certifies there), the others on their
    pieces (:func:`_piecewise_by_pieces`) — a choice per example, from its own pieces.

    A generalized-linear example ``max_j κ_j u + e_j``, ``u = <a, y> + b``, is one piece on ``U`` when
    the piece ``j`` largest at the interior point stays largest over the whole range ``[lo, hi] ∋ u``
    (:func:`argument_range`): ``(κ_j − κ_l) u + (e_j − e_l) ≥ 0`` at both ends, the float value moved
    down by its rounding.  Then ``f = <κ_j a, y> + (κ_j b + e_j)`` on ``U``; if that level dominates
    (as for the pieces), the substitute is ``κ_j <a, y>`` — every piece ``(κ_j, 0)`` and ``b = 0`` —
    and ``κ_i = κ_j b + e_j``, exactly.  The substituted batch keeps no pieces of its
    generalized-linear examples: any path that asks reads them off the substitute
    (:meth:`Examples.pieces <cvxdp.loss.Examples.pieces>`), so they are the same function.
    """
    glm = examples.glm()
    m = examples.m
    is_glm = np.asarray(glm.is_glm, dtype=bool)
    offsets = np.zeros(m, dtype=object)
    a, b, link = glm.a, glm.b, glm.link
    kappa = np.broadcast_to(link.slopes, (m, link.slopes.shape[-1]))
    e = np.broadcast_to(link.intercepts, kappa.shape)
    rows = np.arange(m)
    a_norm = glm.a_norm()  # one norm per row for the range and the slope (the same bits as each's own)
    with np.errstate(invalid="ignore", over="ignore"):
        lo, hi = argument_range(region, a, b, a_norm)
        centre = row_dot(a, np.asarray(region.interior_point(), float)) + b
        j = np.argmax(kappa * centre[:, None] + e, axis=1)
        kj, ej = kappa[rows, j], e[rows, j]
        dk, de = kj[:, None] - kappa, ej[:, None] - e
        ok = np.ones_like(dk, dtype=bool)
        for end in (lo, hi):
            val = dk * end[:, None] + de
            margin = 4.0 * EPS * (np.abs(dk) * np.abs(end)[:, None] + np.abs(ej)[:, None] + np.abs(e))
            ok &= val - margin >= 0.0
        dominates = ok | (np.arange(kappa.shape[1])[None, :] == j[:, None])
        finite = (row_all(np.isfinite(kappa)) & row_all(np.isfinite(e)) & np.isfinite(b)
                  & row_all(np.isfinite(a)) & np.isfinite(lo) & np.isfinite(hi))
        level = kj * b + ej
        slope_norm = np.abs(kj) * a_norm
        mask = is_glm & finite & row_all(dominates) & _dominant(level, slope_norm, C, region)
    others = np.nonzero(~is_glm)[0]
    by_pieces = _piecewise_by_pieces(examples, region, C, others) if others.size else None
    if not np.any(mask) and (by_pieces is None or not np.any(by_pieces.mask)):
        return AffineReduction(np.zeros(m, dtype=bool), offsets)
    hit = np.nonzero(mask)[0]
    for i in hit:
        offsets[i] = Fraction(float(kj[i])) * Fraction(float(b[i])) + Fraction(float(ej[i]))
    slopes, intercepts = np.array(kappa, copy=True), np.array(e, copy=True)
    slopes[hit] = kj[hit][:, None]
    intercepts[hit] = 0.0
    labels = np.array(b, copy=True)
    labels[hit] = 0.0
    substitute = PiecewiseLinearLink(slopes, intercepts)
    pieces = None
    if by_pieces is not None:
        offsets[others] = by_pieces.offsets[others]
        mask = mask | by_pieces.mask
        # the others' pieces, substituted (the generalized-linear rows' are read off their substitute)
        pieces = by_pieces.pieces if by_pieces.pieces is not None else examples.pieces()
    return AffineReduction(mask, offsets, pieces=pieces, labels=labels, link=substitute)


def affine_reduction(examples: Examples, region: Domain, C: float) -> AffineReduction:
    """Which examples of ``examples`` are one affine piece on ``region`` with a dominating level.

    See the module docstring for the tests, the substitutes and the privacy argument.
    """
    m = examples.m
    mask = np.zeros(m, dtype=bool)
    offsets = np.zeros(m, dtype=object)
    st = examples.loss.structure
    if isinstance(st, PiecewiseLinearStructure) and isinstance(region, Ball | Lens):
        return _piecewise_on_balls(examples, region, C)
    if isinstance(st, PiecewiseLinearStructure):
        return _piecewise_by_pieces(examples, region, C)
    if isinstance(st, SmoothGLMStructure) and isinstance(st.link, HuberLink):
        glm = examples.glm()
        a, b, link = glm.a, glm.b, glm.link
        M = link.M
        sign, b_sub, kept = _label_beyond(region, a, b, M)
        with np.errstate(invalid="ignore", over="ignore"):
            level = 2.0 * M * link.scale * sign * b
        mask = kept & _dominant(level, 2.0 * M * link.scale * row_norm(a), C, region)
        if not np.any(mask):
            return AffineReduction(mask, offsets)
        labels = b.copy()
        labels[mask] = b_sub[mask]
        k = 2 * Fraction(M) * Fraction(link.scale)
        for i in np.nonzero(mask)[0]:
            offsets[i] = k * int(sign[i]) * (Fraction(float(b[i])) - Fraction(float(b_sub[i])))
        return AffineReduction(mask, offsets, labels=labels)
    if (isinstance(st, SmoothGLMStructure) and isinstance(st.link, SquareLink)
            and not isinstance(region, Ball | Lens)):
        return _square_level(examples.glm(), region)
    if (isinstance(st, SmoothGLMStructure) and isinstance(st.link, LogisticLink)
            and not isinstance(region, Ball | Lens)):
        return _logistic_level(examples.glm(), region, C)
    return AffineReduction(mask, offsets)


def _label_beyond(region: Domain, a: np.ndarray, b: np.ndarray, M: float
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows whose argument stays at or beyond ``±M`` on all of ``U``: their side (``±1``, ``0``), the label
    nearest ``U`` that keeps them there (with room for rounding, and tested again), and whether it does.

    Row by row, from the row's ``(a_i, b_i)`` and the public ``U`` and ``M`` only.
    """
    m = b.shape[0]
    a_norm = row_norm(a)
    lo, hi = argument_range(region, a, b, a_norm)
    sign = np.where(lo >= M, 1.0, np.where(hi <= -M, -1.0, 0.0))
    with np.errstate(invalid="ignore", over="ignore"):
        lo0, hi0 = argument_range(region, a, np.zeros(m), a_norm)
        pad = 8.0 * EPS * (np.abs(lo0) + np.abs(hi0) + M) + 1e-300
        b_sub = np.where(sign > 0, M - lo0 + pad, -M - hi0 - pad)
        lo1, hi1 = argument_range(region, a, b_sub, a_norm)
    same_side = np.where(sign > 0, lo1 >= M, hi1 <= -M)
    return sign, b_sub, (sign != 0) & same_side & np.isfinite(b_sub)


def _logistic_level(glm: GLMRepresentation, region: Domain, C: float) -> AffineReduction:
    """A logistic row whose argument stays beyond ``±T₀`` on ``U`` with a dominating level, moved near ``U``.

    ``c log(1 + e^u) = c u + c log(1 + e^{−u})``: where ``u ≥ T₀ = 64`` on all of ``U`` the row is
    ``c u`` up to less than ``c e^{−64}``, and where ``u ≤ −T₀`` it is ``0`` up to as little.  Such a row
    with a level ``|c b| > 2 (1 + C diam U + c||a|| max_U ||y||)`` (a far region, or a steep record's
    offset; a canned logistic loss has ``b = 0`` and is never carried) is substituted: on the positive
    side by the same slope with the label ``b'`` nearest ``U`` that keeps ``u ≥ T₀`` (tested like
    Huber's), ``κ = c(b − b')``; on the negative side by the constant
    row ``c log(1 + e^{−T₀})`` (slope ``0``, label ``−T₀``), ``κ = 0``.  Unlike Huber's linear parts
    this is not exact: the substitute's loss differs from the row's minus ``κ`` by less than
    ``c e^{−64} ≈ 1.6·10⁻²⁸ c`` everywhere on ``U`` — a public per-record map (decided and made from the
    row, ``U`` and ``C`` only; flagged in ``rounded``), so the release is that of the mapped data set,
    as for the record scaling.  Left as it was, float64 could not bracket such a row to any ``α``
    (found by review: one row on ``[10⁶, 10⁶ + 1]³`` refused while its neighbour released).
    """
    a, b, link = glm.a, glm.b, glm.link
    m = b.shape[0]
    T0 = LOGISTIC_TAIL
    sign, b_sub, kept = _label_beyond(region, a, b, T0)
    c = link.scale
    with np.errstate(invalid="ignore", over="ignore"):
        mask = kept & _dominant(c * b, c * row_norm(a), C, region, LOGISTIC_LEVEL_FACTOR)
    if not np.any(mask):
        return AffineReduction(mask, np.zeros(m, dtype=object))
    negative = mask & (sign < 0)
    labels = b.copy()
    labels[mask] = b_sub[mask]
    labels[negative] = -T0
    directions = a.copy()
    directions[negative] = 0.0
    positive = mask & (sign > 0)
    return AffineReduction(mask, lambda: _level_drops(positive, Fraction(c), b, b_sub), labels=labels,
                           rounded=mask.copy(), directions=directions)


def _level_drops(rows: np.ndarray, scale: Fraction, before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """``κ_i = c (b_i − b'_i)`` on ``rows`` and ``0`` elsewhere, in exact rationals."""
    out = np.zeros(rows.shape[0], dtype=object)
    for i in np.nonzero(rows)[0]:
        out[i] = scale * (Fraction(float(before[i])) - Fraction(float(after[i])))
    return out


def _exact_difference(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``fl(x − y)`` and whether it is exact (Knuth's error-free sum: the rounding error is 0)."""
    with np.errstate(invalid="ignore", over="ignore"):
        s = x - y
        z = s - x
        err = (x - (s - z)) + (-y - z)
    return s, np.isfinite(s) & (err == 0.0)


def _square_level(glm: GLMRepresentation, region: Domain) -> AffineReduction:
    """The shifted form of a square-link batch (see the module docstring), row by row."""
    a, b, link = glm.a, glm.b, glm.link
    m = b.shape[0]
    lo0, hi0 = argument_range(region, a, np.zeros(m))  # bounds of <a_i, y> over U, per row
    with np.errstate(invalid="ignore", over="ignore"):
        lo = lo0 + b - 2.0 * EPS * (np.abs(lo0) + np.abs(b))
        hi = hi0 + b + 2.0 * EPS * (np.abs(hi0) + np.abs(b))
        T = np.where(lo > 0, b + lo0, np.where(hi < 0, b + hi0, 0.0))
        T = np.where(np.isfinite(T) & np.isfinite(2.0 * T), T, 0.0)
    b_new, exact = _exact_difference(b, T)
    mask = (T != 0.0) & np.isfinite(b_new)
    T = np.where(mask, T, 0.0)
    labels = np.where(mask, b_new, b)
    return AffineReduction(mask, lambda: _square_constants(mask, Fraction(link.scale), T), labels=labels,
                           link=ShiftedSquareLink(link.scale, T), rounded=mask & ~exact)


def _square_constants(rows: np.ndarray, scale: Fraction, shift: np.ndarray) -> np.ndarray:
    """``κ_i = c T_i²`` on ``rows`` and ``0`` elsewhere, in exact rationals."""
    out = np.zeros(rows.shape[0], dtype=object)
    for i in np.nonzero(rows)[0]:
        out[i] = scale * Fraction(float(shift[i])) ** 2
    return out


__all__ = ["LEVEL_FACTOR", "LOGISTIC_LEVEL_FACTOR", "LOGISTIC_TAIL", "AffineReduction", "affine_reduction",
           "argument_range"]
