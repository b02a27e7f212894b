"""The scaled simplex ``{y ≥ 0 : Σ y = s}`` (or ``Σ y ≤ s`` with ``full=True``)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxdp._validation import positive_finite
from cvxdp.conic.cones import Cone, ConeRows
from cvxdp.geometry.domain import Domain, as_points
from cvxdp.numerics import EPS


def project_onto_simplex(points: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """Euclidean projection of each row onto ``{y ≥ 0 : Σ y = scale}`` (sort-based, exact)."""
    p = np.asarray(points, dtype=float)
    scale = float(scale)  # a Python float: the test below overflows to inf without a warning
    if 4.0 * scale * max(p.shape[-1], 1) > np.finfo(float).max:  # partial sums down to −2·scale·d
        _, e = np.frexp(scale)  # exact: project y/2^e onto the simplex of scale/2^e, then scale back
        return np.ldexp(project_onto_simplex(np.ldexp(p, -int(e)), float(np.ldexp(scale, -int(e)))), int(e))
    # the projection is unchanged by adding t·1 to a row; shifted to its maximum 0, the scale is not
    # lost beside entries of 10³⁰⁰ (where the sum of the sorted entries would swallow it).  An entry
    # below max − scale projects to 0 (θ ≥ max − scale), so raising one from below −2·scale to −2·scale
    # changes nothing and keeps every partial sum finite (a difference past −10³⁰⁸ overflows to −inf)
    flat = p.reshape(-1, p.shape[-1])
    with np.errstate(over="ignore"):
        flat = np.maximum(flat - np.max(flat, axis=1, keepdims=True), -2.0 * scale)
    u = -np.sort(-flat, axis=1)
    css = np.cumsum(u, axis=1) - scale
    k = np.arange(1, flat.shape[1] + 1)
    cond = u - css / k > 0
    rho = flat.shape[1] - 1 - np.argmax(cond[:, ::-1], axis=1)
    theta = css[np.arange(flat.shape[0]), rho] / (rho + 1.0)
    return np.maximum(flat - theta[:, None], 0.0).reshape(p.shape)


class Simplex(Domain):
    """``{y ≥ 0 : Σ y = scale}``, or the full simplex ``{y ≥ 0 : Σ y ≤ scale}``.

    ``σ(v) = scale · max_i v_i`` (full: ``scale · max(0, max_i v_i)``); diameter
    ``scale · √2``.
    """

    def __init__(self, dim: int, scale: float = 1.0, full: bool = False) -> None:
        super().__init__(dim)
        self.scale = positive_finite("simplex scale", scale)
        self.full = bool(full)

    def feasibility_tolerance(self) -> float:
        return 0.0 if self.full else 16 * np.finfo(float).eps * self.scale * self.dim

    def contains(self, points: np.ndarray, tol: float = 0.0) -> np.ndarray:
        p = as_points(points, self.dim)
        s = p.sum(axis=-1)
        ok = np.all(p >= -tol, axis=-1)
        if self.full:
            return ok & (s <= self.scale + tol)
        return ok & (np.abs(s - self.scale) <= max(tol, self.feasibility_tolerance()))

    def certainly_contains(self, points: np.ndarray) -> np.ndarray | None:
        """``y ≥ 0`` is exact; ``Σ y ≤ s`` with a margin ``(d + 2) ε (Σ|y| + s)``; else ``None``."""
        if not self.full:
            return None
        p = as_points(points, self.dim)
        slack = (self.dim + 2.0) * EPS * (np.abs(p).sum(axis=-1) + self.scale)
        return np.all(p >= 0.0, axis=-1) & (p.sum(axis=-1) <= self.scale - slack)

    def project(self, points: np.ndarray) -> np.ndarray:
        p = as_points(points, self.dim)
        if not self.full:
            return project_onto_simplex(p, self.scale)
        clipped = np.maximum(p, 0.0)
        with np.errstate(over="ignore"):  # a sum past 10³⁰⁸ is inf: over the scale, as it should be
            over = clipped.sum(axis=-1) > self.scale
        out = clipped.copy()
        if np.any(over):
            out[over] = project_onto_simplex(p[over], self.scale)
        return out

    def support(self, directions: np.ndarray) -> np.ndarray:
        v = as_points(directions, self.dim)
        top = v.max(axis=-1)
        return self.scale * (np.maximum(top, 0.0) if self.full else top)

    @property
    def diameter(self) -> float:
        return self.scale * float(np.sqrt(2.0)) if self.dim > 1 else (
            self.scale if self.full else 0.0)

    def bounding_ball(self) -> tuple[np.ndarray, float]:
        if self.full:
            c = np.full(self.dim, self.scale / 2.0)
            return c, self.scale * float(np.sqrt(self.dim)) / 2.0
        c = np.full(self.dim, self.scale / self.dim)
        return c, self.scale * float(np.sqrt(1.0 - 1.0 / self.dim))

    def interior_point(self) -> np.ndarray:
        return np.full(self.dim, self.scale / (self.dim + (1 if self.full else 0)))

    def cone_rows(self) -> ConeRows:
        d = self.dim
        if self.full:
            A = np.vstack([-np.eye(d), np.ones((1, d))])
            return ConeRows(A_y=A, b=np.concatenate([np.zeros(d), [self.scale]]),
                            cones=(Cone("nonneg", d + 1),))
        A = np.vstack([np.ones((1, d)), -np.eye(d)])
        return ConeRows(A_y=A, b=np.concatenate([[self.scale], np.zeros(d)]),
                        cones=(Cone("zero", 1), Cone("nonneg", d)))

    def constraints(self, w: cp.Variable) -> list[cp.Constraint]:
        if self.full:
            return [w >= 0, cp.sum(w) <= self.scale]
        return [w >= 0, cp.sum(w) == self.scale]
