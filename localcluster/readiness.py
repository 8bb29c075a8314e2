"""Readiness: waiting for ports, ready files and a gateway's NODE_STATUS."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from localcluster.plan import (
    CONNECT_TIMEOUT_S,
    LOOPBACK,
    NODE_STATUS_TIMEOUT_S,
    POLL_INTERVAL_S,
    READY_TIMEOUT_S,
    LauncherError,
)
from localcluster.processes import (
    PidRecord,
    is_alive,
    log_tail,
)

# ------------------------------------------------------------------- readiness


def wait_until(
    check: Callable[[], bool],
    *,
    what: str,
    timeout_s: float = READY_TIMEOUT_S,
    alive: PidRecord | None = None,
    log_path: Path | None = None,
) -> None:
    """Poll ``check`` until true; fail early when the watched process died."""
    deadline = time.monotonic() + timeout_s
    while True:
        if check():
            return
        if alive is not None and not is_alive(alive):
            tail = log_tail(log_path) if log_path else ""
            raise LauncherError(f"{what}: the process exited; see {log_path}:\n{tail}")
        if time.monotonic() > deadline:
            tail = log_tail(log_path) if log_path else ""
            raise LauncherError(
                f"{what}: not ready after {timeout_s:.0f} s; see {log_path}:\n{tail}"
            )
        time.sleep(POLL_INTERVAL_S)


def accepts_connections(port: int, host: str = LOOPBACK) -> bool:
    """True when a TCP connect to ``host:port`` succeeds."""
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False


def redis_answers(port: int, password: str | None = None) -> bool:
    """True when Redis on ``port`` answers PING (after AUTH with ``password``)."""
    import redis

    client = redis.Redis(
        host=LOOPBACK, port=port, password=password, socket_timeout=CONNECT_TIMEOUT_S
    )
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def read_ready_file(path: Path) -> dict[str, Any] | None:
    """The gateway's ready file, or None while it is not written."""
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data


def node_status(
    internal_port: int,
    secret: str,
    timeout_s: float = NODE_STATUS_TIMEOUT_S,
    *,
    linearizable: bool = False,
) -> dict[str, Any]:
    """Ask a gateway's internal port for NODE_STATUS; the decoded JSON body. A refusal
    is a LauncherError; ``linearizable`` commits a barrier first (node/internal.py)."""
    from node import internal

    try:
        return internal.node_status(
            internal_port, secret, linearizable=linearizable, timeout_s=timeout_s
        )
    except internal.InternalRequestError as exc:
        raise LauncherError(str(exc)) from exc


def gateway_ready(ready_file: Path, internal_port: int, secret: str) -> bool:
    """True once the gateway wrote its ready file and answers NODE_STATUS."""
    return read_ready_file(ready_file) is not None and gateway_answers(internal_port, secret)


def gateway_answers(internal_port: int, secret: str) -> bool:
    """True when the gateway answers NODE_STATUS on its internal port."""
    from remoting.client import RemotingClientError

    try:
        node_status(internal_port, secret, timeout_s=CONNECT_TIMEOUT_S)
    except (RemotingClientError, LauncherError, ValueError):
        return False
    return True
