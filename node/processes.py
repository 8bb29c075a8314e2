"""The processes of one node, made from its :class:`~node.config.NodeConfig`.

A node is a gateway (``manage.py run_gateway``: the remoting port, the Raft port,
the internal port) and a web process (uvicorn serving the console and the API);
with Redis configured, also a Celery worker and beat for the broker scan.
Everything a process needs is in its environment (the ``NAMESRV_*`` variables
``namesrv_site.settings`` reads) and its command line, both made here, so
``run_node`` on a host and ``cluster up`` on one machine start the same
processes the same way.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from node.config import RAFT_SCAN_INTERVAL_MS, NodeConfig, NodeTls
from node.files import atomic_write, write_secret_file
from node.web_tls import WebTls, launcher_args, tls_args
from raftstore import vocab
from remoting.acl import read_secret_file
from remoting.properties import encode_properties
from remoting.tls import CONFIG_FILE_ENV, TlsMode

PROJECT_DIR = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"
ASGI_APP = "namesrv_site.asgi:application"
DB_FILE_NAME = "namesrv.sqlite3"
"""The node's projection (its own route tables)."""
SHARED_DB_FILE_NAME = "shared.sqlite3"
"""Accounts, tokens and experiment runs when no [database] url is configured."""
SHARED_DB = "default"
PROJECTION_DB = "projection"
PROJECTION_DB_ENV = "NAMESRV_DB_PATH"
"""The environment variable naming the projection's SQLite file."""
READY_FILE_NAME = "gateway.ready.json"
CLUSTER_FILE_NAME = "cluster.json"
INTERNAL_SECRET_FILE_NAME = "internal.secret"
RAFT_DIR_NAME = "raft"
TLS_PROPERTIES_FILE_NAME = "tls.properties"
"""The node's [tls] section in upstream's tls.properties keys (remoting/tls.py)."""
METRICS_DIR_NAME = "web-metrics"
STATIC_DIR_NAME = "static"
"""The web process's static files, gathered by ``collectstatic`` before it starts."""
STATIC_ROOT_ENV = "NAMESRV_STATIC_ROOT"
LIVE_EVENT_PUBLISHER = "namesrv_app.live.publish_change"
"""The gateway's change-event publisher when Redis carries live updates (namesrv_app.live)."""
LIVE_LEADER_PUBLISHER = "namesrv_app.live.publish_leader_change"
"""The raft gateway's leader-change publisher when Redis carries live updates."""
SCAN_QUEUE_PREFIX = "namesrv.scan."
"""Celery queue of one node's broker scans; only the worker on that node's host
consumes it, because a scan reaches the gateway through its loopback-only port."""


def tls_properties_file(config: NodeConfig) -> Path | None:
    """Where the node's TLS settings are written for its processes; None without TLS."""
    if config.tls.mode is TlsMode.DISABLED:
        return None
    return config.data_dir / TLS_PROPERTIES_FILE_NAME


def tls_properties(config: NodeConfig) -> str:
    """The ``[tls]`` section as upstream's keys: the server side for the gateway (and its
    read front), the client side for every process of the node (they reach the members'
    remoting ports with the node's own certificate, checked against ``ca_file``)."""
    tls = config.tls
    props = {
        "tls.server.mode": tls.mode.value,
        "tls.server.need.client.auth": tls.need_client_auth.value,
        "tls.enable": "true" if tls.clients_use_tls else "false",
        "tls.client.authServer": "true",
    }
    for key, path in (
        ("tls.server.certPath", tls.cert_file),
        ("tls.server.keyPath", tls.key_file),
        ("tls.server.trustCertPath", tls.ca_file),
        ("tls.client.trustCertPath", tls.ca_file),
        ("tls.client.certPath", tls.cert_file),
        ("tls.client.keyPath", tls.key_file),
    ):
        if path is not None:
            props[key] = str(path)
    if tls.key_password_file is not None:
        password = read_secret_file(tls.key_password_file, "TLS key password")
        props["tls.server.keyPassword"] = props["tls.client.keyPassword"] = password
    header = "# Written from node.toml's [tls] section at every start; edit that instead.\n"
    return header + encode_properties(props, escape=True).decode("ascii")


def write_tls_properties(config: NodeConfig) -> Path | None:
    """Write :func:`tls_properties` to :func:`tls_properties_file` (owner only: it may
    hold the key's password); the path, None when the node has no TLS."""
    path = tls_properties_file(config)
    if path is not None:
        write_secret_file(path, tls_properties(config))
    return path


def ready_file(config: NodeConfig) -> Path:
    """Where the gateway writes its ready file (ports it bound, Raft identity)."""
    return config.data_dir / READY_FILE_NAME


def internal_secret_file(config: NodeConfig) -> Path:
    """The internal-port secret: the configured file, else one in the data folder."""
    return config.internal_secret_file or config.data_dir / INTERNAL_SECRET_FILE_NAME


def metrics_dir(config: NodeConfig) -> Path:
    """Where the web workers keep their Prometheus counters (prometheus-client's
    multi-process mode); it must be emptied before the web process starts."""
    return config.data_dir / METRICS_DIR_NAME


def reset_metrics_dir(config: NodeConfig) -> None:
    """Empty (or make) the web workers' metrics folder before the web process starts."""
    folder = metrics_dir(config)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.db"):
        stale.unlink(missing_ok=True)


def static_root(config: NodeConfig) -> Path:
    """Where the node's static files are collected and its web process serves them from."""
    return config.data_dir / STATIC_DIR_NAME


def cluster_file(config: NodeConfig) -> Path:
    """The member list the console and beat read: configured, else made from [peers]."""
    return config.cluster_file or config.data_dir / CLUSTER_FILE_NAME


def scan_queue(node_id: str) -> str:
    """The Celery queue of ``node_id``'s scans."""
    return SCAN_QUEUE_PREFIX + node_id


def cluster_document(config: NodeConfig) -> dict[str, Any]:
    """The member list of a node on its own host (``cluster.json`` beside its data).

    Only this node has an internal port here: the others' are loopback-only on
    their own hosts, so this host's console shows them through their remoting
    ports (routes, topics, cluster info), which are what clients see anyway.
    """
    nodes = []
    for member in config.members():
        entry: dict[str, Any] = {
            "id": member.node_id,
            "host": member.remoting.host,
            "remoting_port": member.remoting.port,
            "remoting_addr": str(member.remoting),
        }
        if member.internal_port:
            entry["internal_port"] = member.internal_port
        if member.web:
            entry["web_port"] = member.web.port
            # Members are configured alike: each serves its console as this node does.
            entry["console_url"] = console_url(config.tls, str(member.web))
        if member.raft:
            entry["raft_addr"] = str(member.raft)
        nodes.append(entry)
    return {"mode": config.mode, "nodes": nodes}


def with_password(url: str, password_file: Path | None, what: str) -> str:
    """``url`` with the password of ``password_file`` in it (unchanged without a file)."""
    if password_file is None:
        return url
    password = quote(read_secret_file(password_file, what), safe="")
    parts = urlsplit(url)
    user = quote(parts.username or "", safe="")
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = f"{user}:{password}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def shared_database_url(config: NodeConfig) -> str:
    """The cluster-wide database every process of the node uses (accounts, tokens, the
    audit log), its password in it: ``[database] url``, else a file of the node's own."""
    if config.database_url:
        return with_password(
            config.database_url, config.database_password_file, "database password"
        )
    # No shared database configured: this node keeps its accounts to itself.
    return f"sqlite:///{config.data_dir / SHARED_DB_FILE_NAME}"


def node_env(config: NodeConfig, base: Mapping[str, str]) -> dict[str, str]:
    """The environment of every process of the node: ``base`` plus what the file says.

    Reads the database and Redis password files (their URLs carry the password);
    every other secret travels as the path of its file.
    """
    env = dict(base)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "namesrv_site.settings",
            "PYTHONUNBUFFERED": "1",
            "NAMESRV_DEBUG": "false",  # never on a launched node, whatever the shell says
            "NAMESRV_PROFILE": "production" if config.web_profile == "production" else "local",
            "NAMESRV_NODE_ID": config.node_id,
            "NAMESRV_MODE": config.mode,
            "NAMESRV_HOST": config.remoting.host,
            "NAMESRV_PORT": str(config.remoting.port),
            "NAMESRV_INTERNAL_PORT": str(config.internal_port),
            "NAMESRV_INTERNAL_SECRET_FILE": str(internal_secret_file(config)),
            "NAMESRV_CLUSTER_FILE": str(cluster_file(config)),
            PROJECTION_DB_ENV: str(config.data_dir / DB_FILE_NAME),
            "DATABASE_URL": shared_database_url(config),
            "NAMESRV_SCAN_INTERVAL_S": str(config.scan_interval_s),
            # The web workers' counters, merged by /metrics (emptied at every start).
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir(config)),
            # The static files collectstatic gathers and whitenoise serves.
            STATIC_ROOT_ENV: str(static_root(config)),
            "NAMESRV_ACL": "true" if config.acl_enabled else "false",
            # The web port serves HTTPS itself: secure cookies and HSTS (settings.py).
            "NAMESRV_WEB_HTTPS": "true" if config.tls.web else "false",
            "DJANGO_ALLOWED_HOSTS": ",".join(
                config.web_allowed_hosts or _default_allowed_hosts(config)
            ),
        }
    )
    optional = {
        "DJANGO_SECRET_KEY_FILE": config.django_secret_file,
        "NAMESRV_RAFT_SECRET_FILE": config.raft_secret_file,
        "NAMESRV_ACL_FILE": config.acl_file,
        "NAMESRV_ACL_SECRET_KEY_FILE": config.acl_secret_key_file,
    }
    env.update({name: str(path) for name, path in optional.items() if path})
    if config.acl_access_key:
        env["NAMESRV_ACL_ACCESS_KEY"] = config.acl_access_key
    tls_file = tls_properties_file(config)
    if tls_file is not None and config.tls.clients_use_tls:
        env[CONFIG_FILE_ENV] = str(tls_file)
    if config.redis_url:
        env["REDIS_URL"] = with_password(
            config.redis_url, config.redis_password_file, "redis password"
        )
        # Registrations, expiries and leader changes reach every console through Redis.
        env.setdefault("NAMESRV_EVENT_PUBLISHER", LIVE_EVENT_PUBLISHER)
        env.setdefault("NAMESRV_LEADER_PUBLISHER", LIVE_LEADER_PUBLISHER)
    if config.mode == vocab.MODE_RAFT:
        # The settings checks (run by migrate and the web process) require both.
        env["NAMESRV_RAFT_PORT"] = str(config.raft.port if config.raft else 0)
        env["NAMESRV_RAFT_PEERS"] = ",".join(config.raft_members())
    return env


def _default_allowed_hosts(config: NodeConfig) -> tuple[str, ...]:
    hosts = [(config.web_advertise or config.web).host, config.web.host]
    return tuple(dict.fromkeys(h for h in hosts if h not in ("0.0.0.0", "::")))


def manage_argv(*args: str) -> list[str]:
    """``manage.py ARGS`` with this interpreter, through the project's command-line module
    (an installed node has no checkout and so no ``manage.py``)."""
    return [sys.executable, "-m", "namesrv_site.cli", *args]


def migrate_argvs() -> list[list[str]]:
    """Apply the migrations of the shared database, then of the node's projection."""
    return [
        manage_argv("migrate", "--noinput", "-v", "0", "--database", database)
        for database in (SHARED_DB, PROJECTION_DB)
    ]


def collectstatic_argv() -> list[str]:
    """Gather the static files into ``NAMESRV_STATIC_ROOT`` (hashed names, gzip copies),
    which the web process's whitenoise serves; run before the web process starts."""
    return manage_argv("collectstatic", "--noinput", "-v", "0")


@dataclass(frozen=True, slots=True)
class GatewayArgs:
    """``run_gateway``'s options, typed: the one place their flag names are written.

    Each field is the option of its name (``ready_file`` is ``--ready-file``); a field left
    None is left off the command line, so run_gateway's own default (settings.NAMESRV)
    applies. Options are written in the order of the fields. :func:`gateway_argv` fills
    them from a node config; the test harnesses fill the ones they need (ports 0, a ready
    file of their own, ``--scan-fallback-s 0``), so a renamed or added option changes here.
    """

    node: str | None = None
    host: str | None = None
    port: int | None = None
    internal_port: int | None = None
    mode: str | None = None
    ready_file: Path | None = None
    read_front: bool | None = None
    """True ``--read-front``, False ``--no-read-front``."""
    below_front_nice: int | None = None
    tls_config: Path | None = None
    config: Path | None = None
    restore_state: Path | None = None
    raft_port: int | None = None
    raft_host: str | None = None
    raft_peers: tuple[str, ...] | None = None
    raft_dir: Path | None = None
    scan_interval_ms: int | None = None
    propose_timeout_s: float | None = None
    skew_allowance_ms: int | None = None
    remoting_advertise: str | None = None
    raft_bind_host: str | None = None
    raft_dial: tuple[tuple[str, str], ...] | None = None
    """(peer Raft identity, address dialled instead); empty writes an empty map."""
    metrics_port: int | None = None
    metrics_host: str | None = None
    migrate: bool = False
    """``--migrate``: apply the database migrations first."""
    acl_file: Path | None = None
    scan_fallback_s: float | None = None

    def args(self) -> list[str]:
        """The options without the command (``manage.py run_gateway`` takes them)."""
        args: list[str] = []
        for field in fields(self):
            value = getattr(self, field.name)
            flag = "--" + field.name.replace("_", "-")
            # --migrate is a switch with no --no- form: False leaves it off.
            if value is None or (value is False and field.name == "migrate"):
                continue
            if isinstance(value, bool):
                args.append(flag if value else "--no-" + flag[2:])
            elif isinstance(value, tuple):
                items = (item if isinstance(item, str) else "=".join(item) for item in value)
                args += [flag, ",".join(items)]
            else:
                args += [flag, str(value)]
        return args

    def argv(self) -> list[str]:
        """The whole command line: ``manage.py run_gateway`` with :meth:`args`."""
        return manage_argv("run_gateway", *self.args())


def gateway_argv(config: NodeConfig) -> list[str]:
    """The command line of the node's gateway."""
    metrics = config.metrics
    args = GatewayArgs(
        node=config.node_id,
        host=config.remoting.host,
        port=config.remoting.port,
        internal_port=config.internal_port,
        mode=config.mode,
        ready_file=ready_file(config),
        read_front=config.read_front,
        below_front_nice=config.below_front_nice,
        tls_config=tls_properties_file(config),
        config=config.namesrv_config_file,
        restore_state=config.restore_state_file,
        metrics_port=metrics.port if metrics else None,
        metrics_host=metrics.host if metrics else None,
    )
    if config.mode != vocab.MODE_RAFT or config.raft is None:
        return args.argv()
    return replace(
        args,
        raft_port=config.raft.port,
        raft_host=config.raft.host,
        raft_peers=config.raft_members(),
        raft_dir=config.data_dir / RAFT_DIR_NAME,
        scan_interval_ms=RAFT_SCAN_INTERVAL_MS,
        propose_timeout_s=config.propose_timeout_s,
        skew_allowance_ms=config.skew_allowance_ms,
        # The address this member records for every node's address server (RAFT.md).
        remoting_advertise=str(config.remoting_advertise or config.remoting),
        raft_bind_host=config.raft_bind_host or None,
        raft_dial=config.raft_dial or None,
    ).argv()


def asgi_server_argv(
    host: str, port: int, workers: int = 1, app: str = ASGI_APP, tls: WebTls | None = None
) -> list[str]:
    """uvicorn serving the ASGI app: httptools for HTTP, uvloop, websockets for Channels.

    No lifespan (Django and Channels have none), no proxy headers (the client is the
    socket's peer), no Server header, no per-request access log. With ``tls``, HTTPS
    only on that port (:mod:`node.web_tls`: an encrypted key's password never appears
    on the command line).
    """
    launcher = ["-m", "uvicorn"] if tls is None else launcher_args(tls)
    return [
        sys.executable,
        *launcher,
        app,
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--http",
        "httptools",
        "--loop",
        "uvloop",
        "--ws",
        "websockets-sansio",
        "--lifespan",
        "off",
        "--no-proxy-headers",
        "--no-server-header",
        "--no-access-log",
        "--log-level",
        "info",
        *(tls_args(tls) if tls is not None else []),
    ]


def web_certificate(tls: NodeTls) -> WebTls | None:
    """The web port's certificate and key when ``[tls] web`` is on, else None."""
    if not tls.web or tls.cert_file is None or tls.key_file is None:
        return None
    return WebTls(tls.cert_file, tls.key_file, tls.key_password_file)


def web_scheme(tls: NodeTls) -> str:
    """``https`` when the web port serves TLS itself, else ``http``."""
    return "https" if web_certificate(tls) is not None else "http"


def console_url(tls: NodeTls, address: str) -> str:
    """The console's URL at ``address`` (``host:port``), in the scheme ``tls`` gives it."""
    return f"{web_scheme(tls)}://{address}/"


def web_argv(config: NodeConfig) -> list[str]:
    """The command line of the node's web process (HTTPS with ``[tls] web``)."""
    web = config.web
    return asgi_server_argv(web.host, web.port, config.web_workers, tls=web_certificate(config.tls))


def worker_argv(hostname: str, queues: list[str]) -> list[str]:
    """A Celery worker consuming ``queues`` (one solo-pool process: a scan every few s)."""
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
        hostname,
        "--queues",
        ",".join(queues),
    ]


def beat_argv(schedule_file: Path) -> list[str]:
    """Celery beat, its local schedule state in ``schedule_file``."""
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
        str(schedule_file),
    ]


def write_cluster_document(config: NodeConfig) -> Path:
    """Write the member list a node on its own host reads (see :func:`cluster_document`)."""
    path = cluster_file(config)
    atomic_write(path, json.dumps(cluster_document(config), indent=2) + "\n")
    return path
