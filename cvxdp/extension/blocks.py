"""Per-example conic representations of a loss, batched over examples.

An :class:`EpigraphBlock` describes, for every example ``i`` at once, rows

    A_i [y; τ; v] + s = b_i,   s ∈ K        with   f(y, z_i) = min_v {τ + cᵀ(y, v) : rows}

over local columns ``y`` (``d``), the epigraph variable ``τ`` and auxiliaries
``v``.  All examples share one sparsity pattern and one cone list, so a batch
of programs is assembled by index arithmetic (no Python loop over examples).

Structured blocks (built here) let the certificate read the multipliers it
needs off known rows: for a piecewise-linear loss, the duals of the ``M``
epigraph rows ``τ ≥ a_jᵀ y + b_j`` are exactly the simplex weights ``π`` of
Appendix E.3.  The generic block comes from CVXPY
(:mod:`cvxdp.extension.template`) and carries an objective instead of ``τ``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cvxdp.conic.cones import Cone
from cvxdp.links import HuberLink, LogisticLink, ShiftedSquareLink, SquareLink
from cvxdp.loss import Examples
from cvxdp.structure import PiecewiseLinearStructure, SmoothGLMStructure


@dataclass
class EpigraphBlock:
    """Batched rows of a per-example epigraph representation.

    Attributes
    ----------
    d, n_aux:
        Local columns are ``[y (d) | τ (1) | v (n_aux)]``.
    rows, cols:
        Local row and column of each structural nonzero (shared by all examples).
    vals:
        ``(m, nnz)`` per-example values (or ``(1, nnz)`` shared).
    b:
        ``(m, k)`` right-hand sides.
    cones:
        The ``k`` rows' cones (one example).
    objective:
        ``(m, d + 1 + n_aux)`` linear objective on local columns; for structured
        blocks it is ``e_τ``.
    offset:
        ``(m,)`` constant added to the objective.
    pi_rows:
        Local rows whose multipliers are the conjugate weights ``π`` (structured
        piecewise-linear blocks), else ``None``.
    """

    d: int
    n_aux: int
    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    b: np.ndarray
    cones: tuple[Cone, ...]
    objective: np.ndarray
    offset: np.ndarray
    pi_rows: np.ndarray | None = None
    kind: str = "structured"
    meta: dict = field(default_factory=dict)

    @property
    def m(self) -> int:
        return int(self.b.shape[0])

    @property
    def k(self) -> int:
        return int(self.b.shape[1])

    @property
    def tau(self) -> int:
        return self.d

    def subset(self, index: np.ndarray) -> EpigraphBlock:
        vals = self.vals if self.vals.shape[0] == 1 else self.vals[index]
        obj = self.objective if self.objective.shape[0] == 1 else self.objective[index]
        return EpigraphBlock(self.d, self.n_aux, self.rows, self.cols, vals, self.b[index],
                             self.cones, obj, self.offset[index], self.pi_rows, self.kind,
                             dict(self.meta))


class _Rows:
    """Helper accumulating local rows for one example layout."""

    def __init__(self, m: int) -> None:
        self.m = m
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.b: list[np.ndarray] = []
        self.cones: list[Cone] = []
        self.k = 0

    def add(self, entries: list[tuple[int, int, np.ndarray | float]], b: list, cone: Cone) -> None:
        """``entries``: (local row within this cone block, column, value per example)."""
        for r, c, v in entries:
            self.rows.append(np.array([self.k + r]))
            self.cols.append(np.array([c]))
            self.vals.append(np.broadcast_to(np.asarray(v, float), (self.m,))[:, None])
        self.b.append(np.column_stack([np.broadcast_to(np.asarray(x, float), (self.m,)) for x in b]))
        self.cones.append(cone)
        self.k += cone.dim

    def add_dense_y(self, row: int, y_coeffs: np.ndarray) -> None:
        """Add per-example coefficients on all ``y`` columns to local row ``row`` of the last block."""
        d = y_coeffs.shape[1]
        start = self.k - self.cones[-1].dim
        self.rows.append(np.full(d, start + row))
        self.cols.append(np.arange(d))
        self.vals.append(np.asarray(y_coeffs, float))

    def finish(self, d: int, n_aux: int, pi_rows: np.ndarray | None) -> EpigraphBlock:
        m = self.m
        obj = np.zeros((1, d + 1 + n_aux))
        obj[0, d] = 1.0
        return EpigraphBlock(
            d=d, n_aux=n_aux, rows=np.concatenate(self.rows), cols=np.concatenate(self.cols),
            vals=np.concatenate(self.vals, axis=1), b=np.concatenate(self.b, axis=1),
            cones=tuple(self.cones), objective=obj, offset=np.zeros(m), pi_rows=pi_rows,
        )


def piecewise_linear_block(A: np.ndarray, b: np.ndarray) -> EpigraphBlock:
    """Rows ``τ − a_jᵀ y ≥ b_j`` (``j = 1..M``); their multipliers are the weights ``π_j``."""
    m, M, d = A.shape
    tau = d
    # row j: s_j = τ - a_j^T y - b_j  =>  A x = a_j^T y - τ, rhs = -b_j
    rows = np.concatenate([np.repeat(np.arange(M), d), np.arange(M)])
    cols = np.concatenate([np.tile(np.arange(d), M), np.full(M, tau)])
    vals = np.concatenate([A.reshape(m, M * d), -np.ones((m, M))], axis=1)
    obj = np.zeros((1, d + 1))
    obj[0, tau] = 1.0
    return EpigraphBlock(d=d, n_aux=0, rows=rows, cols=cols, vals=vals, b=-b,
                         cones=(Cone("nonneg", M),), objective=obj, offset=np.zeros(m),
                         pi_rows=np.arange(M))


def smooth_glm_block(a: np.ndarray, b: np.ndarray,
                     link: HuberLink | SquareLink | ShiftedSquareLink | LogisticLink) -> EpigraphBlock:
    """Conic rows of ``τ ≥ c φ(aᵀ y + b)`` for the Huber, square, shifted square and logistic links."""
    m, d = a.shape
    tau = d
    R = _Rows(m)
    c = link.scale
    if isinstance(link, SquareLink):
        p = d + 1  # aux p >= u^2, tau >= c p
        R.add([(0, tau, -1.0), (0, p, c)], [0.0], Cone("nonneg", 1))
        # (p + 1, p - 1, 2u) in SOC: s0 = p + 1, s1 = p - 1, s2 = 2(a^T y + b)
        R.add([(0, p, -1.0), (1, p, -1.0)], [1.0, -1.0, 2.0 * b], Cone("soc", 3))
        R.add_dense_y(2, -2.0 * a)
        return R.finish(d, 1, None)
    if isinstance(link, ShiftedSquareLink):
        # c u (u + 2T) = c u² + 2cT u:  tau >= c p + 2cT u, p >= u² (the solver only proposes points;
        # the certificate evaluates the link itself, so rounding 2cT here costs no validity)
        p = d + 1
        k = 2.0 * c * np.broadcast_to(link.shift, (m,))
        R.add([(0, tau, -1.0), (0, p, c)], [-k * b], Cone("nonneg", 1))
        R.add_dense_y(0, k[:, None] * a)
        R.add([(0, p, -1.0), (1, p, -1.0)], [1.0, -1.0, 2.0 * b], Cone("soc", 3))
        R.add_dense_y(2, -2.0 * a)
        return R.finish(d, 1, None)
    if isinstance(link, HuberLink):
        v, p, e = d + 1, d + 2, d + 3
        M = link.M
        # tau - c p - 2 c M e >= 0 ; e + v - u >= 0 ; e - v + u >= 0
        R.add([(0, tau, -1.0), (0, p, c), (0, e, 2.0 * c * M),
               (1, e, -1.0), (1, v, -1.0),
               (2, e, -1.0), (2, v, 1.0)], [0.0, -b, b], Cone("nonneg", 3))
        R.add_dense_y(1, a)
        R.add_dense_y(2, -a)
        # (p + 1, p - 1, 2 v) in SOC
        R.add([(0, p, -1.0), (1, p, -1.0), (2, v, -2.0)], [1.0, -1.0, 0.0], Cone("soc", 3))
        return R.finish(d, 3, None)
    if isinstance(link, LogisticLink):
        p, q = d + 1, d + 2
        # (-tau/c, 1, p) in K_exp ; (u - tau/c, 1, q) in K_exp ; 1 - p - q >= 0
        R.add([(0, tau, 1.0 / c), (2, p, -1.0)], [0.0, 1.0, 0.0], Cone("exp", 3))
        R.add([(0, tau, 1.0 / c), (2, q, -1.0)], [b, 1.0, 0.0], Cone("exp", 3))
        R.add_dense_y(0, -a)
        R.add([(0, p, 1.0), (0, q, 1.0)], [1.0], Cone("nonneg", 1))
        return R.finish(d, 2, None)
    raise TypeError(f"no conic block for link {type(link).__name__}")


def structured_block(examples: Examples) -> EpigraphBlock:
    """The epigraph block of a structured loss (piecewise linear or smooth GLM)."""
    st = examples.loss.structure
    if isinstance(st, PiecewiseLinearStructure):
        A, b = examples.pieces()
        return piecewise_linear_block(A, b)
    if isinstance(st, SmoothGLMStructure):
        glm = examples.glm()
        assert glm is not None
        a, b, link = glm
        return smooth_glm_block(a, b, link)  # type: ignore[arg-type]
    raise TypeError("structured_block needs a piecewise-linear or smooth GLM loss")
