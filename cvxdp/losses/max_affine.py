"""Max-affine loss ``max_j (A_j w + b_j)``: the general polyhedral loss of Appendix E.3."""

from __future__ import annotations

import cvxpy as cp

from cvxdp._validation import positive_int
from cvxdp.error import ModelError
from cvxdp.loss import Loss


def max_affine(w: cp.Variable, pieces: int) -> Loss:
    """``f(w, (A, b)) = max_j (A w + b)_j`` with ``A`` of shape ``(pieces, d)`` per example.

    Bind ``{"A": A (m, pieces, d), "b": b (m, pieces)}``.  ``A(z) = max_j ||A_j||``.
    """
    k = positive_int("pieces", pieces)
    if not isinstance(w, cp.Variable) or w.ndim != 1:
        raise ModelError("max_affine needs a vector model variable, e.g. w = cp.Variable(d).")
    A = cp.Parameter((k, w.size), name="A")
    b = cp.Parameter(k, name="b")
    return Loss(cp.max(A @ w + b), w, data={"A": A, "b": b})
