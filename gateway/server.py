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
(:class:`~gateway.scan_fallback.ScanFallback`), so a dead beat or Redis cannot keep a
silent broker in the table forever.

In eventual mode a closed broker connection unregisters what was registered
over it (upstream ``BrokerHousekeepingService``). In raft mode that would be a
replicated decision taken from one node's local observation, so the service
only logs it and leaves liveness to the replicated expiry (docs/RAFT.md,
"Liveness in raft mode").

The parts are built by small functions in ``parts.py`` from ``options.py``; the
loops beside the servers are ``loops.py``'s; the request handling lives in
``dispatch.py``, ``services.py``, ``internal.py`` and ``metrics.py``. This module is
the process's wiring, read top to bottom as the start and stop order above.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import tempfile
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from gateway.backpressure import RequestQueues
from gateway.clock import Clock, SystemClock
from gateway.config_store import persist_config_updates
from gateway.dispatch import PENDING, RequestDispatcher
from gateway.front_link import FRONT_PEER, parse_peer
from gateway.front_options import FrontOptions
from gateway.front_process import FrontProcess
from gateway.internal import InternalDispatcher
from gateway.kv_file import KvConfigFile
from gateway.loops import LeaderPublisher, scan_fallback_loop, scan_loop, watch_leadership
from gateway.member_addrs import publish_loop
from gateway.mirror import Mirror, MirrorFactory, NoMirror
from gateway.options import GatewayConfigError, GatewayOptions, scan_fallback_period_s
from gateway.parts import (
    FRONT_SOCKET_NAME,
    INTERNAL_HOST,
    PublicPorts,
    build_acl,
    build_metrics,
    build_replicator,
    build_service,
    build_tls,
    config_store,
    direct_ports,
    fronted_ports,
    initial_config,
    internal_server,
    node_properties,
)
from gateway.priority import lower_priority
from gateway.private_codes import FRONT_PEER_CODE, FRONT_STATS_CODE, ROUTE_ANSWERS_FIELD
from gateway.restore import RestoredNode, load as load_restore
from gateway.route_answers import RouteVersions
from gateway.scan_fallback import ScanFallback
from raftstore.commands import Command, PutKV
from raftstore.raft import RaftReplicator
from raftstore.replicator import MODE_EVENTUAL, Replicator
from raftstore.results import ApplyResult, MinBrokerIdChange
from remoting.client import RemotingClient
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.connection import Connection
from remoting.listener import raise_open_files_limit
from remoting.server import CANCEL_GRACE_S

log = logging.getLogger(__name__)

PROJECTION_FLUSH_TIMEOUT_S = 30.0
NOTIFICATIONS_PENDING_MAX = 1024
"""In-flight NOTIFY_MIN_BROKER_ID_CHANGE sends; beyond this new ones are dropped."""
ROUTE_VERSIONS_FILE = "route-versions"


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
        initial = initial_config(options)
        self.replicator = replicator or build_replicator(
            options.node_id, options.mode, initial, raft=options.raft, host=options.host
        )
        # A restore (or a restart of one) starts from the backup's table: seeded before
        # anything reads the table (gateway/restore.py; GatewayConfigError if refused).
        restored = load_restore(options)
        self.restored: RestoredNode | None = None
        if restored is not None:
            self.restored = RestoredNode(restored, self.replicator, self.clock, options)
            self.restored.seed()
        self.client = RemotingClient()
        self.service = build_service(options, self.replicator, self.clock, self._notify)
        if self.restored is not None:
            self.service.before_scan = self.restored.before_scan
        self.dispatcher = RequestDispatcher(
            self.service,
            clock=self.clock,
            node_properties=lambda: node_properties(options, self.port),
        )
        self._answer_now = self.dispatcher.answer_now
        self.queues = RequestQueues(lambda: self.dispatcher.route_cache.config)
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
        self.metrics, self.metrics_server = build_metrics(
            options, self.service, self.acl, self.scan_fallback, self.projection
        )
        # Without metrics the public handler is _handle itself.
        self._public_handler = self._handle if self.metrics is None else self._handle_metered
        self.front: FrontProcess | None = None
        self._front_dir: Path | None = None
        self.route_versions: RouteVersions | None = None
        ports = self._public_ports()
        self.server = ports.server
        self.adopted_server = ports.adopted_server
        self.handoff = ports.handoff
        if self.metrics is not None and self.handoff is not None:
            self.metrics.collector.handoff = self.handoff
        self.internal_server = internal_server(self.internal.handle, options.internal_port)
        # Connections that carried a REGISTER_BROKER: only their closing can
        # unregister anything, so other clients' closes cost nothing.
        self._broker_channels: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._scan_task: asyncio.Task[None] | None = None
        self._fallback_task: asyncio.Task[None] | None = None
        self._leader_task: asyncio.Task[None] | None = None
        self._member_addr_task: asyncio.Task[None] | None = None
        self._stopping = False

    def _public_ports(self) -> PublicPorts:
        """The servers behind the public port: this process's own, or a read front's
        links and hand-overs (whose folder also holds the front's answer store)."""
        options = self.options
        if not options.read_front:
            return direct_ports(options, self._public_handler, self._connection_closed, self.tls)
        self._front_dir = Path(tempfile.mkdtemp(prefix=f"namesrv-{options.node_id}-"))
        self._share_route_answers(self._front_dir)
        return fronted_ports(
            options,
            self._front_dir,
            self._public_handler,
            self._handle_fronted,
            self._connection_closed,
        )

    async def start(self) -> None:
        """Start replicating, rebuild the projection, then listen on both ports."""
        await self.replicator.start()
        await self._load_kv_config()
        store = config_store(self.options)
        if store is not None:
            persist_config_updates(self.replicator, store)
        if self.restored is not None:
            self.restored.started()
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
            await self._start_front(self._front_dir)
        await self.internal_server.start()
        if self.metrics_server is not None:
            await self.metrics_server.start()
        self._start_loops()
        log.info(
            "gateway %s (%s) listening on %s:%d, internal %s:%d",
            self.options.node_id,
            self.replicator.mode,
            self.options.host,
            self.port,
            INTERNAL_HOST,
            self.internal_server.port,
        )

    async def _start_front(self, folder: Path) -> None:
        """Start the read front on the public port, then step below it (if asked)."""
        self.front = FrontProcess(self._front_options(folder))
        await self.front.start()
        if self.options.below_front_nice > 0:
            changed = lower_priority(self.options.below_front_nice)
            log.info(
                "gateway threads (%d) run %d nice steps below the read front",
                changed,
                self.options.below_front_nice,
            )

    def _start_loops(self) -> None:
        """Start the loops the options ask for (gateway/loops.py)."""
        loop = asyncio.get_running_loop()
        if self.options.scan_interval_ms > 0:
            self._scan_task = loop.create_task(
                scan_loop(self.service, self.options.scan_interval_ms / 1000)
            )
        if self.scan_fallback.enabled:
            # The silence is counted from now: a node that never hears a scan takes over
            # three periods after it started listening.
            self.scan_fallback.restart()
            self._fallback_task = loop.create_task(
                scan_fallback_loop(self.service, self.scan_fallback)
            )
        if self._leader_publisher is not None and isinstance(self.replicator, RaftReplicator):
            self._leader_task = loop.create_task(
                watch_leadership(self.replicator, self.options.node_id, self._leader_publisher)
            )
        if isinstance(self.replicator, RaftReplicator):
            self._start_member_addr_publisher(self.replicator)

    def _start_member_addr_publisher(self, replicator: RaftReplicator) -> None:
        """Raft mode: keep this member's remoting address recorded for the address server
        of every node (gateway/member_addrs.py)."""
        advertised = self.options.remoting_advertise
        if advertised is None:
            log.info(
                "no --remoting-advertise: %s's remoting address is not recorded, so the "
                "address servers list it only where a cluster file names it",
                self.options.node_id,
            )
            return
        self._member_addr_task = asyncio.get_running_loop().create_task(
            publish_loop(self.service, replicator, advertised)
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

    # -- the read front and its answer store ------------------------------------------

    def _share_route_answers(self, folder: Path) -> None:
        """Share the route answers' version with the read front, through a file in
        ``folder`` the front maps (its cached answers go stale when it moves)."""
        self.route_versions = RouteVersions(folder / ROUTE_VERSIONS_FILE, writable=True)
        self.dispatcher.route_cache.share_versions(self.route_versions)

    def _front_options(self, folder: Path) -> FrontOptions:
        options = self.options
        return FrontOptions(
            listen_fd=-1,  # FrontProcess binds the port and fills it in
            upstream_path=str(folder / FRONT_SOCKET_NAME),
            handoff_path=None if self.handoff is None else str(self.handoff.path),
            versions_path=str(folder / ROUTE_VERSIONS_FILE),
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
        for task in (
            self._scan_task,
            self._fallback_task,
            self._leader_task,
            self._member_addr_task,
        ):
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
        self.dispatcher.registrar.bodies.close()
        if self.restored is not None:
            await self.restored.stop()
        await self.replicator.stop()
        await asyncio.to_thread(self.projection.flush, PROJECTION_FLUSH_TIMEOUT_S)
        await asyncio.to_thread(self.projection.stop, PROJECTION_FLUSH_TIMEOUT_S)
        if self._front_dir is not None:
            if self.route_versions is not None:
                self.route_versions.close()
            shutil.rmtree(self._front_dir, ignore_errors=True)

    # -- callbacks ------------------------------------------------------------------

    def _handle(
        self, request: RemotingCommand, conn: Connection
    ) -> RemotingCommand | Awaitable[RemotingCommand | None] | None:
        """The public server's handler: reads that need no waiting (cached routes above
        all) are answered here, so the server writes them without creating a Task."""
        acl = self.acl
        if acl is not None and acl.guards(request.code):
            refusal = acl.check(request, conn.peer_host, conn.peer_subject)
            if refusal is not None:
                return acl.refuse(request, refusal)
        answer = self._answer_now(request)
        if answer is not PENDING:
            return answer
        busy = self.queues.refusal(request)
        if busy is not None:
            return busy
        if request.code == RequestCode.REGISTER_BROKER:
            self._broker_channels.add(conn.id)
        return self.queues.track(request, self.dispatcher.handle_async(request, conn))

    def _handle_fronted(
        self, request: RemotingCommand, conn: Connection
    ) -> RemotingCommand | Awaitable[RemotingCommand | None] | None:
        """The handler behind a read front: a link's first frame names its client, whose
        address the ACL and the logs then see; the rest is the public handler's.

        Only the front itself speaks the two private codes: the peer frame counts only
        as a link's first, and route-answer reports only on the front's own link (named
        ``read-front``, which no socket address can be). A client sending either code
        gets what any unknown code gets."""
        if request.code == FRONT_PEER_CODE and not conn.peer_host:
            peer = parse_peer(request)
            if peer is not None:
                conn.peer_host, conn.peer_port, conn.peer_subject = peer
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
    ) -> RemotingCommand | Awaitable[RemotingCommand | None] | None:
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
