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
* at most ``connections_per_address_max`` connections per remote address, at most
  ``connections_per_prefix_max`` per /24 (IPv4) or /64 (IPv6) prefix, and the
  loopback network as a whole at most :data:`LOOPBACK_PREFIXES` prefixes' worth
  (:class:`SourceCounts`): one past a cap is closed at once, before any handler or
  hook sees it;
* every connection holds a slot of a ``ConnectionBudget`` (remoting/listener.py).

Each closure is logged through a :class:`RefusalLog`, at most
``REFUSAL_LOG_LINES_MAX`` lines per ``REFUSAL_LOG_INTERVAL_S``.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from dataclasses import dataclass

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
# One address is one host or one NAT, but whoever holds a subnet holds all of its
# addresses: a /24 or an IPv6 /64 (the smallest block a network hands out, and what a
# single host often gets) is one source. Twice the address cap, so a subnet with two
# NAT addresses each at its full cap, or 254 hosts with 32 client instances each, is
# served whole. One prefix then takes at most a seventh of a gateway's connection cap
# (57,088 with LimitNOFILE=65536; remoting/listener.py), under a third of a read
# front's (28,544): flooding a node takes several prefixes, each of them served.
CONNECTIONS_PER_PREFIX_MAX = 8192
CONNECTIONS_PER_PREFIX_MAX_ENV = "NAMESRV_CONNECTIONS_PER_PREFIX_MAX"
"""Environment variable: the prefix cap of every remoting server of the process."""
IPV4_PREFIX_BITS = 24
IPV6_PREFIX_BITS = 64
# Every address of 127.0.0.0/8 (and ::1) is this host, and any local user may connect
# from any of them: there a /24 costs nothing, so the whole loopback network is one
# more source, of two prefixes' worth. A full loopback /24 leaves the others room for
# the node's own processes and local tools; a local flood over many /24s stops there.
LOOPBACK_PREFIXES = 2
LOOPBACK_SOURCE = "the loopback network"
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

    def reset(self) -> None:
        """What was failing works again: the next line is written at once."""
        self._window_start_s = float("-inf")
        self._lines = 0


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


def configured_connections_per_prefix_max() -> int:
    """The prefix cap: ``NAMESRV_CONNECTIONS_PER_PREFIX_MAX`` when set, else
    :data:`CONNECTIONS_PER_PREFIX_MAX`; ValueError naming the variable when it is not a
    positive integer."""
    text = os.environ.get(CONNECTIONS_PER_PREFIX_MAX_ENV, "").strip()
    if not text:
        return CONNECTIONS_PER_PREFIX_MAX
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(
            f"{CONNECTIONS_PER_PREFIX_MAX_ENV} must be a positive integer, got {text!r}"
        )
    return value


@dataclass(frozen=True, slots=True)
class Source:
    """Where a connection comes from, at each level a cap applies to."""

    address: str
    """The peer's address (an IPv4-mapped IPv6 address as IPv4)."""
    prefix: str | None
    """Its /24 or /64, e.g. ``10.0.1.0/24``; None when the peer has no IP address (a
    Unix socket's)."""
    loopback: bool
    """True for 127.0.0.0/8 and ::1 (see :data:`LOOPBACK_PREFIXES`)."""


def source_of(host: str) -> Source:
    """The :class:`Source` of a peer at ``host`` (an IP address, scope id allowed; any
    other text is an address without a prefix)."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return Source(host, None, False)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    bits = IPV4_PREFIX_BITS if address.version == 4 else IPV6_PREFIX_BITS
    network = ipaddress.ip_network(f"{address}/{bits}", strict=False)
    text = str(address) if address.version == 4 else host
    return Source(text, str(network), address.is_loopback)


class SourceCounts:
    """The open connections of each remote address, prefix and of the loopback network,
    each within its cap (see the module docstring)."""

    __slots__ = ("_by_address", "_by_prefix", "_loopback", "per_address_max", "per_prefix_max")

    def __init__(self, per_address_max: int, per_prefix_max: int) -> None:
        """No connections yet; ValueError unless both caps are positive."""
        check_positive("connections_per_address_max", per_address_max)
        check_positive("connections_per_prefix_max", per_prefix_max)
        self.per_address_max = per_address_max
        self.per_prefix_max = per_prefix_max
        self._by_address: dict[str, int] = {}
        self._by_prefix: dict[str, int] = {}
        self._loopback = 0

    @property
    def loopback_max(self) -> int:
        """How many connections the loopback network may hold in all."""
        return self.per_prefix_max * LOOPBACK_PREFIXES

    def count(self, host: str) -> int:
        """How many open connections the address ``host`` holds."""
        return self._by_address.get(source_of(host).address, 0)

    def prefix_count(self, host: str) -> int:
        """How many open connections the prefix of ``host`` holds."""
        prefix = source_of(host).prefix
        return 0 if prefix is None else self._by_prefix.get(prefix, 0)

    def admit(self, source: Source) -> str | None:
        """Count one more connection of ``source``; when a cap refuses it, count
        nothing and say which (``10.0.1.0/24 already holds 8192 connections (the
        maximum per prefix)``)."""
        address_count = self._by_address.get(source.address, 0)
        if address_count >= self.per_address_max:
            return (
                f"{source.address} already holds {address_count} connections "
                "(the maximum per address)"
            )
        prefix = source.prefix
        if prefix is not None:
            prefix_count = self._by_prefix.get(prefix, 0)
            if prefix_count >= self.per_prefix_max:
                return f"{prefix} already holds {prefix_count} connections (the maximum per prefix)"
            if source.loopback and self._loopback >= self.loopback_max:
                return (
                    f"{LOOPBACK_SOURCE} already holds {self._loopback} connections (the "
                    f"maximum: {LOOPBACK_PREFIXES} prefixes' worth)"
                )
            self._by_prefix[prefix] = prefix_count + 1
            if source.loopback:
                self._loopback += 1
        self._by_address[source.address] = address_count + 1
        return None

    def release(self, source: Source) -> None:
        """Count one connection of ``source`` (admitted) less."""
        _decrement(self._by_address, source.address)
        if source.prefix is not None:
            _decrement(self._by_prefix, source.prefix)
            if source.loopback:
                self._loopback -= 1


def _decrement(counts: dict[str, int], key: str) -> None:
    count = counts.get(key, 0) - 1
    if count > 0:
        counts[key] = count
    else:
        counts.pop(key, None)
