"""What one call costs the thread that makes it, for the tests that bound what a hostile
frame or body may cost before anything is authenticated."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable


def least_cpu_s(call: Callable[[], object], times: int = 2) -> float:
    """The least CPU seconds this thread spends in one of ``times`` calls of ``call``.

    Other threads of the test process (a test's leftover background thread) are not
    counted, and the garbage collector is held off: a full collection walks the whole
    process's heap, which earlier tests fill, not the decoder's work (one run counted
    0.31 s for a 10 ms decode)."""
    spent = []
    collecting = gc.isenabled()
    gc.disable()
    try:
        for _ in range(times):
            started_s = time.thread_time()
            call()
            spent.append(time.thread_time() - started_s)
    finally:
        if collecting:
            gc.enable()
    return min(spent)
