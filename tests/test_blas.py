"""The BLAS thread limit of a fit (``cvxdp.run.blas``): set for the fit, restored after, given to workers."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
import cvxdp.problem as problem_module
from cvxdp.error import ParameterError
from cvxdp.run.blas import DEFAULT_THREADS, blas_threads, fit_limit, limited_blas
from cvxdp.run.executor import ProcessExecutor


def _report_threads(job: int) -> tuple[int | None, int | None]:
    return blas_threads(), fit_limit()


def test_the_limit_holds_inside_the_block_and_is_restored_after():
    before = blas_threads()
    assert before is not None  # numpy's BLAS is loaded
    with limited_blas(1):
        assert blas_threads() == 1
        with limited_blas(None):  # None leaves the setting as it is
            assert blas_threads() == 1
    assert blas_threads() == before


@pytest.mark.parametrize(("setting", "expected"), [(None, "process"), (1, 1), ("default", DEFAULT_THREADS)])
def test_a_fit_runs_with_the_settings_blas_threads(monkeypatch, setting, expected):
    """``ERMSettings.blas_threads`` (default :data:`DEFAULT_THREADS`) is in force during the fit and the
    process's own setting after it; ``None`` leaves the process's setting alone."""
    seen = []
    real = problem_module.run_fit

    def spy(*args, **kwargs):
        seen.append((blas_threads(), fit_limit()))
        return real(*args, **kwargs)

    monkeypatch.setattr(problem_module, "run_fit", spy)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = X @ np.array([1.0, -1.0]) + rng.normal(size=300)
    w = cp.Variable(2)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 2.0])
    before = blas_threads()
    erm = None if setting == "default" else cvxdp.ERMSettings(blas_threads=setting)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cvxdp.PrivateProblem(model).solve({"x": X, "y": y}, epsilon=1.0, moment_k=4.0, G_k=3.0,
                                          random_state=0, erm=erm, algorithm="output-perturbation")
    # in force during the fit, and what its executors give their workers (nothing when None)
    assert seen == [(before, None) if expected == "process" else (expected, expected)]
    assert blas_threads() == before and fit_limit() is None


@pytest.mark.parametrize("setting", [None, 1])
def test_solve_certified_called_outside_a_fit_keeps_the_settings_limit(monkeypatch, setting):
    """The ERM solver, called on its own (as notebook 03 does), runs under ``blas_threads`` too."""
    import cvxdp.erm.solver as solver_module

    seen = []
    monkeypatch.setattr(solver_module, "_solve_certified",
                        lambda problem, alpha, settings: seen.append((blas_threads(), fit_limit())))
    before = blas_threads()
    solver_module.solve_certified(None, 1e-6, cvxdp.ERMSettings(blas_threads=setting))
    assert seen == [(before, None) if setting is None else (1, 1)]
    assert blas_threads() == before and fit_limit() is None


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2"])
def test_blas_threads_is_validated(bad):
    with pytest.raises(ParameterError, match="blas_threads"):
        cvxdp.ERMSettings(blas_threads=bad)


@pytest.mark.slow
def test_process_workers_run_under_the_drivers_limit():
    """A spawned worker starts with its own BLAS threads; the executor gives it the fit's limit, as it gives
    it the driver's numpy error settings (two workers of two threads each on two cores wait on one
    another), and outside a fit's limit leaves the worker's own."""
    with ProcessExecutor(workers=2) as pool:
        with limited_blas(1):
            assert list(pool.map(_report_threads, range(4))) == [(1, 1)] * 4
        # outside a fit's limit nothing is forwarded: the workers' own setting stands
        assert [limit for _, limit in pool.map(_report_threads, range(2))] == [None, None]
