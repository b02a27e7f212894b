"""Fault injection: solver failures, time-outs, NaNs and uncertifiable points never lead to a release.

Each path must end in refinement, a fallback solver, or a clear exception —
and the public record of a run (noise scales, ε's, radii) must not change
because a solver misbehaved.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from conftest import CountingSource

import cvxdp
from cvxdp.conic import program as program_module
from cvxdp.conic.program import ConicSettings
from cvxdp.datasets import student_t_lad
from cvxdp.erm import ERMSettings, RegularizedERM, solve_certified
from cvxdp.erm.problem import evaluate_upper
from cvxdp.error import CertificationError, SolverError
from cvxdp.extension import ExtensionSettings, LipschitzExtension
from cvxdp.geometry import localize
from cvxdp.problem import PrivateProblem

pytestmark = pytest.mark.filterwarnings("ignore::cvxdp.error.PrivacyLeakWarning")

REAL_SOLVE = program_module.solve


def _problem(m=60, d=3):
    task = student_t_lad(n=m, d=d, n_test=10, seed=4)
    w = cp.Variable(d)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w) <= 1.5])
    ex = model.bind({"x": task.X_train, "y": task.y_train})
    U = localize(model.domain, np.full(d, 0.2), 0.9)
    return RegularizedERM(model, ex, U, C=1.5, lam=0.2, w0=np.zeros(d)), model, task


def _patch_solver(monkeypatch, fail):
    """Replace the conic solver seen by the joint program; ``fail(settings)`` decides per call."""
    def patched(prog, settings=None):
        settings = settings or ConicSettings()
        out = fail(settings)
        if out == "raise":
            raise SolverError(f"injected failure of {settings.solver}")
        sol = REAL_SOLVE(prog, settings)
        if out == "nan":
            sol.x = np.full_like(sol.x, np.nan)
        return sol
    monkeypatch.setattr("cvxdp.erm.joint.solve", patched)


def test_clarabel_failure_falls_back_to_ecos(monkeypatch):
    problem, _, _ = _problem()
    _patch_solver(monkeypatch, lambda s: "raise" if s.solver == "clarabel" else None)
    w, cert = solve_certified(problem, 1e-7)
    assert cert.certified and "ecos" in cert.method
    assert problem.region.contains(w)


def test_nan_points_are_rejected_and_the_ladder_moves_on(monkeypatch):
    problem, _, _ = _problem()
    _patch_solver(monkeypatch, lambda s: "nan" if s.solver == "clarabel" else None)
    w, cert = solve_certified(problem, 1e-7)
    assert cert.certified and np.all(np.isfinite(w))
    assert any("failed" in n for n in cert.notes)


def test_every_solver_failing_falls_back_to_cutting_planes_or_raises(monkeypatch):
    problem, _, _ = _problem(m=30, d=2)
    _patch_solver(monkeypatch, lambda s: "raise")
    _w, cert = solve_certified(problem, 1e-5, ERMSettings(cutting_plane_iterations=5000))
    assert cert.certified and "cutting-plane" in cert.method
    with pytest.raises(CertificationError, match="nothing was released"):
        solve_certified(problem, 1e-9, ERMSettings(cutting_plane_iterations=3))


def test_time_out_never_releases_an_uncertified_point():
    problem, _, _ = _problem(m=200)
    tiny = ERMSettings(conic=ConicSettings(time_limit=1e-7, max_iter=1), cutting_plane_iterations=2000)
    try:
        w, cert = solve_certified(problem, 1e-6, tiny)
    except CertificationError:
        return
    assert evaluate_upper(problem, w, 1e-12)[0] - cert.lower <= 1e-6 + 1e-9


def test_oracle_solver_failure_moves_to_the_other_solver(monkeypatch):
    problem, model, _task = _problem(m=20)
    calls = {"clarabel": 0, "ecos": 0}

    def patched(prog, settings=None):
        settings = settings or ConicSettings()
        calls[settings.solver] += 1
        if settings.solver == "clarabel":
            raise SolverError("injected")
        return REAL_SOLVE(prog, settings)

    monkeypatch.setattr("cvxdp.extension.conic_path.solve", patched)
    ext = LipschitzExtension(model, 1.0, problem.region, ExtensionSettings(closed_form=False))
    ev = ext.evaluate(np.zeros(3), problem.examples, tolerance=1e-7, require=True)
    assert calls["ecos"] >= 1 and np.all(ev.certified)


def test_faults_do_not_change_the_public_record(monkeypatch):
    """A run whose first solver attempt fails publishes exactly the same noise scales and radii."""
    task = student_t_lad(n=1500, d=3, n_test=10, seed=5)
    w = cp.Variable(3)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w) <= 2])
    data = {"x": task.X_train, "y": task.y_train}
    kw = dict(epsilon=1.0, moment_k=4, G_k=task.G(4.0), random_state=9)
    clean = PrivateProblem(model).solve(data, **kw)
    state = {"n": 0}

    def flaky(s):
        state["n"] += 1
        return "raise" if state["n"] % 2 == 1 else None

    _patch_solver(monkeypatch, flaky)
    faulty = PrivateProblem(model).solve(data, **kw)
    rec = [(e.epsilon, e.sensitivity, e.noise_scale, e.batch) for e in clean.ledger.entries]
    assert rec == [(e.epsilon, e.sensitivity, e.noise_scale, e.batch) for e in faulty.ledger.entries]
    assert [s.plan.radius_plus for s in clean.steps] == [s.plan.radius_plus for s in faulty.steps]


def test_failed_certification_draws_no_noise_and_spends_nothing(monkeypatch):
    task = student_t_lad(n=800, d=2, n_test=10, seed=6)
    w = cp.Variable(2)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w) <= 2])
    _patch_solver(monkeypatch, lambda s: "raise")
    src = CountingSource(0)
    with pytest.raises(CertificationError):
        PrivateProblem(model).solve({"x": task.X_train, "y": task.y_train}, epsilon=1.0, moment_k=4,
                                    G_k=task.G(4.0), algorithm="output-perturbation", random_state=src,
                                    erm=ERMSettings(cutting_plane_iterations=2), tail_share=0.0)
    assert src.draws == 0
