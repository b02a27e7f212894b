"""Solver-backed projection and support function for sets given by cone rows.

Used by the polytope, the generic CVXPY set and intersections without a
closed form.  Many points are handled in one block-diagonal conic program.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from cvxdp.conic.cones import ConeRows, project_dual
from cvxdp.conic.program import ConicSettings, ProgramBuilder, replicate_rows, solve
from cvxdp.error import DomainError, EmptyDomainError, SolverError, UnboundedDomainError
from cvxdp.geometry.domain import Domain, as_points, ball_support
from cvxdp.numerics import row_combine, row_dot

_SETTINGS = ConicSettings(tol=1e-11, max_iter=300)


def _layout(N: int, d: int, n_aux: int) -> tuple[np.ndarray, np.ndarray, int]:
    per = d + n_aux
    base = np.arange(N)[:, None] * per
    y_cols = base + np.arange(d)[None, :]
    aux_cols = base + d + np.arange(n_aux)[None, :]
    return y_cols, aux_cols, N * per


def batched_projection(rows: ConeRows, points: np.ndarray) -> np.ndarray:
    """Project each row of ``points`` onto ``{y : ∃v, A_y y + A_aux v + s = b, s ∈ K}``."""
    pts = np.atleast_2d(np.asarray(points, float))
    N, d = pts.shape
    y_cols, aux_cols, n = _layout(N, d, rows.n_aux)
    builder = ProgramBuilder(n)
    replicate_rows(builder, rows.A_y, rows.b, rows.cones, y_cols, rows.A_aux, aux_cols)
    q = np.zeros(n)
    q[y_cols.ravel()] = -pts.ravel()
    diag = np.zeros(n)
    diag[y_cols.ravel()] = 1.0
    prog = builder.build(q, sp.diags(diag, format="csc"))
    sol = solve(prog, _SETTINGS)
    if sol.status == "PrimalInfeasible":
        raise EmptyDomainError("the domain constraints are infeasible; check them for contradictions.")
    if not sol.usable:
        raise SolverError(f"projection onto the domain failed (solver status {sol.status}).")
    return sol.x[y_cols]


def batched_support(rows: ConeRows, directions: np.ndarray, require_solved: bool = False
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(σ(v), z, y)`` per direction: value, repaired dual multiplier and maximizer.

    ``require_solved``: refuse (:class:`~cvxdp.error.DomainError`) unless the solver reports a
    solved or almost solved program — a stalled solve's points can sit well inside the set, so
    their values are no bound on ``σ`` (found by a review: a bounding box 8% too small at cond
    1e10).  The domain is public, so the refusal depends on no data.
    """
    dirs = np.atleast_2d(np.asarray(directions, float))
    N, d = dirs.shape
    y_cols, aux_cols, n = _layout(N, d, rows.n_aux)
    builder = ProgramBuilder(n)
    starts = replicate_rows(builder, rows.A_y, rows.b, rows.cones, y_cols, rows.A_aux, aux_cols)
    q = np.zeros(n)
    q[y_cols.ravel()] = -dirs.ravel()
    sol = solve(builder.build(q), _SETTINGS)
    if sol.status == "PrimalInfeasible":
        raise EmptyDomainError("the domain constraints are infeasible; check them for contradictions.")
    if sol.status == "DualInfeasible":
        raise UnboundedDomainError(
            "the domain is unbounded (a linear function grows without limit on it); "
            "add bounds such as cp.norm(w, 2) <= R."
        )
    if not sol.usable:
        raise SolverError(f"support-function LP failed (solver status {sol.status}).")
    if require_solved and sol.status not in ("Solved", "optimal", "AlmostSolved", "close_to_optimal"):
        raise DomainError(f"could not bound the domain reliably (support LP status {sol.status}); "
                          "add explicit bounds such as cp.norm(w, 2) <= R or rescale the constraints.")
    k = rows.n_rows
    z = sol.z[(starts[:, None] + np.arange(k)[None, :])]
    z = project_dual(z, rows.cones)
    y = sol.x[y_cols]
    return row_dot(dirs, y), z, y


def dual_support_bound(rows: ConeRows, directions: np.ndarray, z: np.ndarray,
                       ball_center: np.ndarray, ball_radius: float) -> np.ndarray:
    """Certified ``σ_W(v) ≤ bᵀz + σ_B(v − A_yᵀ z)`` for ``z ∈ K*`` and ``W ⊆ B``.

    Valid only when the set has no auxiliary variables (or ``A_auxᵀ z = 0``);
    otherwise we return the bounding ball's support ``σ_B(v)``.
    """
    v = np.atleast_2d(np.asarray(directions, float))
    # row by row (cvxdp.numerics), not BLAS: each direction's bound from its own row
    plain = ball_support(v, ball_center, ball_radius)
    r = v - row_combine(z, rows.A_y)
    bound = np.minimum(row_dot(z, rows.b) + ball_support(r, ball_center, ball_radius), plain)
    if rows.n_aux:  # each direction whose multiplier misses A_auxᵀ z = 0 falls back on its own
        return np.where(np.any(np.abs(row_combine(z, rows.A_aux)) > 0, axis=-1), plain, bound)
    return bound


def bounding_box(rows: ConeRows, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Coordinate bounds ``lo ≤ y ≤ hi`` from ``2d`` support LPs, widened by a safety margin."""
    eye = np.eye(d)
    vals, _, _ = batched_support(rows, np.vstack([eye, -eye]), require_solved=True)
    hi, lo = vals[:d], -vals[d:]
    if np.any(lo > hi + 1e-7 * (1 + np.abs(hi))):
        raise DomainError("the domain's coordinate bounds are inconsistent; is it empty?")
    width = np.maximum(hi - lo, 0.0)
    # an almost-solved LP is accurate to about 1e-5 of its terms (reduced tolerances): pad well past it
    pad = 1e-3 * (1.0 + np.abs(lo) + np.abs(hi) + width)
    return lo - pad, hi + pad


def deep_interior_point(rows: ConeRows, d: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """A point maximizing the smallest slack ``r`` in ``A_y y + A_aux v + r e + s = b, s ∈ K``.

    ``e`` is a direction inside each cone (1 for nonnegative rows,
    ``(1, 0, …)`` for a second-order cone, ``(0, 0, 1)`` for an exponential
    cone, nothing for equalities),
    so ``r > 0`` means ``y`` is in the relative interior.  The box
    ``lo ≤ y ≤ hi`` and ``r ≤ 1`` keep the program bounded.  Used as the anchor
    that :meth:`Domain.make_feasible` pulls rounding-violations toward: the
    mean of LP vertices may sit on a facet, an anchor on a facet cannot repair
    a violation of that facet.
    """
    from cvxdp.conic.cones import Cone, cone_offsets

    n_aux = rows.n_aux
    n = d + n_aux + 1
    r_col = n - 1
    unit = np.zeros(rows.n_rows)
    off = cone_offsets(rows.cones)
    for c, a in zip(rows.cones, off[:-1], strict=False):
        if c.kind == "nonneg":
            unit[a:a + c.dim] = 1.0
        elif c.kind == "soc":
            unit[a] = 1.0
        elif c.kind == "exp":
            unit[a + 2] = 1.0
    builder = ProgramBuilder(n)
    A = np.hstack([rows.A_y, rows.A_aux, unit[:, None]])
    rr, cc = np.nonzero(A)
    builder.add_rows(rr, cc, A[rr, cc], rows.b, rows.cones)
    # box on y and 0 <= r <= 1
    eye = np.eye(d)
    box_A = np.vstack([np.hstack([eye, np.zeros((d, n - d))]), np.hstack([-eye, np.zeros((d, n - d))])])
    rr, cc = np.nonzero(box_A)
    builder.add_rows(rr, cc, box_A[rr, cc], np.concatenate([hi, -lo]), [Cone("nonneg", 2 * d)])
    builder.add_rows(np.array([0, 1]), np.array([r_col, r_col]), np.array([1.0, -1.0]),
                     np.array([1.0, 0.0]), [Cone("nonneg", 2)])
    q = np.zeros(n)
    q[r_col] = -1.0
    sol = solve(builder.build(q), _SETTINGS)
    if not sol.usable:
        return 0.5 * (lo + hi)
    return sol.x[:d]


class ConicDomain(Domain):
    """A domain handled through its cone rows: projection and support by batched conic programs.

    Both are solver-accurate (about ``1e-9``), not closed forms; certificates
    that need a guaranteed bound use :meth:`support_upper`.  Subclasses set
    ``_ball`` (a bounding ball ``(c, r)``) and ``_interior`` (a deep interior
    point) when they are built.
    """

    _ball: tuple[np.ndarray, float]
    _interior: np.ndarray
    #: keep points that are already inside instead of solving for them (needs a cheap ``contains``)
    _keep_inside: bool = True

    def project(self, points: np.ndarray) -> np.ndarray:
        p = as_points(points, self.dim)
        flat = p.reshape(-1, self.dim)
        if not self._keep_inside:
            return batched_projection(self.cone_rows(), flat).reshape(p.shape)
        out = flat.copy()
        outside = ~self.contains(flat)
        if np.any(outside):
            out[outside] = batched_projection(self.cone_rows(), flat[outside])
        return out.reshape(p.shape)

    def support(self, directions: np.ndarray) -> np.ndarray:
        v = as_points(directions, self.dim)
        vals, _, _ = batched_support(self.cone_rows(), v.reshape(-1, self.dim))
        return vals.reshape(v.shape[:-1])

    def bounding_ball(self) -> tuple[np.ndarray, float]:
        return self._ball[0].copy(), self._ball[1]

    def interior_point(self) -> np.ndarray:
        return self._interior.copy()
