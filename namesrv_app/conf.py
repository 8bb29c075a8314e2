"""The ``NAMESRV`` settings dict with defaults, read lazily (the DRF settings habit).

Code reads ``namesrv_settings().PORT`` instead of indexing ``settings.NAMESRV``
itself, so a missing key falls back to its default in one place and tests that
override settings see the new values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

MODES = ("eventual", "raft")
NAME_CHARS_MAX = 255
"""Longest cluster name, broker name or address the node accepts and stores."""
PORT_MAX = 65535

DEFAULTS: dict[str, Any] = {
    "NODE_ID": "n1",
    "MODE": "eventual",
    "HOST": "127.0.0.1",
    "PORT": 9876,
    "INTERNAL_PORT": 0,
    "INTERNAL_SECRET": "",
    "SCAN_INTERVAL_S": 10,
    "IDLE_TIMEOUT_S": 120,
    "NOTIFY_MIN_BROKER_ID_CHANGED": False,
    "CLUSTER_FILE": "",
    "EVENT_PUBLISHER": "",
}


@dataclass(frozen=True, slots=True)
class NamesrvSettings:
    """Typed view of ``settings.NAMESRV``."""

    NODE_ID: str
    MODE: str
    HOST: str
    PORT: int
    INTERNAL_PORT: int
    INTERNAL_SECRET: str
    SCAN_INTERVAL_S: int
    IDLE_TIMEOUT_S: int
    NOTIFY_MIN_BROKER_ID_CHANGED: bool
    CLUSTER_FILE: str
    EVENT_PUBLISHER: str


def namesrv_settings() -> NamesrvSettings:
    """The current NAMESRV settings merged over the defaults (unknown keys ignored)."""
    configured = getattr(settings, "NAMESRV", {}) or {}
    merged = {key: configured.get(key, default) for key, default in DEFAULTS.items()}
    return NamesrvSettings(**merged)
