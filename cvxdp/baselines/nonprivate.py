"""The non-private ERM (CVXPY + Clarabel): the utility ceiling and the speed reference.

The per-example loss is vectorized over the data set from its recognized
structure (piecewise-linear pieces, or a smooth link of an affine argument), so
CVXPY sees one expression over an ``(m, d)`` constant, not ``m`` copies.
Generic losses fall back to a sum of per-example expressions.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxdp.links import HuberLink, LogisticLink, PiecewiseLinearLink, SquareLink
from cvxdp.loss import Examples
from cvxdp.model import Model
from cvxdp.structure import GenericStructure, PiecewiseLinearStructure


def empirical_objective(model: Model, examples: Examples, w: cp.Variable) -> cp.Expression:
    """``(1/m) Σ f(w, z_i)`` as one CVXPY expression in ``w``."""
    st = model.loss.structure
    m = examples.m
    glm = None if isinstance(st, GenericStructure) else examples.glm()
    # the link form only when it is every example's loss (a non-private reference: a choice
    # for the whole data set is harmless here); otherwise piecewise-linear losses go by pieces
    if glm is not None and np.all(glm.is_glm):
        a, b, link = glm
        u = a @ w + b
        if isinstance(link, PiecewiseLinearLink):
            k = np.broadcast_to(link.slopes, (m, link.slopes.shape[1]))
            e = np.broadcast_to(link.intercepts, k.shape)
            pieces = [cp.multiply(k[:, j], u) + e[:, j] for j in range(k.shape[1])]
            per_example = cp.maximum(*pieces) if len(pieces) > 1 else pieces[0]
        elif isinstance(link, HuberLink):
            per_example = link.scale * cp.huber(u, link.M)
        elif isinstance(link, SquareLink):
            per_example = link.scale * cp.square(u)
        elif isinstance(link, LogisticLink):
            per_example = link.scale * cp.logistic(u)
        else:  # pragma: no cover - every link is handled above
            raise TypeError(type(link).__name__)
        return cp.sum(per_example) / m
    if isinstance(st, PiecewiseLinearStructure):
        A, b = examples.pieces()
        vals = cp.vstack([A[:, j, :] @ w + b[:, j] for j in range(A.shape[1])])
        return cp.sum(cp.max(vals, axis=0)) / m
    terms = []
    params = list(model.loss.placeholders.values())
    for i in range(m):
        subst = {p: cp.Constant(examples.arrays[p][i]) for p in params}
        terms.append(_substitute(model.loss.expr, subst, model.variable, w))
    return cp.sum(cp.hstack(terms)) / m


def _substitute(expr: cp.Expression, subst: dict, old: cp.Variable, new: cp.Variable) -> cp.Expression:
    if isinstance(expr, cp.Parameter):
        return subst[expr]
    if isinstance(expr, cp.Variable):
        return new if expr.id == old.id else expr
    if not expr.args:
        return expr
    return expr.copy([_substitute(a, subst, old, new) for a in expr.args])


def nonprivate_erm(model: Model, examples: Examples, lam: float = 0.0, w0: np.ndarray | None = None,
                   solver: str = "CLARABEL") -> np.ndarray:
    """``argmin_{w ∈ W} (1/m) Σ f(w, z_i) + (λ/2)||w − w₀||²`` with CVXPY (not private)."""
    w = cp.Variable(model.dim)
    obj = empirical_objective(model, examples, w)
    if lam:
        w0 = np.zeros(model.dim) if w0 is None else w0
        obj = obj + lam / 2 * cp.sum_squares(w - w0)
    prob = cp.Problem(cp.Minimize(obj), model.domain.constraints(w))
    prob.solve(solver=solver)
    return np.asarray(w.value, float)
