"""Exact-arithmetic brackets for the examples float64 cannot resolve (refusal-free certification).

A float64 bracket of ``f_{C,U}(w, z)`` carries a rounding margin proportional to
the *terms* of its formulas: an example with a label of ``10¹⁰`` or features of
``10¹²`` has terms that large, so its float bracket is far wider than any
accuracy ``α`` a release can afford, and a certificate that needs it would
refuse — an observable event that one record can cause.  This module
re-evaluates such an example in exact rational arithmetic
(:class:`fractions.Fraction` of the float inputs, which is exact), so the
width of its bracket no longer depends on its magnitude.

For a generalized linear example with a piecewise-linear link,

    f(y) = φ(<a, y> + b),    φ(u) = max_j κ_j u + e_j,

on ``U`` a ball or a lens, the bracket is built from float *proposals* (the
closed-form path's inner point ``y``, slope ``g`` and conjugate weight ``π``)
that are repaired and evaluated exactly:

* **upper** — the proposal is *polished*: projected in high precision
  (:mod:`decimal`, Newton's method on the constraints that are active at the
  proposal: the kink ``<a, y> + b = u_k`` and the spheres of ``U``, each sphere
  shrunk by a relative ``2⁻ᵖ``) so that a steep slope does not turn the
  proposal's float rounding into a visible loss.  Every candidate ``y`` is
  tested for membership in ``U`` *exactly* (``||y − c||² ≤ r²`` in rationals);
  ``f(y) + C||w − y||`` is then exact but for one square root, bounded above by
  an integer square root at ``p`` bits.
* **lower** — the minorant ``u ↦ <g, u> + β`` with
  ``β = π b − φ*(π) − σ_U(g − π a)`` (Appendix E.3) for ``||g|| ≤ C`` (tested
  exactly) and ``π`` in ``[min κ, max κ]``: ``φ*`` is the lower convex envelope
  of ``(κ_j, −e_j)``, exact in rationals; ``σ_U`` is bounded above exactly:
  ``<c, v> + r·√(||v||²)`` for a ball, and for a lens the inf-convolution bound
  ``σ_{B₁}(v − μ) + σ_{B₂}(μ) ≥ σ_{B₁∩B₂}(v)`` (valid for every ``μ``) at
  ``μ ∈ {0, v, μ*}``, ``μ*`` the split of ``v`` over the two normals at the
  lens's extreme point, computed in high precision.  Several ``π`` (the
  proposal, the pieces' slopes, the least-squares multiplier at the polished
  point) are tried; the best bound is kept.
* both are shifted by the example's **offset** ``κ_i`` — a per-example rational
  constant, exact, fixed for a whole ERM problem (:meth:`LipschitzExtension.level_offsets`) —
  *before* they are rounded to float, the upper one up and the lower one down.
  Subtracting a constant from one example's loss changes no minimizer, and
  makes the rounded value of size ``C·diam U``, not of the example's level.

``p`` is chosen from the example's own magnitudes and the requested tolerance
(:func:`precision_bits`), so everything here is a function of the example,
the query point and public inputs only.  Cost: milliseconds per example, in
Python — meant for the few examples the float path cannot certify.
"""

from __future__ import annotations

import itertools
import math
import sys
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from cvxdp.geometry import Ball, Lens

Vector = list[Fraction]


# -- exact scalar helpers ----------------------------------------------------------------------------
def _q(x: float) -> Fraction:
    return Fraction(float(x))


def _dec(q: Fraction) -> Decimal:
    """``q`` in the current decimal context (rounded to its precision)."""
    return Decimal(q.numerator) / Decimal(q.denominator)


def _qv(v: np.ndarray) -> Vector:
    return [Fraction(float(t)) for t in v]


#: The types ``_dot``'s integer paths take (exact, arbitrary precision); any other takes the plain sum.
_EXACT = (Fraction, int, bool)


def _dot(u: Vector, v: Vector) -> Fraction:
    """``Σ u_i v_i``, exactly, with one normalization instead of a gcd per step.

    Entries that came from floats are dyadic (denominator a power of two); their products are summed as
    integers over a common power of two.  Other rationals are summed as integers over the product of
    the two vectors' common denominators (:func:`_dot_common`).  Either is the same rational as the
    plain sum of :class:`~fractions.Fraction` products, 2–6× faster on 20-dimensional vectors.
    """
    num, exp = 0, 0  # the partial sum is num / 2**exp
    for a, b in zip(u, v, strict=True):
        # 3 (not a power of two): anything but a Fraction or a Python int (numpy's 64-bit integers would wrap)
        da = a.denominator if type(a) in _EXACT else 3
        db = b.denominator if type(b) in _EXACT else 3
        if da & (da - 1) or db & (db - 1):
            return _dot_common(u, v)
        e = da.bit_length() + db.bit_length() - 2
        p = a.numerator * b.numerator
        if e > exp:
            num <<= e - exp
            exp = e
        else:
            p <<= exp - e
        num += p
    return Fraction(num, 1 << exp)


def _dot_common(u: Vector, v: Vector) -> Fraction:
    """``Σ u_i v_i`` as ``Σ (U u_i)(V v_i) / (U V)`` with ``U``, ``V`` the lcm of each vector's
    denominators (integers throughout); an entry other than a Fraction or a Python int takes the plain
    sum."""
    if not all(type(a) in _EXACT for a in u) or not all(type(b) in _EXACT for b in v):
        return sum((a * b for a, b in zip(u, v, strict=True)), Fraction(0))
    du, dv = [a.denominator for a in u], [b.denominator for b in v]
    nu, nv = [a.numerator for a in u], [b.numerator for b in v]
    U, V = math.lcm(*du), math.lcm(*dv)
    total = sum((x * (U // dx)) * (y * (V // dy)) for x, dx, y, dy in zip(nu, du, nv, dv, strict=True))
    return Fraction(total, U * V)


def _sub(u: Vector, v: Vector) -> Vector:
    return [a - b for a, b in zip(u, v, strict=True)]


def sqrt_upper(q: Fraction, bits: int) -> Fraction:
    """A rational ``s ≥ √q`` with ``s ≤ √q (1 + 2^{−bits})`` (``q ≥ 0``), from an integer square root."""
    if q < 0:
        raise ValueError("sqrt_upper needs q >= 0")
    if q == 0:
        return Fraction(0)
    n, d = q.numerator, q.denominator
    nd = n * d  # √(n/d) = √(n d) / d
    shift = max(0, bits - nd.bit_length() // 2 + 2)
    s = math.isqrt(nd << (2 * shift))  # s ≤ √(n d)·2^shift < s + 1
    return Fraction(s + 1, d << shift)


def round_up(q: Fraction) -> float:
    """The smallest float ``≥ q`` (``+∞`` above the float range, the most negative float below it)."""
    try:
        f = float(q)
    except OverflowError:
        return math.inf if q > 0 else -sys.float_info.max
    if math.isfinite(f) and Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def round_down(q: Fraction) -> float:
    """The largest float ``≤ q`` (``−∞`` below the float range, the largest float above it)."""
    try:
        f = float(q)
    except OverflowError:
        return sys.float_info.max if q > 0 else -math.inf
    if math.isfinite(f) and Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def precision_bits(magnitude: float, tolerance: float) -> int:
    """Bits ``p`` of the square roots and of the polishing: ``magnitude·2^{−p} ≤ 2⁻⁶⁴ tolerance``.

    At least 64, at most 8000; a magnitude that is not a finite positive number (overflowed), or
    whose ratio to the tolerance overflows (a finite 1e300 over a tolerance below 1e8 raised
    ``OverflowError`` from ``math.ceil``, found by review), gets the most.  Only the tightness of a
    bracket depends on ``p``, never its validity.
    """
    if not magnitude > 0:
        return 64
    ratio = magnitude / tolerance if tolerance > 0 else math.inf
    if not math.isfinite(ratio):
        return 8000
    return int(min(max(64, 64 + math.ceil(math.log2(ratio))), 8000))


# -- the region, exactly -----------------------------------------------------------------------------
def _balls(region: Ball | Lens) -> list[tuple[np.ndarray, float]]:
    if isinstance(region, Lens):
        return [(region.first.center, region.first.radius), (region.second.center, region.second.radius)]
    return [(region.center, region.radius)]


def _inside(y: Vector, balls: list[tuple[Vector, Fraction]]) -> bool:
    for c, r in balls:
        diff = _sub(y, c)
        if _dot(diff, diff) > r * r:
            return False
    return True


def _ball_support_upper(v: Vector, c: Vector, r: Fraction, bits: int) -> Fraction:
    return _dot(c, v) + r * sqrt_upper(_dot(v, v), bits)


# -- high-precision polishing ------------------------------------------------------------------------
def _solve_small(M: list[list[Decimal]], rhs: list[Decimal]) -> list[Decimal] | None:
    """Gaussian elimination with partial pivoting for a k × k system (k ≤ 4), in the current context."""
    k = len(rhs)
    A = [row[:] + [rhs[i]] for i, row in enumerate(M)]
    for col in range(k):
        piv = max(range(col, k), key=lambda i: abs(A[i][col]))
        if A[piv][col] == 0:
            return None
        A[col], A[piv] = A[piv], A[col]
        for i in range(col + 1, k):
            f = A[i][col] / A[col][col]
            for j in range(col, k + 1):
                A[i][j] -= f * A[col][j]
    x = [Decimal(0)] * k
    for i in reversed(range(k)):
        s = A[i][k] - sum(A[i][j] * x[j] for j in range(i + 1, k))
        x[i] = s / A[i][i]
    return x


def _polish(y0: np.ndarray, planes: list[tuple[np.ndarray, Fraction]],
            spheres: list[tuple[np.ndarray, Fraction]], digits: int) -> Vector | None:
    """Newton's method (minimum-norm steps) onto ``{<a, y> = t} ∩ {||y − c||² = ρ²}`` in high precision."""
    with localcontext() as ctx:
        ctx.prec = digits
        y = [Decimal(float(t)) for t in y0]
        P = [([Decimal(float(t)) for t in a], _dec(t))
             for a, t in planes]
        S = [([Decimal(float(t)) for t in c], _dec(rho))
             for c, rho in spheres]
        for _ in range(8):
            rows, h = [], []
            for a, t in P:
                rows.append(a)
                h.append(sum(ai * yi for ai, yi in zip(a, y, strict=True)) - t)
            for c, rho2 in S:
                diff = [yi - ci for yi, ci in zip(y, c, strict=True)]
                rows.append([2 * t for t in diff])
                h.append(sum(t * t for t in diff) - rho2)
            if not rows:
                break
            gram = [[sum(p * q for p, q in zip(r1, r2, strict=True)) for r2 in rows] for r1 in rows]
            lam = _solve_small(gram, h)
            if lam is None:
                return None
            step = [sum(lam[i] * rows[i][j] for i in range(len(rows))) for j in range(len(y))]
            y = [yi - si for yi, si in zip(y, step, strict=True)]
        return [Fraction(t) for t in y]


def _least_squares(cols: list[np.ndarray | Vector], target: np.ndarray, digits: int,
                   minus: tuple[float, np.ndarray] | None = None) -> list[Fraction] | None:
    """Coefficients ``x`` minimizing ``||Σ x_i col_i − (target − minus)||`` (normal equations).

    In high precision; ``minus = (κ, a)`` stands for ``κ a`` and is formed and subtracted there:
    ``g − κ a`` in float would lose ``g`` beside a slope of 10¹⁰⁰.  A column may be an exact
    rational vector (a normal ``y − c`` at an exact inner point), converted at ``digits`` digits.
    """
    def dec(t) -> Decimal:
        return _dec(t) if isinstance(t, Fraction) else Decimal(float(t))

    with localcontext() as ctx:
        ctx.prec = digits
        C = [[dec(t) for t in c] for c in cols]
        b = [Decimal(float(t)) for t in target]
        if minus is not None:
            k = Decimal(float(minus[0]))
            b = [bi - k * Decimal(float(t)) for bi, t in zip(b, minus[1], strict=True)]
        gram = [[sum(p * q for p, q in zip(c1, c2, strict=True)) for c2 in C] for c1 in C]
        rhs = [sum(p * q for p, q in zip(c, b, strict=True)) for c in C]
        x = _solve_small(gram, rhs)
        return None if x is None else [Fraction(t) for t in x]


# -- the bracket -------------------------------------------------------------------------------------
@dataclass
class ExactBracket:
    """One example's exact bracket of ``f_{C,U}(w) − offset`` (rationals) and its float rounding."""

    upper: Fraction | None
    lower: Fraction | None
    g: np.ndarray
    beta: Fraction | None
    y: np.ndarray

    def rounded(self) -> tuple[float, float, float]:
        """``(upper ↑, lower ↓, β ↓)`` as floats; ``±∞`` where no bound was found."""
        up = math.inf if self.upper is None else round_up(self.upper)
        lo = -math.inf if self.lower is None else round_down(self.lower)
        be = -math.inf if self.beta is None else round_down(self.beta)
        return up, lo, be


def _kink_level(kq: Vector, eq: Vector, j1: int, j2: int) -> Fraction | None:
    """The argument ``u`` where pieces ``κ_j u + e_j`` meet, exactly (``None`` for parallel pieces)."""
    if kq[j1] == kq[j2]:
        return None
    return (eq[j2] - eq[j1]) / (kq[j1] - kq[j2])


def _upper_candidates(yf: np.ndarray, a: np.ndarray, P: np.ndarray, q: np.ndarray, kq: Vector, eq: Vector,
                      bq: Fraction, balls: list[tuple[np.ndarray, float]],
                      qballs: list[tuple[Vector, Fraction]], shrink: Fraction, digits: int) -> list[Vector]:
    """The proposal, and its projections onto the constraints active near it, that lie in ``U`` exactly.

    Active near ``y``: the kink between the two largest pieces (``<a, y> + b = u_k`` with
    ``κ_j u_k + e_j = κ_l u_k + e_l`` — its normal ``a`` is a float, so the plane is exact) and
    the spheres of ``U`` that ``y`` is within a relative ``10⁻⁶`` of.
    """
    planes: list[tuple[np.ndarray, Fraction]] = []
    if P.shape[0] >= 2 and np.any(a):
        order = np.argsort(-(P @ yf + q))
        j1 = int(order[0])
        for j2 in order[1:]:
            u_k = _kink_level(kq, eq, j1, int(j2))
            if u_k is not None:
                planes.append((a, u_k - bq))
                break
    near = [i for i, (c, r) in enumerate(balls) if float(np.linalg.norm(yf - c)) >= r * (1.0 - 1e-6)]
    candidates: list[Vector] = []
    yq = _qv(yf)
    if _inside(yq, qballs):
        candidates.append(yq)
    for use_plane in ([False, True] if planes else [False]):
        for k in range(len(near) + 1):
            for subset in itertools.combinations(near, k):
                if not use_plane and not subset:
                    continue
                spheres = [(balls[i][0], (qballs[i][1] * shrink) ** 2) for i in subset]
                y = _polish(yf, planes if use_plane else [], spheres, digits)
                if y is not None and _inside(y, qballs):
                    candidates.append(y)
    return candidates


def _best_candidate(candidates: list[Vector], value, fallback: np.ndarray, region: Ball | Lens,
                    qballs: list[tuple[Vector, Fraction]], bits: int
                    ) -> tuple[Fraction | None, Vector | None, np.ndarray | None]:
    """The candidate of least exact ``value`` (the upper bound), and a float point of ``U`` next to it.

    Without candidates the fallback proposal is pulled toward an interior point until it lies in
    ``U`` exactly.
    """
    if not candidates:
        p = _qv(region.interior_point())
        yq = _qv(fallback)
        for e in (bits, 60, 40, 20, 10, 4, 1):
            t = Fraction(1) - Fraction(1, 1 << e)
            y = [pi + t * (yi - pi) for pi, yi in zip(p, yq, strict=True)]
            if _inside(y, qballs):
                candidates = [y]
                break
    best_upper: Fraction | None = None
    best_y: Vector | None = None
    for y in candidates:
        v = value(y)
        if best_upper is None or v < best_upper:
            best_upper, best_y = v, y
    return best_upper, best_y, (_float_inside(best_y, qballs, region) if best_y is not None else None)


def exact_bracket(w: np.ndarray, a: np.ndarray, b: float, slopes: np.ndarray, intercepts: np.ndarray,
                  C: float, region: Ball | Lens, y_prop: np.ndarray | list[np.ndarray],
                  g_prop: np.ndarray | list[np.ndarray], theta_prop: np.ndarray | list[np.ndarray],
                  offset: Fraction | float, tolerance: float) -> ExactBracket:
    """Exact bracket of ``f_{C,U}(w) − offset`` for ``f(y) = max_j κ_j(<a, y> + b) + e_j`` on a ball or lens.

    The example's generalized linear form (:meth:`~cvxdp.loss.Examples.glm`), taken exactly: its
    pieces ``A_j = κ_j a`` and ``b_j = κ_j b + e_j`` are exact rationals and exactly parallel, so this
    is the same function the float closed form certifies.  The proposals (one each or lists: inner
    points ``y``, slopes ``g``, simplex weights ``θ``) only steer the search; every bound is
    evaluated in rationals, the minorant by the E.3 formula ``β = θᵀb − σ_U(g − Aᵀθ)``.
    """
    d = a.size
    a = np.asarray(a, float)
    slopes, intercepts = np.asarray(slopes, float), np.asarray(intercepts, float)
    P = slopes[:, None] * a[None, :]  # float, for steering only
    q = slopes * b + intercepts
    y_props = [np.asarray(y, float) for y in (y_prop if isinstance(y_prop, list) else [y_prop])]
    g_props = [np.asarray(g, float) for g in (g_prop if isinstance(g_prop, list) else [g_prop])]
    t_props = [np.asarray(t, float) for t in (theta_prop if isinstance(theta_prop, list) else [theta_prop])]
    balls = _balls(region)
    qballs = [(_qv(c), _q(r)) for c, r in balls]
    aq, bq, kq, eq = _qv(a), _q(b), _qv(slopes), _qv(intercepts)
    Pq = [[k * t for t in aq] for k in kq]
    qq = [k * bq + e for k, e in zip(kq, eq, strict=True)]
    wq = _qv(w)
    Cq, off = _q(C), Fraction(offset)
    M = len(qq)
    reach = max(float(np.linalg.norm(c)) + r for c, r in balls)
    magnitude = (float(np.max(np.abs(slopes))) * (float(np.linalg.norm(a)) * (reach + max(
        float(np.linalg.norm(y)) for y in y_props)) + abs(b)) + float(np.max(np.abs(intercepts)))
        + C * (float(np.linalg.norm(w)) + reach) + 1.0)
    bits = precision_bits(magnitude, tolerance)
    digits = int(bits * 0.30103 * 2) + 30
    shrink = Fraction(1) - Fraction(1, 1 << bits)

    def value(y: Vector) -> Fraction:
        f = max(_dot(row, y) + bj for row, bj in zip(Pq, qq, strict=True))
        diff = _sub(wq, y)
        return f + Cq * sqrt_upper(_dot(diff, diff), bits) - off

    # ---- upper: polished candidates, tested exactly -----------------------------------------------
    candidates: list[Vector] = []
    for yf in y_props:
        candidates.extend(_upper_candidates(yf, a, P, q, kq, eq, bq, balls, qballs, shrink, digits))
    # a piece κ_j(<a, y> + b) + e_j steeper than C is minimized over a ball next to a pole
    # c ∓ r·a/||a|| (within an angle ~C/(|κ_j| ||a||)); a float proposal there is off along the
    # sphere by a rounding δ, which costs |κ_j| ||a|| r δ² — 10⁶ at a slope of 10⁴⁰ — so the poles
    # (and a lens's rim points), from the exact direction a in high precision, are candidates too
    if float(np.max(np.abs(slopes))) * float(np.linalg.norm(a)) > C:
        candidates.extend(_poles(a, balls, qballs, shrink, digits))
        candidates.extend(_rim_points(a, region, qballs, shrink, digits))  # a lens: its rim
    # the kinks between the top pieces, <a, y> + b = u_k, met in closed form: where a kink plane
    # only grazes U (a label of ±r||x||), the optimum is on a cap's rim too small for Newton's method
    top = [int(j) for j in np.argsort(-(P @ y_props[0] + q), kind="stable")[:3]]
    for j1, j2 in itertools.combinations(top, 2):
        u_k = _kink_level(kq, eq, j1, j2)
        if u_k is not None:
            candidates.extend(_plane_ball_points(np.asarray(w, float), a, u_k - bq, balls, qballs, shrink,
                                                 digits))
    best_upper, best_y, y_out = _best_candidate(candidates, value, y_props[0], region, qballs, bits)

    # ---- lower: exact minorants for a few (g, θ) ---------------------------------------------------
    # the proposals, the direction from the best inner point, zero (w in the flat part of f_{C,U}),
    # and the pieces' own slopes (the extension equals f near w)
    directions = list(g_props)  # slopes a dual optimum may have: C (w − y*)/||w − y*|| near y*
    if best_y is not None:
        diff = np.asarray(w, float) - np.array([float(t) for t in best_y])
        nd = float(np.linalg.norm(diff))
        if nd > 0:
            directions.append(C * diff / nd)
    # w on U's boundary with y* = w and a piece steeper than C: the piece's slope plus the normal
    # cone at w (the tight minorant there; see reduced.normal_cone_slopes)
    from cvxdp.extension.reduced import normal_cone_slopes

    tilted = normal_cone_slopes(np.broadcast_to(np.asarray(w, float), (M, d)), P, region)
    g_cands = [*directions, np.zeros(d), *(P[j] for j in range(M)), *(tilted[j] for j in range(M))]
    thetas: list[Vector] = []
    for t in t_props:
        thetas.append(_simplex_exact(t))
    thetas.extend([Fraction(int(i == j)) for i in range(M)] for j in range(M))
    if best_y is not None and M >= 2:
        # θ on the two top pieces with g − Aᵀθ in the normal cone at y: least squares over (θ, λ)
        yb = np.array([float(t) for t in best_y])
        order = np.argsort(-(P @ yb + q))
        j1, j2 = int(order[0]), int(order[1])
        # exact normals: near a pole the float y − c is parallel to a, and the system is singular
        normals = [_sub(best_y, _qv(c)) for c, _ in balls]
        span = kq[j1] - kq[j2]
        for g in directions if span != 0 else []:
            for k in range(len(balls) + 1):
                for subset in itertools.combinations(range(len(balls)), k):
                    # g − κ₂ a = t (κ₁ − κ₂) a + Σ λ n: the coefficient of the column a is t (κ₁ − κ₂)
                    sol = _least_squares([a] + [normals[i] for i in subset], g, digits,
                                         minus=(float(slopes[j2]), a))
                    if sol is not None:
                        t = min(max(sol[0] / span, Fraction(0)), Fraction(1))
                        th = [Fraction(0)] * M
                        th[j1], th[j2] = t, 1 - t
                        thetas.append(th)
    best_lower: Fraction | None = None
    best_beta: Fraction | None = None
    best_g = np.zeros(d)
    # per θ, once: Σ_j θ_j P_j and <θ, q> (exact, so g − Σ θ_j P_j is the same rational in any order)
    mixes = []
    for th in thetas:
        mix = [Fraction(0)] * d
        for j in range(M):
            if th[j]:
                mix = [mi + th[j] * pj for mi, pj in zip(mix, Pq[j], strict=True)]
        mixes.append((mix, _dot(th, qq)))
    for g in g_cands:
        g = _into_ball(g, Cq)
        gq = _qv(g)
        gw = _dot(gq, wq)
        for mix, tq in mixes:
            v = [gi - mi for gi, mi in zip(gq, mix, strict=True)]
            sigma = _support_upper(v, balls, qballs, bits, digits, region)
            beta = tq - sigma - off
            if best_lower is None or gw + beta > best_lower:
                best_lower, best_beta, best_g = gw + beta, beta, g
    return ExactBracket(upper=best_upper, lower=best_lower, g=best_g, beta=best_beta,
                        y=y_out if y_out is not None else y_props[0].copy())


# -- smooth links (Huber, square: rational; logistic: rigorous decimal bounds) ----------------------
def _smooth_link(link) -> tuple[str, Fraction, Fraction] | None:
    """``(kind, c, M)`` of a smooth link the exact path bounds rigorously, else ``None``."""
    from cvxdp.links import HuberLink, LogisticLink, SquareLink

    if isinstance(link, HuberLink):
        return "huber", _q(link.scale), _q(link.M)
    if isinstance(link, SquareLink):
        return "square", _q(link.scale), Fraction(0)
    if isinstance(link, LogisticLink):
        return "logistic", _q(link.scale), Fraction(0)
    return None


def _softplus_upper(u: Fraction, digits: int) -> Fraction:
    """A rational ``≥ log(1 + e^u)``: ``max(u, 0) + log(1 + e^{−|u|})`` in ``digits``-digit decimals.

    :mod:`decimal`'s ``exp`` and ``ln`` are correctly rounded, so the computed value errs by a few
    units of its last digit; ``10^{3−digits}(1 + |value|)`` is added.  ``e^{−|u|}`` may underflow
    to 0 — below that margin.
    """
    with localcontext() as ctx:
        ctx.prec = digits
        ctx.Emin = -999999999
        ud = _dec(u)
        tail = (Decimal(1) + (-abs(ud)).exp()).ln()
        val = max(ud, Decimal(0)) + tail
        margin = Decimal(10) ** (3 - digits) * (1 + abs(val))
        return Fraction(val + margin)


def _link_value(kind: str, c: Fraction, M: Fraction, u: Fraction, digits: int) -> Fraction:
    """``φ(u)`` exactly (Huber, square) or a rigorous upper bound (logistic)."""
    if kind == "logistic":
        return c * _softplus_upper(u, digits)
    if kind == "square" or abs(u) <= M:
        return c * u * u
    return c * (2 * M * abs(u) - M * M)


def _link_slope(kind: str, c: Fraction, M: Fraction, u: Fraction, digits: int) -> Fraction:
    """``φ'(u)`` (a proposal for the multiplier; for the logistic link ``c/(1 + e^{−u})`` in decimals)."""
    if kind == "square":
        return 2 * c * u
    if kind == "huber":
        return c * max(-2 * M, min(2 * M, 2 * u))
    with localcontext() as ctx:
        ctx.prec = digits
        ctx.Emin = -999999999
        ud = _dec(u)
        sig = 1 / (1 + (-ud).exp()) if ud >= 0 else ud.exp() / (1 + ud.exp())
        return c * Fraction(sig)


def _link_conjugate(kind: str, c: Fraction, M: Fraction, pi: Fraction, digits: int) -> Fraction | None:
    """An upper bound on ``φ*(π)`` (exact for Huber and square), ``None`` outside its domain.

    Huber and square: ``π²/(4c)`` (``|π| ≤ 2Mc`` for Huber).  Logistic:
    ``c [p log p + (1 − p) log(1 − p)]`` with ``p = π/c ∈ [0, 1]`` (``0`` at the ends), in decimals
    plus ``10^{3−digits}`` (``decimal``'s ``ln`` is correctly rounded).
    """
    if kind == "logistic":
        p = pi / c
        if p < 0 or p > 1:
            return None
        val = Decimal(0)
        with localcontext() as ctx:
            ctx.prec = digits
            ctx.Emin = -999999999
            # each of p and 1 − p from its exact rational (1 − p formed in decimals would round to 0
            # for p within 10^{−digits} of 1, and 0·ln 0 is an invalid operation); x ln x ≤ 0 on [0, 1],
            # so a term whose x rounds to 0 is bounded above by 0
            for x in (p, 1 - p):
                xd = _dec(x)
                if xd > 0:
                    val += xd * xd.ln()
            return c * Fraction(val + Decimal(10) ** (3 - digits))
    if kind == "huber" and abs(pi) > 2 * M * c:
        return None
    return pi * pi / (4 * c)


def _valley_levels(kind: str, c: Fraction, M: Fraction, a_norm: float, C: float,
                   digits: int) -> list[Fraction]:
    """Levels ``u`` of ``<a, y> + b`` to polish proposals onto: where a steep link's optimum sits.

    Huber: its flat middle's ends and centre ``{−M, 0, M}``; square: its zero; logistic: ``0`` and
    ``±logit(q)`` with ``q = C/(c||a||)`` (where ``φ'(u)||a|| = C``), computed in decimals.
    """
    if kind == "huber":
        return [-M, Fraction(0), M]
    if kind == "square":
        return [Fraction(0)]
    out = [Fraction(0)]
    q = C / (float(c) * a_norm) if a_norm > 0 else 1.0
    if 0 < q < 0.5:
        with localcontext() as ctx:
            ctx.prec = digits
            qd = Decimal(q)
            level = Fraction((qd / (1 - qd)).ln())
        out += [level, -level]
    return out


def _best_multiplier(kind: str, c: Fraction, M: Fraction, a: np.ndarray, b_c: Fraction, g: np.ndarray,
                     r: float, digits: int) -> Fraction:
    """``argmax_π π b_c − φ*(π) − r||g − π a||`` (within the link's dual domain), by bisection.

    The slope ``b_c − φ*'(π) + r <a, g − π a>/||g − π a||`` decreases in ``π``; 200 halvings of a
    bracket (the dual domain, or found by doubling), in ``digits``-digit decimal arithmetic.  A
    proposal only.
    """
    with localcontext() as ctx:
        ctx.prec = digits
        ad = [Decimal(float(t)) for t in a]
        gd = [Decimal(float(t)) for t in g]
        bd, cd = _dec(b_c), _dec(c)
        rd = Decimal(float(r))

        def slope(p: Decimal) -> Decimal:
            v = [gi - p * ai for gi, ai in zip(gd, ad, strict=True)]
            nv = sum(t * t for t in v).sqrt()
            pull = sum(ai * vi for ai, vi in zip(ad, v, strict=True)) / nv if nv > 0 else Decimal(0)
            if kind == "logistic":  # φ*'(π) = logit(π/c)
                q = p / cd
                return bd - (q / (1 - q)).ln() + rd * pull
            return bd - p / (2 * cd) + rd * pull

        if kind == "logistic":
            tiny = Decimal(10) ** (-(digits // 2))
            lo, hi = cd * tiny, cd * (1 - tiny)
        elif kind == "huber":
            lo, hi = -2 * _dec(M) * cd, 2 * _dec(M) * cd
        else:
            lo, hi = Decimal(-1), Decimal(1)
            for _ in range(2000):
                if slope(lo) > 0:
                    break
                lo *= 2
            for _ in range(2000):
                if slope(hi) < 0:
                    break
                hi *= 2
        for _ in range(200):
            mid = (lo + hi) / 2
            if slope(mid) > 0:
                lo = mid
            else:
                hi = mid
        return Fraction((lo + hi) / 2)


def _poles(a: np.ndarray, balls: list[tuple[np.ndarray, float]], qballs: list[tuple[Vector, Fraction]],
           shrink: Fraction, digits: int) -> list[Vector]:
    """The points ``c ± r·a/||a||`` of each sphere of ``U`` (radius shrunk), in high precision, inside ``U``.

    A steep quadratic's minimizer sits next to a pole; a float proposal there is off the pole
    along the sphere by a rounding ``δ``, which costs ``slope·||a||·δ²`` — visible at a slope of
    ``10³⁰``.  The poles are computed to ``digits`` digits instead.
    """
    if not np.any(a):
        return []
    out: list[Vector] = []
    with localcontext() as ctx:
        ctx.prec = digits
        ad = [Decimal(float(t)) for t in a]
        norm = sum(t * t for t in ad).sqrt()
        for (c, _), (_, rq) in zip(balls, qballs, strict=True):
            rad = _dec(rq) * _dec(shrink)
            for sign in (1, -1):
                y = [Fraction(Decimal(float(ci)) + sign * rad * t / norm)
                     for ci, t in zip(c, ad, strict=True)]
                if _inside(y, qballs):
                    out.append(y)
    return out


def _plane_ball_points(w: np.ndarray, a: np.ndarray, level: Fraction, balls: list[tuple[np.ndarray, float]],
                       qballs: list[tuple[Vector, Fraction]], shrink: Fraction, digits: int) -> list[Vector]:
    """Points of the plane ``<a, y> = level`` inside ``U`` near ``w``, in closed form (high precision).

    For each sphere: the disk where the plane cuts the (shrunk) ball, its centre ``h`` and radius
    ``ρ``; the candidate is ``w``'s projection onto the plane if it falls in the disk, else the
    disk's rim point nearest it.  Newton's method fails where the plane is nearly tangent to the
    sphere (their normals almost parallel) — a valley that only grazes ``U``.  Kept if in ``U``
    exactly.
    """
    out: list[Vector] = []
    if not np.any(a):
        return out
    with localcontext() as ctx:
        ctx.prec = digits
        ad = [Decimal(float(t)) for t in a]
        wd = [Decimal(float(t)) for t in w]
        aa = sum(t * t for t in ad)
        na = aa.sqrt()
        lev = _dec(level)
        sh = _dec(shrink)
        shift = (sum(x * y for x, y in zip(ad, wd, strict=True)) - lev) / aa
        p = [wi - shift * ai for wi, ai in zip(wd, ad, strict=True)]  # w projected onto the plane
        for (c, _), (_, rq) in zip(balls, qballs, strict=True):
            cd = [Decimal(float(t)) for t in c]
            r = _dec(rq) * sh
            delta = (lev - sum(x * y for x, y in zip(ad, cd, strict=True))) / na
            if abs(delta) >= r:
                continue
            h = [ci + delta * ai / na for ci, ai in zip(cd, ad, strict=True)]
            rho = (r * r - delta * delta).sqrt()
            off = [pi - hi for pi, hi in zip(p, h, strict=True)]
            dist = sum(t * t for t in off).sqrt()
            for scale in ((Decimal(1),) if dist <= rho else (rho / dist, rho / dist * sh)):
                y = [Fraction(hi + scale * oi) for hi, oi in zip(h, off, strict=True)]
                if _inside(y, qballs):
                    out.append(y)
    return out


def _rim_point(qballs: list[tuple[Vector, Fraction]], sh: Decimal, vd: list[Decimal]) -> list[Decimal] | None:
    """The rim point of two spheres (radii times ``sh``) in direction ``vd`` across their axis.

    Rim centre ``c₁ + t e`` (``e`` the unit axis, ``t = (δ² + r₁² − r₂²)/(2δ)``), radius
    ``sqrt(r₁² − t²)``, then ``centre + radius · v⊥/||v⊥||``; in the current decimal context.
    ``None`` when the spheres do not cut or ``v`` is along the axis.
    """
    (c1q, r1q), (c2q, r2q) = qballs
    c1 = [_dec(t) for t in c1q]
    c2 = [_dec(t) for t in c2q]
    r1, r2 = _dec(r1q) * sh, _dec(r2q) * sh
    axis = [y - x for x, y in zip(c1, c2, strict=True)]
    dist = sum(t * t for t in axis).sqrt()
    if dist == 0:
        return None
    e = [t / dist for t in axis]
    t = (dist * dist + r1 * r1 - r2 * r2) / (2 * dist)
    if r1 * r1 - t * t <= 0:
        return None
    rho = (r1 * r1 - t * t).sqrt()
    along = sum(x * y for x, y in zip(vd, e, strict=True))
    perp = [x - along * y for x, y in zip(vd, e, strict=True)]
    npd = sum(x * x for x in perp).sqrt()
    if npd == 0:
        return None
    return [x + t * y + rho * p / npd for x, y, p in zip(c1, e, perp, strict=True)]


def _rim_points(a: np.ndarray, region: Ball | Lens, qballs: list[tuple[Vector, Fraction]],
                shrink: Fraction, digits: int) -> list[Vector]:
    """A lens's extreme points in the directions ``±a`` when they lie on its rim (high precision).

    The rim of the two spheres shrunk by ``shrink``, from their float centres and radii in
    ``digits``-digit decimals: centre ``c₁ + t e`` (``e`` the unit axis, ``t = (δ² + r₁² − r₂²)/(2δ)``),
    radius ``sqrt(r₁² − t²)``, and the points ``centre ± radius · a⊥/||a⊥||`` with ``a⊥`` the part of
    ``a`` across the axis — where a steep link's optimum sits once the localization ball cuts the
    domain's sphere.  Kept if in ``U`` exactly.
    """
    if not isinstance(region, Lens) or not np.any(a):
        return []
    out: list[Vector] = []
    with localcontext() as ctx:
        ctx.prec = digits
        ad = [Decimal(float(x)) for x in a]
        for sign in (1, -1):
            rim = _rim_point(qballs, _dec(shrink), [sign * x for x in ad])
            if rim is not None:
                y = [Fraction(x) for x in rim]
                if _inside(y, qballs):
                    out.append(y)
    return out


def exact_bracket_smooth(w: np.ndarray, a: np.ndarray, b: float, link, C: float, region: Ball | Lens,
                         y_props: list[np.ndarray], g_props: list[np.ndarray], pi_props: list[float],
                         offset: Fraction | float, tolerance: float) -> ExactBracket:
    """Exact bracket of ``f_{C,U}(w) − offset`` for ``f(y) = φ(<a, y> + b)``, ``φ`` a smooth link.

    Huber and square are rational: ``φ(u) = c u²`` (``c(2M|u| − M²)`` beyond ``M`` for Huber) and
    ``φ*(π) = π²/(4c)`` (on ``|π| ≤ 2Mc``); the logistic link's ``φ`` and ``φ*`` are bounded above
    rigorously in high-precision decimals (correctly rounded ``exp``/``ln`` plus a margin).  As for
    piecewise-linear links, every bound is then evaluated in rationals: the upper one at proposals
    polished onto the spheres of ``U`` and onto the link's valley levels, tested for membership
    exactly; the lower one by the E.3 minorant ``<g, w> + π b − φ*(π) − σ_U(g − π a)`` with
    ``||g|| ≤ C`` tested exactly and ``σ_U`` bounded above exactly.  Candidates: the proposals'
    ``(g, π)``, ``π = φ'(u)`` at the best inner point (the multiplier there), least-squares and
    bisected multipliers, ``g`` the unit direction from that point times ``C``, the slope ``π a``
    clipped and tilted by the normal cone.
    """
    from cvxdp.extension.reduced import normal_cone_slopes

    kind, cq, Mq = _smooth_link(link)
    d = a.size
    a = np.asarray(a, float)
    balls = _balls(region)
    qballs = [(_qv(c), _q(r)) for c, r in balls]
    aq, bq, wq = _qv(a), _q(b), _qv(w)
    Cq, off = _q(C), Fraction(offset)
    reach = max(float(np.linalg.norm(c)) + r for c, r in balls)
    u_size = float(np.linalg.norm(a)) * (reach + max(float(np.linalg.norm(y)) for y in y_props)) + abs(b)
    level = u_size + 1.0 if kind == "logistic" else u_size * u_size + 2.0 * float(Mq) * u_size
    magnitude = float(cq) * level + C * (float(np.linalg.norm(w)) + reach) + 1.0
    bits = precision_bits(magnitude, tolerance)
    digits = int(bits * 0.30103 * 2) + 30
    shrink = Fraction(1) - Fraction(1, 1 << bits)
    no_pieces = np.zeros((0, d))

    def value(y: Vector) -> Fraction:
        diff = _sub(wq, y)
        return (_link_value(kind, cq, Mq, _dot(aq, y) + bq, digits) + Cq * sqrt_upper(_dot(diff, diff), bits)
                - off)

    levels = _valley_levels(kind, cq, Mq, float(np.linalg.norm(a)), C, digits)
    candidates: list[Vector] = []
    for yf in y_props:
        candidates.extend(_upper_candidates(yf, a, no_pieces, np.zeros(0), [], [], bq, balls, qballs, shrink,
                                            digits))
        if np.any(a):
            # the valley of a steep link (Huber's flat middle, the square's zero): polish onto
            # <a, y> + b ∈ {−M, 0, M} (alone and with the near spheres) so that a huge <a, y> does not
            # turn the proposal's rounding into a visible loss
            near = [i for i, (c, r) in enumerate(balls) if float(np.linalg.norm(yf - c)) >= r * (1.0 - 1e-6)]
            for t in levels:
                for k in range(len(near) + 1):
                    for subset in itertools.combinations(near, k):
                        spheres = [(balls[i][0], (qballs[i][1] * shrink) ** 2) for i in subset]
                        y = _polish(yf, [(a, t - bq)], spheres, digits)
                        if y is not None and _inside(y, qballs):
                            candidates.append(y)
    candidates.extend(_poles(a, balls, qballs, shrink, digits))
    candidates.extend(_rim_points(a, region, qballs, shrink, digits))
    for t in levels:
        candidates.extend(_plane_ball_points(np.asarray(w, float), a, t - bq, balls, qballs, shrink, digits))
    best_upper, best_y, y_out = _best_candidate(candidates, value, y_props[0], region, qballs, bits)

    pis = [Fraction(float(p)) for p in pi_props if math.isfinite(p)]
    directions = list(g_props)
    # the best point, and the proposals (next to a flat valley that touches a sphere the best point
    # may be a pole where the multipliers are degenerate, while the proposal sits at the optimum)
    points = ([best_y] if best_y is not None else []) + [_qv(y) for y in y_props]
    for k_pt, yq in enumerate(points):
        if k_pt == 0 and best_y is not None:
            pis.append(_link_slope(kind, cq, Mq, _dot(aq, yq) + bq, digits))
        yb = np.array([float(t) for t in yq])
        diff = np.asarray(w, float) - yb
        nd = float(np.linalg.norm(diff))
        dirs = list(directions)
        if nd > 0:
            dirs.append(C * diff / nd)
            directions.append(C * diff / nd)
        # the multiplier π with g − π a in the normal cone at the point: least squares over
        # (a, the normals of the spheres near it), in high precision, for each direction g
        near = [yb - c for c, r in balls if float(np.linalg.norm(yb - c)) >= r * (1.0 - 1e-6)]
        for g in dirs:
            for k in range(len(near) + 1):
                for subset in itertools.combinations(near, k):
                    sol = _least_squares([a, *subset], g, digits)
                    if sol is not None:
                        pis.append(sol[0])
    def clipped(ps: list[Fraction]) -> list[Fraction]:
        if kind == "huber":
            return [max(-2 * Mq * cq, min(2 * Mq * cq, p)) for p in ps]
        if kind == "logistic":
            return [max(Fraction(0), min(cq, p)) for p in ps]
        return ps

    best: list = [None, None, np.zeros(d)]  # lower, β, g

    def try_multipliers(ps: list[Fraction]) -> None:
        for pi in dict.fromkeys(clipped(ps)):  # each distinct multiplier once
            phistar = _link_conjugate(kind, cq, Mq, pi, digits)
            if phistar is None:
                continue
            base = float(pi) * a
            tilted = normal_cone_slopes(np.asarray(w, float)[None, :], base[None, :], region)[0]
            for g in [*directions, np.zeros(d), base, tilted]:
                g = _into_ball(g, Cq)
                gq = _qv(g)
                v = [gi - pi * ai for gi, ai in zip(gq, aq, strict=True)]
                sigma = _support_upper(v, balls, qballs, bits, digits, region)
                beta = pi * bq - phistar - sigma - off
                lower = _dot(gq, wq) + beta
                if best[0] is None or lower > best[0]:
                    best[:] = [lower, beta, g]

    try_multipliers(pis)
    if best_upper is None or best[0] is None or best_upper - best[0] > Fraction(tolerance) / 2:
        # for each direction g and ball B(c, r) of U: the maximizer of the concave
        # π ↦ π (b + <c, a>) − φ*(π) − r ||g − π a|| (the bound with σ_B for σ_U), by bisection on its
        # slope in high precision — the multiplier where the optimum's position is too fine for floats;
        # costly (hundreds of decimal logarithms for the logistic link), so only when the cheaper
        # multipliers leave the bracket wider than half the tolerance
        try_multipliers([_best_multiplier(kind, cq, Mq, a, bq + _dot(aq, _qv(c)), g, r, digits)
                         for g in directions[:2] for c, r in balls])
    best_lower, best_beta, best_g = best
    return ExactBracket(upper=best_upper, lower=best_lower, g=best_g, beta=best_beta,
                        y=y_out if y_out is not None else y_props[0].copy())


def _simplex_exact(t: np.ndarray) -> Vector:
    """Float weights made an exact point of the simplex (negatives to 0, then divided by their sum)."""
    tq = [max(_q(x), Fraction(0)) for x in t]
    s = sum(tq, Fraction(0))
    if s == 0:
        return [Fraction(int(i == 0)) for i in range(len(tq))]
    return [x / s for x in tq]


def _float_inside(y: Vector, qballs: list[tuple[Vector, Fraction]], region: Ball | Lens) -> np.ndarray:
    """A float point exactly in ``U`` next to the rational ``y`` (reported as the inner point)."""
    yf = np.array([float(t) for t in y])
    if _inside(_qv(yf), qballs):
        return yf
    p = np.asarray(region.interior_point(), float)
    for e in (52, 48, 40, 30, 20, 10):
        cand = p + (1.0 - 2.0**-e) * (yf - p)
        if _inside(_qv(cand), qballs):
            return cand
    return p.copy()


def _into_ball(g: np.ndarray, Cq: Fraction) -> np.ndarray:
    """``g`` scaled (in float) until ``||g||² ≤ C²`` holds exactly."""
    g = np.asarray(g, float).copy()
    for _ in range(60):
        gq = _qv(g)
        if _dot(gq, gq) <= Cq * Cq:
            return g
        g = g * (1.0 - 2.0**-40) * min(1.0, float(Cq) / max(float(np.linalg.norm(g)), 1e-300))
    return np.zeros_like(g)


def _support_upper(v: Vector, balls: list[tuple[np.ndarray, float]],
                   qballs: list[tuple[Vector, Fraction]], bits: int, digits: int,
                   region: Ball | Lens) -> Fraction:
    """An exact upper bound on ``σ_U(v)``: the ball's formula, or the lens's best inf-convolution split."""
    bounds = [_ball_support_upper(v, c, r, bits) for c, r in qballs]
    if isinstance(region, Lens) and any(t != 0 for t in v):
        # extreme point of the lens in direction v when it lies on the rim, and the split of v over the
        # two normals there: σ_{B1}(v − μ) + σ_{B2}(μ) = σ_lens(v) for the exact split
        vf = np.array([float(t) for t in v])
        e = region.axis
        perp = vf - (vf @ e) * e
        npr = float(np.linalg.norm(perp))
        if npr > 0:
            y_rim = region.rim_center + region.rim_radius * perp / npr
            n1, n2 = y_rim - balls[0][0], y_rim - balls[1][0]
            sol = _least_squares([n1, n2], vf, digits)
            if sol is not None:
                mu = [sol[1] * _q(t) for t in n2]
                (c1, r1), (c2, r2) = qballs
                bounds.append(_ball_support_upper(_sub(v, mu), c1, r1, bits)
                              + _ball_support_upper(mu, c2, r2, bits))
        mu = _lens_rim_split(v, qballs, digits)
        if mu is not None:
            (c1, r1), (c2, r2) = qballs
            bounds.append(_ball_support_upper(_sub(v, mu), c1, r1, bits)
                          + _ball_support_upper(mu, c2, r2, bits))
    return min(bounds)


def _lens_rim_split(v: Vector, qballs: list[tuple[Vector, Fraction]], digits: int) -> Vector | None:
    """The split ``μ`` of ``v`` over the two normals at the lens's rim point in direction ``v``, in decimals.

    The rim and its normals computed from the exact centres and radii to ``digits`` digits (the
    float rim point is off by ``ε`` relative, which a ``v`` of ``10²⁰⁰`` turns into a visible
    loss); any ``μ`` gives a valid bound, this one a tight one.
    """
    with localcontext() as ctx:
        ctx.prec = digits
        vd = [_dec(x) for x in v]
        rim = _rim_point(qballs, Decimal(1), vd)
        if rim is None:
            return None
        c1 = [_dec(t) for t in qballs[0][0]]
        c2 = [_dec(t) for t in qballs[1][0]]
        n1 = [x - y for x, y in zip(rim, c1, strict=True)]
        n2 = [x - y for x, y in zip(rim, c2, strict=True)]
        g11 = sum(x * x for x in n1)
        g22 = sum(x * x for x in n2)
        g12 = sum(x * y for x, y in zip(n1, n2, strict=True))
        det = g11 * g22 - g12 * g12
        if det == 0:
            return None
        h1 = sum(x * y for x, y in zip(n1, vd, strict=True))
        h2 = sum(x * y for x, y in zip(n2, vd, strict=True))
        lam2 = (g11 * h2 - g12 * h1) / det
        return [Fraction(lam2 * x) for x in n2]


def _translated(region: Ball | Lens, origin: np.ndarray) -> Ball | Lens:
    if isinstance(region, Lens):
        return Lens(Ball(region.first.center - origin, region.first.radius),
                    Ball(region.second.center - origin, region.second.radius))
    return Ball(region.center - origin, region.radius)


def centered_proposals(W: np.ndarray, a: np.ndarray, b: np.ndarray, slopes: np.ndarray,
                       intercepts: np.ndarray, C: float, region: Ball | Lens, iterations: int,
                       rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Float proposals ``(y, g, π)`` for ``rows`` from the closed form run on a *centred* copy of the batch.

    With ``c₁`` the first ball's centre, ``f(y) = φ(<a, y − c₁> + ũ) = φ_c(<a, y − c₁>) + L`` where
    ``ũ = <a, c₁> + b`` and ``L = φ(ũ)`` are exact and ``φ_c`` has intercepts
    ``κ_j ũ + e_j − L`` rounded once: the search then sees values of the size of the example's
    variation on ``U``, not of its level (a label of ``10¹⁰`` would blur a float search at ``10⁻⁶``).
    The rounded intercepts only steer the search; the bracket is evaluated exactly afterwards.
    The search runs on every row of the batch it is given (rows outside ``rows`` keep stand-in
    intercepts and their results are dropped).  Which rows that batch holds may depend on other
    examples (:meth:`~cvxdp.extension.LipschitzExtension.level_offsets` passes the rows whose size leaves
    their offset open; the oracle, the rows its closed form missed): a row's proposal is its own all the
    same because every step of :func:`~cvxdp.extension.reduced.evaluate_on_balls` is row by row
    (:func:`cvxdp.numerics.row_dot`, a fixed number of search steps per row).
    """
    from cvxdp.extension.reduced import evaluate_on_balls
    from cvxdp.links import PiecewiseLinearLink

    origin = region.first.center if isinstance(region, Lens) else region.center
    oq = _qv(origin)
    cen = np.array(intercepts, dtype=float, copy=True)
    for i in rows:
        u_t = _dot(_qv(a[i]), oq) + _q(b[i])
        pieces = [_q(k) * u_t + _q(e) for k, e in zip(slopes[i], intercepts[i], strict=True)]
        level = max(pieces)
        cen[i] = [float(p - level) for p in pieces]
    try:
        shifted = _translated(region, origin)
    except Exception:  # rounding made the translated lens degenerate: search the original one
        r = evaluate_on_balls(W, a, b, PiecewiseLinearLink(slopes, intercepts), C, region, iterations)
        return r.y[rows], r.g[rows], r.pi[rows]
    r = evaluate_on_balls(W - origin, a, np.zeros(a.shape[0]), PiecewiseLinearLink(slopes, cen), C, shifted,
                          iterations)
    return r.y[rows] + origin, r.g[rows], r.pi[rows]


def _exact_rows(W: np.ndarray, a: np.ndarray, b: np.ndarray, link, C: float, region: Ball | Lens,
                rows: np.ndarray, offsets: np.ndarray, tolerance: float, iterations: int,
                float_pass) -> list[ExactBracket]:
    m = a.shape[0]
    if _smooth_link(link) is not None:
        # smooth links (Huber, square, logistic): the caller's float pass gives the proposals (no centring)
        return [exact_bracket_smooth(W[i], a[i], float(b[i]), link, C, region, [float_pass.y[i]],
                                     [float_pass.g[i]], [float(float_pass.pi[i])], offsets[i], tolerance)
                for i in rows]
    slopes = np.broadcast_to(link.slopes, (m, link.slopes.shape[-1]))
    intercepts = np.broadcast_to(link.intercepts, (m, link.intercepts.shape[-1]))
    y, g, pi = centered_proposals(W, a, b, slopes, intercepts, C, region, iterations, rows)
    out = []
    for k, i in enumerate(rows):
        # the centred search and the caller's own float pass (for ordinary examples it is as good)
        ys = [y[k], float_pass.y[i]]
        gs = [g[k], float_pass.g[i]]
        thetas = [_weights(float(p), slopes[i]) for p in (pi[k], float_pass.pi[i])]
        out.append(exact_bracket(W[i], a[i], float(b[i]), slopes[i], intercepts[i], C, region, ys, gs,
                                 thetas, offsets[i], tolerance))
    return out


def _weights(pi: float, slopes: np.ndarray) -> np.ndarray:
    """Simplex weights ``θ`` with ``Σ θ_j κ_j = π`` on the two slopes that bracket ``π`` (a GLM's conjugate
    weight turned into the pieces' E.3 weights)."""
    theta = np.zeros(slopes.size)
    lo = [j for j in range(slopes.size) if slopes[j] <= pi]
    hi = [j for j in range(slopes.size) if slopes[j] >= pi]
    if not lo or not hi:
        theta[int(np.argmin(np.abs(slopes - pi)))] = 1.0
        return theta
    j = max(lo, key=lambda t: slopes[t])
    l = min(hi, key=lambda t: slopes[t])  # noqa: E741
    if slopes[l] == slopes[j]:
        theta[j] = 1.0
    else:
        t = (pi - slopes[j]) / (slopes[l] - slopes[j])
        theta[j], theta[l] = 1.0 - t, t
    return theta


def exact_brackets(W: np.ndarray, a: np.ndarray, b: np.ndarray, link, C: float, region: Ball | Lens,
                   rows: np.ndarray, offsets: np.ndarray, tolerance: float, iterations: int, float_pass):
    """:func:`exact_bracket` for the examples ``rows`` of a batch, as a ``BracketResult`` over those rows.

    ``(a, b, link)`` is the batch's GLM form with a :class:`~cvxdp.links.PiecewiseLinearLink`, the
    function certified (see :func:`exact_bracket`); ``W`` is ``(m, d)``; each example is evaluated
    at its own query point with its own offset.
    ``float_pass`` is the closed form's :class:`~cvxdp.extension.reduced.BracketResult` on this same
    batch (the caller has it already); its points are proposals too.  One Python call per example:
    this path is for the few examples whose float bracket is too wide.
    """
    from cvxdp.extension.reduced import BracketResult

    out = _exact_rows(W, a, b, link, C, region, rows, offsets, tolerance, iterations, float_pass)
    upper, lower, beta = (np.array(col, float) for col in zip(*(e.rounded() for e in out), strict=True))
    return BracketResult(upper=upper, lower=lower, g=np.stack([e.g for e in out]), beta=beta,
                         y=np.stack([e.y for e in out]), pi=np.zeros(len(out)))


def exact_levels(W: np.ndarray, a: np.ndarray, b: np.ndarray, link, C: float, region: Ball | Lens,
                 rows: np.ndarray, tolerance: float, iterations: int, float_pass) -> np.ndarray:
    """Midpoints of the exact brackets at ``W[rows]``: the offsets ``κ_i``, exact rationals.

    Not rounded to float: a level of ``10³³`` has a float spacing of ``10¹⁷``, so a float offset
    would leave shifted values that large — and their own rounding far above any ``α``.
    """
    out = _exact_rows(W, a, b, link, C, region, rows, np.zeros(a.shape[0], dtype=object), tolerance,
                      iterations, float_pass)
    levels = np.zeros(len(out), dtype=object)
    for k, e in enumerate(out):
        bounds = [t for t in (e.upper, e.lower) if t is not None]
        levels[k] = sum(bounds, Fraction(0)) / len(bounds) if bounds else Fraction(0)
    return levels


__all__ = ["ExactBracket", "centered_proposals", "exact_bracket", "exact_brackets", "exact_levels",
           "precision_bits", "round_down", "round_up", "sqrt_upper"]
