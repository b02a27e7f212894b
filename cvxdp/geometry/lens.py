"""The intersection of two Euclidean balls, with exact closed forms.

When ``W`` is a ball, every localized set ``U = W ∩ B(c, r)`` of Algorithm 3
is such a *lens*.  Its projection and support function have closed forms, so
the extension oracle can certify on it without any solver.

Geometry: with ``δ = ||c₂ − c₁||`` and ``e = (c₂ − c₁)/δ``, the two spheres
meet in the ``(d−2)``-sphere with center ``h = c₁ + t e``,
``t = (r₁² − r₂² + δ²)/(2δ)``, radius ``ρ = sqrt(r₁² − t²)``, lying in the
hyperplane through ``h`` orthogonal to ``e``.

* Projection: if ``Π_{B₁}(y) ∈ B₂`` it is the answer; else if
  ``Π_{B₂}(y) ∈ B₁`` it is; otherwise both constraints are active (KKT) and the
  answer is the nearest point of the intersection sphere,
  ``h + ρ y_⊥/||y_⊥||`` with ``y_⊥`` the part of ``y − h`` orthogonal to ``e``.
* Support function: the same case split on the maximizers ``c_i + r_i v/||v||``;
  in the last case ``σ(v) = <v, h> + ρ ||v_⊥||``.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxdp.conic.cones import ConeRows
from cvxdp.error import EmptyDomainError
from cvxdp.geometry.ball import Ball
from cvxdp.geometry.domain import Domain, as_points, scaled_offsets
from cvxdp.numerics import EPS, row_dot, row_norm


def intersect_balls(first: Ball, second: Ball) -> Domain:
    """``first ∩ second`` as a :class:`Ball` when one contains the other, else a :class:`Lens`."""
    delta = float(np.linalg.norm(second.center - first.center))
    if delta + second.radius <= first.radius:
        return second
    if delta + first.radius <= second.radius:
        return first
    if delta > first.radius + second.radius:
        raise EmptyDomainError(
            f"the balls do not meet: centers {delta:.4g} apart, radii {first.radius:.4g} "
            f"and {second.radius:.4g}."
        )
    return Lens(first, second)


class Lens(Domain):
    """``B(c₁, r₁) ∩ B(c₂, r₂)`` for two balls that overlap without nesting."""

    diameter_is_exact = False

    def __init__(self, first: Ball, second: Ball) -> None:
        if first.dim != second.dim:
            raise ValueError("balls of different dimension")
        super().__init__(first.dim)
        self.first, self.second = first, second
        c1, c2, r1, r2 = first.center, second.center, first.radius, second.radius
        delta = float(np.linalg.norm(c2 - c1))
        if delta == 0.0 or delta > r1 + r2:
            raise EmptyDomainError("Lens needs two overlapping, non-concentric balls; "
                                   "use intersect_balls to handle the other cases.")
        self._e = (c2 - c1) / delta
        self._t = (r1 * r1 - r2 * r2 + delta * delta) / (2.0 * delta)
        self._h = c1 + self._t * self._e
        self._rho = float(np.sqrt(max(r1 * r1 - self._t * self._t, 0.0)))
        lo = max(-r1, delta - r2)
        hi = min(r1, delta + r2)
        self._inner = c1 + 0.5 * (lo + hi) * self._e

    @property
    def axis(self) -> np.ndarray:
        """The unit vector from the first centre to the second."""
        return self._e.copy()

    @property
    def rim_center(self) -> np.ndarray:
        """The centre of the circle (sphere) where the two boundaries meet."""
        return self._h.copy()

    @property
    def rim_radius(self) -> float:
        """The radius of that circle."""
        return self._rho

    def contains(self, points: np.ndarray, tol: float = 0.0) -> np.ndarray:
        return self.first.contains(points, tol) & self.second.contains(points, tol)

    def certainly_contains(self, points: np.ndarray) -> np.ndarray:
        return self.first.certainly_contains(points) & self.second.certainly_contains(points)

    def _perp(self, x: np.ndarray) -> np.ndarray:
        return x - row_dot(x, self._e)[..., None] * self._e  # row-local, as below

    def _sphere_point(self, y: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):  # rows whose norm overflows are redone below
            yp = self._perp(y - self._h)
            n = row_norm(yp)[..., None]
        far = np.isinf(n[..., 0]) & np.all(np.isfinite(y), axis=-1)
        if np.any(far):  # only the direction matters: offsets scaled by a power of two
            yp[far] = self._perp(scaled_offsets(y[far], self._h)[0])
            n[far] = row_norm(yp[far])[:, None]
        # any unit vector orthogonal to e works when y lies on the axis
        fallback = self._perp(np.eye(self.dim)[np.argmin(np.abs(self._e))])
        nf = np.linalg.norm(fallback)
        fallback = fallback / nf if nf > 0 else fallback  # d = 1: the circle is empty
        unit = np.where(n > 0, yp / np.where(n > 0, n, 1.0), fallback)
        return self._h + self._rho * unit

    def project(self, points: np.ndarray) -> np.ndarray:
        y = as_points(points, self.dim)
        p1 = self.first.project(y)
        p2 = self.second.project(y)
        in2 = self.second.contains(p1, tol=4 * EPS * self.second.radius)
        in1 = self.first.contains(p2, tol=4 * EPS * self.first.radius)
        out = np.where(in2[..., None], p1, np.where(in1[..., None], p2, self._sphere_point(y)))
        return out

    def support(self, directions: np.ndarray) -> np.ndarray:
        v = as_points(directions, self.dim)
        n = row_norm(v)[..., None]
        unit = v / np.where(n > 0, n, 1.0)
        x1 = self.first.center + self.first.radius * unit
        x2 = self.second.center + self.second.radius * unit
        s1 = self.first.support(v)
        s2 = self.second.support(v)
        s_sphere = row_dot(v, self._h) + self._rho * row_norm(self._perp(v))
        ok1 = self.second.contains(x1)
        ok2 = self.first.contains(x2)
        val = np.where(ok1, s1, np.where(ok2, s2, s_sphere))
        # rounding can only pick a neighbouring case near a case boundary, where
        # the formulas agree; never exceed the individual balls' supports.
        return np.minimum(val, np.minimum(s1, s2))

    @property
    def diameter(self) -> float:
        return 2.0 * min(self.first.radius, self.second.radius)

    def bounding_ball(self) -> tuple[np.ndarray, float]:
        b = self.first if self.first.radius <= self.second.radius else self.second
        return b.center.copy(), b.radius

    def interior_point(self) -> np.ndarray:
        return self._inner.copy()

    def make_feasible(self, points: np.ndarray) -> np.ndarray:
        p = self.project(points)
        bad = ~self.contains(p)
        if np.any(bad):
            # pull toward an interior point; both balls are convex so the segment stays inside
            c = self._inner
            for shrink in (8 * EPS, 1e-12, 1e-9, 1e-6):
                p[bad] = c + (1.0 - shrink) * (p[bad] - c)
                bad = ~self.contains(p)
                if not np.any(bad):
                    break
            p[bad] = c
        return p

    def translate(self, shift: np.ndarray) -> Lens:
        return Lens(self.first.translate(shift), self.second.translate(shift))

    def cone_rows(self) -> ConeRows:
        return ConeRows.stack([self.first.cone_rows(), self.second.cone_rows()])

    def constraints(self, w: cp.Variable) -> list[cp.Constraint]:
        return self.first.constraints(w) + self.second.constraints(w)

    def __repr__(self) -> str:
        return (f"Lens(dim={self.dim}, radii=({self.first.radius:.4g}, {self.second.radius:.4g}), "
                f"gap={np.linalg.norm(self.second.center - self.first.center):.4g})")
