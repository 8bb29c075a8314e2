"""``manage.py run_gateway``: run one NameServer node's gateway until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import functools
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from broker_app.management.command import ProjectCommand
from gateway.options import GatewayConfigError, GatewayOptions, RaftOptions
from gateway.parts import initial_config, node_properties
from gateway.priority import NICE_STEPS_MAX
from gateway.server import serve
from namesrv_app import schema
from namesrv_app.checks import check_namesrv_settings
from namesrv_app.conf import (
    MODES,
    NamesrvSettings,
    namesrv_settings,
    parse_addr_list,
    parse_dial_map,
    resolve_secret,
)
from namesrv_app.events import load_leader_publisher, load_publisher
from namesrv_app.projection.writer import ProjectionWriter
from raftstore.config import NamesrvConfig
from raftstore.failover import DEFAULT_FAILOVER_LAG_BYTES_MAX
from raftstore.replicator import MODE_RAFT
from remoting.acl_policy import AclConfigError
from remoting.bodies import decode_properties
from remoting.namesrv_list import NamesrvListError, check_namesrv_addr

GIL_SWITCH_INTERVAL_S = 0.001
"""How long a thread may keep the interpreter lock while another waits for it (Python's
default is 5 ms). A gateway runs three threads: the event loop, Raft's tick thread and
the projection writer. The tick thread gives the lock up at every send, poll and
journal flush and then waits for it again; behind a busy thread each wait could last
the whole 5 ms, and during the storm bench ticks stretched past the shortest election
timeout. A millisecond bounds each wait at a fifth of that, for a few more switches."""


def default_raft_dir(node_id: str) -> Path:
    """Where a node keeps its Raft journal and snapshot when nothing else is said."""
    return Path(settings.BASE_DIR) / "run" / f"raft-{node_id}"


KV_FILE_SUFFIX = ".kvConfig.json"


def kv_config_file(configured: str, node_id: str) -> Path:
    """Eventual mode's kvConfig.json: the setting, else beside the node's database."""
    if configured:
        return Path(configured).expanduser()
    database = Path(str(settings.DATABASES["projection"]["NAME"]))
    if settings.DATABASES["projection"]["ENGINE"].endswith("sqlite3"):
        return database.with_name(f"{database.stem}.kvConfig.json")
    return Path(settings.BASE_DIR) / "run" / f"{node_id}.kvConfig.json"


def namesrv_properties(path: Path | None) -> dict[str, str]:
    """The properties of upstream's ``-c`` file, checked against NamesrvConfig: a value
    that does not parse, is out of range or cannot be honoured here is a one-line error."""
    if path is None:
        return {}
    try:
        properties = decode_properties(path.read_bytes())
        config = NamesrvConfig().updated(properties)
        config.validate()
        config.check_honoured()
    except (OSError, ValueError) as exc:
        raise CommandError(f"--config {path}: {exc}") from exc
    return properties


def listen_port(
    options: dict[str, Any], properties: Mapping[str, str], conf: NamesrvSettings
) -> int:
    """``--port``, else the file's ``listenPort``, else ``NAMESRV['PORT']``."""
    if options["port"] is not None:
        return int(options["port"])
    if "listenPort" in properties:
        return NamesrvConfig().updated(properties).listen_port
    return int(conf.PORT)


def idle_timeout_s(properties: Mapping[str, str]) -> float:
    """The public port's idle timeout: the file's ``serverChannelMaxIdleTimeSeconds``
    (upstream's default, 120 s, without one)."""
    return float(NamesrvConfig().updated(properties).server_channel_max_idle_time_seconds)


def scan_interval_ms(options: dict[str, Any], properties: Mapping[str, str]) -> int:
    """``--scan-interval-ms``, else the file's ``scanNotActiveBrokerInterval`` (the
    gateway then scans itself that often), else 0 (only the external scans)."""
    if options["scan_interval_ms"] is not None:
        return int(options["scan_interval_ms"])
    if "scanNotActiveBrokerInterval" in properties:
        return NamesrvConfig().updated(properties).scan_not_active_broker_interval_ms
    return 0


def store_paths(
    properties: Mapping[str, str], conf: NamesrvSettings, node_id: str
) -> tuple[Path, Path]:
    """Eventual mode's KV file and config store: the file's ``kvConfigPath`` and
    ``configStorePath``, else the KV setting's (or beside the node's database) and
    ``<name>.namesrv.properties`` beside the KV file ``<name>.kvConfig.json``."""
    kv_path = properties.get("kvConfigPath", "").strip()
    kv_file = (
        Path(kv_path).expanduser() if kv_path else kv_config_file(conf.KV_CONFIG_PATH, node_id)
    )
    store_path = properties.get("configStorePath", "").strip()
    if store_path:
        return kv_file, Path(store_path).expanduser()
    stem = (
        kv_file.name.removesuffix(KV_FILE_SUFFIX)
        if kv_file.name.endswith(KV_FILE_SUFFIX)
        else node_id
    )
    return kv_file, kv_file.with_name(f"{stem}.namesrv.properties")


def print_config(options: GatewayOptions) -> str:
    """The effective NamesrvConfig as upstream's ``-p`` prints it: ``key=value`` lines."""
    try:
        config = initial_config(options).to_properties()
    except GatewayConfigError as exc:
        raise CommandError(str(exc)) from exc
    config.update(node_properties(options, options.port))
    return "".join(f"{key}={config[key]}\n" for key in sorted(config))


def remoting_advertise(value: str | None) -> str | None:
    """``--remoting-advertise``: a plain ``host:port`` (the address server hands it out as
    it is), or CommandError."""
    if not value:
        return None
    try:
        return check_namesrv_addr(value)
    except NamesrvListError as exc:
        raise CommandError(f"--remoting-advertise: {exc}") from exc


def metrics_port(port: int) -> int:
    """``--metrics-port``, or CommandError when it is not a port (0 is off)."""
    if not 0 <= port <= 65535:
        raise CommandError(f"--metrics-port must be from 0 (off) to 65535, got {port}")
    return port


def scan_fallback_s(options: dict[str, Any], conf: NamesrvSettings) -> float:
    """``--scan-fallback-s``: the given seconds (0: off), by default the Celery scan period
    (``NAMESRV['SCAN_INTERVAL_S']``) in eventual mode; CommandError when negative.

    Raft mode ignores it (every gateway scans itself there, ``--scan-interval-ms``).
    """
    value = options["scan_fallback_s"]
    if value is None:
        return 0.0 if options["mode"] == MODE_RAFT else float(conf.SCAN_INTERVAL_S)
    if not math.isfinite(value) or value < 0:
        raise CommandError(f"--scan-fallback-s must be 0 (off) or positive, got {value}")
    return float(value)


def positive(options: dict[str, Any], name: str) -> Any:
    """``options[name]``, or CommandError naming its flag when it is not positive."""
    value = options[name]
    if not value > 0:
        raise CommandError(f"--{name.replace('_', '-')} must be positive, got {value}")
    return value


def raft_options(options: dict[str, Any], conf: NamesrvSettings) -> RaftOptions | None:
    """The raft part of the command line (None in eventual mode); CommandError if malformed."""
    if options["mode"] != MODE_RAFT:
        return None
    try:
        peers = parse_addr_list(options["raft_peers"])
        dial = parse_dial_map(options["raft_dial"])
    except ValueError as exc:
        raise CommandError(f"raft options: {exc}") from exc
    raft_dir = options["raft_dir"] or default_raft_dir(options["node"])
    try:
        secret = resolve_secret(
            conf.RAFT_SECRET, options["raft_secret_file"] or "", "raft cluster secret"
        )
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    if not secret:
        raise CommandError(
            "raft mode needs the cluster secret: --raft-secret-file FILE (mode 0600), "
            "NAMESRV_RAFT_SECRET_FILE or NAMESRV_RAFT_SECRET; every member uses the same one"
        )
    return RaftOptions(
        port=options["raft_port"],
        peers=peers,
        data_dir=Path(raft_dir),
        secret=secret,
        bind_host=options["raft_bind_host"] or None,
        host=options.get("raft_host") or None,
        dial=dial,
        propose_timeout_s=options["propose_timeout_s"],
        skew_allowance_ms=options["skew_allowance_ms"],
        failover_lag_bytes_max=options["failover_lag_bytes_max"],
    )


class Command(ProjectCommand):
    """Start the remoting servers of a node; every option defaults to settings.NAMESRV."""

    help = "Run a NameServer node's gateway (RocketMQ remoting server + internal port)."
    # The gateway serves no URLs: only the NAMESRV checks matter here, so a broken
    # web layer (URL config, DRF settings) cannot keep the routing service down.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        """The command line; defaults come from settings.NAMESRV."""
        conf = namesrv_settings()
        parser.add_argument("--node", default=conf.NODE_ID, help="node id, e.g. n1")
        parser.add_argument("--host", default=conf.HOST, help="the address the ports listen on")
        parser.add_argument(
            "--remoting-advertise",
            default=None,
            metavar="HOST:PORT",
            help="raft mode: where clients reach the remoting port, recorded in the replicated "
            "state for every node's address server, /rocketmq/nsaddr (default: none, nothing "
            "recorded; run_node and cluster up give it)",
        )
        parser.add_argument(
            "--port",
            type=int,
            default=None,
            help="the remoting port; 0 picks a free one (default: listenPort of --config, "
            f"else NAMESRV['PORT'], now {conf.PORT})",
        )
        parser.add_argument(
            "--internal-port",
            type=int,
            default=conf.INTERNAL_PORT,
            help="the internal port (scan, status); 0 picks a free port",
        )
        parser.add_argument(
            "--mode",
            choices=MODES,
            default=conf.MODE,
            help="eventual (each node on its own, as upstream) or raft (writes through Raft)",
        )
        parser.add_argument(
            "--ready-file",
            type=Path,
            default=None,
            help="write the node's ports to this JSON file once it serves (default: none)",
        )
        parser.add_argument(
            "--migrate", action="store_true", help="apply database migrations first"
        )
        parser.add_argument(
            "-p",
            "--print-config",
            action="store_true",
            help="print the effective NamesrvConfig (key=value lines) and exit",
        )
        raft = parser.add_argument_group("raft mode")
        raft.add_argument(
            "--raft-port",
            type=int,
            default=conf.RAFT_PORT,
            help="this node's Raft port; host:port is its identity, so never 0",
        )
        raft.add_argument(
            "--raft-peers",
            default=conf.RAFT_PEERS,
            help='every member\'s Raft address, "h:p,h:p,..." (self may be listed)',
        )
        raft.add_argument(
            "--raft-host",
            default=None,
            metavar="HOST",
            help="the host of this node's Raft identity (default: --host)",
        )
        raft.add_argument(
            "--raft-dir",
            type=Path,
            default=conf.RAFT_DIR or None,
            help="the Raft journal and snapshot folder (default: run/raft-<node>)",
        )
        raft.add_argument(
            "--raft-secret-file",
            default=conf.RAFT_SECRET_FILE or None,
            metavar="FILE",
            help="the cluster secret every Raft peer must prove (mode 0600)",
        )
        raft.add_argument(
            "--raft-bind-host",
            default=conf.RAFT_BIND_HOST or None,
            metavar="HOST",
            help="where the Raft port listens (default: the host of this node's identity)",
        )
        raft.add_argument(
            "--raft-dial",
            default=conf.RAFT_DIAL,
            help='"peer=h:p,...": dial a peer elsewhere (tests: through a fault proxy)',
        )
        raft.add_argument(
            "--propose-timeout-s",
            type=float,
            default=float(conf.PROPOSE_TIMEOUT_S),
            help="bound on a write without quorum before SYSTEM_ERROR",
        )
        raft.add_argument(
            "--skew-allowance-ms",
            type=int,
            default=int(conf.SKEW_ALLOWANCE_MS),
            help="extra silence the replicated expiry allows for clock skew",
        )
        raft.add_argument(
            "--failover-lag-bytes-max",
            type=int,
            default=DEFAULT_FAILOVER_LAG_BYTES_MAX,
            help="raft failover: an elected slave is at most this many bytes behind",
        )
        parser.add_argument(
            "--restore-state",
            type=Path,
            default=None,
            metavar="FILE",
            help="start a new cluster from this backup: only into an empty Raft folder (raft; "
            "every member given the same file) or an empty node (eventual); refused, and "
            "nothing started, otherwise (docs/RAFT.md, Backup and restore)",
        )
        parser.add_argument(
            "--config",
            type=Path,
            default=None,
            metavar="FILE",
            help="NamesrvConfig properties (Java names, e.g. orderMessageEnable=true), as -c",
        )
        parser.add_argument(
            "--tls-config",
            type=Path,
            default=None,
            metavar="FILE",
            help="tls.properties for the public port (tls.server.mode disabled | permissive | "
            "enforcing, tls.server.certPath ...; docs/SECURITY.md, TLS)",
        )
        acl = parser.add_argument_group("remoting ACL (docs/SECURITY.md)")
        acl.add_argument(
            "--acl-file",
            type=Path,
            default=Path(conf.ACL_FILE) if conf.ACL_FILE else None,
            metavar="FILE",
            help="accounts in plain_acl.yml style; without one, admin codes are refused",
        )
        acl.add_argument(
            "--no-acl",
            action="store_false",
            dest="acl_enabled",
            default=conf.ACL_ENABLED,
            help="turn the remoting ACL off: ANY peer may then change routes and config",
        )
        parser.add_argument(
            "--scan-interval-ms",
            type=int,
            default=None,
            help="also scan for silent brokers this often (default: scanNotActiveBrokerInterval "
            "of --config, else 0: only the Celery scan)",
        )
        parser.add_argument(
            "--scan-fallback-s",
            type=float,
            default=None,
            metavar="SECONDS",
            help="eventual mode: the Celery scan period; after three periods without a scan "
            "the gateway scans itself this often and raises an alarm (default: "
            "NAMESRV['SCAN_INTERVAL_S']; 0: off; ignored in raft mode)",
        )
        metrics = parser.add_argument_group("Prometheus metrics (docs/DEPLOY.md, Metrics)")
        metrics.add_argument(
            "--metrics-port",
            type=int,
            default=0,
            metavar="PORT",
            help="serve GET /metrics on this port (0: no metrics port)",
        )
        metrics.add_argument(
            "--metrics-host",
            default=None,
            metavar="HOST",
            help="where the metrics port listens (default: --host)",
        )
        parser.add_argument(
            "--read-front",
            action=argparse.BooleanOptionalAction,
            default=conf.READ_FRONT,
            help="serve the public port from a read front process that answers route "
            "queries from copies of this process's answers (docs/ARCHITECTURE.md)",
        )
        parser.add_argument(
            "--below-front-nice",
            type=int,
            choices=range(NICE_STEPS_MAX + 1),
            default=conf.BELOW_FRONT_NICE,
            metavar=f"0-{NICE_STEPS_MAX}",
            help="with a read front, run this process this many nice steps below it, so "
            "route reads get the larger share of busy cores (0: same priority)",
        )
        limits = parser.add_argument_group("public port limits against hostile peers")
        limits.add_argument(
            "--unfinished-frames-bytes-max",
            type=int,
            default=conf.UNFINISHED_FRAMES_BYTES_MAX,
            metavar="BYTES",
            help="bytes of unfinished frames held over all connections; past it the "
            "connection growing is closed",
        )
        limits.add_argument(
            "--frame-deadline-s",
            type=float,
            default=conf.FRAME_DEADLINE_S,
            metavar="SECONDS",
            help="a frame not complete this long after it started closes its connection",
        )
        limits.add_argument(
            "--connections-per-address-max",
            type=int,
            default=conf.CONNECTIONS_PER_ADDRESS_MAX,
            metavar="N",
            help="connections one remote address may hold; past it they are refused",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Build the options and run until a stop signal."""
        conf = namesrv_settings()
        errors = check_namesrv_settings()
        if errors:
            raise CommandError("\n".join(f"{e.id}: {e.msg}" for e in errors))
        properties = namesrv_properties(options["config"])
        kv_file, config_store_file = store_paths(properties, conf, options["node"])
        gateway_options = GatewayOptions(
            node_id=options["node"],
            host=options["host"],
            port=listen_port(options, properties, conf),
            remoting_advertise=remoting_advertise(options["remoting_advertise"]),
            internal_port=options["internal_port"],
            mode=options["mode"],
            internal_secret=conf.INTERNAL_SECRET,
            idle_timeout_s=idle_timeout_s(properties),
            unfinished_frames_bytes_max=positive(options, "unfinished_frames_bytes_max"),
            frame_deadline_s=positive(options, "frame_deadline_s"),
            connections_per_address_max=positive(options, "connections_per_address_max"),
            notify_min_broker_id_changed=conf.NOTIFY_MIN_BROKER_ID_CHANGED,
            clock_offset_ms=int(conf.CLOCK_OFFSET_MS),
            ready_file=options["ready_file"],
            raft=raft_options(options, conf),
            scan_interval_ms=scan_interval_ms(options, properties),
            beat_scan_period_ms=int(conf.SCAN_INTERVAL_S) * 1000,
            scan_fallback_s=scan_fallback_s(options, conf),
            kv_config_file=kv_file,
            config_store_file=config_store_file,
            namesrv_properties=properties,
            acl_enabled=options["acl_enabled"],
            acl_file=options["acl_file"],
            tls_config_file=options["tls_config"],
            metrics_port=metrics_port(options["metrics_port"]),
            metrics_host=options["metrics_host"] or None,
            read_front=options["read_front"],
            below_front_nice=options["below_front_nice"],
            restore_state_file=options["restore_state"],
        )
        if options["print_config"]:
            self.stdout.write(print_config(gateway_options), ending="")
            return
        if options["migrate"]:
            schema.migrate(("default", "projection"))  # shared, then this node's own
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        try:
            asyncio.run(
                serve(
                    gateway_options,
                    # The gateway knows a Mirror; this process makes it the projection.
                    mirror=functools.partial(
                        ProjectionWriter, publisher=load_publisher(conf.EVENT_PUBLISHER)
                    ),
                    leader_publisher=load_leader_publisher(conf.LEADER_PUBLISHER),
                )
            )
        except (GatewayConfigError, AclConfigError) as exc:
            raise CommandError(str(exc)) from exc
