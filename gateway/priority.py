"""The gateway's CPU priority below its read front's (nice steps).

With a read front, the gateway lowers its own priority once the front is up, so that when
every core is busy route reads (the front) get the larger share and registrations and
Raft (the gateway) still get theirs. The node's settings (node/config.py,
namesrv_app/conf.py) and ``run_gateway --below-front-nice`` read the bounds here.
"""

from __future__ import annotations

import contextlib
import os
import sys

from tools.process_facts import thread_ids

BELOW_FRONT_NICE = 5
"""Nice steps a gateway runs below its read front by default (see lower_priority):
with every core busy the kernel then gives the front about three times the gateway's
share. Measured on the storm bench (docs/BENCHMARKS.md, "registration storm")."""
NICE_STEPS_MAX = 19


def lower_priority(steps: int) -> int:
    """Raise this process's nice value by ``steps`` (lower its CPU priority), thread
    by thread; the number of threads changed. Threads started later inherit it from
    the thread that starts them.

    Linux's nice value belongs to each thread, so every thread of the process is set;
    elsewhere nothing is changed. Raising it needs no privilege.
    """
    if steps <= 0 or not sys.platform.startswith("linux"):
        return 0
    changed = 0
    for tid in thread_ids(os.getpid()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            now = os.getpriority(os.PRIO_PROCESS, tid)
            os.setpriority(os.PRIO_PROCESS, tid, min(NICE_STEPS_MAX, now + steps))
            changed += 1
    return changed
