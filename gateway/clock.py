"""Clocks: services stamp ``now_ms`` from one of these, never from ``time`` directly.

Apply never reads a clock (commands carry the time), so only the proposing
side needs one; injecting it lets tests move time by hand.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """A source of wall-clock milliseconds."""

    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch."""


class SystemClock:
    """The machine's wall clock (what RocketMQ's ``System.currentTimeMillis`` reads).

    ``offset_ms`` shifts it: experiments give one node a fast or slow clock
    (``NAMESRV_CLOCK_OFFSET_MS``, passed in by the process that owns the clock).
    """

    def __init__(self, offset_ms: int = 0) -> None:
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch, from ``time.time``, plus the offset."""
        return time.time_ns() // 1_000_000 + self.offset_ms


class ManualClock:
    """A clock that moves only when told to: for tests and simulations."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        """The current manual time."""
        with self._lock:
            return self._now_ms

    def advance(self, delta_ms: int) -> int:
        """Move time forward by ``delta_ms`` (never backwards) and return the new time."""
        if delta_ms < 0:
            raise ValueError("a manual clock never goes backwards")
        with self._lock:
            self._now_ms += delta_ms
            return self._now_ms
