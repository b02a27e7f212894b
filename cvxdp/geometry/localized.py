"""Localized domains ``U = W ∩ B(c, r)`` and the inexact projection of Lemma 2.7.

Algorithm 3 shrinks the working set to ``U_{j+1} = W ∩ B(w_loc, R⁺)``.  When
``W`` is a ball, ``U`` is a ball or a :class:`~cvxdp.geometry.lens.Lens` with
closed forms.  Otherwise :class:`LocalizedDomain` projects with the paper's
Lemma 2.7: a bisection on the multiplier of the ball constraint that uses only
the projection onto ``W``.
"""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np

from cvxdp._validation import finite_array, positive_finite
from cvxdp.conic.cones import ConeRows
from cvxdp.error import DomainError
from cvxdp.geometry.ball import Ball
from cvxdp.geometry.domain import Domain, as_points, scaled_offsets
from cvxdp.geometry.lens import intersect_balls
from cvxdp.numerics import row_norm


def inexact_projection(domain: Domain, center: np.ndarray, radius: float, points: np.ndarray,
                       xi: float) -> np.ndarray:
    """Lemma 2.7: a point of ``W ∩ B(c, r)`` within ``xi`` of ``Π_{W ∩ B(c,r)}(y)``.

    Requires ``c ∈ W``.  If ``||Π_W(y) − c|| ≤ r`` that projection is exact.
    Otherwise, with ``z_λ = (y + λc)/(1 + λ)``, ``x_λ = Π_W(z_λ)`` and
    ``g(λ) = ||x_λ − c||² − r²`` (non-increasing, ``g(0) > 0``), the true
    projection is ``x_{λ*}`` for the root ``λ*`` in
    ``[0, λ̄]``, ``λ̄ = max(0, ||y − c||/r − 1)``.  Bisection keeps
    ``g(λ₋) > 0 ≥ g(λ₊)`` and stops once ``||y − c|| (λ₊ − λ₋) ≤ ξ``; because
    ``||x_λ − x_μ|| ≤ ||y − c|| |λ − μ|`` the returned ``x_{λ₊}`` (which is in
    the ball, hence feasible) is within ``ξ`` of the projection.  The number of
    projections onto ``W`` is ``⌈log₂(||y − c|| λ̄ / ξ)⌉ + 1``.
    """
    xi = positive_finite("xi", xi)
    y = as_points(points, domain.dim)
    flat = y.reshape(-1, domain.dim)
    x0 = domain.project(flat)
    far = np.linalg.norm(x0 - center, axis=-1) > radius
    out = x0.copy()
    if np.any(far):
        yy = flat[far]
        with np.errstate(over="ignore", invalid="ignore"):
            dist = row_norm(yy - center)
        huge = ~np.isfinite(dist)  # the offset's norm overflowed: its size from offsets scaled by 2^{−e}
        if np.any(huge):
            offsets, e = scaled_offsets(yy[huge], center)
            dist[huge] = np.ldexp(row_norm(offsets), e)
        lam_lo = np.zeros(yy.shape[0])
        with np.errstate(over="ignore", invalid="ignore"):
            lam_hi = np.maximum(0.0, dist / radius - 1.0)
            # z_λ = (y + λc)/(1 + λ) must stay finite for every λ ≤ λ̄ the bisection may try
            reach = lam_hi * (float(np.max(np.abs(center), initial=0.0)) + 1.0) + np.max(np.abs(yy), axis=-1)
        if not np.all(np.isfinite(reach)):
            raise DomainError("a point is so far from the localized set's centre (its distance over "
                              "the radius, times the centre's size, beyond 10³⁰⁸) or so large that its "
                              "projection cannot be computed in floating point; rescale the problem (such "
                              "a point arises only from an astronomically large noise scale).")
        # each row bisects for its own number of steps (at most 200), so its point depends on it alone
        with np.errstate(over="ignore"):
            need = np.log2(np.maximum(dist * lam_hi / xi, 1.0))
        steps = np.where(need <= 200.0, np.ceil(need) + 1.0, 200.0)
        for step in range(int(min(float(np.max(steps)), 200.0))):
            mid = 0.5 * (lam_lo + lam_hi)
            z = (yy + mid[:, None] * center) / (1.0 + mid[:, None])
            g = np.sum((domain.project(z) - center) ** 2, axis=-1) - radius * radius
            above = (g > 0) & (step < steps)
            below = ~(g > 0) & (step < steps)
            lam_lo = np.where(above, mid, lam_lo)
            lam_hi = np.where(below, mid, lam_hi)
        z = (yy + lam_hi[:, None] * center) / (1.0 + lam_hi[:, None])
        out[far] = domain.project(z)
    return out.reshape(y.shape)


class LocalizedDomain(Domain):
    """``W ∩ B(c, r)`` for a general ``W`` (projection by Lemma 2.7 with accuracy ``xi``).

    ``support`` is the bound ``min(σ_W(v), σ_B(v))``; exact inf-convolution
    values would need a solver, and certificates only need an upper bound.
    """

    support_is_exact = False
    diameter_is_exact = False

    def __init__(self, base: Domain, center: np.ndarray, radius: float, xi: float = 1e-12) -> None:
        super().__init__(base.dim)
        c = finite_array("localization center", center, shape=(base.dim,))
        self.base = base
        self.ball = Ball(base.make_feasible(c), radius)
        self.xi = positive_finite("xi", xi)

    @property
    def center(self) -> np.ndarray:
        return self.ball.center

    @property
    def radius(self) -> float:
        return self.ball.radius

    def feasibility_tolerance(self) -> float:
        return self.base.feasibility_tolerance()

    def contains(self, points: np.ndarray, tol: float = 0.0) -> np.ndarray:
        return self.base.contains(points, tol) & self.ball.contains(points, tol)

    def certainly_contains(self, points: np.ndarray) -> np.ndarray | None:
        base = self.base.certainly_contains(points)
        return None if base is None else base & self.ball.certainly_contains(points)

    def project(self, points: np.ndarray) -> np.ndarray:
        scale = max(self.radius, 1e-300)
        return inexact_projection(self.base, self.center, self.radius, points, self.xi * scale)

    def support(self, directions: np.ndarray) -> np.ndarray:
        return np.minimum(self.base.support_upper(directions), self.ball.support(directions))

    @property
    def diameter(self) -> float:
        return min(self.base.diameter, self.ball.diameter)

    def bounding_ball(self) -> tuple[np.ndarray, float]:
        c, r = self.base.bounding_ball()
        if r <= self.radius:
            return c, r
        return self.ball.bounding_ball()

    def interior_point(self) -> np.ndarray:
        """A point strictly inside both ``W`` and the ball.

        The center may sit on a facet of ``W``; moving part of the way toward
        ``W``'s own interior point (and staying within half the radius) gives a
        point from which :meth:`make_feasible`'s rays can repair a violation of
        any constraint.
        """
        inner = self.base.interior_point()
        gap = float(np.linalg.norm(inner - self.center))
        t = 1.0 if gap == 0 else min(1.0, 0.5 * self.radius / gap)
        return self.center + t * (inner - self.center)

    def translate(self, shift: np.ndarray) -> LocalizedDomain | None:
        base = self.base.translate(shift)
        return None if base is None else LocalizedDomain(base, self.center - shift, self.radius, self.xi)

    def cone_rows(self) -> ConeRows:
        return ConeRows.stack([self.base.cone_rows(), self.ball.cone_rows()])

    def constraints(self, w: cp.Variable) -> list[cp.Constraint]:
        return self.base.constraints(w) + self.ball.constraints(w)

    def __repr__(self) -> str:
        return f"LocalizedDomain({self.base!r} ∩ B(r={self.radius:.4g}))"


def localize(domain: Domain, center: np.ndarray, radius: float, xi: float = 1e-12) -> Domain:
    """``U = W ∩ B(center, radius)`` in the most exact representation available.

    ``radius = inf`` (or a ball containing ``W``) returns ``W`` itself; a ball
    ``W`` gives a :class:`Ball` or a :class:`Lens`; anything else a
    :class:`LocalizedDomain`.  ``center`` must lie in ``W`` (Algorithm 3 only
    uses projected centers); it is moved onto ``W`` if rounding left it outside.
    """
    if isinstance(radius, int | float) and math.isinf(radius) and radius > 0:
        return domain
    radius = positive_finite("localization radius", radius)
    c = finite_array("localization center", center, shape=(domain.dim,))
    if not domain.contains(c, tol=1e-9 * (1 + radius)):
        raise DomainError("the localization center must lie in the domain W (project it first).")
    wc, wr = domain.bounding_ball()
    if np.linalg.norm(c - wc) + wr <= radius:
        return domain
    if isinstance(domain, Ball):
        return intersect_balls(domain, Ball(domain.make_feasible(c), radius))
    return LocalizedDomain(domain, c, radius, xi)
