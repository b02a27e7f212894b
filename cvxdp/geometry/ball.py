"""The Euclidean ball ``B(c, r) = {y : ||y − c|| ≤ r}``."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxdp._validation import finite_array, positive_finite
from cvxdp.conic.cones import Cone, ConeRows
from cvxdp.geometry.domain import Domain, as_points, ball_support, scaled_offsets
from cvxdp.numerics import EPS, row_norm


class Ball(Domain):
    """``{y : ||y − center|| ≤ radius}`` with closed-form projection and support function.

    ``σ(v) = <c, v> + r ||v||``; ``Π(y) = c + (y − c) min(1, r / ||y − c||)``;
    diameter ``2r``.
    """

    def __init__(self, center: np.ndarray, radius: float) -> None:
        c = finite_array("ball center", center, ndim=1)
        super().__init__(c.shape[0])
        self.center = c
        self.radius = positive_finite("ball radius", radius)

    def contains(self, points: np.ndarray, tol: float = 0.0) -> np.ndarray:
        p = as_points(points, self.dim)
        return row_norm(p - self.center) <= self.radius + tol

    def certainly_contains(self, points: np.ndarray) -> np.ndarray:
        """``fl(||y − c||) ≤ r − (d + 8) ε (||y|| + ||c|| + r)`` implies ``||y − c|| ≤ r`` exactly."""
        p = as_points(points, self.dim)
        scale = row_norm(p) + np.linalg.norm(self.center) + self.radius
        slack = (self.dim + 8.0) * EPS * scale
        return row_norm(p - self.center) <= self.radius - slack

    def project(self, points: np.ndarray) -> np.ndarray:
        p = as_points(points, self.dim)
        with np.errstate(over="ignore", invalid="ignore"):  # rows whose norm overflows are redone below
            diff = p - self.center
            nrm = row_norm(diff)[..., None]
            scale = np.where(nrm > self.radius, self.radius / np.maximum(nrm, 1e-300), 1.0)
            out = self.center + diff * scale
        far = np.isinf(nrm[..., 0]) & np.all(np.isfinite(p), axis=-1)
        if np.any(far):  # the norm overflowed: the direction from offsets scaled by a power of two
            unit, _ = scaled_offsets(p[far], self.center)
            out[far] = self.center + unit * (self.radius / row_norm(unit))[:, None]
        return out

    def make_feasible(self, points: np.ndarray) -> np.ndarray:
        p = self.project(points)
        diff = p - self.center
        nrm = row_norm(diff)[..., None]
        # shrink by a few ulps where rounding left the point a hair outside
        scale = np.where(nrm > self.radius, (self.radius / np.maximum(nrm, 1e-300)) * (1 - 8 * EPS),
                         1.0)
        out = self.center + diff * scale
        bad = ~self.contains(out)
        if np.any(bad):
            out[bad] = self.center + diff[bad] * (1 - 1e-12) * self.radius / np.maximum(
                nrm[bad], 1e-300)
        return out

    def support(self, directions: np.ndarray) -> np.ndarray:
        v = as_points(directions, self.dim)
        return ball_support(v, self.center, self.radius)

    @property
    def diameter(self) -> float:
        return 2.0 * self.radius

    def bounding_ball(self) -> tuple[np.ndarray, float]:
        return self.center.copy(), self.radius

    def interior_point(self) -> np.ndarray:
        return self.center.copy()

    def translate(self, shift: np.ndarray) -> Ball:
        return Ball(self.center - shift, self.radius)

    def cone_rows(self) -> ConeRows:
        d = self.dim
        A = np.vstack([np.zeros((1, d)), -np.eye(d)])
        b = np.concatenate([[self.radius], -self.center])
        return ConeRows(A_y=A, b=b, cones=(Cone("soc", d + 1),))

    def constraints(self, w: cp.Variable) -> list[cp.Constraint]:
        return [cp.norm(w - self.center, 2) <= self.radius]

    def __repr__(self) -> str:
        return f"Ball(dim={self.dim}, radius={self.radius:.4g})"
