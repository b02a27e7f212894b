"""Intersections of recognized sets (for example a box cut by a ball)."""

from __future__ import annotations

from collections.abc import Sequence

import cvxpy as cp
import numpy as np

from cvxdp.conic.cones import ConeRows
from cvxdp.geometry._conic_set import (
    ConicDomain,
    bounding_box,
    deep_interior_point,
)
from cvxdp.geometry.domain import Domain, as_points, ball_support


class Intersection(ConicDomain):
    """``W₁ ∩ … ∩ W_p``.

    Projection and support come from one conic program over all parts' rows;
    :meth:`support_upper` uses ``σ_{∩W_k} ≤ min_k σ_{W_k}`` (each part contains
    the intersection), which is always a valid bound.  The diameter bound is the
    smaller of the parts' bounds and of the intersection's own bounding box.
    """

    support_is_exact = False
    diameter_is_exact = False

    def __init__(self, parts: Sequence[Domain]) -> None:
        parts = list(parts)
        if len(parts) < 2:
            raise ValueError("an intersection needs at least two parts")
        dims = {p.dim for p in parts}
        if len(dims) != 1:
            raise ValueError(f"parts have different dimensions: {sorted(dims)}")
        super().__init__(parts[0].dim)
        self.parts = parts
        lo, hi = bounding_box(self.cone_rows(), self.dim)
        self._interior = deep_interior_point(self.cone_rows(), self.dim, lo, hi)
        box_ball = ((lo + hi) / 2.0, float(np.linalg.norm(hi - lo)) / 2.0)
        balls = [p.bounding_ball() for p in parts] + [box_ball]
        self._ball = min(balls, key=lambda cb: cb[1])
        self._diameter = min([p.diameter for p in parts] + [2.0 * box_ball[1]])

    def feasibility_tolerance(self) -> float:
        return max(p.feasibility_tolerance() for p in self.parts)

    def contains(self, points: np.ndarray, tol: float = 0.0) -> np.ndarray:
        ok = self.parts[0].contains(points, tol)
        for p in self.parts[1:]:
            ok = ok & p.contains(points, tol)
        return ok

    def certainly_contains(self, points: np.ndarray) -> np.ndarray | None:
        answers = [p.certainly_contains(points) for p in self.parts]
        if any(a is None for a in answers):
            return None
        return np.logical_and.reduce(answers)

    def support_upper(self, directions: np.ndarray) -> np.ndarray:
        vals = [p.support_upper(directions) for p in self.parts]
        c, r = self._ball
        v = as_points(directions, self.dim)
        vals.append(ball_support(v, c, r))
        return np.min(np.stack(vals), axis=0)

    @property
    def diameter(self) -> float:
        return self._diameter

    def translate(self, shift: np.ndarray) -> Intersection | None:
        parts = [p.translate(shift) for p in self.parts]
        return None if any(p is None for p in parts) else Intersection(parts)

    def cone_rows(self) -> ConeRows:
        return ConeRows.stack([p.cone_rows() for p in self.parts])

    def constraints(self, w: cp.Variable) -> list[cp.Constraint]:
        return [c for p in self.parts for c in p.constraints(w)]

    def __repr__(self) -> str:
        inner = ", ".join(type(p).__name__ for p in self.parts)
        return f"Intersection({inner}; diameter≤{self.diameter:.4g})"
