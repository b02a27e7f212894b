"""Pinball (check) loss of quantile regression."""

from __future__ import annotations

import cvxpy as cp

from cvxdp._validation import probability
from cvxdp.loss import Loss
from cvxdp.losses._placeholders import features_and_target


def pinball(w: cp.Variable, quantile: float = 0.5) -> Loss:
    """``f(w, (x, y)) = max(τ r, (τ − 1) r)`` with residual ``r = y − <x, w>``, ``τ ∈ (0, 1)``.

    Its population minimizer is the conditional ``τ``-quantile.
    ``A(z) = max(τ, 1 − τ) ||x||``.
    """
    tau = probability("quantile", quantile)
    x, y = features_and_target(w)
    r = y - x @ w
    return Loss(cp.maximum(tau * r, (tau - 1) * r), w, data={"x": x, "y": y})
