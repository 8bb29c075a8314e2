"""What one peer, and all peers together, may hold of a remoting server, and the log
of the peers refused or cut for passing it.

Netty leaves these limits to the operating system; here they keep hostile peers from
taking the memory or the connections of everyone else (docs/SECURITY.md, "Hostile
clients"):

* the bytes held in unfinished frames, summed over every connection, stay within
  ``unfinished_frames_bytes_max`` (:class:`UnfinishedFrameBudget`): the connection
  whose read would push the sum past it is closed, its bytes released;
* a frame, once started, must be complete within ``frame_deadline_s`` (time the
  server itself is not reading does not count), else its connection is closed: a
  peer dripping one byte a second cannot keep a buffer forever;
* at most ``connections_per_address_max`` connections per remote address
  (:class:`AddressCounts`): one past it is closed at once, before any handler or
  hook sees it;
* every connection holds a slot of a ``ConnectionBudget`` (remoting/listener.py).

Each closure is logged through a :class:`RefusalLog`, at most
``REFUSAL_LOG_LINES_MAX`` lines per ``REFUSAL_LOG_INTERVAL_S``.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

IDLE_TIMEOUT_S = 120.0
READ_HIGH_WATER_BYTES = 4 * 1024 * 1024
MAX_INFLIGHT_PER_CONNECTION = 1024
# Four maximum-size (16 MiB) frames arriving at once fit; real requests are far
# smaller (a register of thousands of topics is a few MiB). See docs/SECURITY.md,
# "Hostile clients", for what an unbounded sum cost.
UNFINISHED_FRAMES_BYTES_MAX = 64 * 1024 * 1024
# Longer than any RocketMQ client waits for its own answer (a broker's register
# times out after 24 s, other requests after 3 s), so a frame still unfinished
# then is useless to its sender; a 16 MiB frame needs about 4.5 Mbit/s to make it.
FRAME_DEADLINE_S = 30.0
# Each RocketMQ client instance or broker holds one channel per NameServer, so
# thousands from one address is a whole fleet behind a NAT. Twice the 2000 idle
# loopback connections tests/integration/test_bad_input.py holds against one
# gateway; the route-query bench opens 2 x --connections (32 by default).
CONNECTIONS_PER_ADDRESS_MAX = 4096
# Closures for the limits above are logged at most this many lines per interval;
# a flood of them (peers reconnecting in a loop) must not fill the disk.
REFUSAL_LOG_LINES_MAX = 10
REFUSAL_LOG_INTERVAL_S = 10.0


def check_positive(name: str, value: float) -> None:
    """ValueError naming ``name`` unless ``value`` is positive."""
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")


class RefusalLog:
    """Warnings about refused or cut peers, at most ``lines_max`` per ``interval_s``.

    Lines past the allowance are counted, not written; the next line written
    says how many were left out, so the log stays honest about the flood.
    """

    def __init__(
        self,
        lines_max: int = REFUSAL_LOG_LINES_MAX,
        interval_s: float = REFUSAL_LOG_INTERVAL_S,
        logger: logging.Logger | None = None,
    ) -> None:
        """A log allowing ``lines_max`` lines in each window of ``interval_s``, written
        to ``logger`` (this module's by default)."""
        self.lines_max = lines_max
        self.interval_s = interval_s
        self._log = log if logger is None else logger
        self._window_start_s = float("-inf")
        self._lines = 0
        self._suppressed = 0

    def warning(self, now_s: float, message: str, *args: object) -> bool:
        """Log ``message % args`` unless this window's allowance is spent; True if logged."""
        if now_s - self._window_start_s >= self.interval_s:
            self._window_start_s = now_s
            self._lines = 0
        if self._lines >= self.lines_max:
            self._suppressed += 1
            return False
        self._lines += 1
        if self._suppressed:
            message += " (%d similar lines left out)"
            args = (*args, self._suppressed)
            self._suppressed = 0
        self._log.warning(message, *args)
        return True


class UnfinishedFrameBudget:
    """The bytes of unfinished frames held over all of a server's connections,
    kept within ``bytes_max``."""

    __slots__ = ("bytes_max", "held_bytes")

    def __init__(self, bytes_max: int) -> None:
        """An empty budget of ``bytes_max``; ValueError unless it is positive."""
        check_positive("unfinished_frames_bytes_max", bytes_max)
        self.bytes_max = bytes_max
        self.held_bytes = 0

    def reserve(self, delta_bytes: int) -> bool:
        """Add ``delta_bytes`` (negative: a release) to the bytes held.

        False, changing nothing, when a growth would pass the budget.
        """
        total_bytes = self.held_bytes + delta_bytes
        if delta_bytes > 0 and total_bytes > self.bytes_max:
            return False
        self.held_bytes = total_bytes
        return True


class AddressCounts:
    """The open connections of each remote address, at most ``per_address_max`` each."""

    __slots__ = ("_by_host", "per_address_max")

    def __init__(self, per_address_max: int) -> None:
        """No connections yet; ValueError unless ``per_address_max`` is positive."""
        check_positive("connections_per_address_max", per_address_max)
        self.per_address_max = per_address_max
        self._by_host: dict[str, int] = {}

    def count(self, host: str) -> int:
        """How many open connections ``host`` holds."""
        return self._by_host.get(host, 0)

    def add(self, host: str) -> bool:
        """Count one more connection of ``host``; False, counting nothing, at the cap."""
        count = self._by_host.get(host, 0)
        if count >= self.per_address_max:
            return False
        self._by_host[host] = count + 1
        return True

    def remove(self, host: str) -> None:
        """Count one connection of ``host`` less."""
        count = self._by_host.get(host, 0) - 1
        if count > 0:
            self._by_host[host] = count
        else:
            self._by_host.pop(host, None)
