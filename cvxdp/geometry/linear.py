"""The linear minimization oracle of a domain: a point of ``W`` minimizing ``<v, w>``.

Closed forms for the ball (``c − r v/||v||``), the box (each coordinate at the end its sign picks) and
the simplex (its vertex on the smallest coordinate of ``v``); a vertex of a polytope from the HiGHS
simplex method (``scipy.optimize.linprog``); any other domain through one CVXPY solve of ``min <v, w>``
over its constraints (an SOCP).  Every answer is projected and made exactly feasible.  ``v = 0``
returns the domain's public interior point.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxdp.error import SolverError
from cvxdp.geometry.ball import Ball
from cvxdp.geometry.box import Box
from cvxdp.geometry.domain import Domain
from cvxdp.geometry.polytope import Polytope
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
    elif isinstance(domain, Polytope):
        point = _polytope_vertex(domain, unit)
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
    return domain.make_feasible(domain.project(point))


def _polytope_vertex(domain: Polytope, v: np.ndarray) -> np.ndarray:
    from scipy.optimize import linprog

    res = linprog(v, A_ub=domain.A, b_ub=domain.b, A_eq=domain.A_eq, b_eq=domain.b_eq,
                  bounds=[(None, None)] * domain.dim, method="highs-ds")
    if res.status != 0 or res.x is None:
        raise SolverError(f"the linear minimization over the polytope failed ({res.message}); the private "
                          "release itself is unaffected.")
    return np.asarray(res.x, dtype=float)


__all__ = ["linear_minimizer"]
