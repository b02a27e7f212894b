"""Fault injection: solver failures, time-outs, NaNs and uncertifiable points never lead to a release.

Each path must end in refinement, a fallback solver, or a clear exception —
and the public record of a run (noise scales, ε's, radii) must not change
because a solver misbehaved.
"""

from __future__ import annotations

import math

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
from cvxdp.error import CertificationError, ParameterError, SolverError
from cvxdp.extension import ExtensionSettings, LipschitzExtension
from cvxdp.geometry import localize
from cvxdp.privacy.mechanisms import L2LaplaceMechanism
from cvxdp.privacy.random import SeededRandom
from cvxdp.problem import PrivateProblem
from cvxdp.run.population import majority_vote
from cvxdp.run.release import release_point

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
    w, cert = solve_certified(problem, 1e-7, ERMSettings(method="conic"))
    assert cert.certified and "ecos" in cert.method
    assert problem.region.contains(w)


def test_nan_points_are_rejected_and_the_ladder_moves_on(monkeypatch):
    problem, _, _ = _problem()
    _patch_solver(monkeypatch, lambda s: "nan" if s.solver == "clarabel" else None)
    w, cert = solve_certified(problem, 1e-7, ERMSettings(method="conic"))
    assert cert.certified and np.all(np.isfinite(w))
    assert any("failed" in n for n in cert.notes)


def test_every_solver_failing_falls_back_to_cutting_planes_or_raises(monkeypatch):
    problem, _, _ = _problem(m=30, d=2)
    _patch_solver(monkeypatch, lambda s: "raise")
    _w, cert = solve_certified(problem, 1e-5, ERMSettings(method="conic", cutting_plane_iterations=5000))
    assert cert.certified and "cutting-plane" in cert.method
    with pytest.raises(CertificationError, match="nothing was released"):
        solve_certified(problem, 1e-9, ERMSettings(method="conic", cutting_plane_iterations=3))


def test_time_out_never_releases_an_uncertified_point():
    problem, _, _ = _problem(m=200)
    tiny = ERMSettings(method="conic", conic=ConicSettings(time_limit=1e-7, max_iter=1),
                       cutting_plane_iterations=2000)
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
                                    erm=ERMSettings(method="conic", cutting_plane_iterations=2),
                                    tail_share=0.0)
    assert src.draws == 0


# ---------------------------------------------------------------------------------------------------
# Fail closed on every release path (issue 10, deliverable 4): a NaN certificate, a NaN point or a NaN
# noise sample never becomes a released point.

ALGORITHMS = ("output-perturbation", "recursive", "population")


class NoiseCounter(SeededRandom):
    """A seeded source that counts ℓ2-Laplace radius draws; ``radius`` replaces them when given."""

    def __init__(self, seed: int, radius: float | None = None) -> None:
        super().__init__(seed)
        self.noise_draws = 0
        self.radius = radius

    def gamma(self, shape, scale, size):
        self.noise_draws += 1
        out = super().gamma(shape, scale, size)
        return out if self.radius is None else np.full_like(out, self.radius)


def _lad_fit(n=400, d=2, seed=6):
    task = student_t_lad(n=n, d=d, n_test=10, seed=seed)
    w = cp.Variable(d)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w) <= 2])
    kw = dict(epsilon=1.0, moment_k=4, G_k=task.G(4.0), tail_share=0.0, boosting_groups=1,
              erm=ERMSettings(cutting_plane_iterations=20))
    return model, {"x": task.X_train, "y": task.y_train}, kw


def _nan_lower_bounds(monkeypatch):
    """Every certified lower bound is NaN — what 0·(−∞) from a vacuous cut used to produce."""
    def nan_bound(problem, cuts):
        return math.nan, np.full(len(cuts), 1.0 / len(cuts))

    real_master = cvxdp.erm.bundle.bundle_master

    def nan_master(problem, cuts, kinks=None, prox=None):
        return real_master(problem, cuts, kinks, prox)._replace(lower=math.nan)

    monkeypatch.setattr("cvxdp.erm.solver.bundle_lower_bound", nan_bound)
    monkeypatch.setattr("cvxdp.erm.cutting_plane.bundle_lower_bound", nan_bound)
    monkeypatch.setattr("cvxdp.erm.bundle.bundle_master", nan_master)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_nan_certificates_are_never_released(algorithm, monkeypatch):
    """NaN lower bounds make every gap NaN: ``gap > α`` is False for NaN, so the old gates released the
    point uncertified. Now every rung of the ladder fails and nothing is released or noised."""
    model, data, kw = _lad_fit()
    _nan_lower_bounds(monkeypatch)
    src = NoiseCounter(0)
    with pytest.raises(CertificationError, match="nothing was released"):
        PrivateProblem(model).solve(data, algorithm=algorithm, random_state=src, **kw)
    assert src.noise_draws == 0


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_an_uncertified_solver_answer_is_not_noised(algorithm, monkeypatch):
    """Algorithm 2 checks the certificate it is handed (``not (gap <= α)``) before any noise is drawn."""
    from cvxdp.erm.problem import ERMCertificate

    model, data, kw = _lad_fit()

    def liar(problem, alpha, settings=None):
        w = problem.feasible_set.make_feasible(problem.w0)
        return w, ERMCertificate(required=alpha, gap=math.nan, upper=math.nan, lower=math.nan, method="liar")

    monkeypatch.setattr("cvxdp.run.release.solve_certified", liar)
    src = NoiseCounter(0)
    with pytest.raises(CertificationError, match="nothing was released"):
        PrivateProblem(model).solve(data, algorithm=algorithm, random_state=src, **kw)
    assert src.noise_draws == 0


@pytest.mark.parametrize("radius", [math.nan, math.inf])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_non_finite_noise_is_never_released(algorithm, radius):
    """A broken noise source (NaN or infinite radius): ``np.clip`` passes NaN through and clamps ∞ to the
    box, so the old release returned NaN or a box corner; now the mechanism refuses the sample."""
    model, data, kw = _lad_fit()
    src = NoiseCounter(0, radius=radius)
    with pytest.raises(ParameterError, match="non-finite sample"):
        PrivateProblem(model).solve(data, algorithm=algorithm, random_state=src, **kw)
    assert src.noise_draws == 1


def test_release_point_fails_closed():
    """The release itself: a non-finite point is refused before any noise is drawn, a non-finite noise
    sample after; a finite release is finite and in W."""
    w = cp.Variable(2)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w) <= 1])
    mech = L2LaplaceMechanism(0.1, 1.0, 2)
    src = NoiseCounter(0)
    for bad in ([math.nan, 0.0], [math.inf, 0.0]):
        with pytest.raises(CertificationError, match="not finite"):
            release_point(np.array(bad), mech, model.domain, src)
    assert src.noise_draws == 0
    for radius in (math.nan, math.inf):
        with pytest.raises(ParameterError, match="non-finite sample"):
            release_point(np.zeros(2), mech, model.domain, NoiseCounter(0, radius=radius))
        with pytest.raises(ParameterError, match="non-finite sample"):
            mech.sample(NoiseCounter(0, radius=radius), 3)
    out = release_point(np.zeros(2), mech, model.domain, src)
    assert np.all(np.isfinite(out)) and model.domain.contains(out) and src.noise_draws == 1


def test_majority_vote_never_picks_a_non_finite_candidate():
    ok = np.array([[0.0, 0.0], [0.0, 0.1], [5.0, 5.0]])
    assert majority_vote(ok, 0.1) == 0
    nan_first = np.array([[math.nan, math.nan], [0.0, 0.0], [0.0, 0.1]])
    assert majority_vote(nan_first, 0.1) == 1
    apart = np.array([[math.nan, 0.0], [0.0, 0.0], [9.0, 9.0]])
    assert majority_vote(apart, 0.1) == 1  # no majority: the most neighbours among finite candidates
    with pytest.raises(ParameterError, match="radius"):  # the old vote fell back to index 0 (NaN)
        majority_vote(nan_first, math.nan)
    with pytest.raises(CertificationError, match="nothing was released"):
        majority_vote(np.full((3, 2), math.nan), 0.1)
    with pytest.raises(CertificationError, match="nothing was released"):
        majority_vote(np.full((1, 2), math.inf), 0.1)


def test_oracle_refusal_names_no_data_derived_numbers(monkeypatch):
    """``require=True`` refuses with the public B only: no count of failed examples, no worst bracket."""
    problem, model, _task = _problem(m=20)

    def nan_bracket(*args, **kwargs):
        raise SolverError("injected")

    monkeypatch.setattr("cvxdp.extension.conic_path.solve", nan_bracket)
    ext = LipschitzExtension(model, 1.0, problem.region, ExtensionSettings(closed_form=False))
    with pytest.raises(CertificationError) as info:
        ext.evaluate(np.zeros(3), problem.examples, tolerance=1e-7, require=True)
    msg = str(info.value)
    assert "nothing was released" in msg and "1e-07" in msg
    assert " of 20" not in msg and "worst" not in msg
    ev = ext.evaluate(np.zeros(3), problem.examples, tolerance=1e-7)
    assert not ev.certified.any()  # −∞/+∞ brackets are never certified


def test_certification_failure_message_quotes_only_public_numbers(monkeypatch):
    """The refusal names α and the settings; the certified gap (data-dependent) stays out."""
    problem, _, _ = _problem(m=30, d=2)
    _patch_solver(monkeypatch, lambda s: "raise")
    with pytest.raises(CertificationError) as info:
        solve_certified(problem, 1e-9, ERMSettings(method="conic", cutting_plane_iterations=3))
    msg = str(info.value)
    assert "1.000e-09" in msg and "nothing was released" in msg
    assert "gap" not in msg and "steps" not in msg
