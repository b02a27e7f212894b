"""The fixed configurations whose round plans are frozen in ``round_plans.json``."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

import cvxdp
from cvxdp.plan.profiles import TightProfile


def _lad(n: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(5.0, size=(n, d))
    y = X @ np.linspace(0.5, -0.5, d) + rng.standard_t(3.0, size=n)
    w = cp.Variable(d)
    return cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 2.0]), {"x": X, "y": y}


def _hinge_box(n: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(4.0, size=(n, d))
    y = np.where(X @ np.ones(d) + rng.normal(size=n) > 0, 1.0, -1.0)
    w = cp.Variable(d)
    return cvxdp.Model(cvxdp.losses.hinge(w), [cp.abs(w) <= 1.0]), {"x": X, "y": y}


BASE = {"epsilon": 4.0, "moment_k": 8.0, "G_k": 3.0, "random_state": 11}

CASES = {
    "population-tight-tail": ("lad", {"algorithm": "population"}),
    "population-tight-public": ("lad", {"algorithm": "population", "tail_share": 0.0}),
    "population-paper": ("lad", {"profile": "paper"}),
    "population-auto": ("lad", {"algorithm": "population", "G_k": "auto"}),
    "population-clip": ("lad", {"profile": TightProfile(clip=2.5), "tail_share": 0.0}),
    "population-manual-schedule": ("lad", {"tail_share": 0.0, "lambda_scale": 2.0, "lambda_growth": 4.0,
                                           "max_phases": 2, "boosting_groups": 3}),
    "population-max-phases": ("lad", {"tail_share": 0.0, "max_phases": 1}),
    "population-hinge-box": ("hinge", {"algorithm": "population", "epsilon": 2.0, "moment_k": 3.0,
                                       "G_k": 2.0}),
    # algorithm="auto" (the default) at n ε/d = 4000 (cvxdp.plan.auto): with a public G_2 ≤ 0.85 G_k,
    # Algorithm 3 with the clip rule (no histogram unless asked for); without one, Algorithm 1
    # ε = 1: n ε/d = 1000, below the switch to Algorithm 1 (2000 since the histogram's lower-edge values)
    "auto-clip-rule": ("lad", {"G_2": 1.0, "epsilon": 1.0}),
    "auto-clip-rule-tail": ("lad", {"G_2": 1.0, "tail_share": 0.1, "epsilon": 1.0}),
    "auto-without-G2": ("lad", {}),
    "recursive-tight": ("lad", {"algorithm": "recursive", "tail_share": 0.0}),
    "recursive-tail": ("lad", {"algorithm": "recursive"}),
    "recursive-rounds": ("lad", {"algorithm": "recursive", "tail_share": 0.0, "lam": 10.0}),
    "recursive-rounds-tail": ("lad", {"algorithm": "recursive", "lam": 3.0}),
    "recursive-paper-lam": ("lad", {"algorithm": "recursive", "profile": "paper", "lam": 0.3}),
    "output-perturbation": ("lad", {"algorithm": "output-perturbation", "tail_share": 0.0}),
    "output-perturbation-paper": ("lad", {"algorithm": "output-perturbation", "profile": "paper"}),
}


def make(name: str):
    kind, overrides = CASES[name]
    model, data = _lad(3000, 3, 5) if kind == "lad" else _hinge_box(3000, 3, 6)
    return model, data, {**BASE, **overrides}


def run_case(name: str):
    model, data, kw = make(name)
    return cvxdp.PrivateProblem(model).solve(data, **kw)
