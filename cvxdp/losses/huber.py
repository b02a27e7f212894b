"""Huber loss of the residual (robust regression)."""

from __future__ import annotations

import cvxpy as cp

from cvxdp._validation import positive_finite
from cvxdp.loss import Loss
from cvxdp.losses._placeholders import features_and_target


def huber(w: cp.Variable, threshold: float = 1.0) -> Loss:
    """``f(w, (x, y)) = huber(y − <x, w>, M)`` in CVXPY's convention (``r²`` inside, ``2M|r| − M²`` out).

    ``A(z) = 2M ||x||``.
    """
    M = positive_finite("threshold", threshold)
    x, y = features_and_target(w)
    return Loss(cp.huber(y - x @ w, M), w, data={"x": x, "y": y})
