"""Free listening ports that a client socket cannot steal.

``bind(("127.0.0.1", 0))`` hands out a port from the kernel's ephemeral range, and
every outgoing connection takes its source port from that same range. Between
probing such a port and the real server binding it, a client connection elsewhere
on the machine may grab it ("cannot bind raft port ..."). Ports below the
ephemeral range are never handed to client sockets, so a free one stays free until
someone binds it on purpose.

Processes that pick ports at the same time without talking to each other (the test
suite's workers, each starting clusters) may each be given a slice of that span with
``NAMESRV_PORT_SHARE=K/N`` (the K-th of N equal slices, from 0): two picks in different
slices can never meet, even between one's probe and its server's bind. Subprocesses
inherit the variable, so a cluster a worker launches picks in the worker's slice.
"""

from __future__ import annotations

import os
import random
import socket
import threading
from collections.abc import Iterable
from pathlib import Path

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LISTEN_PORT_SPAN = 12_000
"""How many ports below the ephemeral range are candidates."""
LISTEN_PORT_FLOOR = 10_000
ATTEMPTS_MAX = 500
PORT_SHARE_ENV = "NAMESRV_PORT_SHARE"


def listen_port_range() -> tuple[int, int]:
    """The candidate ports: the span just below the ephemeral range (Linux default 32768)."""
    try:
        ephemeral_low = int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32_768
    high = ephemeral_low - 1
    low = max(LISTEN_PORT_FLOOR, high - LISTEN_PORT_SPAN)
    share = os.environ.get(PORT_SHARE_ENV)
    if not share:
        return low, high
    index, count = _parse_share(share)
    width = (high - low + 1) // count
    return low + index * width, low + (index + 1) * width - 1


def _parse_share(share: str) -> tuple[int, int]:
    """``K/N`` as (K, N), with 0 <= K < N; a clear error for anything else."""
    index_text, _, count_text = share.partition("/")
    try:
        index, count = int(index_text), int(count_text)
    except ValueError:
        index = count = -1
    if not 0 <= index < count <= 64:
        raise ValueError(f"{PORT_SHARE_ENV}={share!r}: expected K/N with 0 <= K < N <= 64")
    return index, count


def is_bindable(host: str, port: int) -> bool:
    """True when nothing listens on (host, port) right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


_HANDED_OUT: set[int] = set()
"""Every port this process has handed out. A handed-out port stays free until its
server binds it, so a second pick made before then (the next node's Raft port, a
fault proxy's listen port) must not return it again."""
_HANDED_OUT_LOCK = threading.Lock()


def free_port(host: str = "127.0.0.1", avoid: Iterable[int] = ()) -> int:
    """A port below the ephemeral range that is free now, not in ``avoid`` and never
    handed out before by this process."""
    low, high = listen_port_range()
    chooser = random.SystemRandom()
    with _HANDED_OUT_LOCK:
        taken = _HANDED_OUT.union(avoid)
        for _ in range(ATTEMPTS_MAX):
            port = chooser.randint(low, high)
            if port not in taken and is_bindable(host, port):
                _HANDED_OUT.add(port)
                return port
    raise OSError(f"no free port in {low}..{high} after {ATTEMPTS_MAX} attempts")
