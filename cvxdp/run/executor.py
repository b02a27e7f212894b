"""Where the independent groups of a phase run: in this process, or in a pool of worker processes.

An executor maps a picklable function over jobs and yields the results *in job order*, whatever
order they finish in.  The groups of one phase of Algorithm 1 read disjoint batches, share the
phase's public centre and draw from their own noise sources (spawned from the main source before
the phase); the ledger was charged from the plan before any of them runs.  So a worker holds no
state another needs: the run's output is the same function of the data and of the spawned sources
whether the groups run serially or in parallel (tested bit for bit under a seed).

Failures: a group that raises makes ``map`` raise that exception — the first failing group in job
order, as in a serial run — and nothing of the phase is released (the vote needs every candidate).
"""

from __future__ import annotations

import abc
import concurrent.futures
import contextlib
import multiprocessing
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from cvxdp._validation import positive_int
from cvxdp.error import ParameterError
from cvxdp.run.allocator import keep_temporaries_on_the_heap
from cvxdp.run.blas import fit_limit, limited_blas


class Executor(abc.ABC):
    """Runs ``fn`` on every job and yields the results in job order (a new backend subclasses this).

    The order is part of the contract: the majority vote of Algorithm 1 breaks ties by position, so
    results in completion order would let solve times pick the model.  A job that raises makes
    ``map`` raise, and a backend that runs jobs elsewhere (``remote``) must give them this
    process's floating-point error settings and bring their warnings back (as
    :class:`ProcessExecutor` does), or what a run prints would depend on where it ran — and its BLAS
    thread limit (:mod:`cvxdp.run.blas`), or workers sharing the cores would oversubscribe them.
    """

    #: Whether jobs run outside this process (then their noise sources must be independent objects).
    remote: bool = False
    #: Whether this backend runs the *oracle passes* over partitions of each batch (and the groups of
    #: Algorithm 1 at the driver, so that noise is drawn and the ledger kept only here).
    data_parallel: bool = False

    @abc.abstractmethod
    def map(self, fn: Callable, jobs: Iterable) -> Iterator: ...

    def place(self, fn: Callable, arguments: Iterable[tuple]) -> list:
        """``fn(*args)`` for each tuple, kept where later jobs of :meth:`map` can use it; returns the
        handles to pass in those jobs (here: the objects themselves)."""
        return [fn(*args) for args in arguments]

    def materialize(self, items: list) -> list:
        """Items usable as arguments of :meth:`place` and :meth:`map`: lazy objects (Dask's delayed,
        futures) computed here; anything else as it is."""
        out = []
        for item in items:
            if hasattr(item, "dask") and hasattr(item, "compute"):  # a Dask delayed object
                item = item.compute()
            elif hasattr(item, "result") and hasattr(item, "key"):  # a Dask future
                item = item.result()
            out.append(item)
        return out


#: One isolated job at a time per process: the warning filters and the BLAS limit are the process's, not a
#: thread's, so two jobs overlapping on a worker with several threads would swap their warnings and
#: limits (found by review).  Re-entrant, so a job that runs another in its own thread cannot deadlock.
_ISOLATION = threading.RLock()


@contextlib.contextmanager
def _isolated(errors: dict, threads: int | None) -> Iterator[list]:
    """The block runs as a worker job does: alone in its process, under the caller's numpy error settings
    and BLAS thread count (:mod:`cvxdp.run.blas`), its warnings recorded into the list it yields."""
    with _ISOLATION, np.errstate(**errors), limited_blas(threads), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def _run_isolated(fn: Callable, job, errors: dict, threads: int | None = None, tune: bool = False
                  ) -> tuple[object, list[tuple[type, str]]]:
    """``fn(job)`` in a worker, :func:`_isolated`, with its warnings (``tune``: the worker's allocator
    first, :mod:`cvxdp.run.allocator`)."""
    if tune:
        keep_temporaries_on_the_heap()
    with _isolated(errors, threads) as caught:
        result = fn(job)
    return result, [(w.category, str(w.message)) for w in caught]


class Placed:
    """What a task placed on a Dask worker keeps there: its result and the warnings it raised.

    The object is the partition's handle (its future); only ``caught`` travels to the driver, so the
    result is neither copied nor moved.  :func:`placed_value` unwraps it where a job reads it."""

    __slots__ = ("caught", "value")

    def __init__(self, value: object, caught: list[tuple[type, str]]) -> None:
        self.value, self.caught = value, caught


def placed_value(item: object) -> object:
    """The result a :class:`Placed` holds, or ``item`` itself."""
    return item.value if isinstance(item, Placed) else item


def _caught(placed: Placed) -> list[tuple[type, str]]:
    return placed.caught


def _place_isolated(fn: Callable, args: tuple, errors: dict, threads: int | None = None,
                    tune: bool = False) -> Placed:
    """``fn(*args)`` in a worker, :func:`_isolated`, kept there with its warnings (``tune``: as
    :func:`_run_isolated`)."""
    if tune:
        keep_temporaries_on_the_heap()
    with _isolated(errors, threads) as caught:
        result = fn(*(placed_value(a) for a in args))
    return Placed(result, [(w.category, str(w.message)) for w in caught])


class SerialExecutor(Executor):
    """The default: every job in this process, one after another."""

    remote = False

    def map(self, fn: Callable, jobs: Iterable) -> Iterator:
        for job in jobs:
            yield fn(job)

    def __repr__(self) -> str:
        return "SerialExecutor()"


class ProcessExecutor(Executor):
    """Jobs in a pool of ``workers`` processes (``concurrent.futures``).

    The pool starts on the first ``map`` and is kept for later phases and fits until :meth:`close`
    (or the end of a ``with`` block).  The ``spawn`` start method by default: a worker imports cvxdp
    afresh instead of inheriting this process's threads and locks.  The function and the jobs are
    pickled, so every job carries its own rows, plan, centre, ledger entries and noise source.
    """

    remote = True

    def __init__(self, workers: int = 2, start_method: str = "spawn") -> None:
        self.workers = positive_int("workers", workers)
        if start_method not in multiprocessing.get_all_start_methods():
            raise ParameterError(f"start_method must be one of {multiprocessing.get_all_start_methods()}, "
                                 f"got {start_method!r}.")
        self.start_method = start_method
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    def map(self, fn: Callable, jobs: Iterable) -> Iterator:
        jobs = list(jobs)
        if len(jobs) <= 1:  # nothing to overlap
            yield from (fn(job) for job in jobs)
            return
        if self._pool is None:
            context = multiprocessing.get_context(self.start_method)
            self._pool = concurrent.futures.ProcessPoolExecutor(self.workers, mp_context=context)
        errors = np.geterr()  # a fit runs with numpy's warnings off; so must its workers
        threads = fit_limit()  # and with the fit's BLAS limit (cvxdp.run.blas)
        futures = [self._pool.submit(_run_isolated, fn, job, errors, threads) for job in jobs]
        try:
            for future in futures:
                result, caught = future.result()
                for category, message in caught:  # re-issued here, under this process's filters
                    warnings.warn(message, category, stacklevel=2)
                yield result
        except BrokenProcessPool:
            self.close()  # a dead worker breaks the pool for good: the next map starts a new one
            raise
        finally:
            for future in futures:
                future.cancel()

    def close(self) -> None:
        """Shut the worker pool down (a later ``map`` starts a new one)."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ProcessExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def __repr__(self) -> str:
        return f"ProcessExecutor(workers={self.workers}, start_method={self.start_method!r})"


class PartitionedExecutor(Executor):
    """The data-parallel path of :class:`DaskExecutor` without a cluster: each batch split into
    ``partitions`` contiguous blocks whose oracle passes run here, one after another.

    The same release path as on Dask — partition sums reduced at the driver, the bundle solver —
    so the audit and the tests exercise it without starting workers; on one machine the serial
    default is faster.
    """

    remote = False
    data_parallel = True

    def __init__(self, partitions: int = 4) -> None:
        self.partitions = positive_int("partitions", partitions)

    def map(self, fn: Callable, jobs: Iterable) -> Iterator:
        for job in jobs:
            yield fn(job)

    def __repr__(self) -> str:
        return f"PartitionedExecutor(partitions={self.partitions})"


class DaskExecutor(Executor):
    """Oracle passes on a Dask cluster (``dask.distributed``; install ``cvxdp[dask]``).

    Data parallel: each batch's examples are split into ``partitions`` contiguous blocks (a public
    rule: sizes from ``m`` and the count only), each block's problem is built on a worker by a task
    (:meth:`place`), and every oracle pass of the certified solver runs one task per block that
    returns only sums (:mod:`cvxdp.erm.partitioned`), reduced at the driver.  The solver, the noise
    and the ledger stay at the driver; the groups of Algorithm 1 run there one after another.

    Failures: a worker lost mid-pass makes the scheduler re-run the pass (and, if needed, the
    block's build task, whose inputs it holds) on another worker; a pass is a deterministic
    function of its block and ``w``, so the re-run returns the same sums, and nothing is charged or
    drawn twice (charges precede the solve, noise follows it, both here).  A pass that still fails
    makes the fit raise before its release.

    Parameters
    ----------
    client:
        A ``distributed.Client``.
    partitions:
        Blocks per batch (default: the number of workers when the executor is made — public).
    tune_allocator:
        Raise each worker's glibc mmap threshold so a pass's temporary arrays are reused from the heap
        instead of mapped and unmapped every time (:mod:`cvxdp.run.allocator`: Dask's nanny freezes
        it at 128 KiB); once per worker process, and it stays set. ``False`` leaves workers alone.
    """

    remote = True
    data_parallel = True

    def __init__(self, client, partitions: int | None = None, tune_allocator: bool = True) -> None:
        try:
            from distributed import Client
        except ImportError as exc:  # pragma: no cover - the dask extra is part of the test extra
            raise ParameterError("DaskExecutor needs dask.distributed: pip install 'cvxdp[dask]'.") from exc
        if not isinstance(client, Client):
            raise ParameterError(f"client must be a distributed.Client, got {type(client).__name__}.")
        self.client = client
        workers = len(client.scheduler_info().get("workers", {})) or 1
        self.partitions = positive_int("partitions", workers if partitions is None else partitions)
        self.tune_allocator = bool(tune_allocator)

    def place(self, fn: Callable, arguments: Iterable[tuple]) -> list:
        """Futures of ``fn(*args)`` (as :class:`Placed`), computed and kept on the workers — under this
        process's numpy error settings, with their warnings brought back here (in argument order) once
        they are made, as :meth:`map` does for its jobs: what a fit prints does not depend on where its
        partitions live."""
        from distributed import wait

        errors, threads = np.geterr(), fit_limit()
        # the handles are futures of Placed objects (unwrapped where jobs read them): only the warnings
        # travel, so a partition is neither copied nor moved to take them out
        handles = [self.client.submit(_place_isolated, fn, args, errors, threads, self.tune_allocator,
                                      pure=False)
                   for args in arguments]
        notes = [self.client.submit(_caught, h, pure=False) for h in handles]
        wait(notes)
        for note in notes:  # in partition order, as a serial run: the first failure raises, after the
            for category, message in note.result():  # warnings of the partitions before it
                warnings.warn(message, category, stacklevel=2)
        return handles

    def materialize(self, items: list) -> list:
        """Delayed objects become futures computed on the cluster (never here); futures and plain
        objects are kept (a plain object is sent with the task that binds it)."""
        return [self.client.compute(item) if hasattr(item, "dask") and hasattr(item, "compute") else item
                for item in items]

    def map(self, fn: Callable, jobs: Iterable) -> Iterator:
        errors, threads = np.geterr(), fit_limit()
        futures = [self.client.submit(_run_isolated, fn, job, errors, threads, self.tune_allocator,
                                      pure=False) for job in jobs]
        try:
            for future in futures:
                result, caught = future.result()
                for category, message in caught:
                    warnings.warn(message, category, stacklevel=2)
                yield result
        finally:
            for future in futures:
                future.cancel()

    def __repr__(self) -> str:
        return f"DaskExecutor(partitions={self.partitions})"


def get_executor(executor: Executor | None) -> Executor:
    """``None`` → :class:`SerialExecutor`; an :class:`Executor` is used as given."""
    if executor is None:
        return SerialExecutor()
    if not isinstance(executor, Executor):
        raise ParameterError(f"executor must be a cvxdp Executor (SerialExecutor, ProcessExecutor, "
                             f"DaskExecutor, or a subclass) or None, got {type(executor).__name__}.")
    return executor


__all__ = ["DaskExecutor", "Executor", "PartitionedExecutor", "ProcessExecutor", "SerialExecutor",
           "get_executor"]
