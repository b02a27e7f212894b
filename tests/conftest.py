"""Shared fixtures: small instances and a high-accuracy CVXPY reference for the extension."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.privacy.random import SeededRandom


def reference_extension(model: cvxdp.Model, region, C: float, queries: np.ndarray,
                        data: dict) -> np.ndarray:
    """``f_{C,U}(w_i, z_i)`` by solving each inner problem with CVXPY at tight tolerances."""
    loss = model.loss
    w = loss.variable
    out = np.empty(queries.shape[0])
    cons = region.constraints(w)
    for i in range(queries.shape[0]):
        for name, p in loss.placeholders.items():
            p.value = np.asarray(data[name])[i]
        prob = cp.Problem(cp.Minimize(loss.expr + C * cp.norm(queries[i] - w, 2)), cons)
        # the tightest tolerances first; where Clarabel stalls there (hypothesis found such an instance),
        # looser ones and then ECOS — the callers compare at 1e-6 relative
        attempts = (dict(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11),
                    dict(solver=cp.CLARABEL, tol_gap_abs=1e-9, tol_gap_rel=1e-9, tol_feas=1e-9),
                    dict(solver=cp.ECOS, abstol=1e-9, reltol=1e-9, feastol=1e-9))
        for k, options in enumerate(attempts):
            try:
                prob.solve(**options)
            except cp.error.SolverError:
                if k == len(attempts) - 1:
                    raise
                continue
            if prob.status == cp.OPTIMAL:
                break
        assert prob.status == cp.OPTIMAL, prob.status
        out[i] = prob.value
    return out


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261130)


def glm_data(rng: np.random.Generator, m: int, d: int, df: float = 3.0) -> dict:
    """Heavy-tailed features (Student-t) with ±1 labels."""
    X = rng.standard_t(df, size=(m, d))
    y = np.where(rng.random(m) < 0.5, -1.0, 1.0)
    return {"x": X, "y": y}


class CountingSource(SeededRandom):
    """A seeded noise source that counts its draws (to check that nothing is drawn before a refusal):
    float uniforms in ``draws`` (the ℓ2-Laplace mechanism), uniform integers in ``integers`` (the
    exact integer noise of the tail histogram)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.draws = 0
        self.integers = 0

    def uniform(self, size):
        self.draws += 1
        return super().uniform(size)

    def randbelow(self, n):
        self.integers += 1
        return super().randbelow(n)
