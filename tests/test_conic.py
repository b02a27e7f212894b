"""Cones: projections land in the dual cone, are idempotent, and the solvers agree."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from cvxdp.conic.cones import Cone, in_dual, project_dual, project_soc
from cvxdp.conic.program import ConicProgram, ConicSettings, solve


def test_soc_projection_properties(rng):
    z = rng.normal(size=(500, 5)) * 3
    p = project_soc(z)
    assert np.all(np.linalg.norm(p[:, 1:], axis=1) <= p[:, 0] * (1 + 1e-12) + 1e-15)
    assert np.allclose(project_soc(p), p)
    # Moreau: z = Π_K(z) − Π_K(−z) for the self-dual second-order cone
    assert np.allclose(z, p - project_soc(-z))


def test_project_dual_membership(rng):
    cones = (Cone("zero", 2), Cone("nonneg", 3), Cone("soc", 4), Cone("exp", 3))
    z = rng.normal(size=(300, 12)) * 2
    assert np.all(in_dual(project_dual(z, cones), cones))


def test_clarabel_and_ecos_agree_on_socp():
    # min x0 + x1  s.t. ||(x0, x1)|| <= 1  ->  -sqrt(2)
    A = sp.csc_matrix(np.array([[0.0, 0.0], [-1.0, 0.0], [0.0, -1.0]]))
    prog = ConicProgram(q=np.array([1.0, 1.0]), A=A, b=np.array([1.0, 0.0, 0.0]),
                        cones=(Cone("soc", 3),))
    for solver in ("clarabel", "ecos"):
        sol = solve(prog, ConicSettings(solver=solver))
        assert sol.usable
        assert np.isclose(sol.x.sum(), -np.sqrt(2), atol=1e-7)
