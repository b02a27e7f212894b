"""cvxdp.run.allocator: the mmap threshold is raised once per process, where the C library is glibc."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's")
def test_the_threshold_is_set_once_under_dasks_trim_setting():
    code = ("from cvxdp.run import allocator as a\n"
            "first = a.keep_temporaries_on_the_heap()\n"
            "a.keep_temporaries_on_the_heap()\n"
            "print(first, a._DONE)\n")
    env = dict(os.environ, MALLOC_TRIM_THRESHOLD_="65536")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]
