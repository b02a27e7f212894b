"""Turning repaired dual points into certified bounds (DESIGN §2, the paper's Appendix E.3).

For ``h = f(·, z) + I_U`` the extension is the conjugate of ``h*`` on the
C-ball, so every dual-feasible point gives a *global* affine minorant

    f_{C,U}(u, z) ≥ <g, u> + β     for all u ∈ R^d,

    β = πᵀ b − ψ(π) − σ_U(g − Aᵀ π),   ||g|| ≤ C,  π ∈ Π,

for a loss in conjugate form ``f(y) = max_{π∈Π} πᵀ(A y + b) − ψ(π)``.  Any
upper bound on ``σ_U`` keeps the inequality; we use the exact support
function where a closed form exists and a split
``σ_W(s) + σ_{B(c,r)}(v − s)`` (inf-convolution, any ``s``) otherwise.

Rounding: every certified quantity is evaluated in float64 by formulas whose
terms we know, and moved by :func:`rounding_margin` in the safe direction.
"""

from __future__ import annotations

import numpy as np

from cvxdp.geometry import Ball, Box, Domain, Ellipsoid, Intersection, Lens, LocalizedDomain, Simplex

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


def upper_margin(fval: np.ndarray, C: float, dist: np.ndarray, d: int, value_error: np.ndarray,
                 w_norm: np.ndarray, y_norm: np.ndarray) -> np.ndarray:
    """What to add to ``fl(f(y) + C ||w − y||)`` so it bounds ``f(y) + C ||w − y||`` from above.

    ``value_error`` bounds the error that reaches ``f(y)`` through its argument
    (:func:`argument_rounding` times the link's Lipschitz constant near it); the
    link's own evaluation and the final sum are covered by :func:`rounding_margin`;
    ``||w − y||`` errs by at most ``(d + 2) ε (||w − y|| + ||w|| + ||y||)``.
    """
    return (rounding_margin(fval, C * dist) + value_error
            + C * (d + 2.0) * EPS * (dist + np.asarray(w_norm) + np.asarray(y_norm)))


def support_rounding(region: Domain, d: int, v_scale: np.ndarray) -> np.ndarray:
    """A bound on the float64 error of ``σ_U(v)`` for ``v`` computed from terms of size ``v_scale``.

    ``σ_U`` is Lipschitz in ``v`` with constant ``max_{u∈U} ||u|| ≤ ||c|| + r`` for any
    bounding ball ``B(c, r)``, and its formula (``<c, v> + r||v||`` for a ball, and the
    like) errs by ``(d + O(1)) ε (||c|| + r) ||v||``; the rounding of ``v`` itself is at
    most a few ``ε`` times the terms it is made of.  Both are charged on the terms, so
    the bound holds when ``σ_U(v)`` is small by cancellation.
    """
    return (d + 64.0) * EPS * region.norm_bound() * np.asarray(v_scale)


def certified_inner_points(region: Domain, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points of ``region`` in exact arithmetic near ``points``, and which rows succeeded.

    An upper bound ``f(y) + C||w − y||`` on ``f_{C,U}(w)`` needs ``y ∈ U`` exactly;
    a float membership test can pass a point outside by a rounding error, which
    a steep loss turns into a visible error.  Points the region cannot vouch for
    are pulled toward its interior point until
    :meth:`~cvxdp.geometry.Domain.certainly_contains` holds; rows that still fail
    are reported ``False`` (their upper bound must be ``+∞``).  Regions without an
    exact test (``None``: equality constraints, generic CVXPY sets) keep the
    float test, a documented limitation.
    """
    y = np.array(points, dtype=float, copy=True)
    ok = region.certainly_contains(y)
    if ok is None:
        return y, np.ones(y.shape[0], dtype=bool)
    if np.all(ok):
        return y, ok
    center = region.interior_point()
    for shrink in (1e-13, 1e-11, 1e-9, 1e-7, 1e-5, 1e-3):
        bad = ~ok
        y[bad] = center + (1.0 - shrink) * (y[bad] - center)
        ok = region.certainly_contains(y)
        if np.all(ok):
            break
    return y, ok


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
        bounds.append(v @ np.asarray(c, float) + r * np.linalg.norm(v, axis=-1))
        return np.min(np.stack(bounds), axis=0)
    c, r = region.bounding_ball()
    if not np.isfinite(r):
        return np.full(v.shape[:-1], np.inf)
    return v @ np.asarray(c, float) + r * np.linalg.norm(v, axis=-1)


def split_support_bound(region: Domain, v: np.ndarray, s_base: np.ndarray | None,
                        base_bound: np.ndarray | None) -> np.ndarray:
    """``σ_U(v)`` bounded through the split ``σ_W(s) + σ_B(v − s)`` when ``U = W ∩ B``.

    ``base_bound`` must be a certified upper bound on ``σ_W(s_base)`` (for
    instance ``bᵀ z`` for a dual-feasible ``z`` of ``W``'s rows).  The result is
    the smallest of the valid bounds available.
    """
    plain = support_upper(region, v)
    if s_base is None or base_bound is None:
        return plain
    if isinstance(region, LocalizedDomain):
        ball = region.ball
    else:
        c, r = region.bounding_ball()
        ball = Ball(c, r)
    split = base_bound + ball.support(v - s_base)
    return np.minimum(plain, np.where(np.isfinite(split), split, np.inf))


def project_simplex_rows(pi: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row onto the probability simplex."""
    from cvxdp.geometry import project_onto_simplex

    return project_onto_simplex(pi, 1.0)


def clip_to_ball(g: np.ndarray, radius: float) -> np.ndarray:
    """Scale rows of ``g`` into the ball of the given radius (shrinking by a few ulps at the edge)."""
    n = np.linalg.norm(g, axis=-1, keepdims=True)
    scale = np.where(n > radius, radius / np.maximum(n, 1e-300) * (1 - 4 * EPS), 1.0)
    return g * scale
