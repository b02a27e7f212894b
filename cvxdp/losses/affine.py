"""Affine loss ``<x, w> + y`` (the paper's linear lower-bound instance uses ``−<z, w>``)."""

from __future__ import annotations

import cvxpy as cp

from cvxdp.loss import Loss
from cvxdp.losses._placeholders import features_and_target


def affine(w: cp.Variable) -> Loss:
    """``f(w, (x, y)) = <x, w> + y``; bind ``{"x": X, "y": Y}``; ``A(z) = ||x||``."""
    x, y = features_and_target(w)
    return Loss(x @ w + y, w, data={"x": x, "y": y})
