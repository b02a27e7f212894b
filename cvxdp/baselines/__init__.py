"""Baselines a user would otherwise pick, all pure ε-DP with public tuning (see the paper's Section 1.1).

* :func:`clipped_output_perturbation` — one-shot output perturbation at one clipping level;
* :func:`noisy_clipped_gd` — noisy clipped gradient descent, basic composition;
* :func:`objective_perturbation` — for smooth losses (logistic, Huber);
* :func:`nonprivate_erm` — the non-private CVXPY + Clarabel ERM, the utility ceiling.

:mod:`cvxdp.baselines.tuning` holds the public tuning rules and the
best-in-hindsight grids.
"""

from __future__ import annotations

from cvxdp.baselines.noisy_gd import noisy_clipped_gd
from cvxdp.baselines.nonprivate import empirical_objective, nonprivate_erm
from cvxdp.baselines.objective_perturbation import objective_perturbation
from cvxdp.baselines.output_perturbation import (
    BaselineResult,
    clipped_minimizer,
    clipped_output_perturbation,
    clipped_plan,
    clipped_problem,
)
from cvxdp.erm.solver import solve_certified
from cvxdp.run.release import release_memoized


def audit_mechanisms(model, *, epsilon: float, lam: float, C: float = 2.0, steps: int = 10) -> dict:
    """The baselines as ``mechanism(data, source) -> w`` callables for :func:`cvxdp.audit.audit`.

    The clipped output perturbation releases through :func:`~cvxdp.run.release.release_round` with
    its certified minimizer (deterministic in the data) computed once per data set; noisy GD
    reruns in full.
    """
    cache: dict[int, tuple] = {}

    def op(data, source):
        key = id(data)
        if key not in cache:
            ex = model.bind(data)
            problem = clipped_problem(model, ex, C=C, lam=lam)
            plan = clipped_plan(model, ex.m, epsilon=epsilon, C=C, lam=lam)
            cache[key] = (problem, plan, solve_certified(problem, plan.alpha))
        problem, plan, solved = cache[key]
        return release_memoized(problem, plan, solved, source, mechanism="clipped output perturbation")

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
