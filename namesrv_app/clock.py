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

    ``offset_ms`` shifts it; when not given it is ``NAMESRV['CLOCK_OFFSET_MS']``
    (env ``NAMESRV_CLOCK_OFFSET_MS``, 0 by default), which experiments use to give
    one node a fast or slow clock.
    """

    def __init__(self, offset_ms: int | None = None) -> None:
        self.offset_ms = offset_ms if offset_ms is not None else configured_offset_ms()

    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch, from ``time.time``, plus the offset."""
        return time.time_ns() // 1_000_000 + self.offset_ms


def configured_offset_ms() -> int:
    """The clock offset from settings, or 0 where Django settings are not configured."""
    from django.conf import settings

    if not settings.configured:
        return 0
    return int(getattr(settings, "NAMESRV", {}).get("CLOCK_OFFSET_MS", 0))


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
