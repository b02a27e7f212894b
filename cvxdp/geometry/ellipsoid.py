"""The ellipsoid ``{y : (y − c)ᵀ Q (y − c) ≤ 1}`` with ``Q`` symmetric positive definite."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxdp._validation import finite_array
from cvxdp.conic.cones import Cone, ConeRows
from cvxdp.error import DomainError, UnboundedDomainError
from cvxdp.geometry.domain import Domain, as_points, scaled_offsets
from cvxdp.numerics import EPS, row_combine, row_dot, row_norm

#: The form ``zᵀ diag(q) z`` above which :meth:`Ellipsoid.project` starts Newton's method in the scaled
#: variables from ``ν₀`` instead of from ``μ = 0``.
FAR_FORM = 1e20


class Ellipsoid(Domain):
    """``{y : (y − c)ᵀ Q (y − c) ≤ 1}``.

    With ``Q = V diag(q) Vᵀ``: ``σ(v) = <c, v> + ||diag(q)^{-1/2} Vᵀ v||``,
    diameter ``2 / sqrt(min q)``.  The projection solves the secular equation
    ``Σ q_i z_i² / (1 + μ q_i)² = 1`` for the multiplier ``μ ≥ 0`` by Newton's
    method, which converges monotonically from ``μ = 0`` because the left side
    is convex and decreasing in ``μ``.
    """

    def __init__(self, center: np.ndarray, shape_matrix: np.ndarray) -> None:
        c = finite_array("ellipsoid center", center, ndim=1)
        Q = finite_array("ellipsoid shape matrix", shape_matrix, shape=(c.shape[0], c.shape[0]))
        if not np.allclose(Q, Q.T, rtol=1e-10, atol=1e-12 * np.abs(Q).max()):
            raise DomainError("the ellipsoid's shape matrix must be symmetric.")
        q, V = np.linalg.eigh((Q + Q.T) / 2.0)
        if q.min() <= 1e-12 * max(q.max(), 1e-300):
            raise UnboundedDomainError(
                "the ellipsoid's shape matrix is singular, so the set is unbounded; "
                "add bounds on the flat directions."
            )
        super().__init__(c.shape[0])
        self.center, self.Q, self._q, self._V = c, Q, q, V

    def contains(self, points: np.ndarray, tol: float = 0.0) -> np.ndarray:
        z = row_combine(as_points(points, self.dim) - self.center, self._V)  # row by row, not BLAS
        return np.sqrt(np.sum(self._q * z * z, axis=-1)) <= 1.0 + tol

    @property
    def condition_number(self) -> float:
        """``λ_max(Q)/λ_min(Q)``, from the (float) eigendecomposition."""
        return float(self._q.max() / self._q.min())

    def certainly_contains(self, points: np.ndarray) -> np.ndarray:
        """``(y − c)ᵀQ(y − c) ≤ 1`` exactly, from the form evaluated with ``Q`` itself (no eigenvectors).

        With ``δ = fl(y − c)`` the float form errs by at most ``(d + 8) ε |δ|ᵀ|Q||δ|``
        (the dot products plus the subtraction's relative error in each ``δ_j``).
        """
        delta = as_points(points, self.dim) - self.center
        form = row_dot(delta, row_combine(delta, self.Q))  # row by row (cvxdp.numerics.row_dot)
        bound = row_dot(np.abs(delta), row_combine(np.abs(delta), np.abs(self.Q)))
        return form + (self.dim + 8.0) * EPS * bound <= 1.0 - 4.0 * EPS

    def project(self, points: np.ndarray) -> np.ndarray:
        given = as_points(points, self.dim)
        p = given.reshape(-1, self.dim)
        q = self._q
        with np.errstate(over="ignore", invalid="ignore"):  # rows that overflow are redone in scale
            z = row_combine(p - self.center, self._V)
            val = np.sum(q * z * z, axis=-1)
        # a far row solves the same equation for its offset scaled by 2^{−e}: with z = 2^e z_s and
        # μ = 2^e ν, Σ q z_s²/(2^{−e} + ν q)² = 1, from ν₀ below.  "Far": the form overflows
        # (|y| ≳ 10¹⁵⁴), or exceeds FAR_FORM, beyond which Newton from μ = 0 — growing μ about 1.5× a
        # step — would not reach the root in its 200 steps (and q²z² overflows before the form does)
        far = ~(val <= FAR_FORM) & np.all(np.isfinite(p), axis=-1)
        rho = np.ones(val.shape)
        if np.any(far):
            offsets, e = scaled_offsets(p[far], self.center)
            z[far] = row_combine(offsets, self._V)
            rho[far] = np.ldexp(1.0, -e)
            val[far] = np.inf
        mu = np.zeros(val.shape)
        out_mask = val > 1.0
        if np.any(out_mask):
            zz, r = z[out_mask], rho[out_mask][:, None]
            # Newton from a point left of the root, where the convex decreasing left side is ≥ 1: μ = 0,
            # or for a far row ν₀ = (sqrt(Σ q z_s²) − ρ)/max q (each term then at least q z_s²/Σ q z_s²)
            m = np.where(np.isinf(val[out_mask]),
                         np.maximum(np.sqrt(np.sum(q * zz * zz, axis=-1)) - r[:, 0], 0.0) / q.max(), 0.0)
            # each point stops at its own convergence (not when the whole batch has converged), so its
            # projection depends on that point alone
            active = np.ones(zz.shape[0], dtype=bool)
            for _ in range(200):
                den = r + m[:, None] * q
                h = np.sum(q * zz * zz / den**2, axis=-1) - 1.0
                dh = -2.0 * np.sum(q * q * zz * zz / den**3, axis=-1)
                m_new = np.where(active, m - h / dh, m)
                # relative to μ itself: with a large q the root μ* is far below 1, and a test against
                # max(1, μ) stopped after one step at a point far outside the set
                active &= ~(np.abs(m_new - m) <= 1e-15 * m_new)
                m = m_new
                if not np.any(active):
                    break
            mu[out_mask] = m
        x = z / (rho[:, None] + mu[:, None] * q)
        return (self.center + row_combine(x, self._V.T)).reshape(given.shape)

    def support(self, directions: np.ndarray) -> np.ndarray:
        v = as_points(directions, self.dim)
        # row by row, not BLAS: a row's bits must not depend on the batch it is evaluated in
        w = row_combine(v, self._V) / np.sqrt(self._q)
        return row_dot(v, self.center) + row_norm(w)

    def support_upper(self, directions: np.ndarray) -> np.ndarray:
        """:meth:`support` plus its error bound: a guaranteed upper bound on ``σ(v)``.

        ``q, V`` come from a float eigendecomposition, exact for ``Q + E`` with
        ``||E|| ≲ d ε ||Q||``, so ``vᵀQ⁻¹v`` errs by a relative ``d ε cond(Q)``; we charge
        ``(d + 64) ε ((cond + 1) R + ||c||) ||v||`` with ``R = 1/sqrt(min q) ≥ sqrt(vᵀQ⁻¹v)/||v||``.
        """
        v = as_points(directions, self.dim)
        radius = 1.0 / float(np.sqrt(self._q.min()))
        scale = (self.condition_number + 1.0) * radius + float(np.linalg.norm(self.center))
        margin = (self.dim + 64.0) * EPS * scale * row_norm(v)
        return self.support(v) + margin

    @property
    def diameter(self) -> float:
        """``2/sqrt(min q)`` widened by the eigendecomposition's error (relative ``(d + 64) ε cond``):
        an upper bound, so the bounding ball contains the set (found by a review at cond 1e10)."""
        grow = 1.0 + (self.dim + 64.0) * EPS * (self.condition_number + 1.0)
        return 2.0 / float(np.sqrt(self._q.min())) * grow

    def bounding_ball(self) -> tuple[np.ndarray, float]:
        return self.center.copy(), self.diameter / 2.0

    def interior_point(self) -> np.ndarray:
        return self.center.copy()

    def translate(self, shift: np.ndarray) -> Ellipsoid:
        return Ellipsoid(self.center - shift, self.Q)

    def cone_rows(self) -> ConeRows:
        d = self.dim
        Lt = np.sqrt(self._q)[:, None] * self._V.T  # ||Lt (y - c)|| <= 1
        A = np.vstack([np.zeros((1, d)), -Lt])
        b = np.concatenate([[1.0], -Lt @ self.center])
        return ConeRows(A_y=A, b=b, cones=(Cone("soc", d + 1),))

    def constraints(self, w: cp.Variable) -> list[cp.Constraint]:
        Lt = np.sqrt(self._q)[:, None] * self._V.T
        return [cp.norm(Lt @ (w - self.center), 2) <= 1.0]
