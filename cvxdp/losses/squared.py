"""Squared loss ``(y − <x, w>)²`` (least squares)."""

from __future__ import annotations

import cvxpy as cp

from cvxdp.loss import Loss
from cvxdp.losses._placeholders import features_and_target


def squared(w: cp.Variable) -> Loss:
    """``f(w, (x, y)) = (y − <x, w>)²``.  Its Lipschitz constant grows with ``|y|``, ``||x||`` and ``D``."""
    x, y = features_and_target(w)
    return Loss(cp.square(y - x @ w), w, data={"x": x, "y": y})
