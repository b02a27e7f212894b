"""The linear minimization oracle of a domain: a point of ``W`` minimizing ``<v, w>``.

Closed forms for the ball (``c − r v/||v||``), the box (each coordinate at the end its sign picks) and
the simplex (its vertex on the smallest coordinate of ``v``); a vertex of any polyhedral domain (a
polytope, an ℓ1 ball, ...: every cone of its conic rows linear) from the HiGHS simplex method
(``scipy.optimize.linprog``); any other domain through one Clarabel solve of ``min <v, w>`` over its
conic rows.  Both solve in the coordinates of the domain's bounding ball, so their absolute
tolerances meet a set of unit size whatever its scale.  An answer outside the domain in floating point
is made exactly feasible (:meth:`~cvxdp.geometry.domain.Domain.make_feasible`).  ``v = 0`` returns the
domain's public interior point.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxdp.conic.cones import ConeRows
from cvxdp.error import SolverError
from cvxdp.geometry.ball import Ball
from cvxdp.geometry.box import Box
from cvxdp.geometry.convex_set import rows_to_constraints
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
    else:  # in the bounding ball's coordinates, so the solvers' absolute tolerances meet a unit-size set
        rows, centre, rho = _unit_rows(domain)
        if all(cone.kind in ("zero", "nonneg") for cone in rows.cones):
            z = _polyhedral_vertex(rows, unit)
        else:
            z = _conic_minimizer(rows, unit)
        point = centre + rho * z
    if bool(np.all(domain.contains(point))):  # exactly feasible already (a closed form, an LP vertex)
        return point
    # make_feasible tries the rays toward the point and toward its projection: a vertex an ulp outside
    # stays (almost) where it is, where projecting first (a conic solve, accurate to ~√tol) moved it
    return domain.make_feasible(point)


def _unit_rows(domain: Domain) -> tuple[ConeRows, np.ndarray, float]:
    """The domain's conic rows in the coordinates ``y = c + ρ z`` of its bounding ball ``B(c, ρ)``, with
    the auxiliaries scaled by ``ρ`` too: ``A_y z + A_aux u' + s' = (b − A_y c)/ρ`` (each row divided by
    ``ρ``; every cone is scale-free).  Returns ``(rows, c, ρ)``."""
    rows = domain.cone_rows()
    centre, radius = domain.bounding_ball()
    rho = float(radius) if radius > 0 else 1.0
    scaled = ConeRows(A_y=rows.A_y, b=(rows.b - rows.A_y @ centre) / rho, cones=rows.cones, A_aux=rows.A_aux)
    return scaled, np.asarray(centre, dtype=float), rho


def _polyhedral_vertex(rows: ConeRows, v: np.ndarray) -> np.ndarray:
    """``argmin <v, y>`` over ``{y : A_y y + A_aux u + s = b, s ∈ K}`` with ``K`` a product of zero and
    nonnegative cones: an LP, solved to a vertex by HiGHS's dual simplex."""
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


def _conic_minimizer(rows: ConeRows, v: np.ndarray) -> np.ndarray:
    """``argmin <v, y>`` over the rows' set: one Clarabel solve through CVXPY."""
    y = cp.Variable(v.size)
    problem = cp.Problem(cp.Minimize(v @ y), rows_to_constraints(rows, y))
    try:
        problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    except cp.error.SolverError as exc:
        raise SolverError("the linear minimization over the domain failed in the conic solver; "
                          "the private release itself is unaffected.") from exc
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or y.value is None:
        raise SolverError(f"the linear minimization over the domain ended with status "
                          f"{problem.status!r}; the private release itself is unaffected.")
    return np.asarray(y.value, dtype=float).reshape(-1)


__all__ = ["linear_minimizer"]
