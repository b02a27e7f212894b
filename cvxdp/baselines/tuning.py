"""Public tuning rules for the baselines, and grids for the best-in-hindsight comparison.

A *public rule* uses only what a private analyst may use: ``n, d, ε, D`` and the
public moment bounds.  The *hindsight* grid is searched with the test risk — a
non-private oracle choice, reported only as a ceiling and labelled as such.

Rules (all from the usual bounds, constants 1 unless noted):

* clipped output perturbation: ``C = G_2`` (the typical gradient scale) and
  ``λ = 4C sqrt(d/(nε))/D``, the minimizer of ``λD²/8 + 2C²d/(λnε)`` (regularization
  bias plus ``C E||b||``);
* noisy clipped GD: ``C = G_2``, ``T = ⌈nε / (2 sqrt(d(d+1)))⌉`` (at most 1000),
  the minimizer of ``C²/T + d(d+1) s²`` with ``s = 2CT/(nε)``;
* objective perturbation: feature bound ``B = G_2``, ``Λ = 4 sqrt(d/(nε))/D``.
"""

from __future__ import annotations

import math

import numpy as np


def output_perturbation_rule(n: int, d: int, epsilon: float, D: float, G_2: float) -> dict:
    C = G_2
    return {"C": C, "lam": 4.0 * C * math.sqrt(d / (n * epsilon)) / D}


def noisy_gd_rule(n: int, d: int, epsilon: float, D: float, G_2: float, max_steps: int = 1000) -> dict:
    steps = int(min(max(1, math.ceil(n * epsilon / (2.0 * math.sqrt(d * (d + 1))))), max_steps))
    return {"C": G_2, "steps": steps}


def objective_perturbation_rule(n: int, d: int, epsilon: float, D: float, G_2: float) -> dict:
    return {"feature_bound": G_2, "regularization": 4.0 * math.sqrt(d / (n * epsilon)) / D}


def hindsight_grid(rule: dict, factors: tuple[float, ...] = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
                   ) -> list[dict]:
    """Multiplicative grid around a public rule's values (one knob varied at a time, then pairs)."""
    keys = list(rule)
    grid = []
    for f1 in factors:
        for f2 in (0.25, 1.0, 4.0) if len(keys) > 1 else (1.0,):
            cand = dict(rule)
            cand[keys[0]] = rule[keys[0]] * f1
            if len(keys) > 1:
                v = rule[keys[1]] * f2
                cand[keys[1]] = int(max(1, round(v))) if isinstance(rule[keys[1]], int) else v
            grid.append(cand)
    return grid


def best_in_hindsight(results: list[tuple[dict, float]]) -> tuple[dict, float]:
    """The grid point with the lowest (test-set) risk — not private, a ceiling only.

    A NaN risk never wins (``np.argmin`` would pick the first NaN); if every risk is NaN the
    first grid point is returned with its NaN risk.
    """
    risks = np.array([r for _, r in results], dtype=float)
    i = int(np.argmin(np.where(np.isnan(risks), np.inf, risks)))
    return results[i]
