"""Hinge loss ``max(0, 1 − y <x, w>)`` (linear SVM)."""

from __future__ import annotations

import cvxpy as cp

from cvxdp.loss import Loss
from cvxdp.losses._placeholders import features_and_target, require_labels


def hinge(w: cp.Variable) -> Loss:
    """``f(w, (x, y)) = max(0, 1 − y <x, w>)`` with labels ``y ∈ {−1, +1}``.

    Bind data as ``{"x": X (m, d), "y": Y (m,)}``.  Per-example Lipschitz
    constant ``A(z) = ||x||``; the extension on ``R^d`` is ``min(1, C/||x||) f``.
    """
    x, y = features_and_target(w)
    return Loss(cp.pos(1 - y * (x @ w)), w, data={"x": x, "y": y},
                validators={"y": require_labels})
