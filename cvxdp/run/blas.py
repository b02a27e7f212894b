"""How many threads the BLAS library may use while cvxdp fits.

cvxdp's matrix products are tall and thin — ``m × d`` rows against one or ``d`` vectors, the bundle
master's ``N × d`` pieces — where a second BLAS thread buys little and, when the cores are shared (a
Dask cluster's workers on the same machine, a process pool, any other work), costs a great deal:
OpenBLAS's threads wait for one another on every call.  Measured on the 2-core benchmark machine with
one other busy process: the bundle master's interior-point method 10–30× slower with two threads than
with one, a hinge fit on 10⁵ rows 2–3× slower (``benchmarks/bench_scale.py`` runs its fits with the
default).  So a fit limits BLAS to :data:`DEFAULT_THREADS` thread for its duration
(:class:`~cvxdp.erm.solver.ERMSettings` ``blas_threads``; ``None`` leaves the process's setting), through
``threadpoolctl``, and the executors give their workers the limit in force at the driver, as they give
them its numpy error settings.  Results do not depend on it beyond the last bits of BLAS reductions in
solver proposals, which every certificate re-evaluates.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

#: BLAS threads during a fit, unless ``ERMSettings(blas_threads=...)`` says otherwise.
DEFAULT_THREADS = 1


def blas_threads() -> int | None:
    """The largest thread count of the BLAS libraries loaded in this process (``None`` if none is)."""
    from threadpoolctl import threadpool_info

    counts = [info["num_threads"] for info in threadpool_info() if info.get("user_api") == "blas"]
    return max(counts) if counts else None


@contextlib.contextmanager
def limited_blas(threads: int | None) -> Iterator[None]:
    """BLAS limited to ``threads`` threads inside the block (``None``: unchanged), restored after."""
    if threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=int(threads), user_api="blas"):
        yield


__all__ = ["DEFAULT_THREADS", "blas_threads", "limited_blas"]
