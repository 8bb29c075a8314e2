"""The gateway process of a NameServer node, as plain functions and one class.

``manage.py run_gateway`` is a thin shell over :func:`serve`. The steps:

1. build the replicator for the mode (eventual: :class:`LocalReplicator`; raft:
   :class:`~raftstore.raft.RaftReplicator`, which binds the Raft port and replays
   snapshot + journal before the gateway goes on);
2. start the projection writer, which rebuilds the node's tables first (and again
   whenever a Raft snapshot replaces the whole table);
3. start the public remoting server (clients and brokers) and the internal one
   (loopback, secret-protected: the scan task and the web process);
4. write the ready file (ports and pid) once both listen;
5. on SIGTERM/SIGINT: drain both servers, flush the projection, stop.

In eventual mode the liveness scan comes from Celery beat over the internal port;
with ``scan_fallback_s`` set, a gateway that hears no scan for three such periods
scans itself every period and raises an alarm until the scans come back
(:class:`~gateway.services.ScanFallback`), so a dead beat or Redis cannot keep a
silent broker in the table forever.

In eventual mode a closed broker connection unregisters what was registered
over it (upstream ``BrokerHousekeepingService``). In raft mode that would be a
replicated decision taken from one node's local observation, so the service
only logs it and leaves liveness to the replicated expiry (docs/RAFT.md,
"Liveness in raft mode").

Why one module of ~650 lines: it is the process's wiring, read top to bottom as the
start and stop order above; the options it takes, the ``Mirror`` it is given and the
loops it owns (leadership, scan, scan fallback, metrics) are started and stopped in
one place so their order cannot drift. The request handling itself lives elsewhere
(``dispatch.py``, ``services.py``, ``internal.py``, ``metrics.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gateway.acl import namesrv_acl
from gateway.clock import Clock, SystemClock
from gateway.dispatch import PENDING, RequestDispatcher
from gateway.front import (
    FRONT_PEER,
    FRONT_PEER_CODE,
    FRONT_STATS_CODE,
    ROUTE_ANSWERS_FIELD,
    FrontOptions,
    FrontProcess,
    lower_priority,
    parse_peer,
)
from gateway.handoff import HandoffServer
from gateway.internal import InternalDispatcher
from gateway.kv_file import KvConfigFile
from gateway.metrics import (
    GatewayMetrics,
    MetricsHttpServer,
    ScanCountingService,
    metrics_bind_host,
)
from gateway.route_versions import RouteVersions
from gateway.services import ScanFallback
from raftstore.commands import Command, PutKV
from raftstore.config import NamesrvConfig
from raftstore.failover import DEFAULT_FAILOVER_LAG_BYTES_MAX
from raftstore.raft import (
    DEFAULT_PROPOSE_TIMEOUT_S,
    DEFAULT_SKEW_ALLOWANCE_MS,
    RaftReplicator,
    RaftSettings,
)
from raftstore.replicator import MODE_EVENTUAL, MODE_RAFT, LocalReplicator, Replicator
from raftstore.results import ApplyResult, MinBrokerIdChange
from raftstore.route_table import RouteTable
from remoting.acl_policy import RemotingAcl
from remoting.client import RemotingClient
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.listener import ConnectionBudget, raise_open_files_limit
from remoting.server import (
    CANCEL_GRACE_S,
    CONNECTIONS_PER_ADDRESS_MAX,
    FRAME_DEADLINE_S,
    UNFINISHED_FRAMES_BYTES_MAX,
    Connection,
    RemotingServer,
)
from remoting.tls import ServerTls, TlsConfigError, read_tls_properties

log = logging.getLogger(__name__)

DRAIN_TIMEOUT_S = 5.0
PROJECTION_FLUSH_TIMEOUT_S = 30.0
NOTIFICATIONS_PENDING_MAX = 1024
LEADERSHIP_POLL_S = 0.5
"""How often a raft gateway looks for a leader or term change to tell the consoles."""
"""In-flight NOTIFY_MIN_BROKER_ID_CHANGE sends; beyond this new ones are dropped."""
INTERNAL_HOST = "127.0.0.1"
FRONTED_IDLE_TIMEOUT_S = 24 * 3600.0
FRONTED_CONNECTIONS_MAX = 1 << 20
INTERNAL_CONNECTIONS_MAX = 64
"""The internal port's connections (web workers, scan worker, status calls)."""


LeaderPublisher = Callable[[str, str | None, int], None]
"""Told (node id, leader address or None, term) when a raft node sees leadership change."""


class Mirror(Protocol):
    """What keeps a copy of the table outside the gateway (the Django projection).

    The gateway knows only this shape: ``manage.py run_gateway`` injects
    ``namesrv_app.projection.ProjectionWriter``, so this package never imports Django.
    """

    def start(self, *, rebuild: bool = True) -> None:
        """Subscribe to the replicator; rebuild the whole copy first when asked."""

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until everything applied so far is mirrored; False on timeout."""

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop mirroring."""

    def request_rebuild(self) -> None:
        """Rebuild the whole copy (a snapshot replaced the table); any thread."""

    def lag_versions(self) -> int | None:
        """Table changes not yet in the copy (the projection-lag metric); None: no copy."""


MirrorFactory = Callable[[Replicator], Mirror]


class NoMirror:
    """The mirror of a gateway without a console: nothing to keep."""

    def __init__(self, replicator: Replicator) -> None:
        self.replicator = replicator

    def start(self, *, rebuild: bool = True) -> None:
        """Nothing to start."""

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Always up to date."""
        return True

    def stop(self, timeout_s: float = 10.0) -> None:
        """Nothing to stop."""

    def request_rebuild(self) -> None:
        """Nothing to rebuild."""

    def lag_versions(self) -> int | None:
        """No copy, so no lag."""
        return None


class GatewayConfigError(ValueError):
    """The gateway cannot start with the given options."""


@dataclass(frozen=True, slots=True)
class RaftOptions:
    """Raft mode's part of the options.

    ``port`` with the gateway's host is this node's Raft identity
    (``host:port``); ``peers`` are every member's identities (self may be
    listed); ``dial`` maps a peer identity to the address actually dialled
    (tests route every link through ``tools/faultproxy.py``).
    """

    port: int
    peers: tuple[str, ...]
    data_dir: Path
    secret: str = field(repr=False)
    """The cluster secret every Raft peer proves (docs/SECURITY.md, "Raft port")."""
    dial: Mapping[str, str] = field(default_factory=dict)
    bind_host: str | None = None
    """Where the Raft port listens; None: the host of this node's Raft identity."""
    host: str | None = None
    """The host of this node's Raft identity (what its peers dial); None: the gateway's
    remoting host. A node on its own host advertises its routable address here."""
    propose_timeout_s: float = DEFAULT_PROPOSE_TIMEOUT_S
    skew_allowance_ms: int = DEFAULT_SKEW_ALLOWANCE_MS
    settings: RaftSettings = field(default_factory=RaftSettings)
    failover_lag_bytes_max: int = DEFAULT_FAILOVER_LAG_BYTES_MAX


@dataclass(frozen=True, slots=True)
class GatewayOptions:
    """Everything a gateway needs to start (the command line and settings, merged)."""

    node_id: str
    host: str = "127.0.0.1"
    port: int = 9876
    internal_port: int = 0
    mode: str = MODE_EVENTUAL
    internal_secret: str = ""
    idle_timeout_s: float = 120.0
    unfinished_frames_bytes_max: int = UNFINISHED_FRAMES_BYTES_MAX
    """Public port: bytes of unfinished frames held over all connections."""
    frame_deadline_s: float = FRAME_DEADLINE_S
    """Public port: how long a started frame may take to arrive."""
    connections_per_address_max: int = CONNECTIONS_PER_ADDRESS_MAX
    """Public port: connections one remote address may hold."""
    notify_min_broker_id_changed: bool = False
    clock_offset_ms: int = 0
    """Shifts this node's wall clock (experiments give nodes skewed clocks)."""
    ready_file: Path | None = None
    drain_timeout_s: float = DRAIN_TIMEOUT_S
    raft: RaftOptions | None = None
    scan_interval_ms: int = 0
    """0: scans come from Celery beat; > 0: the gateway also scans itself this often
    (fast failure detection; in raft mode only the leader's scan proposes)."""
    scan_fallback_s: float = 0
    """Eventual mode: the period of the external (Celery beat) scans. When none has
    arrived for three such periods, the gateway scans itself every ``scan_fallback_s``
    and raises an alarm until one arrives again. 0: off. Ignored in raft mode and
    with ``scan_interval_ms`` (the gateway scans itself anyway)."""
    kv_config_file: Path | None = None
    """Eventual mode: where KV config is persisted across restarts (None: not at all)."""
    namesrv_properties: Mapping[str, str] = field(default_factory=dict)
    """NamesrvConfig properties by their Java names (upstream's ``-c`` file)."""
    acl_enabled: bool = True
    """False only when an operator turns the remoting ACL off (``--no-acl``)."""
    acl_file: Path | None = None
    """The accounts file (plain_acl.yml style); None: no accounts, so admin codes are
    refused and only loopback peers may send broker codes unsigned."""
    metrics_port: int = 0
    """The Prometheus metrics port (``GET /metrics``, gateway/metrics.py); 0: no metrics."""
    metrics_host: str | None = None
    """Where the metrics port listens; None: ``host`` (loopback if ``host`` is a wildcard)."""
    read_front: bool = False
    """Serve the public port from a read front process (gateway/front.py): route reads
    then never wait for the apply path. False: this process serves the port itself."""
    tls_config_file: Path | None = None
    """The public port's TLS (a tls.properties, remoting/tls.py); None: plain only."""
    below_front_nice: int = 0
    """With a read front: how many steps of nice value this process runs below it once
    the front is up (0: the same priority). When the host's cores are all busy, the
    kernel then gives route reads the larger share (5 steps: about three to one), so
    a registration storm or a large table's first registration slows route answers
    less; registrations and Raft still get a quarter of a busy core, never nothing
    (docs/BENCHMARKS.md, "registration storm")."""

    def raft_addr(self) -> str | None:
        """This node's Raft identity, None outside raft mode."""
        return None if self.raft is None else f"{self.raft.host or self.host}:{self.raft.port}"


def scan_fallback_period_s(options: GatewayOptions, mode: str) -> float:
    """The scan fallback's period for a gateway in ``mode``: 0 (off) in raft mode and
    when the gateway scans itself anyway (``scan_interval_ms``); GatewayConfigError
    when ``scan_fallback_s`` is negative or not a number."""
    period = options.scan_fallback_s
    if not isinstance(period, int | float) or not math.isfinite(period) or period < 0:
        raise GatewayConfigError(f"scan_fallback_s must be >= 0 seconds (0: off), got {period}")
    if mode != MODE_EVENTUAL or options.scan_interval_ms > 0:
        return 0.0
    return float(period)


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


def notify_request(change: MinBrokerIdChange) -> RemotingCommand:
    """The one-way NOTIFY_MIN_BROKER_ID_CHANGE (905) request for ``change``."""
    fields = {
        "minBrokerId": str(change.min_broker_id),
        "minBrokerAddr": change.min_broker_addr,
        "offlineBrokerAddr": change.offline_broker_addr,
        "haBrokerAddr": change.ha_broker_addr,
    }
    return RemotingCommand.request(
        RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE,
        {k: v for k, v in fields.items() if v is not None},
        oneway=True,
    )


def write_ready_file(path: Path, info: dict[str, Any]) -> None:
    """Write ``info`` as JSON atomically (readers never see half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(info, sort_keys=True), encoding="utf-8")
    os.replace(temporary, path)


class Gateway:
    """One node's gateway: replicator, projection, route cache and both servers."""

    def __init__(
        self,
        options: GatewayOptions,
        *,
        clock: Clock | None = None,
        replicator: Replicator | None = None,
        mirror: MirrorFactory = NoMirror,
        leader_publisher: LeaderPublisher | None = None,
    ) -> None:
        self.options = options
        self._leader_publisher = leader_publisher
        self.clock: Clock = clock if clock is not None else SystemClock(options.clock_offset_ms)
        # The setting seeds the replicated notifyMinBrokerIdChanged; UPDATE_NAMESRV_CONFIG
        # can still change it at run time, and the table decides what to notify.
        initial = NamesrvConfig(
            notify_min_broker_id_changed=options.notify_min_broker_id_changed
        ).updated(options.namesrv_properties)
        self.replicator = replicator or build_replicator(
            options.node_id, options.mode, initial, raft=options.raft, host=options.host
        )
        self.client = RemotingClient()
        self.service = ScanCountingService(
            self.replicator,
            self.clock,
            self._notify,
            skew_allowance_ms=(
                DEFAULT_SKEW_ALLOWANCE_MS
                if options.raft is None
                else options.raft.skew_allowance_ms
            ),
            failover_lag_bytes_max=(
                None if options.raft is None else options.raft.failover_lag_bytes_max
            ),
        )
        self.dispatcher = RequestDispatcher(self.service, clock=self.clock)
        self._answer_now = self.dispatcher.answer_now
        self.scan_fallback = ScanFallback(scan_fallback_period_s(options, self.replicator.mode))
        self.internal = InternalDispatcher(
            self.service, options.internal_secret, self.scan_fallback
        )
        self.projection: Mirror = mirror(self.replicator)
        # Before start(): a raft restart itself may install a snapshot.
        self.replicator.subscribe_snapshot(self._snapshot_installed)
        self.acl = build_acl(options)
        self.service.holds.acl = self.acl  # who signed, for gateway/broker_holds.py
        self.tls = build_tls(options)
        # Metrics only when asked for: without them the public handler is _handle itself.
        self.metrics: GatewayMetrics | None = None
        self.metrics_server: MetricsHttpServer | None = None
        handler = self._handle
        if options.metrics_port > 0:
            self.metrics = GatewayMetrics(
                self.replicator,
                self.acl,
                self.scan_fallback,
                mirror=self.projection,
                registrations=self.service.registrations,
            )
            self.service.metrics = self.metrics
            handler = self._handle_metered
            self.metrics_server = MetricsHttpServer(
                self.metrics,
                metrics_bind_host(options.metrics_host, options.host),
                options.metrics_port,
            )
        self._public_handler = handler
        self.front: FrontProcess | None = None
        self._front_dir: Path | None = None
        self.route_versions: RouteVersions | None = None
        public_server = functools.partial(
            RemotingServer,
            on_connection_closed=self._connection_closed,
            unfinished_frames_bytes_max=options.unfinished_frames_bytes_max,
            frame_deadline_s=options.frame_deadline_s,
        )
        if options.read_front:
            # The front owns the public port; clients reach this process through it,
            # over a Unix socket in a folder only this user can enter.
            self._front_dir = Path(tempfile.mkdtemp(prefix=f"namesrv-{options.node_id}-"))
            self.route_versions = RouteVersions(self._front_dir / "route-versions", writable=True)
            self.dispatcher.route_cache.versions = self.route_versions
            self.server = public_server(
                self._handle_fronted,
                unix_path=str(self._front_dir / "gateway.sock"),
                # The front times idle clients out and closes their links.
                idle_timeout_s=FRONTED_IDLE_TIMEOUT_S,
                # Every link comes from the front; it caps each client address.
                connections_per_address_max=FRONTED_CONNECTIONS_MAX,
            )
            # Brokers' connections are handed over by the front and served here
            # directly, with the public port's limits (gateway/handoff.py).
            self.adopted_server: RemotingServer | None = public_server(
                handler,
                listen=False,
                host=options.host,
                idle_timeout_s=options.idle_timeout_s,
                connections_per_address_max=options.connections_per_address_max,
            )
            self.handoff: HandoffServer | None = HandoffServer(
                self._front_dir / "handoff.sock", self.adopted_server.adopt
            )
            if self.metrics is not None:
                self.metrics.collector.handoff = self.handoff
        else:
            self.adopted_server = None
            self.handoff = None
            self.server = public_server(
                handler,
                prepare=None if self.tls is None else self.tls.prepare,
                host=options.host,
                port=options.port,
                idle_timeout_s=options.idle_timeout_s,
                connections_per_address_max=options.connections_per_address_max,
            )
        self.internal_server = RemotingServer(
            self.internal.handle,
            host=INTERNAL_HOST,
            port=options.internal_port,
            # Its own budget: a flood of the public ports must not lock out the scan
            # and the status (remoting/listener.py).
            budget=ConnectionBudget(INTERNAL_CONNECTIONS_MAX),
        )
        # Connections that carried a REGISTER_BROKER: only their closing can
        # unregister anything, so other clients' closes cost nothing.
        self._broker_channels: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._scan_task: asyncio.Task[None] | None = None
        self._fallback_task: asyncio.Task[None] | None = None
        self._leader_task: asyncio.Task[None] | None = None
        self._stopping = False

    async def start(self) -> None:
        """Start replicating, rebuild the projection, then listen on both ports."""
        await self.replicator.start()
        await self._load_kv_config()
        self.projection.start(rebuild=True)
        if not await asyncio.to_thread(self.projection.flush, PROJECTION_FLUSH_TIMEOUT_S):
            log.warning(
                "projection rebuild did not finish within %.0f s", PROJECTION_FLUSH_TIMEOUT_S
            )
        await self.server.start()
        if self.adopted_server is not None and self.handoff is not None:
            await self.adopted_server.start()
            await self.handoff.start()
        if self._front_dir is not None:
            self.front = FrontProcess(self._front_options(self._front_dir))
            await self.front.start()
            if self.options.below_front_nice > 0:
                changed = lower_priority(self.options.below_front_nice)
                log.info(
                    "gateway threads (%d) run %d nice steps below the read front",
                    changed,
                    self.options.below_front_nice,
                )
        await self.internal_server.start()
        if self.metrics_server is not None:
            await self.metrics_server.start()
        if self.options.scan_interval_ms > 0:
            self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop())
        if self.scan_fallback.enabled:
            # The silence is counted from now: a node that never hears a scan takes over
            # three periods after it started listening.
            self.scan_fallback.restart()
            self._fallback_task = asyncio.get_running_loop().create_task(
                self._scan_fallback_loop(self.scan_fallback)
            )
        if self._leader_publisher is not None and isinstance(self.replicator, RaftReplicator):
            self._leader_task = asyncio.get_running_loop().create_task(
                self._watch_leadership(self.replicator, self._leader_publisher)
            )
        log.info(
            "gateway %s (%s) listening on %s:%d, internal %s:%d",
            self.options.node_id,
            self.replicator.mode,
            self.options.host,
            self.port,
            INTERNAL_HOST,
            self.internal_server.port,
        )

    async def _load_kv_config(self) -> None:
        """Eventual mode: replay the saved KV table, then save it after every KV change."""
        path = self.options.kv_config_file
        if path is None or self.options.mode != MODE_EVENTUAL:
            return
        kv_file = KvConfigFile(
            path, bytes_max=self.replicator.read(lambda t: t.config.kv_config_bytes_max)
        )
        for namespace, table in sorted(kv_file.load().items()):
            for key, value in sorted(table.items()):
                await self.replicator.propose(PutKV(namespace, key, value))

        def save_after_kv_change(_command: Command, result: ApplyResult) -> None:
            # Runs on the apply path, as upstream persists inside put/delete: the
            # file is small and a change acknowledged to the caller is on disk.
            if result.changes.kv:
                kv_file.save(self.replicator.read(lambda table: table.kv_namespaces()))

        self.replicator.subscribe(save_after_kv_change)
        log.info("KV config of %s persisted in %s", self.options.node_id, path)

    @property
    def port(self) -> int:
        """The public remoting port (the read front's when there is one)."""
        if self.front is not None:
            return self.front.port
        return self.server.port

    def _front_options(self, folder: Path) -> FrontOptions:
        options = self.options
        return FrontOptions(
            listen_fd=-1,  # FrontProcess binds the port and fills it in
            upstream_path=str(folder / "gateway.sock"),
            handoff_path=None if self.handoff is None else str(self.handoff.path),
            versions_path=str(folder / "route-versions"),
            parent_pid=os.getpid(),
            host=options.host,
            port=options.port,
            idle_timeout_s=options.idle_timeout_s,
            unfinished_frames_bytes_max=options.unfinished_frames_bytes_max,
            frame_deadline_s=options.frame_deadline_s,
            connections_per_address_max=options.connections_per_address_max,
            acl_enabled=options.acl_enabled,
            acl_file=None if options.acl_file is None else str(options.acl_file),
            tls_config_file=(
                None if options.tls_config_file is None else str(options.tls_config_file)
            ),
        )

    def ready_info(self) -> dict[str, Any]:
        """What the ready file says: the node, its mode, its bound ports and the pid."""
        info: dict[str, Any] = {
            "node_id": self.options.node_id,
            "mode": self.replicator.mode,
            "host": self.options.host,
            "port": self.port,
            "read_front": self.front is not None,
            "internal_port": self.internal_server.port,
            "pid": os.getpid(),
        }
        if self.options.raft is not None:
            info["raft_port"] = self.options.raft.port
        if self.metrics_server is not None:
            info["metrics_port"] = self.metrics_server.port
        if self.front is not None:
            # Not the front's pid: the gateway restarts a front that dies.
            info["front_socket"] = self.server.unix_path
        return info

    async def stop(self) -> None:
        """Drain both servers, let pending work finish, flush the projection, stop.

        Connections the shutdown itself closes do not unregister their brokers:
        the node going away is not the broker going away, and the projection
        keeps the last state the node served.
        """
        self._stopping = True
        for task in (self._scan_task, self._fallback_task, self._leader_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.metrics_server is not None:
            await self.metrics_server.close()
        if self.front is not None:
            # First: it lets the requests it forwarded finish here.
            await self.front.stop(self.options.drain_timeout_s + CANCEL_GRACE_S)
        if self.handoff is not None:
            await self.handoff.close()
        await self.server.close(self.options.drain_timeout_s)
        if self.adopted_server is not None:
            await self.adopted_server.close(self.options.drain_timeout_s)
        await self.internal_server.close(self.options.drain_timeout_s)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self.options.drain_timeout_s)
        await self.client.close()
        await self.replicator.stop()
        await asyncio.to_thread(self.projection.flush, PROJECTION_FLUSH_TIMEOUT_S)
        await asyncio.to_thread(self.projection.stop, PROJECTION_FLUSH_TIMEOUT_S)
        if self._front_dir is not None:
            if self.route_versions is not None:
                self.route_versions.close()
            shutil.rmtree(self._front_dir, ignore_errors=True)

    async def _watch_leadership(
        self, replicator: RaftReplicator, publisher: LeaderPublisher
    ) -> None:
        """Tell the consoles when this node sees a new leader or term (or loses the leader).

        Polled off the apply thread: the Raft view is refreshed every 50 ms and
        reading it costs nothing, while a callback on PySyncObj's tick thread could
        stall replication behind a slow channel layer.
        """
        seen: tuple[str | None, int] | None = None
        while True:
            current = replicator.leadership()
            if current != seen:
                seen = current
                try:
                    await asyncio.to_thread(publisher, self.options.node_id, *current)
                except Exception:
                    log.exception("leader-change publisher failed")
            await asyncio.sleep(LEADERSHIP_POLL_S)

    async def _scan_loop(self) -> None:
        """The gateway's own liveness scan (``scan_interval_ms``); failures only logged."""
        while True:
            await asyncio.sleep(self.options.scan_interval_ms / 1000)
            try:
                await self.service.scan()
            except Exception as exc:
                # No quorum or a leadership change: the next round tries again.
                log.info("liveness scan failed: %s", exc)

    async def _scan_fallback_loop(self, fallback: ScanFallback) -> None:
        """Scan here every period while no external scan arrives (``scan_fallback_s``).

        The same :meth:`NameServerService.scan` as the internal request, stamped by this
        gateway's clock; failures are only logged, as the scan loop's are.
        """
        while True:
            wait_s = fallback.seconds_until_due()
            if wait_s > 0:
                await asyncio.sleep(wait_s)
                continue
            fallback.begin_run()
            try:
                await self.service.scan()
            except Exception as exc:
                log.info("fallback liveness scan failed: %s", exc)
            await asyncio.sleep(fallback.period_s)

    # -- callbacks ------------------------------------------------------------------

    def _handle(
        self, request: RemotingCommand, conn: Connection
    ) -> RemotingCommand | Coroutine[Any, Any, RemotingCommand | None] | None:
        """The public server's handler: reads that need no waiting (cached routes above
        all) are answered here, so the server writes them without creating a Task."""
        acl = self.acl
        if acl is not None and acl.guards(request.code):
            refusal = acl.check(request, conn.peer_host)
            if refusal is not None:
                return acl.refuse(request, refusal)
        answer = self._answer_now(request)
        if answer is not PENDING:
            return answer
        if request.code == RequestCode.REGISTER_BROKER:
            self._broker_channels.add(conn.id)
        return self.dispatcher.handle_async(request, conn)

    def _handle_fronted(
        self, request: RemotingCommand, conn: Connection
    ) -> RemotingCommand | Coroutine[Any, Any, RemotingCommand | None] | None:
        """The handler behind a read front: a link's first frame names its client, whose
        address the ACL and the logs then see; the rest is the public handler's.

        Only the front itself speaks the two private codes: the peer frame counts only
        as a link's first, and route-answer reports only on the front's own link (named
        ``read-front``, which no socket address can be). A client sending either code
        gets what any unknown code gets."""
        if request.code == FRONT_PEER_CODE and not conn.peer_host:
            peer = parse_peer(request)
            if peer is not None:
                conn.peer_host, conn.peer_port = peer
                conn.id = f"{conn.id.partition('/')[0]}/{peer[0]}:{peer[1]}"
            return None
        if request.code == FRONT_STATS_CODE and (conn.peer_host, conn.peer_port) == FRONT_PEER:
            answered = (request.ext_fields or {}).get(ROUTE_ANSWERS_FIELD, "")
            if self.metrics is not None and answered.isdigit():
                self.metrics.front_route_answers.inc(int(answered))
            return None
        return self._public_handler(request, conn)

    def _handle_metered(
        self, request: RemotingCommand, conn: Connection
    ) -> RemotingCommand | Coroutine[Any, Any, RemotingCommand | None] | None:
        """The public handler with metrics on: :meth:`_handle`, counted per code."""
        assert self.metrics is not None
        return self.metrics.handle(self._handle, request, conn)

    def _connection_closed(self, conn: Connection) -> None:
        if self._stopping or conn.id not in self._broker_channels:
            return
        self._broker_channels.discard(conn.id)
        # The service decides what a close means in this mode (raft: nothing replicated).
        self._spawn(self.service.channel_destroyed(conn.id))

    def _snapshot_installed(self, applied_index: int) -> None:
        """Raft tick thread: a snapshot replaced the table; rebuild the projection
        (the route cache subscribes on its own)."""
        log.info("snapshot at index %d installed: rebuilding projection", applied_index)
        self.projection.request_rebuild()

    def _notify(self, changes: tuple[MinBrokerIdChange, ...]) -> None:
        for change in changes:
            for target in change.targets:
                if len(self._tasks) >= NOTIFICATIONS_PENDING_MAX:
                    log.warning("dropping min-broker-id notification to %s", target)
                    continue
                self._spawn(self._send_oneway(target, notify_request(change)))

    async def _send_oneway(self, addr: str, request: RemotingCommand) -> None:
        try:
            await self.client.invoke_oneway(addr, request)
        except Exception as exc:
            # Upstream sends with a 300 ms timeout and only logs failures.
            log.info("notify %s failed: %s", addr, exc)

    def _spawn(self, work: Any) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def install_stop_signals(stop: asyncio.Event) -> None:
    """Make SIGTERM and SIGINT set ``stop`` (a clean shutdown instead of a kill)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


async def serve(
    options: GatewayOptions,
    *,
    stop: asyncio.Event | None = None,
    mirror: MirrorFactory = NoMirror,
    replicator: Replicator | None = None,
    leader_publisher: LeaderPublisher | None = None,
) -> Gateway:
    """Run a gateway until ``stop`` is set (by default: until SIGTERM or SIGINT).

    ``replicator`` overrides the one :func:`build_replicator` makes (the raft seam).
    """
    if stop is None:
        stop = asyncio.Event()
        install_stop_signals(stop)
    try:
        raise_open_files_limit()  # and size the connection cap from it (remoting/listener.py)
    except ValueError as exc:
        raise GatewayConfigError(str(exc)) from exc
    gateway = Gateway(
        options, mirror=mirror, replicator=replicator, leader_publisher=leader_publisher
    )
    await gateway.start()
    try:
        if options.ready_file is not None:
            write_ready_file(options.ready_file, gateway.ready_info())
        await stop.wait()
    finally:
        await gateway.stop()
    return gateway
