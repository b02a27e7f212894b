"""Absolute loss ``|y − <x, w>|`` (least absolute deviations, median regression)."""

from __future__ import annotations

import cvxpy as cp

from cvxdp.loss import Loss
from cvxdp.losses._placeholders import features_and_target


def absolute(w: cp.Variable) -> Loss:
    """``f(w, (x, y)) = |y − <x, w>|``; bind ``{"x": X (m, d), "y": Y (m,)}``; ``A(z) = ||x||``."""
    x, y = features_and_target(w)
    return Loss(cp.abs(y - x @ w), w, data={"x": x, "y": y})
