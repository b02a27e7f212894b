"""Compiling a generic loss once with CVXPY and reusing its conic data for every example.

For a loss without recognized structure we let CVXPY canonicalize
``minimize f(w, z)`` *once*, with the data placeholders as parameters (this
needs DPP).  CVXPY's parametrized program maps the parameter vector ``θ``
affinely to the conic data ``(c, A, b)``; we read that map off by probing
``apply_parameters`` at ``θ = 0`` and at the unit vectors (``P + 1`` calls,
``P`` = total data size per example), with explicit zeros kept so the
sparsity pattern is the same for every ``θ``.  The data of ``m`` examples is
then one dense matrix product — no CVXPY object per example and no CVXPY
parameter holding the whole data set.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxdp.conic.cones import cones_from_dims
from cvxdp.error import UncertifiableLossError
from cvxdp.extension.blocks import EpigraphBlock
from cvxdp.loss import Examples, Loss
from cvxdp.numerics import row_combine, row_dot


class ConicTemplate:
    """The affine map from one example's data to its conic program (compiled once)."""

    def __init__(self, loss: Loss) -> None:
        if not loss.is_dpp:
            raise UncertifiableLossError(
                "this loss has no structure cvxdp recognizes and is not DPP, so CVXPY cannot "
                "compile it once for all examples; rewrite it so each data placeholder enters "
                "affinely (for example one placeholder for the product y*x instead of y * (x @ w))."
            )
        prob = cp.Problem(cp.Minimize(loss.expr))
        # a quadratic term must be a cone of the program: CVXPY would hand Clarabel a quadratic objective
        # (P), which the affine map below does not carry — the certificate's dual then bounded the loss
        # without it, a valid but loose bracket that refused wherever the quadratic mattered (found by
        # review: huber(r) + |r| refused on one ordinary record)
        data, _, _ = prob.get_problem_data(cp.CLARABEL, solver_opts={"use_quad_obj": False})
        if data.get("P") is not None or getattr(data[cp.settings.PARAM_PROB], "P", None) is not None:
            raise UncertifiableLossError("CVXPY compiled this loss with a quadratic objective, which cvxdp's "
                                         "conic path cannot certify; write it with conic atoms.")
        dims = data["dims"]
        if dims.psd or dims.p3d or getattr(dims, "pnd", None):
            raise UncertifiableLossError("losses needing PSD or power cones cannot be certified by "
                                         "cvxdp's conic path.")
        pp = data[cp.settings.PARAM_PROB]
        self.loss = loss
        self.params = [p for p in loss.placeholders.values()]
        sizes = [int(p.size) for p in self.params]
        self.P = int(sum(sizes))
        n = pp.x.size
        start = pp.var_id_to_col[loss.variable.id]
        d = loss.variable.size
        self.y_cols = np.arange(start, start + d)
        self.aux_cols = np.setdiff1d(np.arange(n), self.y_cols)
        self.cones = cones_from_dims(dims)

        def probe(theta: np.ndarray):
            values = {}
            off = 0
            for p, s in zip(self.params, sizes, strict=True):
                values[p.id] = theta[off:off + s].reshape(p.shape, order="F")
                off += s
            q, dconst, A, b = pp.apply_parameters(values, keep_zeros=True)
            # CVXPY's parametrized form is A x + b ∈ K; the solver form is (−A) x + s = b.
            A = (-A).tocoo()
            return np.asarray(q, float), float(dconst), A, np.asarray(b, float)

        q0, d0, A0, b0 = probe(np.zeros(self.P))
        self.rows, self.cols = A0.row.copy(), A0.col.copy()
        self.k = A0.shape[0]
        self.n = n
        TA = np.empty((A0.nnz, self.P + 1))
        Tb = np.empty((self.k, self.P + 1))
        Tq = np.empty((n, self.P + 1))
        Td = np.empty(self.P + 1)
        TA[:, -1], Tb[:, -1], Tq[:, -1], Td[-1] = A0.data, b0, q0, d0
        for j in range(self.P):
            e = np.zeros(self.P)
            e[j] = 1.0
            q, dc, A, b = probe(e)
            if A.nnz != A0.nnz or np.any(A.row != self.rows) or np.any(A.col != self.cols):
                raise UncertifiableLossError("CVXPY's compiled data changed its sparsity pattern "
                                             "with the data; cvxdp cannot batch this loss.")
            TA[:, j] = A.data - A0.data
            Tb[:, j] = b - b0
            Tq[:, j] = q - q0
            Td[j] = dc - d0
        self.TA, self.Tb, self.Tq, self.Td = TA, Tb, Tq, Td
        self.sizes = sizes

    def theta(self, examples: Examples) -> np.ndarray:
        """``(m, P + 1)``: each example's data flattened (CVXPY's column-major order) and a 1."""
        cols = [examples.arrays[p].reshape(examples.m, -1, order="F") if p.ndim <= 1 else
                np.stack([examples.arrays[p][i].ravel(order="F") for i in range(examples.m)])
                for p in self.params]
        return np.hstack(cols + [np.ones((examples.m, 1))])

    def block(self, examples: Examples) -> EpigraphBlock:
        """The per-example conic data as an :class:`EpigraphBlock` (objective instead of ``τ``).

        Local columns: ``[y (d) | τ (unused, zero objective) | aux]``.
        """
        th = self.theta(examples)
        d = self.y_cols.size
        n_aux = self.aux_cols.size
        local = np.empty(self.n, dtype=np.int64)
        local[self.y_cols] = np.arange(d)
        local[self.aux_cols] = d + 1 + np.arange(n_aux)
        # row by row, not BLAS: an example's conic data must not depend on the batch (cvxdp.numerics)
        vals = row_combine(th, self.TA.T)
        b = row_combine(th, self.Tb.T)
        q = row_combine(th, self.Tq.T)
        obj = np.zeros((examples.m, d + 1 + n_aux))
        obj[:, local] = q
        return EpigraphBlock(d=d, n_aux=n_aux, rows=self.rows, cols=local[self.cols], vals=vals,
                             b=b, cones=self.cones, objective=obj, offset=row_dot(th, self.Td),
                             pi_rows=None, kind="generic")
