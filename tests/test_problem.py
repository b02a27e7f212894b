"""The public API: privacy invariants, bad input refused before any noise, utility trends end to end."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from conftest import CountingSource

import cvxdp
from cvxdp.datasets import student_t_lad
from cvxdp.erm import ERMSettings
from cvxdp.error import (
    DataError,
    ParameterError,
    UncertifiableLossError,
)
from cvxdp.problem import PrivateProblem

pytestmark = pytest.mark.filterwarnings("ignore::cvxdp.error.PrivacyLeakWarning")


def _lad(n=2000, d=3, seed=0):
    task = student_t_lad(n=n, d=d, nu=5.0, n_test=50_000, seed=seed)
    w = cp.Variable(d)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 2.0])
    return task, model


def _public_record(result):
    ledger = [(e.mechanism, e.batch, e.n_examples, e.epsilon, e.sensitivity, e.noise_scale)
              for e in result.ledger.entries]
    plans = [(s.phase, s.group, s.round, s.m, s.plan.C, s.plan.alpha, s.plan.radius_plus, s.lam)
             for s in result.steps]
    return ledger, plans


@pytest.mark.parametrize("algorithm", ["population", "recursive", "output-perturbation"])
@pytest.mark.parametrize("profile", ["tight", "paper"])
def test_noise_scales_do_not_depend_on_the_data(algorithm, profile):
    """Neighbouring data sets — one example replaced by a huge outlier — get identical noise scales.

    With ``tail_share=0`` every scale is a function of the public inputs alone.
    """
    task, model = _lad(n=1500)
    X, y = task.X_train.copy(), task.y_train.copy()
    X2, y2 = X.copy(), y.copy()
    X2[7] = 1e6 * np.array([1.0, -2.0, 0.5])
    y2[7] = -3e6
    kw = dict(epsilon=1.0, moment_k=4.0, G_k=task.G(4.0), algorithm=algorithm, profile=profile,
              tail_share=0.0)
    r1 = PrivateProblem(model).solve({"x": X, "y": y}, random_state=3, **kw)
    r2 = PrivateProblem(model).solve({"x": X2, "y": y2}, random_state=3, **kw)
    assert _public_record(r1) == _public_record(r2)
    for r in (r1, r2):
        assert r.ledger.spent <= 1.0 + 1e-12
        assert model.domain.contains(r.w)


@pytest.mark.parametrize("algorithm", ["auto", "population", "output-perturbation"])
def test_noise_scales_depend_only_on_released_tail_estimates(algorithm):
    """With the private tail histogram, scales are functions of public inputs and that DP release.

    A response outlier leaves every per-example Lipschitz constant ``||x_i||`` (so
    the histogram's counts) unchanged: with the same noise, the released
    histogram and therefore every scale must be identical.
    """
    task, model = _lad(n=1500)
    y2 = task.y_train.copy()
    y2[3] = 1e6
    kw = dict(epsilon=1.0, moment_k=4.0, G_k=task.G(4.0), algorithm=algorithm, random_state=5)
    r1 = PrivateProblem(model).solve({"x": task.X_train, "y": task.y_train}, **kw)
    r2 = PrivateProblem(model).solve({"x": task.X_train, "y": y2}, **kw)
    assert r1.ledger.entries[0].mechanism == "private tail histogram"
    assert _public_record(r1) == _public_record(r2)


@pytest.mark.parametrize("algorithm", ["population", "recursive"])
def test_public_clip_is_used_in_every_round_and_keeps_scales_public(algorithm):
    """``TightProfile(clip=C)``: every release uses that C, also with the private tail histogram on.

    The outlier changes the histogram's counts, so only the noise scales' *dependence on C*
    is compared: each step's sensitivity is ``2C/(λm) + 2 sqrt(2α/λ)`` with the fixed C.
    """
    from cvxdp.plan.profiles import TightProfile

    task, model = _lad(n=1500)
    X2 = task.X_train.copy()
    X2[7] = 1e6 * np.array([1.0, -2.0, 0.5])
    kw = dict(epsilon=1.0, moment_k=4.0, G_k=task.G(4.0), algorithm=algorithm, random_state=3,
              profile=TightProfile(clip=1.25))
    for X in (task.X_train, X2):
        r = PrivateProblem(model).solve({"x": X, "y": task.y_train}, **kw)
        assert r.steps and all(s.plan.C == 1.25 for s in r.steps)
        for s in r.steps:
            exact = 2 * 1.25 / (s.lam * s.m) + 2 * np.sqrt(2 * s.plan.alpha / s.lam)
            assert s.plan.sensitivity == pytest.approx(exact)
            assert s.plan.noise_scale * s.epsilon >= exact * (1 - 1e-12)
        assert r.ledger.spent <= 1.0 + 1e-12
    no_tail = dict(kw, tail_share=0.0)
    r1 = PrivateProblem(model).solve({"x": task.X_train, "y": task.y_train}, **no_tail)
    r2 = PrivateProblem(model).solve({"x": X2, "y": task.y_train}, **no_tail)
    assert _public_record(r1) == _public_record(r2)


def test_ledger_accounts_parallel_batches():
    task, model = _lad(n=4000)
    r = PrivateProblem(model).solve({"x": task.X_train, "y": task.y_train}, epsilon=0.7, moment_k=4,
                                    G_k=task.G(4.0), random_state=1, algorithm="population")
    spent = r.ledger.per_example()
    assert r.ledger.spent == pytest.approx(0.7)
    assert np.all(spent <= 0.7 + 1e-12)
    # the tail histogram reads everyone (0.1 ε); every phase then spends the rest on its own,
    # disjoint batch; examples left over after the last phase spent only the histogram's share
    assert set(np.round(spent, 9)) <= {0.07, 0.7}
    assert r.schedule is not None and (spent > 0.07 + 1e-9).sum() == sum(r.schedule.sizes)


BAD = [
    ({"epsilon": 0.0}, ParameterError), ({"epsilon": -1.0}, ParameterError),
    ({"epsilon": float("nan")}, ParameterError), ({"epsilon": float("inf")}, ParameterError),
    ({"epsilon": "1"}, ParameterError), ({"moment_k": 1.5}, ParameterError),
    ({"moment_k": float("nan")}, ParameterError), ({"moment_k": float("inf")}, ParameterError),
    ({"G_k": 0.0}, ParameterError), ({"G_k": float("inf")}, ParameterError),
    ({"G_k": -2.0}, ParameterError), ({"G_2": 100.0}, ParameterError),
    ({"delta": 1.5}, ParameterError), ({"algorithm": "magic"}, ParameterError),
    ({"profile": "loose"}, ParameterError), ({"boosting_groups": 0}, ParameterError),
]


@pytest.mark.parametrize("override, error", BAD)
def test_bad_arguments_are_refused_before_any_noise(override, error):
    task, model = _lad(n=500)
    src = CountingSource(0)
    kw = dict(epsilon=1.0, moment_k=4.0, G_k=task.G(4.0), random_state=src)
    kw.update(override)
    with pytest.raises(error):
        PrivateProblem(model).solve({"x": task.X_train, "y": task.y_train}, **kw)
    assert src.draws == 0


@pytest.mark.parametrize("data, error", [
    ({"x": np.full((500, 3), np.nan), "y": np.zeros(500)}, DataError),
    ({"x": np.ones((500, 3)), "y": np.full(500, np.inf)}, DataError),
    ({"x": np.ones((500, 2)), "y": np.zeros(500)}, DataError),
    ({"x": np.ones((12, 3)), "y": np.zeros(12)}, ParameterError),  # too few for Algorithm 1's schedule
])
def test_bad_data_refused_before_any_noise(data, error):
    _, model = _lad(n=10)
    src = CountingSource(0)
    with pytest.raises(error):
        PrivateProblem(model).solve(data, epsilon=1.0, moment_k=4, G_k=3.0, random_state=src,
                                    algorithm="population")
    assert src.draws == 0


def test_uncertifiable_mode_refused_before_any_noise():
    w = cp.Variable(2)
    x = cp.Parameter(2, name="x")
    loss = cvxdp.Loss(cp.log_sum_exp(cp.hstack([x @ w, 0.0])), w, data=[x])
    model = cvxdp.Model(loss, [cp.norm(w) <= 1])
    src = CountingSource(0)
    with pytest.raises(UncertifiableLossError):
        PrivateProblem(model).solve({"x": np.ones((100, 2))}, epsilon=1, moment_k=4, G_k=2.0,
                                    erm=ERMSettings(method="adaptive-subgradient"), random_state=src)
    assert src.draws == 0


def test_result_reports_certificates_and_timings():
    task, model = _lad(n=1200)
    data = {"x": task.X_train, "y": task.y_train}
    r = PrivateProblem(model).solve(data, epsilon=2.0, moment_k=4, G_k=task.G(4.0), random_state=0,
                                    diagnostics=True)
    assert r.diagnostics_enabled
    assert r.certificates and all(c["certified_gap"] <= c["alpha"] for c in r.certificates)
    assert all(c["noise_scale"] * c["epsilon"] >= c["sensitivity"] * (1 - 1e-12)
               for c in r.certificates)
    assert "fit" in r.timings and "ε spent" in r.summary()
    assert set(r.diagnostics) == {"certificates", "timings"}
    # default: no diagnostics are kept, reading them says how to get them; the release is the same
    off = PrivateProblem(model).solve(data, epsilon=2.0, moment_k=4, G_k=task.G(4.0), random_state=0)
    assert not off.diagnostics_enabled and off._timings is None
    for name in ("certificates", "timings", "diagnostics"):
        with pytest.raises(ParameterError, match="diagnostics=True"):
            getattr(off, name)
    assert all(s.certificate is None for s in off.steps) and len(off.steps) == len(r.steps)
    assert all(s.certificate is not None for s in r.steps)
    assert np.array_equal(off.w, r.w) and _public_record(off) == _public_record(r)
    assert "gap" not in off.summary() and "gap" not in repr(off)
    with pytest.raises(ParameterError, match="diagnostics"):
        PrivateProblem(model).solve(data, epsilon=2.0, moment_k=4, G_k=2.0, diagnostics="yes")


def _excess(n, eps, seed, d=3):
    task, model = _lad(n=n, d=d, seed=seed)
    r = PrivateProblem(model).solve({"x": task.X_train, "y": task.y_train}, epsilon=eps, moment_k=4,
                                    G_k=task.G(4.0), random_state=seed)
    risk = np.mean(np.abs(task.y_test - task.X_test @ r.w))
    best = np.mean(np.abs(task.y_test - task.X_test @ task.w_star))
    return risk - best


@pytest.mark.slow
def test_excess_risk_falls_with_n_and_epsilon():
    """Median excess population risk over seeds: larger n and larger ε must both help, clearly."""
    seeds = range(4)
    small_n = np.median([_excess(1000, 1.0, s) for s in seeds])
    big_n = np.median([_excess(16000, 1.0, s) for s in seeds])
    small_eps = np.median([_excess(4000, 0.25, s) for s in seeds])
    big_eps = np.median([_excess(4000, 4.0, s) for s in seeds])
    assert big_n < 0.5 * small_n
    assert big_eps < 0.5 * small_eps
    assert big_n < 0.05 and big_eps < 0.05


def test_cvxpy_solver_and_verbose_options(capfd):
    """``solver=`` takes CVXPY's constants for the two solvers the certificate can use; others are refused
    with the reason; ``verbose=True`` shows the solver's log."""
    task, model = _lad(n=400)
    kw = dict(epsilon=1.0, moment_k=4.0, G_k=task.G(4.0), algorithm="output-perturbation", tail_share=0.0,
              random_state=0, diagnostics=True)
    data = {"x": task.X_train, "y": task.y_train}
    for solver in (cp.CLARABEL, cp.ECOS):
        res = PrivateProblem(model).solve(data, solver=solver, **kw)
        assert res.certificates[0]["method"].startswith(solver.lower())
    capfd.readouterr()
    with pytest.warns(cvxdp.PrivacyLeakWarning, match="diagnostic"):
        PrivateProblem(model).solve(data, solver=cp.CLARABEL, verbose=True, **kw)
    assert "Clarabel" in capfd.readouterr().out
    for bad in (cp.SCS, "highs", 3):
        with pytest.raises(ParameterError, match="not supported"):
            PrivateProblem(model).solve(data, solver=bad, **kw)
