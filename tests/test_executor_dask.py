"""DaskExecutor on a real LocalCluster (2 worker processes on loopback), started and closed here.

The rows are bound, counted for the tail histogram, split into batches and passed over on the workers;
the solver, the noise and the ledger stay at the driver.  Checked: the released point equals the serial
run's (same seed, same batches) within the certified accuracy, for data sent from here, made on the
workers or given as Dask arrays; and a worker killed in the middle of a pass is re-run by Dask without a
second charge or a second draw of noise.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import warnings

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.erm import ERMSettings
from cvxdp.error import ParameterError
from cvxdp.run.executor import placed_value

distributed = pytest.importorskip("distributed")

pytestmark = [pytest.mark.filterwarnings("ignore::cvxdp.error.PrivacyLeakWarning"),
              pytest.mark.filterwarnings("ignore::cvxdp.error.UtilityWarning")]


@pytest.fixture(scope="module")
def client():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           host="127.0.0.1", dashboard_address=None)
        c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _lad(n: int, d: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(3, size=(n, d))
    y = X @ (rng.normal(size=d) / 2) + rng.standard_t(3, size=n)
    w = cp.Variable(d)
    return cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 2.0]), {"x": X, "y": y}


def _fit(model, data, **kw):
    return cvxdp.PrivateProblem(model).solve(data, epsilon=1.0, moment_k=4.0, G_k=3.0, random_state=0,
                                             diagnostics=True, **kw)


def _within_certified_accuracy(r1, r2) -> None:
    """Same seed, same noise: the released points differ by at most the distance of the certified
    minimizers, ``sqrt(2 gap₁/λ) + sqrt(2 gap₂/λ)`` per round (strong convexity), plus a grid step."""
    for s1, s2 in zip(r1.steps, r2.steps, strict=True):
        assert s1.plan == s2.plan
    last1, last2 = r1.steps[-1], r2.steps[-1]
    reach = sum(math.sqrt(2 * s.certificate.gap / s.lam) for s in (last1, last2))
    assert float(np.linalg.norm(r1.w - r2.w)) <= reach + 2 * last1.plan.mechanism().snap_radius + 1e-12


@pytest.mark.parametrize("algorithm", ["output-perturbation", "population"])
def test_dask_fit_equals_the_serial_fit(client, algorithm):
    model, data = _lad(3000)
    serial = _fit(model, data, algorithm=algorithm, erm=ERMSettings(method="bundle"))
    dask = _fit(model, data, algorithm=algorithm, executor=cvxdp.DaskExecutor(client))
    _within_certified_accuracy(serial, dask)
    assert [s.plan for s in dask.steps] == [s.plan for s in serial.steps]
    assert all(s.certificate.method.startswith("bundle") for s in dask.steps)
    if algorithm == "output-perturbation":  # 3000 rows: the smoothed start ran, on the workers' sums
        assert all("smoothed Newton point" in r.steps[0].certificate.method for r in (serial, dask))
    assert dask.ledger.spent == serial.ledger.spent <= 1.0
    assert len(dask.ledger.entries) == len(serial.ledger.entries)


def test_partitioning_does_not_change_the_certificate(client):
    """Any number of partitions: every release certified to its α, the same plan and the same ledger."""
    model, data = _lad(2000, seed=1)
    runs = [_fit(model, data, algorithm="output-perturbation",
                 executor=cvxdp.DaskExecutor(client, partitions=p)) for p in (1, 3, 7)]
    for r in runs:
        assert all(s.certificate.gap <= s.plan.alpha for s in r.steps)
    for r in runs[1:]:
        _within_certified_accuracy(runs[0], r)


class _KillingExecutor(cvxdp.DaskExecutor):
    """Kills the worker that runs the first task of its ``kill_at``-th map (an oracle pass of the first
    release, for the fit below): the driver leaves a flag file, and the task that finds it removes it
    and kills its own process — so Dask must re-run that task elsewhere."""

    def __init__(self, client, flag: str, kill_at: int) -> None:
        super().__init__(client)
        self.flag, self.kill_at, self.calls = flag, kill_at, 0

    def map(self, fn, jobs):
        self.calls += 1
        if self.calls == self.kill_at:
            open(self.flag, "w").close()
        flag = self.flag
        return super().map(_die_once(fn, flag), jobs)


def _die_once(fn, flag):
    def run(job):
        if os.path.exists(flag):
            os.remove(flag)
            os.kill(os.getpid(), signal.SIGKILL)
        return fn(job)
    return run


cloudpickle = pytest.importorskip("cloudpickle")
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers do not import this module


def test_a_worker_killed_mid_fit_is_retried_without_a_second_charge_or_draw(client, tmp_path):
    model, data = _lad(20000, seed=2)
    reference = _fit(model, data, algorithm="population", executor=cvxdp.DaskExecutor(client))
    flag = str(tmp_path / "kill")
    killer = _KillingExecutor(client, flag, kill_at=12)
    fit = _fit(model, data, algorithm="population", executor=killer)
    assert killer.calls > 12 and not os.path.exists(flag)  # the flag was found: a worker died mid-pass
    # the same releases from the same charges: nothing charged twice, no extra noise drawn
    assert len(fit.ledger.entries) == len(reference.ledger.entries)
    assert fit.ledger.spent == reference.ledger.spent <= 1.0
    assert np.array_equal(fit.w, reference.w)  # a re-run pass returns the same sums
    client.wait_for_workers(2, timeout=60)


def _make_partition(i: int, rows: int, d: int) -> dict:
    """Rows generated on a worker (never at the driver)."""
    rng = np.random.default_rng(100 + i)
    X = rng.standard_t(3, size=(rows, d))
    return {"x": X, "y": X @ np.full(d, 0.3) + rng.standard_t(3, size=rows)}


def test_partitions_made_on_the_workers_and_dask_arrays_fit_like_the_serial_data(client):
    """Data given as futures made on the workers, or as Dask arrays: the fit equals the serial fit of the
    same rows within the certified accuracy (same seed, same batches: the shuffle is public and row-wise)."""
    da = pytest.importorskip("dask.array")
    d = 3
    futures = [client.submit(_make_partition, i, 700, d, pure=False) for i in range(4)]
    local = [_make_partition(i, 700, d) for i in range(4)]
    data = {k: np.concatenate([p[k] for p in local]) for k in ("x", "y")}
    w = cp.Variable(d)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 2.0])
    serial = _fit(model, data, algorithm="population")
    from_futures = _fit(model, futures, algorithm="population", executor=cvxdp.DaskExecutor(client))
    arrays = {"x": da.from_array(data["x"], chunks=(900, d)), "y": da.from_array(data["y"], chunks=900)}
    from_arrays = _fit(model, arrays, algorithm="population", executor=cvxdp.DaskExecutor(client))
    for run in (from_futures, from_arrays):
        _within_certified_accuracy(serial, run)
        assert run.ledger.spent == serial.ledger.spent


def _overflow_then_warn(x: float) -> float:
    """A placed task: a numpy overflow (silent under the caller's ``errstate``) and a warning of its own."""
    value = float(np.float64(x) * np.float64(x))
    warnings.warn(f"placed {x:g}", UserWarning, stacklevel=1)
    return value


def test_placed_tasks_run_under_the_drivers_error_settings_and_bring_their_warnings_back(client):
    """Partitions made on the workers (``place``) behave as if made here: numpy's error settings are the
    driver's (an overflow is silent under ``errstate(all="ignore")`` and raises under ``"raise"``), and
    their warnings reach the driver's filters, in order — none is printed only in a worker's log."""
    ex = cvxdp.DaskExecutor(client)
    with np.errstate(all="ignore"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handles = ex.place(_overflow_then_warn, [(1e200,), (2.0,)])
    assert [str(w.message) for w in caught] == ["placed 1e+200", "placed 2"]
    assert all(w.category is UserWarning for w in caught)
    assert [placed_value(h) for h in client.gather(handles)] == [math.inf, 4.0]
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        ex.place(_overflow_then_warn, [(1e200,)])


def _warn_late(tag: int) -> int:
    """A placed task that records a warning of its own after the other thread has started its own."""
    import time

    time.sleep(0.2)
    warnings.warn(f"task {tag}", UserWarning, stacklevel=1)
    return tag


def test_isolated_tasks_on_a_worker_with_two_threads_keep_their_own_warnings():
    """Warning filters are the process's, not a thread's: two tasks overlapping on one worker would swap or
    lose each other's warnings (found by review), so isolated tasks take turns in a process — every
    warning comes back once, in partition order, whatever the threads."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                                           host="127.0.0.1", dashboard_address=None)
        two_threads = distributed.Client(cluster)
    try:
        ex = cvxdp.DaskExecutor(two_threads)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            handles = ex.place(_warn_late, [(i,) for i in range(4)])
        assert [str(w.message) for w in caught] == [f"task {i}" for i in range(4)]
        assert [placed_value(h) for h in two_threads.gather(handles)] == [0, 1, 2, 3]
    finally:
        two_threads.close()
        cluster.close()


def test_dask_executor_refuses_what_is_not_a_client():
    with pytest.raises(ParameterError, match=r"distributed\.Client"):
        cvxdp.DaskExecutor("tcp://127.0.0.1:8786")


def test_sorting_on_the_cluster_releases_each_unsorted_partition(client):
    """``Partitions.sort_by`` on a real cluster: no worker keeps an unsorted partition once its sorted copy
    is made — already while the sort is still running (the driver keeps no future of it beyond the task
    it was handed to; the scheduler keeps only its record, for lineage), not only after it returns: on a
    worker holding many partitions, the unsorted forms alive until the last sort set the peak memory.
    The sorted partitions hold every row."""
    import time

    from cvxdp.privacy.random import SeededRandom
    from cvxdp.run.partitions import Partitions
    from cvxdp.run.shuffle import PublicShuffle

    def in_memory(keys, dask_scheduler=None):  # the keys whose results some worker keeps
        return sorted(k for k in keys if k in dask_scheduler.tasks and dask_scheduler.tasks[k].who_has)

    def kept_after(keys, seconds=30.0):  # the scheduler releases keys asynchronously
        deadline = time.monotonic() + seconds
        while client.run_on_scheduler(in_memory, keys) and time.monotonic() < deadline:
            time.sleep(0.05)
        return client.run_on_scheduler(in_memory, keys)

    during: list[list] = []

    class Watching(cvxdp.DaskExecutor):
        def place(self, fn, arguments):
            keys = []

            def noted(arguments=arguments):
                for args in arguments:
                    if hasattr(args[0], "key"):  # its key only: no future of the partition kept here
                        keys.append(args[0].key)
                    yield args

            handles = super().place(fn, noted())
            if fn.__name__ == "partition_sorted":  # the sorted copies exist; sort_by has not returned
                during.append(kept_after(keys))
            return handles

    model, data = _lad(1200, seed=5)
    parts = Partitions.from_data(model, data, Watching(client, partitions=4))
    unsorted = [h.key for h in parts.handles]
    assert len(unsorted) == 4 and client.run_on_scheduler(in_memory, unsorted) == sorted(unsorted)
    parts.sort_by(PublicShuffle.draw(SeededRandom(5), 1200))
    assert during == [[]]
    assert sum(parts.map(lambda part: part.m)) == 1200


def test_workers_keep_a_fits_temporaries_on_the_heap_unless_told_not_to(client):
    """Dask's nanny sets MALLOC_TRIM_THRESHOLD_, which freezes glibc's mmap threshold at 128 KiB; the
    executor raises it once per worker (cvxdp.run.allocator) — or leaves the workers alone."""
    from cvxdp.run import allocator

    model, data = _lad(600, seed=2)
    state = lambda: allocator._DONE  # noqa: E731 - runs on each worker
    untouched = cvxdp.DaskExecutor(client, tune_allocator=False)
    before = client.run(state)
    _fit(model, data, algorithm="output-perturbation", executor=untouched)
    assert client.run(state) == before  # nothing set by a fit that was told not to
    _fit(model, data, algorithm="output-perturbation", executor=cvxdp.DaskExecutor(client))
    import sys
    assert set(client.run(state).values()) == ({True} if sys.platform.startswith("linux") else {False})
