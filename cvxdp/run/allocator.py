"""Where a Dask worker's C allocator puts a fit's temporary arrays.

A certified oracle pass over a partition makes dozens of temporary arrays the size of a column of
the partition (2.5·10⁵ rows: 2 MB each).  glibc serves a block above its *mmap threshold* with a
fresh ``mmap`` — zero-filled page by page on first touch — and returns it with ``munmap`` when numpy
frees it.  By default the threshold rises, as large blocks are freed, up to 32 MiB, so a pass's
temporaries soon come from the heap and are reused.  Dask's nanny starts its workers with
``MALLOC_TRIM_THRESHOLD_`` set (to return freed memory to the system promptly), and setting any such
tunable freezes the threshold at 128 KiB: every temporary is then mapped, faulted in and unmapped
again, pass after pass.  Measured once on the 2-core benchmark machine (a one-off script, not a
benchmark): one certified LAD pass over 2.5·10⁵ rows at d = 20 in a plain process took 0.69 s with
the defaults, 0.91 s with Dask's setting and 0.60 s with it and the threshold at 32 MiB; private
fits of 10⁶ rows on a 2-worker LocalCluster, same bits, untuned vs tuned: LAD 54 and 77 s vs 35 and
35 s, hinge 52, 77 and 52 s vs 52, 52 and 40 s (a noisy machine); ``benchmarks/bench_scale.py``
measures the fits.

:func:`keep_temporaries_on_the_heap` sets the threshold to 32 MiB (glibc's own ceiling) once per
worker process, through ``mallopt``; the trim threshold is left as Dask set it.  Larger blocks (a
partition's ``m × d`` features) are still mapped.  It changes no result — only where memory comes
from — and is a no-op where the C library is not glibc.  ``DaskExecutor(tune_allocator=False)``
leaves the workers as they are.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

#: glibc's ``M_MMAP_THRESHOLD`` parameter of ``mallopt``.
M_MMAP_THRESHOLD = -3
#: The threshold set: glibc's ceiling for its own dynamic threshold on 64-bit systems.
MMAP_THRESHOLD = 32 * 2**20

_DONE: bool | None = None


def keep_temporaries_on_the_heap() -> bool:
    """Raise this process's mmap threshold to :data:`MMAP_THRESHOLD`, once; ``True`` if it was set."""
    global _DONE
    if _DONE is None:
        _DONE = False
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                _DONE = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
            except (OSError, AttributeError):  # not glibc (musl has no mallopt): nothing to tune
                _DONE = False
    return _DONE


__all__ = ["MMAP_THRESHOLD", "keep_temporaries_on_the_heap"]
