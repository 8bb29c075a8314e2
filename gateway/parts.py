"""A gateway's parts, each built from the options by one small function.

:class:`~gateway.server.Gateway` reads as the list of its parts; how each is made
(which replicator for the mode, whether there is an ACL, TLS or metrics, which
remoting servers stand behind the public port) is here.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gateway.acl import namesrv_acl
from gateway.clock import Clock
from gateway.config_store import ConfigStoreError, ConfigStoreFile
from gateway.handoff import HandoffServer
from gateway.metrics import GatewayMetrics, metrics_bind_host
from gateway.metrics_http import MetricsHttpServer
from gateway.mirror import Mirror
from gateway.options import GatewayConfigError, GatewayOptions, RaftOptions
from gateway.scan_fallback import ScanFallback
from gateway.services import NameServerService
from raftstore.config import NamesrvConfig
from raftstore.raft import DEFAULT_SKEW_ALLOWANCE_MS, RaftReplicator
from raftstore.replicator import MODE_EVENTUAL, MODE_RAFT, LocalReplicator, Replicator
from raftstore.results import MinBrokerIdChange
from raftstore.route_table import RouteTable
from remoting.acl_policy import RemotingAcl
from remoting.connection import Handler
from remoting.listener import ConnectionBudget
from remoting.server import ConnectionClosedCallback, RemotingServer
from remoting.tls import ServerTls, TlsConfigError, read_tls_properties

log = logging.getLogger(__name__)

INTERNAL_HOST = "127.0.0.1"
INTERNAL_CONNECTIONS_MAX = 64
"""The internal port's connections (web workers, scan worker, status calls)."""
FRONTED_IDLE_TIMEOUT_S = 24 * 3600.0
FRONTED_CONNECTIONS_MAX = 1 << 20
FRONT_SOCKET_NAME = "gateway.sock"
HANDOFF_SOCKET_NAME = "handoff.sock"


def initial_config(options: GatewayOptions) -> NamesrvConfig:
    """The table's config before anything is replicated.

    The setting seeds the replicated notifyMinBrokerIdChanged; UPDATE_NAMESRV_CONFIG
    can still change it at run time, and the table decides what to notify. In
    eventual mode the updates accepted before a restart (``configStorePath``) come
    last; GatewayConfigError when that file does not read.
    """
    config = NamesrvConfig(
        notify_min_broker_id_changed=options.notify_min_broker_id_changed
    ).updated(options.namesrv_properties)
    store = config_store(options)
    if store is None:
        return config
    try:
        return config.updated(store.load())
    except ConfigStoreError as exc:
        raise GatewayConfigError(str(exc)) from exc


def config_store(options: GatewayOptions) -> ConfigStoreFile | None:
    """Eventual mode's store of accepted config updates; None in raft mode (the log
    is the store) or when no path is given."""
    if options.mode != MODE_EVENTUAL or options.config_store_file is None:
        return None
    return ConfigStoreFile(options.config_store_file)


def scan_period_ms(options: GatewayOptions) -> int:
    """This node's real ``scanNotActiveBrokerInterval``: its own scans' period, else the
    external scans' (0: nothing scans it)."""
    return options.scan_interval_ms if options.scan_interval_ms > 0 else options.beat_scan_period_ms


def node_properties(options: GatewayOptions, port: int) -> dict[str, str]:
    """The per-process NamesrvConfig keys (``NODE_KEYS``) as this node really runs them,
    with ``port`` its public remoting port."""
    eventual = options.mode == MODE_EVENTUAL

    def used_path(path: Path | None) -> str:
        # Raft mode keeps both in the log: no file is used, so none is reported.
        return str(path) if eventual and path is not None else ""

    return {
        "listenPort": str(port),
        "serverChannelMaxIdleTimeSeconds": str(round(options.idle_timeout_s)),
        "scanNotActiveBrokerInterval": str(scan_period_ms(options)),
        "kvConfigPath": used_path(options.kv_config_file),
        "configStorePath": used_path(options.config_store_file),
        "rocketmqHome": NamesrvConfig().rocketmq_home,
    }


def seeded_table_class(config: NamesrvConfig) -> type[RouteTable]:
    """A RouteTable class whose fresh tables start with ``config``.

    RaftReplicator builds its table from a class (it also restores snapshots
    through it); a restored table keeps the snapshot's own config.
    """
    if config == NamesrvConfig():
        return RouteTable

    class SeededRouteTable(RouteTable):
        """A route table whose default config is the node's configured one."""

        def __init__(self, initial: NamesrvConfig | None = None) -> None:
            super().__init__(config if initial is None else initial)

    return SeededRouteTable


def build_replicator(
    node_id: str,
    mode: str,
    config: NamesrvConfig | None = None,
    *,
    raft: RaftOptions | None = None,
    host: str = "127.0.0.1",
) -> Replicator:
    """The replicator for ``mode`` over a table starting with ``config``."""
    if mode == MODE_EVENTUAL:
        return LocalReplicator(node_id, RouteTable(config))
    if mode != MODE_RAFT:
        raise GatewayConfigError(f"unknown mode {mode!r}")
    if raft is None or raft.port <= 0:
        raise GatewayConfigError("raft mode needs --raft-port (this node's Raft identity)")
    self_addr = f"{raft.host or host}:{raft.port}"
    if not raft.peers:
        raise GatewayConfigError("raft mode needs --raft-peers (every member's host:port)")
    if raft.propose_timeout_s <= 0 or raft.skew_allowance_ms < 0:
        raise GatewayConfigError("propose timeout must be > 0 and skew allowance >= 0")
    try:
        return RaftReplicator(
            node_id=node_id,
            self_addr=self_addr,
            peers=[p for p in raft.peers if p != self_addr],
            data_dir=raft.data_dir,
            propose_timeout_s=raft.propose_timeout_s,
            settings=raft.settings,
            dial=dict(raft.dial),
            table_factory=seeded_table_class(config or NamesrvConfig()),
            secret=raft.secret,
            bind_host=raft.bind_host,
        )
    except ValueError as exc:
        raise GatewayConfigError(str(exc)) from exc


def build_acl(options: GatewayOptions) -> RemotingAcl | None:
    """The remoting ACL of the options (None when turned off); AclConfigError if bad."""
    if not options.acl_enabled:
        log.warning("remoting ACL is OFF: any peer may change routes, KV and config")
        return None
    if options.acl_file is None:
        log.warning(
            "no ACL file: admin request codes are refused and only loopback peers "
            "may register brokers unsigned (give --acl-file to add accounts)"
        )
        return namesrv_acl(None)
    return namesrv_acl(options.acl_file)


def build_tls(options: GatewayOptions) -> ServerTls | None:
    """The public port's TLS from ``options.tls_config_file``; GatewayConfigError when the
    file or the certificates it names do not load. Checked here even with a read front
    (which loads the file itself), so a bad file stops the node at once."""
    if options.tls_config_file is None:
        return None
    try:
        return ServerTls(read_tls_properties(options.tls_config_file)[0])
    except TlsConfigError as exc:
        raise GatewayConfigError(str(exc)) from exc


def build_service(
    options: GatewayOptions,
    replicator: Replicator,
    clock: Clock,
    notify: Callable[[tuple[MinBrokerIdChange, ...]], None],
) -> NameServerService:
    """The NameServer service over ``replicator``, with the raft options' skew allowance
    and failover bound (none outside raft mode)."""
    raft = options.raft
    return NameServerService(
        replicator,
        clock,
        notify,
        skew_allowance_ms=DEFAULT_SKEW_ALLOWANCE_MS if raft is None else raft.skew_allowance_ms,
        failover_lag_bytes_max=None if raft is None else raft.failover_lag_bytes_max,
    )


def build_metrics(
    options: GatewayOptions,
    service: NameServerService,
    acl: RemotingAcl | None,
    scan_fallback: ScanFallback,
    mirror: Mirror,
) -> tuple[GatewayMetrics | None, MetricsHttpServer | None]:
    """The metrics and their HTTP port, only when ``metrics_port`` asks for them; the
    metrics then count the service's scans, as one of its scan observers."""
    if options.metrics_port <= 0:
        return None, None
    metrics = GatewayMetrics(
        service.replicator,
        acl,
        scan_fallback,
        mirror=mirror,
        registrations=service.registrations,
    )
    service.scan_observers.append(metrics.count_scan)
    http = MetricsHttpServer(
        metrics, metrics_bind_host(options.metrics_host, options.host), options.metrics_port
    )
    return metrics, http


@dataclass(frozen=True, slots=True)
class PublicPorts:
    """The remoting servers behind the public port.

    Without a read front, ``server`` is the public port itself. Behind one, ``server``
    takes the front's links on a Unix socket and ``adopted_server`` serves the brokers'
    connections the front hands over through ``handoff`` (gateway/handoff.py).
    """

    server: RemotingServer
    adopted_server: RemotingServer | None = None
    handoff: HandoffServer | None = None


def _public_server(
    options: GatewayOptions, on_closed: ConnectionClosedCallback
) -> functools.partial[RemotingServer]:
    return functools.partial(
        RemotingServer,
        on_connection_closed=on_closed,
        unfinished_frames_bytes_max=options.unfinished_frames_bytes_max,
        frame_deadline_s=options.frame_deadline_s,
    )


def direct_ports(
    options: GatewayOptions,
    handler: Handler,
    on_closed: ConnectionClosedCallback,
    tls: ServerTls | None,
) -> PublicPorts:
    """This process serves the public port itself (with TLS when ``tls`` is given)."""
    server = _public_server(options, on_closed)(
        handler,
        prepare=None if tls is None else tls.prepare,
        host=options.host,
        port=options.port,
        idle_timeout_s=options.idle_timeout_s,
        connections_per_address_max=options.connections_per_address_max,
    )
    return PublicPorts(server)


def fronted_ports(
    options: GatewayOptions,
    folder: Path,
    handler: Handler,
    fronted_handler: Handler,
    on_closed: ConnectionClosedCallback,
) -> PublicPorts:
    """A read front owns the public port; clients reach this process through it, over
    Unix sockets in ``folder`` (which only this user can enter)."""
    public_server = _public_server(options, on_closed)
    server = public_server(
        fronted_handler,
        unix_path=str(folder / FRONT_SOCKET_NAME),
        # The front times idle clients out and closes their links.
        idle_timeout_s=FRONTED_IDLE_TIMEOUT_S,
        # Every link comes from the front; it caps each client address.
        connections_per_address_max=FRONTED_CONNECTIONS_MAX,
    )
    # Brokers' connections are handed over by the front and served here directly,
    # with the public port's limits.
    adopted_server = public_server(
        handler,
        listen=False,
        host=options.host,
        idle_timeout_s=options.idle_timeout_s,
        connections_per_address_max=options.connections_per_address_max,
    )
    handoff = HandoffServer(folder / HANDOFF_SOCKET_NAME, adopted_server.adopt)
    return PublicPorts(server, adopted_server, handoff)


def internal_server(handler: Handler, port: int) -> RemotingServer:
    """The internal port (loopback, secret-protected: the scan task and the web)."""
    return RemotingServer(
        handler,
        host=INTERNAL_HOST,
        port=port,
        # Its own budget: a flood of the public ports must not lock out the scan and
        # the status (remoting/listener.py).
        budget=ConnectionBudget(INTERNAL_CONNECTIONS_MAX),
    )
