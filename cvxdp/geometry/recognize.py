"""Recognizing a domain from the CVXPY constraints a user writes.

``domain_from_constraints([cp.norm(w, 2) <= 1], w)`` returns a
:class:`~cvxdp.geometry.ball.Ball`; ``[w >= -1, w <= 1]`` a
:class:`~cvxdp.geometry.box.Box`; ``[w >= 0, cp.sum(w) == 1]`` a
:class:`~cvxdp.geometry.simplex.Simplex`; norm-ball constraints with a general
linear map give ellipsoids; other linear constraints a
:class:`~cvxdp.geometry.polytope.Polytope`; several recognized pieces an
intersection; and anything else a generic
:class:`~cvxdp.geometry.convex_set.ConvexSet` compiled by CVXPY.
"""

from __future__ import annotations

from collections.abc import Sequence

import cvxpy as cp
import numpy as np
from cvxpy.atoms.norm_inf import norm_inf
from cvxpy.atoms.pnorm import Pnorm
from cvxpy.atoms.quad_form import QuadForm
from cvxpy.atoms.quad_over_lin import quad_over_lin
from cvxpy.constraints.nonpos import Inequality
from cvxpy.constraints.zero import Equality

from cvxdp.error import DomainError, EmptyDomainError, UnboundedDomainError
from cvxdp.geometry.ball import Ball
from cvxdp.geometry.box import Box
from cvxdp.geometry.convex_set import ConvexSet
from cvxdp.geometry.domain import Domain
from cvxdp.geometry.ellipsoid import Ellipsoid
from cvxdp.geometry.intersection import Intersection
from cvxdp.geometry.lens import intersect_balls
from cvxdp.geometry.polytope import Polytope
from cvxdp.geometry.simplex import Simplex


def affine_map(expr: cp.Expression, w: cp.Variable) -> tuple[np.ndarray, np.ndarray]:
    """``(M, v)`` with ``expr(w) = M w + v`` (flattened), for an expression affine in ``w``."""
    d = w.size
    old = w.value
    try:  # save_value: a probe point may violate w's attributes (nonneg, bounds), which .value refuses
        w.save_value(np.zeros(w.shape))
        v = np.asarray(expr.value, dtype=float).ravel(order="F")
        M = np.empty((v.size, d))
        for j in range(d):
            e = np.zeros(d)
            e[j] = 1.0
            w.save_value(e.reshape(w.shape, order="F"))
            M[:, j] = np.asarray(expr.value, dtype=float).ravel(order="F") - v
    finally:
        w.save_value(old)
    return M, v


def _positive_scale(expr: cp.Expression) -> tuple[float, cp.Expression]:
    """Strip positive scalar constant factors: ``2 * norm(x)`` -> ``(2, norm(x))``."""
    scale = 1.0
    while isinstance(expr, cp.multiply | cp.atoms.affine.binary_operators.MulExpression) and len(
            expr.args) == 2:
        a, b = expr.args
        if a.is_constant() and a.size == 1 and float(np.asarray(a.value).ravel()[0]) > 0:
            scale *= float(np.asarray(a.value).ravel()[0])
            expr = b
        elif b.is_constant() and b.size == 1 and float(np.asarray(b.value).ravel()[0]) > 0:
            scale *= float(np.asarray(b.value).ravel()[0])
            expr = a
        else:
            break
    return scale, expr


def _norm_ball(lhs: cp.Expression, bound: float, w: cp.Variable) -> Domain | None:
    """Ball or ellipsoid from ``||M w + v|| ≤ bound`` style constraints, else ``None``."""
    scale, atom = _positive_scale(lhs)
    radius_sq = None
    if isinstance(atom, Pnorm) and float(atom.p) == 2.0 and atom.axis is None:
        arg, radius = atom.args[0], bound / scale
    elif isinstance(atom, quad_over_lin) and atom.args[1].is_constant() and np.allclose(
            atom.args[1].value, 1.0):
        arg, radius_sq = atom.args[0], bound / scale
    elif isinstance(atom, QuadForm) and atom.args[1].is_constant():
        arg = atom.args[0]
        Q = np.asarray(atom.args[1].value, dtype=float) * scale / bound
        if not arg.is_affine() or bound <= 0:
            return None
        M, v = affine_map(arg, w)
        if M.shape[0] != M.shape[1] or abs(np.linalg.det(M)) < 1e-12:
            return None
        c = -np.linalg.solve(M, v)
        return Ellipsoid(c, M.T @ Q @ M)
    else:
        return None
    if not arg.is_affine():
        return None
    if radius_sq is not None:
        if radius_sq < 0:
            raise EmptyDomainError(f"constraint bounds a sum of squares by {radius_sq} < 0.")
        radius = float(np.sqrt(radius_sq))
    if radius < 0:
        raise EmptyDomainError(f"a norm is bounded by {radius} < 0, so the domain is empty.")
    if radius == 0:
        raise DomainError("a norm bounded by 0 pins w to a single point; use a positive radius.")
    M, v = affine_map(arg, w)
    if M.shape[0] == M.shape[1]:
        alpha = M[0, 0]
        if alpha != 0 and np.allclose(M, alpha * np.eye(M.shape[0]), rtol=0, atol=1e-14 * abs(alpha)):
            return Ball(-v / alpha, radius / abs(alpha))
        if abs(np.linalg.det(M)) > 1e-12:
            c = -np.linalg.solve(M, v)
            return Ellipsoid(c, M.T @ M / radius**2)
    return None


def _box_from_inf_norm(lhs: cp.Expression, bound: float, w: cp.Variable) -> Domain | None:
    scale, atom = _positive_scale(lhs)
    if isinstance(atom, norm_inf) and atom.axis is None and atom.args[0].is_affine():
        M, v = affine_map(atom.args[0], w)
        if M.shape[0] == M.shape[1] and np.allclose(M, np.eye(M.shape[0])):
            r = bound / scale
            if r < 0:
                raise EmptyDomainError(f"an infinity norm is bounded by {r} < 0.")
            return Box(-v - r, -v + r)
    if type(atom).__name__ in ("norm1", "Pnorm", "PnormApprox") and atom.args[0].size == 1 \
            and atom.args[0].is_affine():
        atom = cp.abs(atom.args[0])  # a norm of a scalar is its absolute value
    if isinstance(atom, cp.abs) and atom.args[0].is_affine():
        M, v = affine_map(atom.args[0], w)
        if M.shape[0] == M.shape[1] and np.allclose(M, np.eye(M.shape[0])):
            r = np.broadcast_to(np.asarray(bound, float) / scale, v.shape)
            if np.any(r < 0):
                raise EmptyDomainError("an absolute value is bounded by a negative number.")
            return Box(-v - r, -v + r)
    return None


def _classify_polyhedron(P: np.ndarray, q: np.ndarray, E: np.ndarray, e: np.ndarray,
                         bounded_elsewhere: bool) -> Domain | None:
    d = P.shape[1] if P.size else E.shape[1]
    if P.shape[0] == 0 and E.shape[0] == 0:
        return None
    unit = np.zeros(P.shape[0], dtype=bool)
    if P.shape[0]:
        nnz = np.count_nonzero(P, axis=1)
        unit = nnz == 1
    # simplex: w >= 0 (rows -e_j <= 0) plus sum(w) == s or sum(w) <= s
    if P.shape[0]:
        nonneg = np.zeros(d, dtype=bool)
        other_P: list[int] = []
        for i in range(P.shape[0]):
            j = int(np.argmax(np.abs(P[i])))
            if unit[i] and P[i, j] < 0 and q[i] == 0:
                nonneg[j] = True
            else:
                other_P.append(i)
        ones_rows = [i for i in other_P if np.allclose(P[i], P[i, 0]) and P[i, 0] > 0]
        if nonneg.all() and E.shape[0] == 1 and not other_P and np.allclose(E[0], E[0, 0]) \
                and E[0, 0] != 0 and e[0] / E[0, 0] > 0:
            return Simplex(d, e[0] / E[0, 0])
        if nonneg.all() and E.shape[0] == 0 and len(other_P) == 1 and ones_rows:
            i = ones_rows[0]
            return Simplex(d, q[i] / P[i, 0], full=True)
    if E.shape[0] == 0 and P.shape[0] and np.all(unit):
        lo = np.full(d, -np.inf)
        hi = np.full(d, np.inf)
        for i in range(P.shape[0]):
            j = int(np.argmax(np.abs(P[i])))
            bnd = q[i] / P[i, j]
            if P[i, j] > 0:
                hi[j] = min(hi[j], bnd)
            else:
                lo[j] = max(lo[j], bnd)
        if np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)):
            return Box(lo, hi)
    if bounded_elsewhere:
        return _Polyhedron(P, q, E, e)
    return Polytope(P, q, E, e)


class _Polyhedron(Polytope):
    """A possibly unbounded polyhedron, only used inside an intersection with a bounded set."""

    def __init__(self, A: np.ndarray, b: np.ndarray, A_eq: np.ndarray, b_eq: np.ndarray) -> None:
        self.A, self.b, self.A_eq, self.b_eq = A, b, A_eq, b_eq
        self.dim = A.shape[1] if A.size else A_eq.shape[1]
        self._box = (np.full(self.dim, -np.inf), np.full(self.dim, np.inf))
        self._interior = None
        self._ball = (np.zeros(self.dim), np.inf)

    @property
    def diameter(self) -> float:
        return np.inf

    def support_upper(self, directions: np.ndarray) -> np.ndarray:
        v = np.asarray(directions, float)
        return np.full(v.shape[:-1], np.inf)

    def interior_point(self) -> np.ndarray:  # pragma: no cover - intersections use their own
        raise DomainError("an unbounded polyhedron has no interior point to offer")


def domain_from_constraints(constraints: Sequence[cp.Constraint], w: cp.Variable) -> Domain:
    """The :class:`Domain` described by ``constraints`` on the model variable ``w``.

    Raises
    ------
    UnboundedDomainError
        No constraint, or the constraints leave some direction unbounded.
    EmptyDomainError
        The constraints are infeasible.
    DomainError
        A constraint is not convex (DCP), uses other variables or parameters.
    """
    if isinstance(constraints, cp.Constraint):
        constraints = [constraints]
    constraints = list(constraints or [])
    if not isinstance(w, cp.Variable):
        raise DomainError(f"the model variable must be a cp.Variable, got {type(w).__name__}.")
    if not constraints:
        raise UnboundedDomainError(
            "no domain constraints were given, so W = R^d is unbounded; add e.g. "
            "cp.norm(w, 2) <= R."
        )
    parts: list[Domain] = []
    P_rows, q_rows, E_rows, e_rows = [], [], [], []
    generic: list[cp.Constraint] = []
    for c in constraints:
        if not isinstance(c, cp.Constraint):
            raise DomainError(f"domain entries must be CVXPY constraints, got {type(c).__name__}.")
        others = [v for v in c.variables() if v.id != w.id]
        if others:
            raise DomainError(f"domain constraint {c} involves variables other than the model "
                              f"variable ({', '.join(v.name() for v in others)}).")
        if c.parameters():
            raise DomainError(f"domain constraint {c} uses a CVXPY Parameter; the domain must be "
                              "public and fixed, so use constants.")
        if not c.variables():
            raise DomainError(f"domain constraint {c} does not involve the model variable.")
        if not c.is_dcp():
            raise DomainError(f"domain constraint {c} is not DCP, so it is not known to define a "
                              "convex set; rewrite it following CVXPY's DCP rules.")
        if isinstance(c, Equality):
            if not c.expr.is_affine():
                generic.append(c)
                continue
            M, v = affine_map(c.expr, w)
            E_rows.append(M)
            e_rows.append(-v)
            continue
        if isinstance(c, Inequality):
            lhs, rhs = c.args
            if c.expr.is_affine():
                M, v = affine_map(c.expr, w)
                P_rows.append(M)
                q_rows.append(-v)
                continue
            if rhs.is_constant() and rhs.size == 1:
                bound = float(np.asarray(rhs.value).ravel()[0])
                found = (_norm_ball(lhs, bound, w) if w.size > 1 else None) or \
                    _box_from_inf_norm(lhs, bound, w)
                if found is not None:
                    parts.append(found)
                    continue
            if rhs.is_constant() and isinstance(_positive_scale(lhs)[1], cp.abs):
                found = _box_from_inf_norm(lhs, np.asarray(rhs.value, float).ravel(order="F"), w)
                if found is not None:
                    parts.append(found)
                    continue
        generic.append(c)
    d = w.size
    P = np.vstack(P_rows) if P_rows else np.zeros((0, d))
    q = np.concatenate(q_rows) if q_rows else np.zeros(0)
    E = np.vstack(E_rows) if E_rows else np.zeros((0, d))
    e = np.concatenate(e_rows) if e_rows else np.zeros(0)
    poly = _classify_polyhedron(P, q, E, e, bounded_elsewhere=bool(parts or generic))
    if poly is not None:
        parts.append(poly)
    if generic:
        parts.append(ConvexSet(generic, w, bounded_elsewhere=bool(parts)))
    if w.size == 1:
        # in one dimension every interval is a ball; the ball gets the closed-form paths
        parts = [Ball((p.lower + p.upper) / 2.0, float(p.upper[0] - p.lower[0]) / 2.0)
                 if isinstance(p, Box) and p.upper[0] > p.lower[0] else p for p in parts]
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2 and all(isinstance(p, Ball) for p in parts):
        return intersect_balls(parts[0], parts[1])
    return Intersection(parts)
