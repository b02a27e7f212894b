"""The executor seam: groups of a phase run serially or in worker processes with the same result."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest
from conftest import CountingSource

import cvxdp
from cvxdp.error import ParameterError
from cvxdp.privacy.random import SecureRandom, SeededRandom
from cvxdp.run.executor import ProcessExecutor, SerialExecutor, get_executor

pytestmark = pytest.mark.filterwarnings("ignore::cvxdp.error.PrivacyLeakWarning")


def _fit_inputs(n=900, d=2, seed=4):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(5.0, size=(n, d))
    y = X @ np.array([0.4, -0.3]) + rng.standard_t(3.0, size=n)
    w = cp.Variable(d)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 1.5])
    kw = dict(epsilon=2.0, moment_k=4.0, G_k=3.0, boosting_groups=3, max_phases=2)
    return model, {"x": X, "y": y}, kw


@pytest.mark.slow
def test_process_pool_gives_the_serial_result_bit_for_bit():
    """Each group draws from its own spawned source, so the pool cannot change the output."""
    model, data, kw = _fit_inputs()
    serial = cvxdp.PrivateProblem(model).solve(data, random_state=7, **kw)
    with ProcessExecutor(workers=2) as pool:
        parallel = cvxdp.PrivateProblem(model).solve(data, random_state=7, executor=pool, **kw)
    assert np.array_equal(serial.w, parallel.w)
    assert [s.center.tolist() for s in serial.steps] == [s.center.tolist() for s in parallel.steps]
    assert [e.epsilon for e in serial.ledger.entries] == [e.epsilon for e in parallel.ledger.entries]
    assert len(serial.steps) == 6 and parallel.ledger.spent <= 2.0


@pytest.mark.slow
def test_workers_print_nothing_a_record_could_decide(capfd):
    """Worker processes run under the fit's numpy error settings (off) and hand their warnings back:
    a record of 10¹⁰⁰ made the workers print overflow warnings that the serial run never prints
    (found by review)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 2))
    y = X @ np.array([0.5, -0.5]) + rng.standard_normal(600)
    X[7], y[7] = [1e100, -1e100], 1e100
    w = cp.Variable(2)
    model = cvxdp.Model(cvxdp.losses.squared(w), [cp.norm(w, 2) <= 2.0])
    kw = dict(epsilon=1.0, moment_k=4, G_k=3.0, tail_share=0.0, boosting_groups=3, max_phases=1)
    with ProcessExecutor(workers=2) as pool, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cvxdp.PrivateProblem(model).solve({"x": X, "y": y}, executor=pool, **kw)
    _, err = capfd.readouterr()
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert "Warning" not in err and "overflow" not in err


def test_a_shared_noise_source_is_refused_before_anything_is_read():
    model, data, kw = _fit_inputs(n=200)
    src = CountingSource(0)
    with pytest.raises(ParameterError, match="independent sources"):
        cvxdp.PrivateProblem(model).solve(data, random_state=src, executor=ProcessExecutor(2), **kw)
    assert src.draws == 0 and src.integers == 0


def test_spawned_sources():
    secure = SecureRandom().spawn(3)
    assert len({id(s) for s in secure}) == 3 and all(s.secure for s in secure)
    a, b = SeededRandom(1).spawn(2), SeededRandom(1).spawn(2)
    assert [s.uniform(4).tolist() for s in a] == [s.uniform(4).tolist() for s in b]  # reproducible
    assert a[0].uniform(4).tolist() != a[1].uniform(4).tolist()  # independent streams
    shared = CountingSource(0).spawn(3)
    assert shared[0] is shared[1] is shared[2] and not shared[0].spawns_independent


def test_executors_keep_job_order_and_refuse_strangers():
    assert list(SerialExecutor().map(abs, [-3, 1, -2])) == [3, 1, 2]
    assert isinstance(get_executor(None), SerialExecutor)
    with pytest.raises(ParameterError):
        get_executor("processes")
    with pytest.raises(ParameterError):
        ProcessExecutor(workers=0)

    class CompletionOrder:  # has map and remote, but is not an Executor: its order is not promised
        remote = False

        def map(self, fn, jobs):
            return reversed([fn(j) for j in jobs])

    with pytest.raises(ParameterError):
        get_executor(CompletionOrder())


def test_partitioned_executor_runs_the_data_parallel_path_here():
    """PartitionedExecutor: partition sums and the bundle solver, in this process; certified, and equal
    to the serial bundle fit within the certified accuracy (same seed, same noise)."""
    import math

    import cvxpy as cp

    import cvxdp
    from cvxdp.erm import ERMSettings

    rng = np.random.default_rng(5)
    X = rng.standard_t(3, size=(600, 3))
    y = X @ np.array([0.4, -0.3, 0.2]) + rng.standard_t(3, size=600)
    w = cp.Variable(3)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 2.0])
    kw = dict(epsilon=1.0, moment_k=4.0, G_k=3.0, random_state=0, diagnostics=True, algorithm="population")
    with pytest.warns(cvxdp.PrivacyLeakWarning):
        serial = cvxdp.PrivateProblem(model).solve({"x": X, "y": y}, erm=ERMSettings(method="bundle"), **kw)
    with pytest.warns(cvxdp.PrivacyLeakWarning):
        parts = cvxdp.PrivateProblem(model).solve({"x": X, "y": y}, executor=cvxdp.PartitionedExecutor(5),
                                                  **kw)
    assert all(s.certificate.method.startswith("bundle") and s.certificate.gap <= s.plan.alpha
               for s in parts.steps)
    assert [s.plan for s in parts.steps] == [s.plan for s in serial.steps]
    last = parts.steps[-1], serial.steps[-1]
    reach = (sum(math.sqrt(2 * s.certificate.gap / s.lam) for s in last)
             + 2 * last[0].plan.mechanism().snap_radius)
    assert float(np.linalg.norm(parts.w - serial.w)) <= reach
    assert parts.ledger.spent == serial.ledger.spent


def test_a_data_parallel_executor_refuses_a_solver_that_needs_every_example_before_any_charge():
    import cvxpy as cp

    import cvxdp
    from cvxdp.erm import ERMSettings

    w = cp.Variable(2)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 1.0])
    acc = cvxdp.BudgetAccountant(1.0)
    X = np.ones((50, 2))
    with pytest.raises(cvxdp.ParameterError, match="bundle"):
        cvxdp.PrivateProblem(model).solve({"x": X, "y": np.ones(50)}, epsilon=1.0, moment_k=4.0, G_k=2.0,
                                          executor=cvxdp.PartitionedExecutor(2), accountant=acc,
                                          erm=ERMSettings(method="adaptive-subgradient"))
    assert acc.spent == 0.0
