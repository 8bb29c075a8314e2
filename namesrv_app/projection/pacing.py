"""The projection writer's share of a core: a CPU duty cycle kept inside a batch too.

The writer shares the gateway's interpreter lock with the event loop (route reads) and,
in raft mode, with the apply thread. :class:`DutyCycle` keeps it to :data:`DUTY_MAX` of
a core; :func:`keep_pace` lets the SQL and table-reading loops charge it between two
chunks without knowing about the writer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

DUTY_MAX = 0.1
"""The share of a core the writer may use. It earns this share in CPU time as wall time
passes (holding at most :data:`DUTY_FREE_S`); once it has spent more than it had, it
sleeps until the debt is paid, checked after every batch and inside one (between two
reads of the table and two chunks of rows), so over any stretch it averages at most this
share however its work is cut. The deltas arriving meanwhile merge into the next batch
(fewer, larger transactions), and the lag shows as ``namesrv_projection_lag_versions``.
Route answers never wait for the projection. Why a tenth: see docs/BENCHMARKS.md,
"Tables left out of the log, the leader's flush overlapped"."""
DUTY_FREE_S = 0.005
"""CPU time the writer may spend at once without being slowed down: the steady state
(a liveness batch a second) never waits. See docs/BENCHMARKS.md, "Reads first, the
writer's share held, fewer Raft messages"."""

_pacing = threading.local()
"""``pace``: the projection writer's pacing callback, set on its own thread."""


def pace_this_thread(pace: Callable[[], None]) -> None:
    """Make :func:`keep_pace` call ``pace`` on the calling thread (the writer's)."""
    _pacing.pace = pace


def keep_pace() -> None:
    """On a projection writer's thread, keep to its share (:meth:`DutyCycle.pace`);
    on any other thread (a caller writing a delta itself: tests, tools), nothing."""
    pace: Callable[[], None] | None = getattr(_pacing, "pace", None)
    if pace is not None:
        pace()


class DutyCycle:
    """The writer's CPU credit: earned over wall time, spent in thread CPU time."""

    def __init__(self) -> None:
        self._credit_s = DUTY_FREE_S
        self._credit_at = time.monotonic()
        self._charged_cpu_s = 0.0

    def charge_from_now(self) -> None:
        """Start charging from the thread's CPU time now (what came before is free)."""
        self._charged_cpu_s = time.thread_time()

    def pace(self, *, awaited: bool) -> None:
        """Charge the CPU this thread spent since the last charge against the writer's
        share (:data:`DUTY_MAX`) and sleep off what it spent beyond its credit.

        Called at the end of a batch and inside one, between two reads of the table and
        two chunks of rows (see docs/BENCHMARKS.md, "Shorter Raft ticks in the
        large-table phase"). While someone waits (``awaited``: a flush or a stop),
        nothing is slowed down and no debt is kept: catching up is what was asked.
        """
        cpu_s = time.thread_time()
        spent_s, self._charged_cpu_s = cpu_s - self._charged_cpu_s, cpu_s
        now = time.monotonic()
        earned = (now - self._credit_at) * DUTY_MAX
        credit = min(DUTY_FREE_S, self._credit_s + earned) - spent_s
        if awaited:
            credit = max(credit, 0.0)
        elif credit < 0:
            time.sleep(-credit / DUTY_MAX)
            credit = 0.0
            self._charged_cpu_s = time.thread_time()
        self._credit_s = credit
        self._credit_at = time.monotonic()
