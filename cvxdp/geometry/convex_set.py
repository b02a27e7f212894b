"""The generic fallback: any bounded convex set CVXPY can put in conic form.

The constraints are compiled once by CVXPY into solver rows (with whatever
auxiliary variables its canonicalization introduces).  Projection and support
function then come from cvxdp's direct conic calls.  Certificates that need
``σ_W`` fall back on a bounding ball, which is looser but always valid.
"""

from __future__ import annotations

from collections.abc import Sequence

import cvxpy as cp
import numpy as np

from cvxdp.conic.cones import ConeRows, cones_from_dims
from cvxdp.error import DomainError
from cvxdp.geometry._conic_set import (
    ConicDomain,
    bounding_box,
    deep_interior_point,
)
from cvxdp.geometry.domain import as_points, ball_support


def compile_constraints(constraints: Sequence[cp.Constraint], w: cp.Variable) -> ConeRows:
    """Solver rows ``A_y w + A_aux v + s = b`` for ``constraints`` (CVXPY does the canonicalization).

    Raises :class:`DomainError` for constraints that are not DCP or that need
    cones cvxdp does not handle (PSD, power cones).
    """
    for c in constraints:
        if not c.is_dcp():
            raise DomainError(f"domain constraint {c} is not DCP (so not known to be convex); "
                              "rewrite it following CVXPY's DCP rules.")
        if any(p for p in c.parameters()):
            raise DomainError(f"domain constraint {c} uses a CVXPY Parameter; the domain must be "
                              "fixed and public, so use constants.")
    prob = cp.Problem(cp.Minimize(0), list(constraints))
    data, _, _ = prob.get_problem_data(cp.CLARABEL)
    dims = data["dims"]
    if dims.psd or dims.p3d or getattr(dims, "pnd", None):
        raise DomainError("domain constraints needing PSD or power cones are not supported; "
                          "express the domain with linear, second-order or exponential cones.")
    pp = data[cp.settings.PARAM_PROB]
    if w.id not in pp.var_id_to_col:
        raise DomainError("the domain constraints do not involve the model variable.")
    A = data["A"].toarray()
    b = np.asarray(data["b"], float)
    start = pp.var_id_to_col[w.id]
    y_cols = np.arange(start, start + w.size)
    aux_cols = np.setdiff1d(np.arange(A.shape[1]), y_cols)
    lb = data.get("lower_bounds")
    ub = data.get("upper_bounds")
    if (lb is not None and np.any(np.isfinite(lb))) or (ub is not None and np.any(np.isfinite(ub))):
        raise DomainError("variable bounds on the model variable are not supported; "
                          "write them as constraints instead.")
    return ConeRows(A_y=A[:, y_cols], b=b, cones=cones_from_dims(dims), A_aux=A[:, aux_cols])


class ConvexSet(ConicDomain):
    """A bounded convex set given by arbitrary CVXPY constraints on ``w``.

    Checked nonempty and bounded at construction through ``2d`` support LPs;
    the diameter is the diagonal of the resulting (padded) bounding box.
    """

    support_is_exact = False
    diameter_is_exact = False
    _keep_inside = False  # membership is a per-point CVXPY evaluation: projecting everything is cheaper

    def __init__(self, constraints: Sequence[cp.Constraint], w: cp.Variable,
                 bounded_elsewhere: bool = False) -> None:
        super().__init__(w.size)
        self._constraints = list(constraints)
        self._w = w
        self._rows = compile_constraints(self._constraints, w)
        if bounded_elsewhere:
            # only used as one part of an intersection that is bounded as a whole
            self._box = (np.full(self.dim, -np.inf), np.full(self.dim, np.inf))
            self._interior = np.zeros(self.dim)
            self._ball = (np.zeros(self.dim), np.inf)
            return
        lo, hi = bounding_box(self._rows, self.dim)
        self._box = (lo, hi)
        self._interior = deep_interior_point(self._rows, self.dim, lo, hi)
        self._ball = ((lo + hi) / 2.0, float(np.linalg.norm(hi - lo)) / 2.0)

    def contains(self, points: np.ndarray, tol: float = 0.0) -> np.ndarray:
        """Membership by evaluating each constraint's violation (CVXPY ``violation``) in float64.

        With ``tol = 0`` this is exact membership for the inequality constraints a
        generic set holds (affine equalities are routed to a polytope part by
        :func:`~cvxdp.geometry.domain_from_constraints`).
        """
        p = as_points(points, self.dim)
        flat = p.reshape(-1, self.dim)
        out = np.empty(flat.shape[0], dtype=bool)
        for i, pt in enumerate(flat):
            self._w.save_value(pt.reshape(self._w.shape))  # a point outside w's attributes is a point too
            out[i] = all(np.all(np.asarray(c.violation()) <= tol) for c in self._constraints)
        self._w.save_value(None)
        return out.reshape(p.shape[:-1])

    def support_upper(self, directions: np.ndarray) -> np.ndarray:
        v = as_points(directions, self.dim)
        c, r = self._ball
        if not np.isfinite(r):
            return np.full(v.shape[:-1], np.inf)
        return ball_support(v, c, r)

    @property
    def diameter(self) -> float:
        lo, hi = self._box
        return float(np.linalg.norm(hi - lo))

    def cone_rows(self) -> ConeRows:
        return self._rows

    def constraints(self, w: cp.Variable) -> list[cp.Constraint]:
        if w is self._w:
            return list(self._constraints)
        return rows_to_constraints(self._rows, w)


def rows_to_constraints(rows: ConeRows, w: cp.Variable) -> list[cp.Constraint]:
    """CVXPY constraints on ``w`` equivalent to solver rows (fresh auxiliaries if any)."""
    expr = rows.b - rows.A_y @ w
    if rows.n_aux:
        aux = cp.Variable(rows.n_aux)
        expr = expr - rows.A_aux @ aux
    out: list[cp.Constraint] = []
    start = 0
    for cone in rows.cones:
        s = expr[start:start + cone.dim]
        if cone.kind == "zero":
            out.append(s == 0)
        elif cone.kind == "nonneg":
            out.append(s >= 0)
        elif cone.kind == "soc":
            out.append(cp.SOC(s[0], s[1:]))
        else:
            out.append(cp.constraints.ExpCone(s[0], s[1], s[2]))
        start += cone.dim
    return out
