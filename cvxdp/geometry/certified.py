"""Certified facts about a region: support functions, distances and separating cuts with rounding charged.

``σ_U(v) = max_{u∈U} <u, v>`` enters every certified bracket and every per-example Lipschitz
constant.  Closed forms exist for balls, lenses, boxes, simplices and ellipsoids (the last with the
error of its float eigendecomposition charged); other regions are bounded through their parts or a
bounding ball, row by row, so a per-example quantity never couples to another example through a
shared solver run.
"""

from __future__ import annotations

import math

import numpy as np

from cvxdp.conic.cones import ConeRows, cone_offsets, project_dual
from cvxdp.error import DomainError, SolverError
from cvxdp.geometry._conic_set import batched_support
from cvxdp.geometry.ball import Ball
from cvxdp.geometry.box import Box
from cvxdp.geometry.domain import Domain, ball_support
from cvxdp.geometry.ellipsoid import Ellipsoid
from cvxdp.geometry.intersection import Intersection
from cvxdp.geometry.lens import Lens
from cvxdp.geometry.localized import LocalizedDomain
from cvxdp.geometry.polytope import Polytope
from cvxdp.geometry.simplex import Simplex
from cvxdp.numerics import EPS, row_dot, row_norm


def support_rounding(region: Domain, d: int, v_scale: np.ndarray) -> np.ndarray:
    """A bound on the float64 error of ``σ_U(v)`` for ``v`` computed from terms of size ``v_scale``.

    ``σ_U`` is Lipschitz in ``v`` with constant ``max_{u∈U} ||u|| ≤ ||c|| + r`` for any
    bounding ball ``B(c, r)``, and its formula (``<c, v> + r||v||`` for a ball, and the
    like) errs by ``(d + O(1)) ε (||c|| + r) ||v||``; the rounding of ``v`` itself is at
    most a few ``ε`` times the terms it is made of.  Both are charged on the terms, so
    the bound holds when ``σ_U(v)`` is small by cancellation.
    """
    return (d + 64.0) * EPS * region.norm_bound() * np.asarray(v_scale)


def has_exact_support(region: Domain) -> bool:
    """Whether ``σ_U`` has a closed form we evaluate directly."""
    return isinstance(region, Ball | Lens | Box | Simplex | Ellipsoid)


def support_upper(region: Domain, v: np.ndarray) -> np.ndarray:
    """An upper bound on ``σ_U(v)`` (the closed form for balls, lenses, boxes, simplices; an
    ellipsoid's carries the error of its float eigendecomposition, see
    :meth:`~cvxdp.geometry.Ellipsoid.support_upper`)."""
    return region.support_upper(v)


def per_row_support_upper(region: Domain, v: np.ndarray) -> np.ndarray:
    """An upper bound on ``σ_U(v)`` computed for each row of ``v`` from that row alone.

    :func:`support_upper` of a polytope solves one LP for all rows together, so its answer for
    one row moves (within the solver's tolerance) with the others — unusable where a decision
    must be per example.  Here: the closed forms (ball, lens, box, simplex, ellipsoid with its
    error bound), the minimum of the parts' bounds for ``W ∩ B`` and intersections, and the
    bounding ball ``<c, v> + r||v||`` otherwise.
    """
    v = np.asarray(v, float)
    if has_exact_support(region):
        return region.support_upper(v)
    if isinstance(region, LocalizedDomain):
        return np.minimum(per_row_support_upper(region.base, v), region.ball.support(v))
    if isinstance(region, Intersection):
        c, r = region.bounding_ball()
        bounds = [per_row_support_upper(p, v) for p in region.parts]
        bounds.append(ball_support(v, c, r))
        return np.min(np.stack(bounds), axis=0)
    c, r = region.bounding_ball()
    if not np.isfinite(r):
        return np.full(v.shape[:-1], np.inf)
    return ball_support(v, c, r)


def row_support_bound(domain: Domain, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(s, e)`` per row of ``v`` with ``σ_W(v) ≤ s + e`` in exact arithmetic; each row from itself.

    Closed-form support functions where ``W`` has one; otherwise the bounding ball
    ``B(c, r) ⊇ W`` (``σ ≤ <c, v> + r||v||``, evaluated row by row).  ``e`` charges the
    rounding of ``v`` (relative ``ε``) and of the formula, ``(d + 64) ε (||c|| + r) ||v||``.
    """
    d = v.shape[-1]
    vn = row_norm(v)
    if has_exact_support(domain):
        with np.errstate(invalid="ignore", over="ignore"):
            return domain.support_upper(v), support_rounding(domain, d, 2.0 * vn)
    c, r = domain.bounding_ball()
    reach = float(np.linalg.norm(c)) + float(r)
    with np.errstate(invalid="ignore", over="ignore"):
        s = row_dot(v, np.asarray(c, float)) + r * vn
        return s, (d + 64.0) * EPS * reach * 2.0 * vn


def per_row_support_upper_both(region: Domain, v: np.ndarray, norms: np.ndarray | None = None
                               ) -> tuple[np.ndarray, np.ndarray]:
    """``(per_row_support_upper(region, v), per_row_support_upper(region, −v))``, the same bits
    (``norms``: ``row_norm(v)`` where the caller has it — the same bits again).

    On a ball the two closed forms ``±<c, v> + r||v||`` share their terms: float negation is exact and
    rounding is symmetric, so ``fl(<c, −v>) = −fl(<c, v>)`` and ``fl(||−v||) = fl(||v||)`` — one inner
    product and one norm instead of two of each and a negated copy of ``v`` (the range of ``<a_i, y>``
    over ``U`` is needed for every row of every phase).  Other regions: the two calls.
    """
    if type(region) is Ball:
        with np.errstate(invalid="ignore", over="ignore"):
            inner = row_dot(v, np.asarray(region.center, float))
            spread = region.radius * (row_norm(v) if norms is None else norms)
            return inner + spread, -inner + spread
    return per_row_support_upper(region, v), per_row_support_upper(region, -v)


def row_support_bound_both(domain: Domain, v: np.ndarray, norms: np.ndarray | None = None
                           ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``(row_support_bound(domain, v), row_support_bound(domain, −v))``, the same bits, sharing a
    ball's terms (:func:`per_row_support_upper_both`; ``norms``: ``row_norm(v)`` where the caller has it)."""
    if type(domain) is Ball:
        vn = row_norm(v) if norms is None else norms
        with np.errstate(invalid="ignore", over="ignore"):
            top, bottom = per_row_support_upper_both(domain, v, vn)
            error = support_rounding(domain, v.shape[-1], 2.0 * vn)
        return (top, error), (bottom, error)
    return row_support_bound(domain, v), row_support_bound(domain, -v)


def _largest_lower(*bounds: float) -> float:
    """The largest of several valid lower bounds on a distance, NaN-safe: ``0`` if none is usable.

    Python's ``max`` keeps a leading NaN (``max(nan, 1) = nan``, ``max(1, nan) = 1``), so NaNs are
    dropped first; ``0`` is always a valid lower bound on a distance.
    """
    return max([0.0, *(float(b) for b in bounds if not math.isnan(b))])


def distance_lower_bound(region: Domain, x: np.ndarray) -> float:
    """A certified lower bound on ``dist(x, U)``.

    Exact projection (minus a rounding margin) for balls, lenses, boxes and
    simplices; for ellipsoids, weak duality along the direction to the computed
    projection (whose support function is charged for the eigendecomposition's
    error); for ``W ∩ B`` and intersections the largest of
    the parts' bounds (each part contains the set); for a polytope the largest distance to a
    violated half-space or hyperplane (valid also when it is unbounded) and to its bounding ball;
    otherwise the distance to a bounding ball.

    Fails closed: a non-finite ``x`` or a NaN anywhere in the computation gives ``0``
    (the vacuous bound), never NaN — a too *large* distance would lift the model's minimum
    above the truth.
    """
    x = np.asarray(x, dtype=float)
    if not np.all(np.isfinite(x)):
        return 0.0
    if isinstance(region, Ellipsoid):
        # weak duality, dist(x, U) ≥ <v, x> − σ_U(v) for any unit v, with v toward the projection;
        # σ_U comes from a float eigendecomposition, whose error grows with the condition number
        p = region.project(x)
        dist = float(np.linalg.norm(x - p))
        ball = distance_lower_bound(Ball(*region.bounding_ball()), x)
        if not dist > 0.0:
            return ball
        v = (x - p) / dist
        sig = float(region.support(v))
        cond = region.condition_number
        margin = (x.size + 64.0) * EPS * (cond + 1.0) * (abs(float(v @ region.center)) + abs(sig)
                                                        + float(np.linalg.norm(x)))
        return _largest_lower(float(v @ x) - sig - margin, ball)
    if isinstance(region, Ball | Lens | Box | Simplex):
        dist = float(np.linalg.norm(x - region.project(x)))
        return _largest_lower(dist * (1.0 - 1e-12) - 64 * EPS * (1.0 + float(np.linalg.norm(x))))
    if isinstance(region, LocalizedDomain):
        return _largest_lower(distance_lower_bound(region.ball, x), distance_lower_bound(region.base, x),
                              dual_distance_bound(region, x))
    if isinstance(region, Intersection):
        return _largest_lower(*(distance_lower_bound(p, x) for p in region.parts),
                              dual_distance_bound(region, x))
    if isinstance(region, Polytope):
        return _largest_lower(_halfspace_distance(region, x), dual_distance_bound(region, x), *(
            [distance_lower_bound(Ball(*region.bounding_ball()), x)]
            if np.isfinite(region.bounding_ball()[1]) else []))
    c, r = region.bounding_ball()
    if not np.isfinite(r):
        return 0.0
    return _largest_lower(distance_lower_bound(Ball(c, r), x), dual_distance_bound(region, x))


def _row_leaves(region: Domain) -> list[tuple[Domain, str]]:
    """The sets whose cone rows ``region.cone_rows()`` stacks, in order, each marked ``"exact"`` (its
    rows are the set itself), ``"support"`` (its rows only approximate it: its share of a multiplier
    is bounded by its own certified support) or ``"skip"`` (rows with auxiliaries or exponential
    cones, which the dual bound cannot use; leaving a leaf out bounds a superset of ``U``, still
    valid).

    Balls, boxes, simplices, lenses, polytopes and compiled CVXPY sets store their rows as given.
    An ellipsoid's rows hold a rounded factor of its matrix (and ``−L c`` rounded).
    """
    if isinstance(region, Intersection):
        parts: list[Domain] = list(region.parts)
    elif isinstance(region, LocalizedDomain):
        parts = [region.base, region.ball]
    else:
        if isinstance(region, Ellipsoid):
            return [(region, "support")]
        try:
            rows = region.cone_rows()
        except (NotImplementedError, AttributeError):
            return [(region, "skip")]
        usable = rows.n_aux == 0 and all(c.kind != "exp" for c in rows.cones)
        return [(region, "exact" if usable else "skip")]
    return [leaf for part in parts for leaf in _row_leaves(part)]


def dual_rows(region: Domain) -> tuple[ConeRows, list[tuple[Domain, str, int]]] | None:
    """The stacked rows of the leaves the dual bound uses (see :func:`_row_leaves`), and those leaves
    with their kinds and row counts, in the order of the rows; ``None`` when no leaf is usable."""
    leaves = [(leaf, kind, leaf.cone_rows()) for leaf, kind in _row_leaves(region) if kind != "skip"]
    if not leaves:
        return None
    return ConeRows.stack([rows for _, _, rows in leaves]), [(lf, kd, r.n_rows) for lf, kd, r in leaves]


def _norm_up(a: np.ndarray) -> float:
    """An upper bound on ``||a||`` that neither underflows nor overflows (scaled by ``max|a|``)."""
    a = np.asarray(a, float)
    top = float(np.max(np.abs(a))) if a.size else 0.0
    if not (top > 0.0):
        return 0.0 if top == 0.0 else math.inf
    return top * float(np.linalg.norm(a / top)) * (1.0 + (a.size + 4.0) * EPS)


def conic_support_upper(region: Domain, v: np.ndarray, z: np.ndarray,
                        used: tuple[ConeRows, list] | None = None) -> float:
    """``σ_U(v) ≤ Σ_k bₖᵀzₖ + Σ_e σ̄_e(A_eᵀz_e) + σ_B(r)`` for multipliers ``z`` of :func:`dual_rows`.

    ``U`` lies in the intersection of the used leaves.  Split ``v = Σ_k A_kᵀz_k + r`` by leaf.  For
    a leaf whose rows are the set, ``u ∈ U`` and ``z_k ∈ K_k*`` give ``z_kᵀ(b_k − A_k u) ≥ 0``, so
    ``<A_kᵀz_k, u> ≤ b_kᵀz_k`` (weak conic duality); another leaf (an ellipsoid) contributes its own
    certified support at its share ``s_e = fl(A_eᵀz_e)``; the rest ``r`` is bounded on the bounding
    ball ``B ⊇ U``.  Exact at the support program's optimal ``z`` for exact leaves.  Any ``z`` gives
    a valid bound once it is moved into ``K*``: nonnegative blocks are clipped at 0 and a
    second-order block's head is raised to ``(1 + (k + 4)ε)`` times an upper bound on its tail's
    norm (computed scaled, so it cannot underflow).  The float residual differs from the real one by
    at most ``(k + 8)ε`` times its terms per coordinate, which costs ``||δr|| · max_U ||u||``;
    ``bᵀz`` is exactly rounded, the ball's formula charged ``(d + 4)ε``, and ``10⁻³⁰⁰`` is added so
    that no margin vanishes by underflow.  Returns ``+∞`` when no leaf is usable, a sum overflows or
    a value is not finite.  ``used``: :func:`dual_rows` of ``region``, when the caller has it.
    """
    used = dual_rows(region) if used is None else used
    if used is None:
        return math.inf
    rows, leaves = used
    z = project_dual(np.asarray(z, float), rows.cones)
    if z.shape != (rows.n_rows,) or not np.all(np.isfinite(z)):
        return math.inf
    off = cone_offsets(rows.cones)
    for cone, a, b in zip(rows.cones, off[:-1], off[1:], strict=True):
        if cone.kind == "soc":
            z[a] = max(float(z[a]), _norm_up(z[a + 1:b]) * (1.0 + (cone.dim + 4.0) * EPS))
    k, d = rows.A_y.shape
    exact = np.zeros(k, dtype=bool)
    shares = np.zeros(d)
    share_abs = np.zeros(d)
    leaf_bounds: list[float] = []
    start = 0
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        for leaf, kind, n_rows in leaves:
            stop = start + n_rows
            if kind == "exact":
                exact[start:stop] = True
            else:
                s = z[start:stop] @ rows.A_y[start:stop]
                leaf_bounds.append(float(leaf.support_upper(s[None, :])[0]))
                shares = shares + s
                share_abs = share_abs + np.abs(s)
            start = stop
        zb_terms = z[exact] * rows.b[exact]
        r = (v - z[exact] @ rows.A_y[exact]) - shares
        r_err = (k + 8.0) * EPS * (np.abs(v) + np.abs(z[exact]) @ np.abs(rows.A_y[exact]) + share_abs)
        c, radius = region.bounding_ball()
        c = np.asarray(c, float)
        rn = _norm_up(r)
        try:
            margin = (2.0 * EPS * math.fsum(np.abs(zb_terms))
                      + (d + 4.0) * EPS * (float(np.abs(r) @ np.abs(c)) + radius * rn)
                      + _norm_up(r_err) * (1.0 + (d + 4.0) * EPS) * region.norm_bound())
            total = [math.fsum(zb_terms), *leaf_bounds, float(r @ c) + radius * rn]
            bound = (math.fsum(total) + (2.0 * EPS * math.fsum(abs(t) for t in total) + margin)
                     * (1.0 + 8.0 * EPS) + 1e-300)
        except (OverflowError, ValueError):  # a sum beyond float range, or inf − inf
            return math.inf
    return bound if math.isfinite(bound) else math.inf


def dual_distance_bound(region: Domain, x: np.ndarray) -> float:
    """``dist(x, U) ≥ (<v, x> − σ_U(v)) / ||v||`` with ``v = x − p`` toward a computed projection ``p``.

    Weak duality: ``<v, x − u> ≥ <v, x> − σ_U(v)`` for every ``u ∈ U``, and the left side is at most
    ``||v|| ||x − u||``.  ``σ_U(v)`` is bounded by :func:`conic_support_upper` from the multipliers
    of the support program in direction ``v`` over all the region's rows, so the bound is tight
    where several faces are active at once — a ball cut by half-spaces, a corner of a polytope —
    which the parts' own bounds miss (each part alone is farther inside).  The solvers only propose
    ``p`` and ``z``; any values give a valid bound.  Leaves whose rows it cannot use (auxiliaries,
    exponential cones) are left out, which bounds the distance to a superset.  Fails closed to
    ``0`` (a solver failure, no usable leaf, a sum out of range, a non-finite value).
    """
    used = dual_rows(region)
    if used is None or not np.isfinite(region.bounding_ball()[1]):
        return 0.0
    try:
        if bool(np.all(region.contains(x[None, :]))):
            return 0.0
        try:
            v = x - np.asarray(region.project(x[None, :]), float).reshape(-1)
        except (SolverError, DomainError):
            # far points defeat the projection program (found by review at ||x|| ~ 1e12); toward the
            # interior point the bound is within diam(U)²/dist(x, U) of the distance
            v = x - region.interior_point()
        if not (np.all(np.isfinite(v)) and np.any(v)):
            return 0.0
        v = v / _norm_up(v)  # σ_U is positively homogeneous: a unit direction keeps the program scaled
        _, z, _ = batched_support(used[0], v[None, :])
    except (SolverError, DomainError):
        return 0.0
    sigma = conic_support_upper(region, v, z[0], used)
    d = x.size
    vx_terms = v * x
    try:
        numerator = math.fsum(vx_terms) - 2.0 * EPS * math.fsum(np.abs(vx_terms)) - 1e-300 - sigma
    except (OverflowError, ValueError):
        return 0.0
    norm_v = _norm_up(v) * (1.0 + (d + 4.0) * EPS)
    if not (numerator > 0.0 and math.isfinite(numerator) and 0.0 < norm_v < math.inf):
        return 0.0
    return numerator / norm_v * (1.0 - 4.0 * EPS)


def _halfspace_distance(region: Polytope, x: np.ndarray) -> float:
    """``max_i (a_iᵀx − b_i)₊/||a_i||`` (and ``|a_eqᵀx − b_eq|/||a_eq||``), minus its rounding: a valid
    lower bound on ``dist(x, P)`` since ``P`` lies in each half-space and hyperplane; exact when one
    row is violated.  Works for an unbounded polyhedron, whose bounding ball says nothing."""
    d = x.size
    best = 0.0
    for A, b, absolute in ((region.A, region.b, False), (region.A_eq, region.b_eq, True)):
        if not A.shape[0]:
            continue
        norms = np.linalg.norm(A, axis=1)
        resid = A @ x - b
        resid = np.abs(resid) if absolute else resid
        margin = (d + 4.0) * EPS * (np.abs(A) @ np.abs(x) + np.abs(b)) + 1e-300
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = np.where(norms > 0, (resid - margin) / (norms * (1.0 + (d + 4.0) * EPS)), 0.0)
        best = _largest_lower(best, float(np.max(bound)))
    return best


def separating_cut(region: Domain, x: np.ndarray) -> tuple[np.ndarray, float] | None:
    """``(a, level)`` with ``σ_U(a) ≤ level < <a, x>`` for ``x ∉ U``; ``None`` when ``x ∈ U``."""
    if region.contains(x):
        return None
    if isinstance(region, Ball | Lens | Box | Simplex | Ellipsoid):
        a = x - region.project(x)
        if not np.any(a):
            a = x - region.interior_point()
        return a, float(region.support_upper(a))
    if isinstance(region, LocalizedDomain):
        cut = separating_cut(region.ball, x)
        return cut if cut is not None else separating_cut(region.base, x)
    if isinstance(region, Intersection):
        for part in region.parts:
            cut = separating_cut(part, x)
            if cut is not None:
                return cut
        return None
    if isinstance(region, Polytope):
        viol = region.A @ x - region.b
        i = int(np.argmax(viol)) if viol.size else -1
        if viol.size and viol[i] > 0:
            return region.A[i].copy(), float(region.b[i])
        if region.A_eq.shape[0]:
            r = region.A_eq @ x - region.b_eq
            j = int(np.argmax(np.abs(r)))
            sign = np.sign(r[j]) or 1.0
            return sign * region.A_eq[j], float(sign * region.b_eq[j])
        return None
    a = x - region.project(x)
    return a, float(region.support(a)) + 1e-9 * (1.0 + float(np.abs(region.support(a))))


__all__ = [
    "conic_support_upper",
    "distance_lower_bound",
    "dual_distance_bound",
    "dual_rows",
    "has_exact_support",
    "per_row_support_upper",
    "per_row_support_upper_both",
    "row_support_bound",
    "row_support_bound_both",
    "separating_cut",
    "support_rounding",
    "support_upper",
]
