"""The environment and command line of each process of a local cluster."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from localcluster.plan import (
    LOOPBACK,
    MODE_RAFT,
    NODE_DB_FILE_NAME,
    PROJECT_DIR,
    RAFT_DIR_NAME,
    RAFT_SCAN_INTERVAL_MS,
    ClusterPlan,
    NodePlan,
)
from localcluster.run_secrets import RunSecrets

# ------------------------------------------------------------------- environment


LIVE_EVENT_PUBLISHER = "namesrv_app.live.publish_change"
"""The gateway's change-event publisher in a launched cluster (see namesrv_app.live)."""
LIVE_LEADER_PUBLISHER = "namesrv_app.live.publish_leader_change"
"""The raft gateway's leader-change publisher in a launched cluster."""


@dataclass(frozen=True, slots=True)
class ClusterEnv:
    """The environment every process of one cluster shares."""

    redis_url: str
    secret: str
    cluster_file: Path
    mode: str
    extra: Mapping[str, str] = field(default_factory=dict)
    secrets: RunSecrets | None = None
    """Where the cluster's secret files are (the environment names their paths)."""

    def base(self) -> dict[str, str]:
        """The inherited environment plus the cluster's own variables."""
        env = dict(os.environ)
        redis_url = self.redis_url
        if self.secrets is not None:
            env.update(self.secrets.env())
            redis_url = self.secrets.authenticated_redis_url(redis_url)
        env.update(self.extra)
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "namesrv_site.settings",
                "PYTHONUNBUFFERED": "1",
                "REDIS_URL": redis_url,
                "NAMESRV_INTERNAL_SECRET": self.secret,
                "NAMESRV_CLUSTER_FILE": str(self.cluster_file),
                "NAMESRV_MODE": self.mode,
                # Launched clusters never run Django's DEBUG, whatever the shell says.
                "NAMESRV_DEBUG": "false",
            }
        )
        return env

    def for_node(self, plan: ClusterPlan, node: NodePlan) -> dict[str, str]:
        """The environment of a node's gateway and web process."""
        env = self.base()
        env.update(
            {
                "NAMESRV_NODE_ID": node.node_id,
                "NAMESRV_DB_PATH": str(plan.node_dir(node.node_id) / NODE_DB_FILE_NAME),
                "NAMESRV_PORT": str(node.remoting_port),
                "NAMESRV_INTERNAL_PORT": str(node.internal_port),
            }
        )
        # Registrations, expiries and topic changes go to every console through the
        # Redis channel layer (unless the caller chose another publisher).
        env.setdefault("NAMESRV_EVENT_PUBLISHER", LIVE_EVENT_PUBLISHER)
        env.setdefault("NAMESRV_LEADER_PUBLISHER", LIVE_LEADER_PUBLISHER)
        if plan.mode == MODE_RAFT:
            # The settings checks (run by migrate and the web process) require both.
            env["NAMESRV_RAFT_PORT"] = str(node.raft_port)
            env["NAMESRV_RAFT_PEERS"] = ",".join(plan.raft_peers())
        return env


def manage_argv(*args: str) -> list[str]:
    """``python manage.py ARGS`` with this interpreter."""
    return [sys.executable, str(PROJECT_DIR / "manage.py"), *args]


def gateway_argv(plan: ClusterPlan, node: NodePlan) -> list[str]:
    """The command line of a node's gateway."""
    return manage_argv(
        "run_gateway",
        "--node",
        node.node_id,
        "--host",
        LOOPBACK,
        "--port",
        str(node.remoting_port),
        "--internal-port",
        str(node.internal_port),
        "--mode",
        plan.mode,
        "--ready-file",
        str(plan.node_dir(node.node_id) / "gateway.ready.json"),
        *_raft_args(plan, node),
    )


def _raft_args(plan: ClusterPlan, node: NodePlan) -> list[str]:
    """The raft options of a gateway (none in eventual mode)."""
    if plan.mode != MODE_RAFT:
        return []
    return [
        "--raft-port",
        str(node.raft_port),
        "--raft-peers",
        ",".join(plan.raft_peers()),
        "--scan-interval-ms",
        str(RAFT_SCAN_INTERVAL_MS),
        "--raft-dir",
        str(plan.node_dir(node.node_id) / RAFT_DIR_NAME),
        *(["--raft-dial", ",".join(f"{p}={a}" for p, a in node.raft_dial)]
          if node.raft_dial else []),
        *(["--skew-allowance-ms", str(node.skew_allowance_ms)]
          if node.skew_allowance_ms is not None else []),
    ]  # fmt: skip


WEB_WORKERS_ENV = "NAMESRV_WEB_WORKERS"
ASGI_APP = "namesrv_site.asgi:application"


def web_workers() -> int:
    """Worker processes per node's web process: ``NAMESRV_WEB_WORKERS``, default 1."""
    raw = os.environ.get(WEB_WORKERS_ENV, "1").strip()
    if not raw.isdigit() or not 1 <= int(raw) <= 64:
        raise ValueError(f"{WEB_WORKERS_ENV} must be a whole number from 1 to 64, not {raw!r}")
    return int(raw)


def asgi_server_argv(host: str, port: int, workers: int = 1, app: str = ASGI_APP) -> list[str]:
    """uvicorn serving the ASGI app: httptools for HTTP, uvloop, websockets for Channels.

    No lifespan (Django and Channels have none), no proxy headers (the client is the
    socket's peer, as daphne had it), no Server header, no per-request access log.
    """
    return [
        sys.executable, "-m", "uvicorn", app,
        "--host", host, "--port", str(port), "--workers", str(workers),
        "--http", "httptools", "--loop", "uvloop", "--ws", "websockets-sansio",
        "--lifespan", "off", "--no-proxy-headers", "--no-server-header",
        "--no-access-log", "--log-level", "info",
    ]  # fmt: skip


def web_argv(node: NodePlan) -> list[str]:
    """The command line of a node's ASGI web process."""
    return asgi_server_argv(LOOPBACK, node.web_port, web_workers())


def worker_argv(run_dir: Path) -> list[str]:
    """The Celery worker: one solo-pool process is plenty for a scan every few seconds."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "namesrv_site.celery",
        "worker",
        "--pool",
        "solo",
        "--loglevel",
        "INFO",
        "--without-gossip",
        "--without-mingle",
        "--hostname",
        f"scan@{run_dir.name or 'cluster'}",
    ]


def beat_argv(run_dir: Path) -> list[str]:
    """Celery beat with its schedule file inside the run folder."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "namesrv_site.celery",
        "beat",
        "--loglevel",
        "INFO",
        "--schedule",
        str(run_dir / "celery" / "beat-schedule"),
    ]


def demo_argv(cluster_file: Path) -> list[str]:
    """The simulated brokers of ``--demo-sim``."""
    return [sys.executable, "-m", "localcluster.demo", "--cluster-file", str(cluster_file)]
