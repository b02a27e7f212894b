"""Turning repaired dual points into certified bounds (the paper's Appendix E.3).

For ``h = f(·, z) + I_U`` the extension is the conjugate of ``h*`` on the
C-ball, so every dual-feasible point gives a *global* affine minorant

    f_{C,U}(u, z) ≥ <g, u> + β     for all u ∈ R^d,

    β = πᵀ b − ψ(π) − σ_U(g − Aᵀ π),   ||g|| ≤ C,  π ∈ Π,

for a loss in conjugate form ``f(y) = max_{π∈Π} πᵀ(A y + b) − ψ(π)``.  Any
upper bound on ``σ_U`` keeps the inequality; we use the exact support
function where a closed form exists and a split
``σ_W(s) + σ_{B(c,r)}(v − s)`` (inf-convolution, any ``s``) otherwise.

Rounding: every certified quantity is evaluated in float64 by formulas whose
terms we know, and moved by :func:`~cvxdp.numerics.rounding_margin` in the safe direction.
"""

from __future__ import annotations

import numpy as np

from cvxdp.geometry import Domain
from cvxdp.numerics import EPS, rounding_margin


def upper_margin(fval: np.ndarray, C: float, dist: np.ndarray, d: int, value_error: np.ndarray,
                 w_norm: np.ndarray, y_norm: np.ndarray) -> np.ndarray:
    """What to add to ``fl(f(y) + C ||w − y||)`` so it bounds ``f(y) + C ||w − y||`` from above.

    ``value_error`` bounds the error that reaches ``f(y)`` through its argument
    (:func:`~cvxdp.numerics.argument_rounding` times the link's Lipschitz constant near it); the
    link's own evaluation and the final sum are covered by :func:`~cvxdp.numerics.rounding_margin`;
    ``||w − y||`` errs by at most ``(d + 2) ε (||w − y|| + ||w|| + ||y||)``.
    """
    return (rounding_margin(fval, C * dist) + value_error
            + C * (d + 2.0) * EPS * (dist + np.asarray(w_norm) + np.asarray(y_norm)))


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


def project_simplex_rows(pi: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row onto the probability simplex."""
    from cvxdp.geometry import project_onto_simplex

    return project_onto_simplex(pi, 1.0)


def clip_to_ball(g: np.ndarray, radius: float) -> np.ndarray:
    """Scale rows of ``g`` into the ball of the given radius (shrinking by a few ulps at the edge).

    The float norm of a row of length ``d`` errs by less than ``(d/2 + 2)ε`` relatively, and the
    scaling by two more roundings: a row whose float norm is within ``(d + 8)ε`` of the radius is
    scaled to ``(1 − (d + 8)ε)`` of it, so every returned row lies in the ball in exact arithmetic.
    """
    n = np.linalg.norm(g, axis=-1, keepdims=True)
    slack = 1.0 - (np.shape(g)[-1] + 8.0) * EPS
    scale = np.where(n > radius * slack, radius / np.maximum(n, 1e-300) * slack * slack, 1.0)
    return g * scale
