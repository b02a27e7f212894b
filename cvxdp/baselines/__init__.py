"""Baselines a user would otherwise pick (DESIGN §6), all pure ε-DP with public tuning.

* :func:`clipped_output_perturbation` — one-shot output perturbation at one clipping level;
* :func:`noisy_clipped_gd` — noisy clipped gradient descent, basic composition;
* :func:`objective_perturbation` — for smooth losses (logistic, Huber);
* :func:`nonprivate_erm` — the non-private CVXPY + Clarabel ERM, the utility ceiling.

:mod:`cvxdp.baselines.tuning` holds the public tuning rules and the
best-in-hindsight grids.
"""

from __future__ import annotations

import numpy as np

from cvxdp.baselines.noisy_gd import noisy_clipped_gd
from cvxdp.baselines.nonprivate import empirical_objective, nonprivate_erm
from cvxdp.baselines.objective_perturbation import objective_perturbation
from cvxdp.baselines.output_perturbation import (
    BaselineResult,
    clipped_minimizer,
    clipped_output_perturbation,
)
from cvxdp.localization.output_perturbation import release_point
from cvxdp.mechanisms import L2LaplaceMechanism


def audit_mechanisms(model, *, epsilon: float, lam: float, C: float = 2.0, steps: int = 10) -> dict:
    """The baselines as ``mechanism(data, source) -> w`` callables for :func:`cvxdp.audit.audit`.

    The clipped output perturbation's certified minimizer is deterministic in the
    data and is computed once per data set; noisy GD reruns in full.
    """
    cache: dict[int, tuple[np.ndarray, L2LaplaceMechanism]] = {}

    def op(data, source):
        key = id(data)
        if key not in cache:
            w_tilde, sens, _ = clipped_minimizer(model, model.bind(data), C=C, lam=lam)
            cache[key] = (w_tilde, L2LaplaceMechanism(sens, epsilon, model.dim))
        w_tilde, mech = cache[key]
        return release_point(w_tilde, mech, model.domain, source)

    def gd(data, source):
        return noisy_clipped_gd(model, data, epsilon=epsilon, C=C, steps=steps, random_state=source).w

    return {"baseline: clipped output-pert": op, "baseline: noisy clipped GD": gd}


__all__ = [
    "BaselineResult",
    "audit_mechanisms",
    "clipped_minimizer",
    "clipped_output_perturbation",
    "empirical_objective",
    "noisy_clipped_gd",
    "nonprivate_erm",
    "objective_perturbation",
]
