"""Support functions with their rounding charged: what a certified bound may assume about a region.

``σ_U(v) = max_{u∈U} <u, v>`` enters every certified bracket and every per-example Lipschitz
constant.  Closed forms exist for balls, lenses, boxes, simplices and ellipsoids (the last with the
error of its float eigendecomposition charged); other regions are bounded through their parts or a
bounding ball, row by row, so a per-example quantity never couples to another example through a
shared solver run.
"""

from __future__ import annotations

import numpy as np

from cvxdp.geometry.ball import Ball
from cvxdp.geometry.box import Box
from cvxdp.geometry.domain import Domain
from cvxdp.geometry.ellipsoid import Ellipsoid
from cvxdp.geometry.intersection import Intersection
from cvxdp.geometry.lens import Lens
from cvxdp.geometry.localized import LocalizedDomain
from cvxdp.geometry.simplex import Simplex
from cvxdp.numerics import EPS


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
        bounds.append(v @ np.asarray(c, float) + r * np.linalg.norm(v, axis=-1))
        return np.min(np.stack(bounds), axis=0)
    c, r = region.bounding_ball()
    if not np.isfinite(r):
        return np.full(v.shape[:-1], np.inf)
    return v @ np.asarray(c, float) + r * np.linalg.norm(v, axis=-1)



def row_support_bound(domain: Domain, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(s, e)`` per row of ``v`` with ``σ_W(v) ≤ s + e`` in exact arithmetic; each row from itself.

    Closed-form support functions where ``W`` has one; otherwise the bounding ball
    ``B(c, r) ⊇ W`` (``σ ≤ <c, v> + r||v||``, evaluated row by row).  ``e`` charges the
    rounding of ``v`` (relative ``ε``) and of the formula, ``(d + 64) ε (||c|| + r) ||v||``.
    """
    d = v.shape[-1]
    vn = np.linalg.norm(v, axis=-1)
    if has_exact_support(domain):
        with np.errstate(invalid="ignore", over="ignore"):
            return domain.support_upper(v), support_rounding(domain, d, 2.0 * vn)
    c, r = domain.bounding_ball()
    reach = float(np.linalg.norm(c)) + float(r)
    with np.errstate(invalid="ignore", over="ignore"):
        s = np.einsum("...d,d->...", v, np.asarray(c, float)) + r * vn
        return s, (d + 64.0) * EPS * reach * 2.0 * vn


__all__ = ["has_exact_support", "per_row_support_upper", "row_support_bound", "support_rounding",
           "support_upper"]
