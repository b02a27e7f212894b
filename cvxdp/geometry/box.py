"""The axis-aligned box ``{y : lower ≤ y ≤ upper}``."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxdp._validation import finite_array
from cvxdp.conic.cones import Cone, ConeRows
from cvxdp.error import DomainError, EmptyDomainError
from cvxdp.geometry.domain import Domain, as_points


class Box(Domain):
    """``{y : l ≤ y ≤ u}``: projection is clipping, ``σ(v) = Σ max(l_i v_i, u_i v_i)``."""

    def __init__(self, lower: np.ndarray, upper: np.ndarray) -> None:
        lo = finite_array("box lower bounds", lower, ndim=1)
        hi = finite_array("box upper bounds", upper, ndim=1)
        if lo.shape != hi.shape:
            raise DomainError(f"box bounds differ in shape: {lo.shape} vs {hi.shape}")
        if np.any(lo > hi):
            i = int(np.argmax(lo > hi))
            raise EmptyDomainError(
                f"box is empty: lower[{i}] = {lo[i]} > upper[{i}] = {hi[i]}; swap or fix the bounds."
            )
        super().__init__(lo.shape[0])
        self.lower, self.upper = lo, hi

    def contains(self, points: np.ndarray, tol: float = 0.0) -> np.ndarray:
        p = as_points(points, self.dim)
        return np.all((p >= self.lower - tol) & (p <= self.upper + tol), axis=-1)

    def certainly_contains(self, points: np.ndarray) -> np.ndarray:
        """Comparisons of floats are exact."""
        return self.contains(points)

    def project(self, points: np.ndarray) -> np.ndarray:
        return np.clip(as_points(points, self.dim), self.lower, self.upper)

    def support(self, directions: np.ndarray) -> np.ndarray:
        v = as_points(directions, self.dim)
        return np.sum(np.maximum(v * self.lower, v * self.upper), axis=-1)

    @property
    def diameter(self) -> float:
        return float(np.linalg.norm(self.upper - self.lower))

    def bounding_ball(self) -> tuple[np.ndarray, float]:
        return (self.lower + self.upper) / 2.0, self.diameter / 2.0

    def interior_point(self) -> np.ndarray:
        return (self.lower + self.upper) / 2.0

    def translate(self, shift: np.ndarray) -> Box:
        return Box(self.lower - shift, self.upper - shift)

    def cone_rows(self) -> ConeRows:
        d = self.dim
        A = np.vstack([np.eye(d), -np.eye(d)])
        b = np.concatenate([self.upper, -self.lower])
        return ConeRows(A_y=A, b=b, cones=(Cone("nonneg", 2 * d),))

    def constraints(self, w: cp.Variable) -> list[cp.Constraint]:
        return [w >= self.lower, w <= self.upper]
