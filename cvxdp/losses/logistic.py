"""Logistic loss ``log(1 + exp(−y <x, w>))`` (logistic regression)."""

from __future__ import annotations

import cvxpy as cp

from cvxdp.loss import Loss
from cvxdp.losses._placeholders import features_and_target, require_labels


def logistic(w: cp.Variable) -> Loss:
    """``f(w, (x, y)) = log(1 + exp(−y <x, w>))``, ``y ∈ {−1, +1}``; ``A(z) = ||x||``."""
    x, y = features_and_target(w)
    return Loss(cp.logistic(-y * (x @ w)), w, data={"x": x, "y": y},
                validators={"y": require_labels})
