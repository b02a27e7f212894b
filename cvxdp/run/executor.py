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

import concurrent.futures
import multiprocessing
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, runtime_checkable

from cvxdp._validation import positive_int
from cvxdp.error import ParameterError


@runtime_checkable
class Executor(Protocol):
    """Runs ``fn`` on every job and yields the results in job order."""

    #: Whether jobs run outside this process (then their noise sources must be independent objects).
    remote: bool

    def map(self, fn: Callable, jobs: Iterable) -> Iterator: ...


class SerialExecutor:
    """The default: every job in this process, one after another."""

    remote = False

    def map(self, fn: Callable, jobs: Iterable) -> Iterator:
        for job in jobs:
            yield fn(job)

    def __repr__(self) -> str:
        return "SerialExecutor()"


class ProcessExecutor:
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
        futures = [self._pool.submit(fn, job) for job in jobs]
        try:
            for future in futures:
                yield future.result()
        finally:
            for future in futures:
                future.cancel()

    def close(self) -> None:
        """Shut the worker pool down (a later ``map`` starts a new one)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

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


def get_executor(executor: Executor | None) -> Executor:
    """``None`` → :class:`SerialExecutor`; an object with ``map`` and ``remote`` is used as given."""
    if executor is None:
        return SerialExecutor()
    if not isinstance(executor, Executor):
        raise ParameterError(f"executor must be a cvxdp executor (SerialExecutor, ProcessExecutor) or "
                             f"None, got {type(executor).__name__}.")
    return executor


__all__ = ["Executor", "ProcessExecutor", "SerialExecutor", "get_executor"]
