"""Conic programs in solver form and direct calls to Clarabel and ECOS.

cvxdp assembles its conic programs itself (vectorized over examples) and
hands them to the solver without CVXPY in between: for the many small,
identically structured programs the library solves, CVXPY's per-call
canonicalization would cost more than the solve.  The form is Clarabel's::

    minimize    ½ xᵀ P x + qᵀ x
    subject to  A x + s = b,   s ∈ K

with dual ``maximize −½ xᵀ P x − bᵀ z  s.t.  P x + q + Aᵀ z = 0, z ∈ K*``.
A solver's answer is only a *proposal*: certificates are computed by the
callers from repaired points (see :mod:`cvxdp.extension.certificates`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from cvxdp._validation import positive_finite, positive_int
from cvxdp.conic.cones import Cone, cone_offsets
from cvxdp.error import ParameterError, SolverError

logger = logging.getLogger(__name__)

SOLVERS = ("clarabel", "ecos")


@dataclass(frozen=True)
class ConicSettings:
    """Solver choice and tolerances for cvxdp's direct conic calls.

    Attributes
    ----------
    solver:
        ``"clarabel"`` (default, handles quadratic objectives and exponential
        cones) or ``"ecos"`` (second-order and exponential cones, linear objective).
    tol:
        Relative and absolute gap / feasibility tolerance asked of the solver.
        The certificate, not this number, decides whether a point is accurate.
    max_iter, time_limit:
        Iteration cap and wall-clock cap in seconds (``math.inf`` for none).
    """

    solver: str = "clarabel"
    tol: float = 1e-10
    max_iter: int = 200
    time_limit: float = math.inf
    verbose: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.solver, str):  # CVXPY's constants are upper case: cp.CLARABEL, cp.ECOS
            object.__setattr__(self, "solver", self.solver.lower())
        if self.solver not in SOLVERS:
            raise ParameterError(f"ConicSettings.solver must be one of {SOLVERS}, got {self.solver!r}.")
        for name, value in (("tol", positive_finite("ConicSettings.tol", self.tol)),
                            ("max_iter", positive_int("ConicSettings.max_iter", self.max_iter)),
                            ("time_limit", positive_finite("ConicSettings.time_limit", self.time_limit,
                                                           allow_inf=True))):
            object.__setattr__(self, name, value)  # frozen: store the validated Python scalar
        if not isinstance(self.verbose, bool | np.bool_):
            raise ParameterError("ConicSettings.verbose must be True or False.")

    def tightened(self, factor: float = 100.0) -> ConicSettings:
        """The same settings with a tolerance ``factor`` times smaller (floored at 1e-14)."""
        return ConicSettings(self.solver, max(self.tol / factor, 1e-14), self.max_iter * 2,
                             self.time_limit, self.verbose)


@dataclass
class ConicProgram:
    """``min ½xᵀPx + qᵀx  s.t.  Ax + s = b, s ∈ K`` with ``cones`` in row order."""

    q: np.ndarray
    A: sp.csc_matrix
    b: np.ndarray
    cones: tuple[Cone, ...]
    P: sp.csc_matrix | None = None

    @property
    def n(self) -> int:
        return int(self.q.shape[0])


@dataclass
class ConicSolution:
    """Primal ``x``, slack ``s`` and dual ``z`` proposed by a solver, with its report."""

    x: np.ndarray
    s: np.ndarray
    z: np.ndarray
    status: str
    iterations: int
    solve_time: float
    solver: str
    info: dict = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        """True when the solver produced finite points worth certifying."""
        return (
            self.status in ("Solved", "AlmostSolved", "optimal", "close_to_optimal",
                            "MaxIterations", "MaxTime", "InsufficientProgress")
            and bool(np.all(np.isfinite(self.x)))
            and bool(np.all(np.isfinite(self.z)))
        )


def _clarabel_cones(cones: Sequence[Cone]) -> list:
    import clarabel

    out: list = []
    # merge runs of zero / nonneg rows into single cone objects
    for c in cones:
        if c.kind in ("zero", "nonneg") and out and out[-1][0] == c.kind:
            out[-1] = (c.kind, out[-1][1] + c.dim)
        else:
            out.append((c.kind, c.dim))
    res = []
    for kind, dim in out:
        if kind == "zero":
            res.append(clarabel.ZeroConeT(dim))
        elif kind == "nonneg":
            res.append(clarabel.NonnegativeConeT(dim))
        elif kind == "soc":
            res.append(clarabel.SecondOrderConeT(dim))
        else:
            res.append(clarabel.ExponentialConeT())
    return res


def _solve_clarabel(prog: ConicProgram, settings: ConicSettings) -> ConicSolution:
    import clarabel

    s = clarabel.DefaultSettings()
    s.verbose = settings.verbose
    s.tol_gap_abs = settings.tol
    s.tol_gap_rel = settings.tol
    s.tol_feas = settings.tol
    s.tol_ktratio = min(1e-6, settings.tol * 1e2)
    s.max_iter = int(settings.max_iter)
    if math.isfinite(settings.time_limit):
        s.time_limit = float(settings.time_limit)
    # presolve drops rows with infinite b; we never pass those, and keeping the row
    # order intact lets us read the multipliers back by position.
    s.presolve_enable = False
    P = prog.P if prog.P is not None else sp.csc_matrix((prog.n, prog.n))
    P = sp.triu(P, format="csc")
    t0 = time.perf_counter()
    try:
        solver = clarabel.DefaultSolver(P, np.asarray(prog.q, float), prog.A.tocsc(),
                                        np.asarray(prog.b, float), _clarabel_cones(prog.cones), s)
        sol = solver.solve()
    except BaseException as exc:  # Rust panics surface as BaseException subclasses
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        raise SolverError(f"Clarabel failed on a program with {prog.n} variables: {exc}") from exc
    elapsed = time.perf_counter() - t0
    return ConicSolution(
        x=np.asarray(sol.x, float), s=np.asarray(sol.s, float), z=np.asarray(sol.z, float),
        status=str(sol.status).split(".")[-1], iterations=int(sol.iterations),
        solve_time=elapsed, solver="clarabel",
        info={"obj_val": float(sol.obj_val), "obj_val_dual": float(sol.obj_val_dual)},
    )


def _solve_ecos(prog: ConicProgram, settings: ConicSettings) -> ConicSolution:
    import ecos

    if prog.P is not None and prog.P.nnz:
        raise SolverError("ECOS takes linear objectives only; use the epigraph form or Clarabel.")
    off = cone_offsets(prog.cones)
    A = prog.A.tocsr()
    zero_rows, nn_rows, soc_rows, exp_rows = [], [], [], []
    soc_dims: list[int] = []
    for c, a, b in zip(prog.cones, off[:-1], off[1:], strict=True):
        rows = list(range(a, b))
        if c.kind == "zero":
            zero_rows += rows
        elif c.kind == "nonneg":
            nn_rows += rows
        elif c.kind == "soc":
            soc_rows += rows
            soc_dims.append(c.dim)
        else:
            exp_rows += rows
    g_rows = np.array(nn_rows + soc_rows + exp_rows, dtype=int)
    dims = {"l": len(nn_rows), "q": soc_dims, "e": len(exp_rows) // 3}
    G = A[g_rows].tocsc() if len(g_rows) else None
    h = prog.b[g_rows] if len(g_rows) else None
    kw = dict(abstol=settings.tol, reltol=settings.tol, feastol=settings.tol,
              max_iters=int(min(settings.max_iter, 500)), verbose=settings.verbose)
    t0 = time.perf_counter()
    # ECOS orders exponential cones as (x, y, z) with y e^{x/y} <= z, like Clarabel.
    if zero_rows:
        zr = np.array(zero_rows, dtype=int)
        res = ecos.solve(np.asarray(prog.q, float), G, h, dims, A[zr].tocsc(), prog.b[zr], **kw)
    else:
        res = ecos.solve(np.asarray(prog.q, float), G, h, dims, **kw)
    elapsed = time.perf_counter() - t0
    z = np.zeros(prog.b.shape[0])
    s = np.zeros(prog.b.shape[0])
    if len(g_rows):
        z[g_rows] = res["z"]
        s[g_rows] = res["s"]
    if zero_rows:
        z[np.array(zero_rows)] = res["y"]
    flag = res["info"]["exitFlag"]
    status = {0: "Solved", 10: "AlmostSolved", -1: "MaxIterations"}.get(flag, f"ecos_exit_{flag}")
    return ConicSolution(x=np.asarray(res["x"], float), s=s, z=z, status=status,
                         iterations=int(res["info"]["iter"]), solve_time=elapsed, solver="ecos",
                         info={"obj_val": float(res["info"]["pcost"])})


def solve(prog: ConicProgram, settings: ConicSettings | None = None) -> ConicSolution:
    """Solve ``prog`` with the solver named in ``settings`` (Clarabel by default)."""
    settings = settings or ConicSettings()
    if settings.solver == "ecos":
        sol = _solve_ecos(prog, settings)
    else:
        sol = _solve_clarabel(prog, settings)
    logger.debug("%s: n=%d rows=%d status=%s iters=%d %.3fs", sol.solver, prog.n,
                 prog.b.shape[0], sol.status, sol.iterations, sol.solve_time)
    return sol


class ProgramBuilder:
    """Accumulates COO triplets and cone blocks of a conic program.

    Rows are appended in blocks; each block keeps its cones in order.  Used to
    assemble block-diagonal batches of per-example programs with numpy index
    arithmetic instead of Python loops over examples.
    """

    def __init__(self, n_vars: int) -> None:
        self.n = int(n_vars)
        self._rows: list[np.ndarray] = []
        self._cols: list[np.ndarray] = []
        self._vals: list[np.ndarray] = []
        self._b: list[np.ndarray] = []
        self.cones: list[Cone] = []
        self.n_rows = 0

    def add_rows(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, b: np.ndarray,
                 cones: Sequence[Cone]) -> int:
        """Append a block; ``rows`` are local to the block. Returns the block's first row."""
        start = self.n_rows
        k = int(np.asarray(b).size)
        if sum(c.dim for c in cones) != k:
            raise ValueError("cone dimensions must cover the block's rows")
        self._rows.append(np.asarray(rows, dtype=np.int64).ravel() + start)
        self._cols.append(np.asarray(cols, dtype=np.int64).ravel())
        self._vals.append(np.asarray(vals, dtype=float).ravel())
        self._b.append(np.asarray(b, dtype=float).ravel())
        self.cones.extend(cones)
        self.n_rows += k
        return start

    def build(self, q: np.ndarray, P: sp.spmatrix | None = None) -> ConicProgram:
        rows = np.concatenate(self._rows) if self._rows else np.zeros(0, np.int64)
        cols = np.concatenate(self._cols) if self._cols else np.zeros(0, np.int64)
        vals = np.concatenate(self._vals) if self._vals else np.zeros(0)
        A = sp.csc_matrix((vals, (rows, cols)), shape=(self.n_rows, self.n))
        b = np.concatenate(self._b) if self._b else np.zeros(0)
        return ConicProgram(q=np.asarray(q, float), A=A, b=b, cones=tuple(self.cones),
                            P=None if P is None else sp.csc_matrix(P))


def replicate_rows(builder: ProgramBuilder, A_y: np.ndarray, b: np.ndarray,
                   cones: Sequence[Cone], y_cols: np.ndarray,
                   A_aux: np.ndarray | None = None, aux_cols: np.ndarray | None = None,
                   b_per_copy: np.ndarray | None = None, A_y_per_copy: np.ndarray | None = None
                   ) -> np.ndarray:
    """Add ``N`` copies of the rows ``A_y y_i + A_aux v_i + s = b`` (one per copy ``i``).

    ``y_cols`` is ``(N, d)`` giving each copy's variable columns; ``aux_cols``
    likewise ``(N, n_aux)``.  ``b_per_copy`` ``(N, k)`` and ``A_y_per_copy``
    ``(N, k, d)`` override the shared data.  Cones are interleaved copy by
    copy, so copy ``i`` owns rows ``start + i k .. start + (i+1) k``.
    Returns the first row of every copy.
    """
    y_cols = np.atleast_2d(y_cols)
    N, d = y_cols.shape
    A_y = np.asarray(A_y, float).reshape(-1, d)
    k = A_y.shape[0]
    rr, cc = np.nonzero(np.ones((k, d), bool) if A_y_per_copy is not None else A_y)
    local_rows = (np.arange(N)[:, None] * k + rr[None, :])
    cols = y_cols[:, cc]
    if A_y_per_copy is not None:
        vals = np.asarray(A_y_per_copy, float).reshape(N, k, d)[:, rr, cc]
    else:
        vals = np.broadcast_to(A_y[rr, cc], (N, rr.size))
    all_rows = [local_rows.ravel()]
    all_cols = [cols.ravel()]
    all_vals = [np.asarray(vals).ravel()]
    if A_aux is not None and np.asarray(A_aux).size:
        A_aux = np.asarray(A_aux, float).reshape(k, -1)
        ra, ca = np.nonzero(A_aux)
        all_rows.append((np.arange(N)[:, None] * k + ra[None, :]).ravel())
        all_cols.append(np.atleast_2d(aux_cols)[:, ca].ravel())
        all_vals.append(np.broadcast_to(A_aux[ra, ca], (N, ra.size)).ravel())
    bb = np.broadcast_to(np.asarray(b, float), (N, k)) if b_per_copy is None else b_per_copy
    start = builder.add_rows(np.concatenate(all_rows), np.concatenate(all_cols),
                             np.concatenate(all_vals), np.asarray(bb).ravel(),
                             list(cones) * N)
    return start + np.arange(N) * k
