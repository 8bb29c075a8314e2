"""The ``NAMESRV`` settings dict with defaults, read lazily (the DRF settings habit).

Code reads ``namesrv_settings().PORT`` instead of indexing ``settings.NAMESRV``
itself, so a missing key falls back to its default in one place and tests that
override settings see the new values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from gateway.clock import SystemClock
from gateway.priority import BELOW_FRONT_NICE
from raftstore import vocab
from remoting.acl import read_secret_file
from remoting.body_limits import NAME_CHARS_MAX as NAME_CHARS_MAX
from remoting.limits import (
    CONNECTIONS_PER_ADDRESS_MAX,
    FRAME_DEADLINE_S,
    UNFINISHED_FRAMES_BYTES_MAX,
)

MODES = vocab.MODES
PORT_MAX = 65535

DEFAULTS: dict[str, Any] = {
    "NODE_ID": "n1",
    "MODE": vocab.MODE_EVENTUAL,
    "CLOCK_OFFSET_MS": 0,
    "HOST": "127.0.0.1",
    "PORT": 9876,
    "INTERNAL_PORT": 0,
    "INTERNAL_SECRET": "",
    "SCAN_INTERVAL_S": 10,
    "NOTIFY_MIN_BROKER_ID_CHANGED": False,
    "CLUSTER_FILE": "",
    "EVENT_PUBLISHER": "",
    "LEADER_PUBLISHER": "",
    "KV_CONFIG_PATH": "",
    # Raft mode only. RAFT_PORT is this node's Raft identity (host:RAFT_PORT), so it
    # cannot be 0; RAFT_PEERS lists every member's "host:port" (self may be included).
    "RAFT_PORT": 0,
    "RAFT_PEERS": "",
    "RAFT_DIR": "",
    "RAFT_DIAL": "",
    "PROPOSE_TIMEOUT_S": 3.0,
    "SKEW_ALLOWANCE_MS": 5000,
    "RAFT_SECRET_FILE": "",
    "RAFT_SECRET": "",
    "RAFT_BIND_HOST": "",
    "ACL_ENABLED": True,
    "ACL_FILE": "",
    "ACL_ACCESS_KEY": "",
    "ACL_SECRET_KEY_FILE": "",
    "UNFINISHED_FRAMES_BYTES_MAX": UNFINISHED_FRAMES_BYTES_MAX,
    "FRAME_DEADLINE_S": FRAME_DEADLINE_S,
    "CONNECTIONS_PER_ADDRESS_MAX": CONNECTIONS_PER_ADDRESS_MAX,
    # Serve the public port from a read front process (gateway/front.py).
    "READ_FRONT": False,
    # With a read front: nice steps the gateway process runs below it (0-19).
    "BELOW_FRONT_NICE": BELOW_FRONT_NICE,
}


@dataclass(frozen=True, slots=True)
class NamesrvSettings:
    """Typed view of ``settings.NAMESRV``."""

    NODE_ID: str
    MODE: str
    CLOCK_OFFSET_MS: int
    HOST: str
    PORT: int
    INTERNAL_PORT: int
    INTERNAL_SECRET: str
    SCAN_INTERVAL_S: int
    NOTIFY_MIN_BROKER_ID_CHANGED: bool
    CLUSTER_FILE: str
    EVENT_PUBLISHER: str
    LEADER_PUBLISHER: str
    KV_CONFIG_PATH: str
    RAFT_PORT: int
    RAFT_PEERS: str
    RAFT_DIR: str
    RAFT_DIAL: str
    PROPOSE_TIMEOUT_S: float
    SKEW_ALLOWANCE_MS: int
    RAFT_SECRET_FILE: str
    RAFT_SECRET: str
    RAFT_BIND_HOST: str
    ACL_ENABLED: bool
    ACL_FILE: str
    ACL_ACCESS_KEY: str
    ACL_SECRET_KEY_FILE: str
    UNFINISHED_FRAMES_BYTES_MAX: int
    FRAME_DEADLINE_S: float
    CONNECTIONS_PER_ADDRESS_MAX: int
    READ_FRONT: bool
    BELOW_FRONT_NICE: int


def parse_addr_list(text: str) -> tuple[str, ...]:
    """``"h:p,h:p"`` as a tuple of ``host:port`` strings; ValueError on a malformed entry."""
    addrs = tuple(part.strip() for part in text.split(",") if part.strip())
    for addr in addrs:
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) <= PORT_MAX:
            raise ValueError(f"{addr!r} is not host:port")
    return addrs


def parse_dial_map(text: str) -> dict[str, str]:
    """``"peer=h:p,peer=h:p"`` (peer is a member's Raft address) as a dict."""
    dial: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        peer, sep, target = part.partition("=")
        if not sep:
            raise ValueError(f"{part!r} is not peer=host:port")
        parse_addr_list(peer)
        parse_addr_list(target)
        dial[peer] = target
    return dial


def namesrv_settings() -> NamesrvSettings:
    """The current NAMESRV settings merged over the defaults (unknown keys ignored)."""
    configured = getattr(settings, "NAMESRV", {}) or {}
    merged = {key: configured.get(key, default) for key, default in DEFAULTS.items()}
    return NamesrvSettings(**merged)


def resolve_secret(value: str, file: str, what: str) -> str:
    """A secret given as a file path (preferred) or as the value itself; "" if neither."""
    if file:
        return read_secret_file(file, what)
    return value.strip()


def system_clock() -> SystemClock:
    """This node's wall clock, shifted by NAMESRV['CLOCK_OFFSET_MS'] (experiments)."""
    return SystemClock(int(namesrv_settings().CLOCK_OFFSET_MS))
