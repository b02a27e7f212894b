"""How many threads the BLAS library may use while cvxdp fits.

cvxdp's matrix products are tall and thin — ``m × d`` rows against one or ``d`` vectors, the bundle
master's ``N × d`` pieces — where a second BLAS thread buys little and, when the cores are shared (a
Dask cluster's workers on the same machine, a process pool, any other work), costs a great deal:
OpenBLAS's threads wait for one another on every call.  Measured on the 2-core benchmark machine with
one other busy process: the bundle master's interior-point method 10–30× slower with two threads than
with one, a hinge fit on 10⁵ rows 2–3× slower (``benchmarks/bench_scale.py`` runs its fits with the
default).  So a fit limits BLAS to :data:`DEFAULT_THREADS` thread for its duration
(:class:`~cvxdp.erm.solver.ERMSettings` ``blas_threads``; ``None`` leaves the process's setting), through
``threadpoolctl``, and the executors give their workers the fit's limit (none if the fit set none), as
they give them its numpy error settings.  Results do not depend on it beyond the last bits of BLAS
reductions in solver proposals, which every certificate re-evaluates.
"""

from __future__ import annotations

import contextlib
import contextvars
import warnings
from collections.abc import Iterator

#: BLAS threads during a fit, unless ``ERMSettings(blas_threads=...)`` says otherwise.
DEFAULT_THREADS = 1

#: The limit of the fit running in this context (``None``: none set), which the executors give workers.
_FIT_LIMIT: contextvars.ContextVar[int | None] = contextvars.ContextVar("cvxdp_blas_threads", default=None)
#: This process's threadpoolctl controller: its scan of the loaded libraries is made once, not per task.
_CONTROLLER = None


def _controller():
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        with warnings.catch_warnings():  # e.g. its note on two OpenMP runtimes: not cvxdp's to print
            warnings.simplefilter("ignore")
            _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


def blas_threads() -> int | None:
    """The largest thread count of the BLAS libraries loaded in this process (``None`` if none is)."""
    counts = [info["num_threads"] for info in _controller().info() if info.get("user_api") == "blas"]
    return max(counts) if counts else None


def fit_limit() -> int | None:
    """The BLAS limit of the fit running in this context, for its workers (``None``: leave them alone)."""
    return _FIT_LIMIT.get()


@contextlib.contextmanager
def limited_blas(threads: int | None) -> Iterator[None]:
    """BLAS limited to ``threads`` threads inside the block (``None``: unchanged), restored after; the
    limit is also what :func:`fit_limit` reports inside it."""
    if threads is None:
        yield
        return
    token = _FIT_LIMIT.set(int(threads))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            limiter = _controller().limit(limits=int(threads), user_api="blas")
        try:
            yield
        finally:
            limiter.restore_original_limits()
    finally:
        _FIT_LIMIT.reset(token)


__all__ = ["DEFAULT_THREADS", "blas_threads", "fit_limit", "limited_blas"]
