"""The environment and command line of each process of a local cluster."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from localcluster import tls_files
from localcluster.plan import (
    LOOPBACK,
    MODE_RAFT,
    SHARED_DB_FILE_NAME,
    ClusterPlan,
    NodePlan,
)
from localcluster.run_secrets import ADMIN_ACCESS_KEY, INTERNAL_SECRET_FILE, RunSecrets
from node import processes as node_processes
from node.config import Endpoint, NodeConfig, NodeTls, Peer, write_node_config
from node.config_schema import (
    DEFAULT_PROPOSE_TIMEOUT_S,
    DEFAULT_SCAN_INTERVAL_S,
    DEFAULT_SKEW_ALLOWANCE_MS,
)
from remoting.tls import CONFIG_FILE_ENV, TlsMode

# ------------------------------------------------------------------- environment


LIVE_EVENT_PUBLISHER = node_processes.LIVE_EVENT_PUBLISHER
LIVE_LEADER_PUBLISHER = node_processes.LIVE_LEADER_PUBLISHER


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
    tls_client_config: Path | None = None
    """With TLS: the run's client settings, so every process of the cluster that is not
    a node's own (Celery, the simulated demo brokers) speaks TLS to the nodes."""

    def base(self) -> dict[str, str]:
        """The inherited environment plus the cluster's own variables."""
        env = dict(os.environ)
        redis_url = self.redis_url
        if self.secrets is not None:
            env.update(self.secrets.env())
            redis_url = self.secrets.authenticated_redis_url(redis_url)
        if self.tls_client_config is not None:
            env[CONFIG_FILE_ENV] = str(self.tls_client_config)
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

    def for_node(
        self, plan: ClusterPlan, node: NodePlan, config: NodeConfig | None = None
    ) -> dict[str, str]:
        """The environment of a node's gateway and web process: what its node config
        says (:func:`node.processes.node_env`), then the caller's ``extra`` again, so
        a test's or an experiment's override wins over the file. The nodes share the
        run folder's static files (collected once by ``cluster up``).

        ``config`` is the node's config when it was read back from its ``node.toml``
        (a restarted node starts from the file it first started from); by default it is
        made from the plan."""
        if config is None:
            config = node_config(plan, node, self)
        env = node_processes.node_env(config, self.base())
        env[node_processes.STATIC_ROOT_ENV] = str(plan.run_dir / node_processes.STATIC_DIR_NAME)
        env.update(self.extra)
        return env


def node_config(plan: ClusterPlan, node: NodePlan, env: ClusterEnv) -> NodeConfig:
    """The config file of a local node: what ``run_node`` on a host would read.

    Every port is on loopback; the member list is the run folder's cluster.json
    (with every node's internal port, as they share this host).
    """
    secrets = env.secrets
    # What the shell or the caller set still counts, as it did for the processes.
    settings = {**os.environ, **env.extra}

    def endpoint(port: int) -> Endpoint:
        return Endpoint(LOOPBACK, port)

    raft = plan.mode == MODE_RAFT
    peers = tuple(
        Peer(
            other.node_id,
            endpoint(other.remoting_port),
            endpoint(other.raft_port) if raft else None,
            endpoint(other.web_port),
            other.internal_port,
        )
        for other in plan.nodes
        if other.node_id != node.node_id
    )
    acl = secrets.acl if secrets is not None else False
    return NodeConfig(
        source=plan.node_dir(node.node_id) / NODE_CONFIG_FILE_NAME,
        node_id=node.node_id,
        mode=plan.mode,
        data_dir=plan.node_dir(node.node_id),
        cluster_file=env.cluster_file,
        remoting=endpoint(node.remoting_port),
        web=endpoint(node.web_port),
        web_workers=web_workers(),
        web_profile="development",
        internal_port=node.internal_port,
        metrics=endpoint(node.metrics_port) if node.metrics_port else None,
        raft=endpoint(node.raft_port) if raft else None,
        raft_dial=node.raft_dial,
        skew_allowance_ms=(
            int(settings.get("NAMESRV_SKEW_ALLOWANCE_MS") or DEFAULT_SKEW_ALLOWANCE_MS)
            if node.skew_allowance_ms is None
            else node.skew_allowance_ms
        ),
        propose_timeout_s=float(
            settings.get("NAMESRV_PROPOSE_TIMEOUT_S") or DEFAULT_PROPOSE_TIMEOUT_S
        ),
        peers=peers,
        raft_secret_file=secrets.raft_secret_file if secrets else None,
        django_secret_file=secrets.django_secret_file if secrets else None,
        internal_secret_file=plan.run_dir / INTERNAL_SECRET_FILE,
        acl_enabled=acl,
        acl_file=secrets.acl_file if secrets and acl else None,
        acl_access_key=ADMIN_ACCESS_KEY if acl else "",
        acl_secret_key_file=secrets.admin_secret_file if secrets and acl else None,
        redis_url=env.redis_url,
        # The run folder's nodes share one database file: accounts, tokens, runs.
        database_url=f"sqlite:///{(plan.run_dir / SHARED_DB_FILE_NAME).resolve()}",
        redis_password_file=secrets.redis_secret_file if secrets else None,
        scan_interval_s=int(settings.get("NAMESRV_SCAN_INTERVAL_S") or DEFAULT_SCAN_INTERVAL_S),
        tls=node_tls(plan, node),
    )


def node_tls(plan: ClusterPlan, node: NodePlan) -> NodeTls:
    """A local node's ``[tls]``: the run's CA and the node's certificate (made by
    :func:`localcluster.tls_files.ensure_run_tls` before anything starts)."""
    if plan.tls is TlsMode.DISABLED:
        return NodeTls()
    folder = plan.run_dir / tls_files.TLS_DIR
    return NodeTls(
        mode=plan.tls,
        cert_file=folder / f"{node.node_id}.pem",
        key_file=folder / f"{node.node_id}.key",
        ca_file=folder / f"{tls_files.CA_NAME}.pem",
        web=True,
    )


def write_node_config_file(plan: ClusterPlan, node: NodePlan, env: ClusterEnv) -> NodeConfig:
    """Write the node's ``node.toml`` in its folder (for operators to read and reuse) and
    the TLS settings its processes read."""
    config = node_config(plan, node, env)
    write_node_config(config, config.source, NODE_CONFIG_HEADER)
    node_processes.write_tls_properties(config)
    return config


NODE_CONFIG_FILE_NAME = "node.toml"
NODE_CONFIG_HEADER = """\
# This node's config, written by `manage.py cluster up`; its processes were
# started from it. On a host of its own a node starts from such a file with
# `manage.py run_node --config node.toml` (docs/DEPLOY.md).
"""


def manage_argv(*args: str) -> list[str]:
    """``python manage.py ARGS`` with this interpreter."""
    return node_processes.manage_argv(*args)


GatewayArgs = node_processes.GatewayArgs
"""``run_gateway``'s options, typed (the test harnesses build their gateways' command
lines with it too, so every command line of a gateway comes from one place)."""


def gateway_argv(plan: ClusterPlan, node: NodePlan, env: ClusterEnv | None = None) -> list[str]:
    """The command line of a node's gateway (from its node config)."""
    return node_processes.gateway_argv(node_config(plan, node, env or _bare_env(plan)))


def _bare_env(plan: ClusterPlan) -> ClusterEnv:
    return ClusterEnv(
        f"redis://{LOOPBACK}:{plan.redis_port}/0", "", plan.run_dir / "cluster.json", plan.mode
    )


WEB_WORKERS_ENV = "NAMESRV_WEB_WORKERS"
ASGI_APP = node_processes.ASGI_APP
asgi_server_argv = node_processes.asgi_server_argv


def web_workers() -> int:
    """Worker processes per node's web process: ``NAMESRV_WEB_WORKERS``, default 1."""
    raw = os.environ.get(WEB_WORKERS_ENV, "1").strip()
    if not raw.isdigit() or not 1 <= int(raw) <= 64:
        raise ValueError(f"{WEB_WORKERS_ENV} must be a whole number from 1 to 64, not {raw!r}")
    return int(raw)


def web_argv(node: NodePlan, plan: ClusterPlan | None = None) -> list[str]:
    """The command line of a node's ASGI web process (HTTPS when ``plan`` has TLS)."""
    tls = node_processes.web_certificate(node_tls(plan, node)) if plan is not None else None
    return node_processes.asgi_server_argv(LOOPBACK, node.web_port, web_workers(), tls=tls)


def worker_argv(run_dir: Path, node_ids: list[str]) -> list[str]:
    """The Celery worker of a local cluster: every node is on this host, so it takes
    every node's scan queue (and the default queue, for the divergence check)."""
    queues = ["celery", *(node_processes.scan_queue(node_id) for node_id in node_ids)]
    return node_processes.worker_argv(f"scan@{run_dir.name or 'cluster'}", queues)


def beat_argv(run_dir: Path) -> list[str]:
    """Celery beat with its schedule file inside the run folder."""
    return node_processes.beat_argv(run_dir / "celery" / "beat-schedule")


def demo_argv(cluster_file: Path) -> list[str]:
    """The simulated brokers of ``--demo-sim``."""
    return [sys.executable, "-m", "localcluster.demo", "--cluster-file", str(cluster_file)]
