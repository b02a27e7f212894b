"""The linear minimization oracle of a domain: a point of ``W`` minimizing ``<v, w>``.

Closed forms for the ball (``c − r v/||v||``), the box (each coordinate at the end its sign picks) and
the simplex (its vertex on the smallest coordinate of ``v``); a vertex of any polyhedral domain (a
polytope, an ℓ1 ball, ...: every cone of its conic rows linear) from the HiGHS simplex method
(``scipy.optimize.linprog``); any other domain through one CVXPY solve of ``min <v, w>`` over its
constraints (an SOCP).  An answer outside the domain in floating point is projected and made exactly
feasible.  ``v = 0`` returns the domain's public interior point.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxdp.error import SolverError
from cvxdp.geometry.ball import Ball
from cvxdp.geometry.box import Box
from cvxdp.geometry.domain import Domain
from cvxdp.geometry.simplex import Simplex


def linear_minimizer(domain: Domain, direction: np.ndarray) -> np.ndarray:
    """A point of ``W = domain`` minimizing ``<direction, w>`` (exactly feasible).

    A deterministic function of ``direction`` and the domain (up to the conic solver's own
    determinism), so applied to a released vector it is post-processing.  Raises
    :class:`~cvxdp.error.SolverError` if the solver does not return an optimal point.
    """
    v = np.asarray(direction, dtype=float)
    if v.shape != (domain.dim,) or not np.all(np.isfinite(v)):
        raise ValueError(f"direction must be a finite vector of shape ({domain.dim},)")
    peak = float(np.max(np.abs(v)))
    if peak == 0.0:
        return domain.make_feasible(domain.interior_point())
    unit = v / peak  # scaled so the norm neither overflows nor underflows
    if isinstance(domain, Ball):
        point = domain.center - domain.radius * unit / np.linalg.norm(unit)
    elif isinstance(domain, Box):
        point = np.where(unit > 0, domain.lower, np.where(unit < 0, domain.upper,
                                                          (domain.lower + domain.upper) / 2.0))
    elif isinstance(domain, Simplex):
        j = int(np.argmin(unit))
        point = np.zeros(domain.dim)
        if not (domain.full and unit[j] >= 0.0):  # the full simplex keeps 0 when no coordinate is negative
            point[j] = domain.scale
    elif _polyhedral(domain):
        point = _polyhedral_vertex(domain.cone_rows(), unit)
    else:
        w = cp.Variable(domain.dim)
        problem = cp.Problem(cp.Minimize(unit @ w), domain.constraints(w))
        try:
            problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
        except cp.error.SolverError as exc:
            raise SolverError("the linear minimization over the domain failed in the conic solver; "
                              "the private release itself is unaffected.") from exc
        if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or w.value is None:
            raise SolverError(f"the linear minimization over the domain ended with status "
                              f"{problem.status!r}; the private release itself is unaffected.")
        point = np.asarray(w.value, dtype=float).reshape(-1)
    if bool(np.all(domain.contains(point))):  # exactly feasible already (a closed form, an LP vertex)
        return point
    return domain.make_feasible(domain.project(point))


def _polyhedral(domain: Domain) -> bool:
    """Whether every cone of the domain's conic rows is linear (zero or nonnegative)."""
    return all(cone.kind in ("zero", "nonneg") for cone in domain.cone_rows().cones)


def _polyhedral_vertex(rows, v: np.ndarray) -> np.ndarray:
    """``argmin <v, y>`` over ``{y : A_y y + A_aux u + s = b, s ∈ K}`` with ``K`` a product of zero and
    nonnegative cones: an LP in ``(y, u)``, solved to a vertex by HiGHS's dual simplex."""
    from scipy.optimize import linprog

    A = np.hstack([rows.A_y, rows.A_aux])
    kinds = np.concatenate([np.full(cone.dim, cone.kind == "zero") for cone in rows.cones])
    cost = np.concatenate([v, np.zeros(rows.A_aux.shape[1])])
    ub, eq = ~kinds, kinds
    res = linprog(cost, A_ub=A[ub] if ub.any() else None, b_ub=rows.b[ub] if ub.any() else None,
                  A_eq=A[eq] if eq.any() else None, b_eq=rows.b[eq] if eq.any() else None,
                  bounds=[(None, None)] * A.shape[1], method="highs-ds")
    if res.status != 0 or res.x is None:
        raise SolverError(f"the linear minimization over the domain failed ({res.message}); the private "
                          "release itself is unaffected.")
    return np.asarray(res.x[:v.size], dtype=float)


__all__ = ["linear_minimizer"]
