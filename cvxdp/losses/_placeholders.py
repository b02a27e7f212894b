"""Shared helpers for the canned losses."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxdp.error import DataError, ModelError


def features_and_target(w: cp.Variable, target: str = "y") -> tuple[cp.Parameter, cp.Parameter]:
    """Fresh placeholders ``x`` (shape of ``w``) and a scalar target named ``target``."""
    if not isinstance(w, cp.Variable) or w.ndim != 1:
        raise ModelError("canned losses need a vector model variable, e.g. w = cp.Variable(d).")
    return cp.Parameter(w.shape, name="x"), cp.Parameter(name=target)


def require_labels(values: np.ndarray) -> None:
    """Labels of a classification loss must be -1 or +1."""
    bad = (values != 1.0) & (values != -1.0)
    if np.any(bad):
        # a precondition of the data domain, decided label by label; the message names no label from
        # the data (an exception is observable, and its text would be a release)
        raise DataError("labels must be -1 or +1, and some are not; map classes {0, 1} with 2*y - 1, "
                        "or use PrivateLinearSVM(classes=...) to declare two other labels.")
