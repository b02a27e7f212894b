"""The bounded polyhedron ``{y : A y ≤ b, A_eq y = b_eq}``."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxdp._validation import finite_array
from cvxdp.conic.cones import Cone, ConeRows
from cvxdp.error import DomainError
from cvxdp.geometry._conic_set import (
    ConicDomain,
    batched_support,
    bounding_box,
    deep_interior_point,
    dual_support_bound,
)
from cvxdp.geometry.domain import as_points
from cvxdp.numerics import EPS, row_combine, row_dot


class Polytope(ConicDomain):
    """``{y : A y ≤ b, A_eq y = b_eq}``, checked bounded and nonempty at construction.

    Projection and support function come from a conic solver (one
    block-diagonal program for many points).  For certificates use
    :meth:`support_upper`, which turns the LP's repaired dual ``μ ≥ 0`` into the
    bound ``σ(v) ≤ bᵀμ + σ_B(v − Aᵀμ)`` (the E.3 recipe ``s := Aᵀμ``, with the
    rounding residual charged to a bounding ball ``B``).
    """

    support_is_exact = False
    diameter_is_exact = False

    def __init__(self, A: np.ndarray, b: np.ndarray, A_eq: np.ndarray | None = None,
                 b_eq: np.ndarray | None = None) -> None:
        A = finite_array("polytope matrix A", A, ndim=2)
        d = A.shape[1]
        b = finite_array("polytope vector b", b, shape=(A.shape[0],))
        if A_eq is None:
            A_eq, b_eq = np.zeros((0, d)), np.zeros(0)
        A_eq = finite_array("polytope matrix A_eq", A_eq, ndim=2)
        if A_eq.shape[1] != d:
            raise DomainError(f"A_eq has {A_eq.shape[1]} columns but A has {d}.")
        b_eq = finite_array("polytope vector b_eq", b_eq, shape=(A_eq.shape[0],))
        super().__init__(d)
        self.A, self.b, self.A_eq, self.b_eq = A, b, A_eq, b_eq
        lo, hi = bounding_box(self.cone_rows(), d)
        self._box = (lo, hi)
        self._interior = deep_interior_point(self.cone_rows(), d, lo, hi)
        self._ball = ((lo + hi) / 2.0, float(np.linalg.norm(hi - lo)) / 2.0)

    def feasibility_tolerance(self) -> float:
        """Rounding-level slack for the equality rows (none without equalities).

        A float point can satisfy ``A_eq y = b_eq`` only up to rounding;
        :meth:`make_feasible` first projects onto the affine hull exactly (least
        squares), so the residual is a few ulps of ``|A_eq| |y| + |b_eq|``.
        """
        if not self.A_eq.shape[0]:
            return 0.0
        lo, hi = self._box
        reach = float(np.max(np.maximum(np.abs(lo), np.abs(hi)))) if np.all(np.isfinite(lo)) else 1.0
        row = float(np.max(np.abs(self.A_eq).sum(axis=1)))
        return 64 * EPS * (1.0 + row * reach + float(np.max(np.abs(self.b_eq))))

    def make_feasible(self, points: np.ndarray) -> np.ndarray:
        p = as_points(points, self.dim)
        if self.A_eq.shape[0]:
            flat = p.reshape(-1, self.dim)
            resid = row_combine(flat, self.A_eq.T) - self.b_eq
            corr = np.linalg.lstsq(self.A_eq, resid.T, rcond=None)[0].T
            p = (flat - corr).reshape(p.shape)
        return super().make_feasible(p)

    def contains(self, points: np.ndarray, tol: float = 0.0) -> np.ndarray:
        p = as_points(points, self.dim)
        # row by row, not BLAS: a point's answer must not depend on the batch (cvxdp.numerics.row_dot)
        ok = np.all(row_combine(p, self.A.T) <= self.b + tol, axis=-1)
        if self.A_eq.shape[0]:
            gap = np.abs(row_combine(p, self.A_eq.T) - self.b_eq)
            ok &= np.all(gap <= max(tol, self.feasibility_tolerance()), axis=-1)
        return ok

    def certainly_contains(self, points: np.ndarray) -> np.ndarray | None:
        """``fl(A y) ≤ b − (d + 2) ε (|A||y| + |b|)`` row by row; ``None`` with equality constraints."""
        if self.A_eq.shape[0]:
            return None
        p = as_points(points, self.dim)
        slack = (self.dim + 2.0) * EPS * (row_combine(np.abs(p), np.abs(self.A).T) + np.abs(self.b))
        return np.all(row_combine(p, self.A.T) <= self.b - slack, axis=-1)

    def support_upper(self, directions: np.ndarray) -> np.ndarray:
        v = as_points(directions, self.dim)
        flat = v.reshape(-1, self.dim)
        _, z, _ = batched_support(self.cone_rows(), flat)
        c, r = self._ball
        return dual_support_bound(self.cone_rows(), flat, z, c, r).reshape(v.shape[:-1])

    @property
    def diameter(self) -> float:
        lo, hi = self._box
        return float(np.linalg.norm(hi - lo))

    def translate(self, shift: np.ndarray) -> Polytope:
        # type(self): the unbounded polyhedron of an intersection translates as itself
        s = np.asarray(shift, float)
        return type(self)(self.A, self.b - row_dot(self.A, s), self.A_eq,
                          self.b_eq - row_dot(self.A_eq, s))

    def cone_rows(self) -> ConeRows:
        cones = []
        if self.A_eq.shape[0]:
            cones.append(Cone("zero", self.A_eq.shape[0]))
        if self.A.shape[0]:
            cones.append(Cone("nonneg", self.A.shape[0]))
        return ConeRows(A_y=np.vstack([self.A_eq, self.A]), b=np.concatenate([self.b_eq, self.b]),
                        cones=tuple(cones))

    def constraints(self, w: cp.Variable) -> list[cp.Constraint]:
        cons = [self.A @ w <= self.b] if self.A.shape[0] else []
        if self.A_eq.shape[0]:
            cons.append(self.A_eq @ w == self.b_eq)
        return cons
