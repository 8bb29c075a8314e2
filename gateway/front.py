"""The read front: a second process that owns a node's public remoting port, answers
route queries from its own copies of the gateway's route answers, and passes every
other request to the gateway.

Why a process of its own: the gateway process runs the event loop, the Raft thread
(PySyncObj's sending, decoding and applying of entries, journal flushes) and the
projection writer, and they share one interpreter lock. During a registration storm
the apply path holds that lock most of the time, so a route read, however cached,
waited behind other topics' registrations (docs/BENCHMARKS.md, "registration storm").
Here route reads run under their own interpreter lock and never wait for an apply.

How it stays correct (a front never serves an answer older than the gateway's):

* The front keeps the gateway's answers in the same store as the gateway keeps its own
  (:class:`~gateway.route_answers.RouteAnswers`), versioned by the same per-topic
  counters, which the gateway bumps in shared memory before the write that changed a
  topic's route is acknowledged. The front reads the counter *before* asking the
  gateway, so an answer fetched across a change carries the older counter and is
  fetched again at the next read.
* Requests whose answer is more than the cached body (linearizable reads, zone
  filtering, no topic) and every other request code go to the gateway.
* A broker's connection is not relayed for long: at its first request that only
  brokers send and the ACL admits, the connection itself is handed to the gateway
  (:mod:`gateway.handoff`), which then serves it directly. A TLS connection is the
  exception: its session lives in this process, so it is relayed like any other
  client's. A broker request the ACL refuses is answered here, as the gateway would
  (NO_PERMISSION with the ACL's remark, none for a one-way request, the connection
  kept): an unsigned peer cannot move its connections into the gateway.

The link: each client connection gets its own connection to the gateway's Unix socket
(a folder only this user can enter), opened at its first forwarded request. Its first
frame (``FRONT_PEER_CODE``, :mod:`gateway.private_codes`) tells the gateway the client's
address, so the ACL's white list, logs and a broker channel's close (which unregisters
the broker in eventual mode) work as if the client were connected to the gateway
itself. The client's opaques are renumbered on the link and restored on the answers.
Limits, idle timeouts and bad frames are the front's
:class:`~remoting.server.RemotingServer`'s, so a bad peer is cut here and the gateway
never sees it.

The gateway starts the front (:class:`FrontProcess` in :mod:`gateway.server`), passes
it the listening socket, restarts it if it dies, and stops it first on shutdown; a
front whose gateway is gone exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import dataclasses
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway import handoff
from gateway.acl import namesrv_acl
from gateway.private_codes import (
    FRONT_PEER_CODE,
    FRONT_STATS_CODE,
    PEER_FIELD,
    PEER_SUBJECT_FIELD,
    ROUTE_ANSWERS_FIELD,
)
from gateway.route_answers import RouteAnswers, RouteVersions, Version
from gateway.route_request import RouteKey, shared_route_key
from remoting.acl_policy import RemotingAcl
from remoting.codes import FLAG_ONEWAY, RequestCode, ResponseCode
from remoting.command import RemotingCommand, make_response
from remoting.connection import Connection
from remoting.errors import ProtocolError
from remoting.frame import FRAME_BYTES_MAX, FrameDecoder, encode_frame
from remoting.limits import (
    CONNECTIONS_PER_ADDRESS_MAX,
    FRAME_DEADLINE_S,
    IDLE_TIMEOUT_S,
    UNFINISHED_FRAMES_BYTES_MAX,
    RefusalLog,
)
from remoting.listener import connect_unix, raise_open_files_limit
from remoting.server import ACCEPT_BACKLOG, RemotingServer
from remoting.tls import ServerTls, read_tls_properties
from tools.cli import ExactArgumentParser
from tools.process_facts import thread_ids

log = logging.getLogger(__name__)

STATS_PERIOD_S = 1.0
FRONT_PEER = ("read-front", 0)
ROUTE_ANSWERS_MAX = 65_536
PARENT_CHECK_S = 1.0
READY_LINE = b"ready\n"
FRONT_READY_TIMEOUT_S = 30.0
PR_SET_PDEATHSIG = 1
FRONT_RESTART_DELAY_S = 0.5
BELOW_FRONT_NICE = 5
"""Nice steps a gateway runs below its read front by default (see lower_priority):
with every core busy the kernel then gives the front about three times the gateway's
share. Measured on the storm bench (docs/BENCHMARKS.md, "registration storm")."""
NICE_STEPS_MAX = 19

_CACHEABLE = frozenset({int(ResponseCode.SUCCESS), int(ResponseCode.TOPIC_NOT_EXIST)})
_ROUTE = int(RequestCode.GET_ROUTEINFO_BY_TOPIC)

_Answer = tuple[int, str | None, bytes | None]
"""(code, remark, body) of a gateway's route answer."""


@dataclass(frozen=True, slots=True)
class FrontOptions:
    """What the gateway tells its front (JSON on the command line)."""

    listen_fd: int
    upstream_path: str
    versions_path: str
    parent_pid: int
    host: str = "127.0.0.1"
    port: int = 0
    idle_timeout_s: float = IDLE_TIMEOUT_S
    unfinished_frames_bytes_max: int = UNFINISHED_FRAMES_BYTES_MAX
    frame_deadline_s: float = FRAME_DEADLINE_S
    connections_per_address_max: int = CONNECTIONS_PER_ADDRESS_MAX
    connections_per_prefix_max: int | None = None
    """None: the process's setting (``NAMESRV_CONNECTIONS_PER_PREFIX_MAX``, which the
    front inherits from the gateway; remoting/limits.py)."""
    acl_enabled: bool = True
    acl_file: str | None = None
    route_answers_max: int = ROUTE_ANSWERS_MAX
    handoff_path: str | None = None
    """The gateway's hand-over socket (gateway/handoff.py); None: relay broker
    connections too."""
    tls_config_file: str | None = None
    """The node's tls.properties (remoting/tls.py): the public port's ``tls.server.mode``
    and certificate. A TLS connection is always relayed, never handed over (its session
    cannot move to another process)."""

    def to_json(self) -> str:
        """The options as one JSON object."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FrontOptions:
        """Options from :meth:`to_json`'s output; ValueError when malformed."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("front options must be a JSON object")
        return cls(**data)


def peer_request(host: str, port: int, subject: str | None = None) -> RemotingCommand:
    """The link's first frame: who the client is (and its certificate's subject)."""
    fields = {PEER_FIELD: f"{host}:{port}"}
    if subject is not None:
        fields[PEER_SUBJECT_FIELD] = subject
    return RemotingCommand(code=FRONT_PEER_CODE, flag=FLAG_ONEWAY, ext_fields=fields)


def parse_peer(request: RemotingCommand) -> tuple[str, int, str | None] | None:
    """The (host, port, certificate subject) a :func:`peer_request` announces, None
    when malformed."""
    fields = request.ext_fields or {}
    host, sep, port = fields.get(PEER_FIELD, "").rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host, int(port), fields.get(PEER_SUBJECT_FIELD)


class LinkClosedError(ConnectionError):
    """The gateway closed the link (it is restarting or stopping)."""


class Link(asyncio.Protocol):
    """One client's connection to the gateway's Unix socket."""

    def __init__(self, client: Connection | None) -> None:
        self.client = client  # None: the front's own link (its reports)
        self._transport: asyncio.Transport | None = None
        self._decoder = FrameDecoder(FRAME_BYTES_MAX, header_bytes_max=FRAME_BYTES_MAX)
        self._waiting: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._next_opaque = 0
        self._pushes: set[asyncio.Future[None]] = set()
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        client = self.client
        host, port = FRONT_PEER if client is None else (client.peer_host, client.peer_port)
        subject = None if client is None else client.peer_subject
        transport.write(encode_frame(peer_request(host, port, subject)))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(LinkClosedError("the gateway closed the connection"))

    def data_received(self, data: bytes) -> None:
        try:
            commands = self._decoder.feed(data)
        except ProtocolError as exc:
            log.error("bad frame from the gateway: %s", exc)
            self.close()
            return
        for cmd in commands:
            if cmd.is_response:
                future = self._waiting.pop(cmd.opaque, None)
                if future is not None and not future.done():
                    future.set_result(cmd)
            else:
                # A request the gateway pushes to the client: pass it on.
                task = asyncio.ensure_future(self._push(cmd))
                self._pushes.add(task)
                task.add_done_callback(self._pushes.discard)

    async def _push(self, cmd: RemotingCommand) -> None:
        if self.client is None:
            return
        with contextlib.suppress(ConnectionError):
            await self.client.send(cmd)

    def forward(self, request: RemotingCommand) -> asyncio.Future[RemotingCommand] | None:
        """Send ``request`` (renumbered); the future of its answer, None for a one-way."""
        transport = self._transport
        if self.closed or transport is None:
            raise LinkClosedError("the gateway closed the connection")
        self._next_opaque = opaque = (self._next_opaque + 1) & 0x7FFFFFFF
        transport.write(encode_frame(dataclasses.replace(request, opaque=opaque)))
        if request.flag & FLAG_ONEWAY:
            return None
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._waiting[opaque] = future
        return future

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


class ReadFront:
    """The front's server: cached route answers here, everything else to the gateway."""

    def __init__(self, options: FrontOptions, *, acl: RemotingAcl | None) -> None:
        self.options = options
        self.acl = acl
        self.versions = RouteVersions(Path(options.versions_path), writable=False)
        tls = None
        if options.tls_config_file is not None:
            tls = ServerTls(read_tls_properties(Path(options.tls_config_file))[0])
        self.server = RemotingServer(
            self.handle,
            prepare=None if tls is None else tls.prepare,
            host=options.host,
            sock=socket.socket(fileno=options.listen_fd),
            on_connection_closed=self._client_closed,
            idle_timeout_s=options.idle_timeout_s,
            unfinished_frames_bytes_max=options.unfinished_frames_bytes_max,
            frame_deadline_s=options.frame_deadline_s,
            connections_per_address_max=options.connections_per_address_max,
            connections_per_prefix_max=options.connections_per_prefix_max,
        )
        self.answers: RouteAnswers[RouteKey, Version, _Answer] = RouteAnswers(
            options.route_answers_max
        )
        self._links: dict[Connection, asyncio.Future[Link]] = {}
        self.hits = 0
        self.fetches = 0
        self.handed_over = 0
        self.refused_before_handover = 0
        self._handoffs = asyncio.Semaphore(handoff.SENDS_IN_FLIGHT_MAX)
        self._refusals = RefusalLog(logger=log)

    # -- requests -------------------------------------------------------------------------

    def handle(
        self, request: RemotingCommand, conn: Connection
    ) -> RemotingCommand | Coroutine[Any, Any, RemotingCommand | None] | None:
        """The public handler: a valid cached route answer now, else the gateway's.

        The ACL is the gateway's to apply (it sees the client's address through the
        link), so its refusal counts stay whole: when the accounts file closes reads,
        route queries go to the gateway as well. The one exception is a broker request
        that would move its connection: see :meth:`_broker_request`."""
        acl = self.acl
        if request.code == _ROUTE and (acl is None or not acl.guards(_ROUTE)):
            key = shared_route_key(request)
            if key is not None:
                # Read before the topic's version, as the gateway does before its body.
                answered = self.versions.answer_fields()
                version = self.versions.version(key[0])
                answer = self.answers.get(key, version)
                if answer is not None:
                    self.hits += 1
                    return make_response(
                        request,
                        answer[0],
                        remark=answer[1],
                        body=answer[2],
                        ext_fields=answered,
                    )
                return self._fetch_route(request, conn, key, version)
        if (
            request.code in handoff.BROKER_CODES
            and self.options.handoff_path is not None
            and not conn.is_tls
        ):
            return self._broker_request(request, conn, self.options.handoff_path)
        return self._forward(request, conn)

    def _broker_request(
        self, request: RemotingCommand, conn: Connection, path: str
    ) -> RemotingCommand | Coroutine[Any, Any, None] | None:
        """Hand the connection over at a broker request the ACL admits; answer one it
        refuses here, as the gateway would (``Gateway._handle``: NO_PERMISSION with the
        ACL's remark, nothing for a one-way request, the connection kept), so that a
        peer without a signature or a white-listed address cannot move connections into
        the gateway (its connection cap and the descriptors it keeps for Raft). The
        gateway checks the ACL again on the frame it adopts."""
        acl = self.acl
        if acl is not None:
            refusal = acl.check(request, conn.peer_host, conn.peer_subject)
            if refusal is not None:
                self.refused_before_handover += 1
                return acl.refuse(request, refusal)
        return self._hand_over(conn, conn.detach(request), path)

    async def _hand_over(
        self, conn: Connection, detaching: Coroutine[Any, Any, tuple[int, bytes]], path: str
    ) -> None:
        """Give a broker's connection to the gateway (gateway/handoff.py), which
        answers the request that moved it. When that fails the connection is lost
        (the broker connects again) and the refusal is logged."""
        try:
            fd, stream = await detaching  # ConnectionError: closed meanwhile
            try:
                async with self._handoffs:  # a burst waits here, not in the gateway's backlog
                    await handoff.send(path, fd, stream)
            finally:
                os.close(fd)
            self.handed_over += 1
        except OSError as exc:
            # Detached, it is no longer read here: closed, not left until its idle
            # timeout (os.dup failing for want of descriptors left it open).
            conn.close()
            now_s = asyncio.get_running_loop().time()
            self._refusals.warning(now_s, "%s not handed over: %s", conn.id, exc)

    async def _fetch_route(
        self, request: RemotingCommand, conn: Connection, key: RouteKey, version: Version
    ) -> RemotingCommand | None:
        self.fetches += 1
        answer = await self._forward(request, conn)
        if answer is not None and answer.code in _CACHEABLE:
            self.answers.put(key, version, (answer.code, answer.remark, answer.body))
        return answer

    async def _forward(self, request: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        link = await self._link(conn)
        try:
            future = link.forward(request)
            if future is None:
                return None
            answer = await future
        except LinkClosedError as exc:
            # The gateway closed this client's link mid-request (it is restarting, or
            # dropped the client): an answer the client can retry, and one log line.
            now_s = asyncio.get_running_loop().time()
            self._refusals.warning(now_s, "%s: code %d not relayed: %s", conn.id, request.code, exc)
            return make_response(request, ResponseCode.SYSTEM_ERROR, remark=f"{exc}; ask again")
        return dataclasses.replace(answer, opaque=request.opaque)

    async def _link(self, conn: Connection) -> Link:
        pending = self._links.get(conn)
        if pending is not None:
            link = await asyncio.shield(pending)
            if not link.closed:
                return link
            if self._links.get(conn) is pending:
                del self._links[conn]
            return await self._link(conn)
        pending = asyncio.ensure_future(self._open_link(conn))
        self._links[conn] = pending
        try:
            return await asyncio.shield(pending)
        except BaseException:
            if self._links.get(conn) is pending:
                del self._links[conn]
            raise

    async def _open_link(self, conn: Connection) -> Link:
        loop = asyncio.get_running_loop()
        # connect_unix: asyncio's own connect takes a full backlog for a connection.
        sock = await connect_unix(self.options.upstream_path)
        _, link = await loop.create_unix_connection(lambda: Link(conn), sock=sock)
        if conn.is_closed:  # the client left while the link was opening
            link.close()
        return link

    def _client_closed(self, conn: Connection) -> None:
        pending = self._links.pop(conn, None)
        if pending is None:
            return
        if pending.done() and not pending.cancelled() and pending.exception() is None:
            pending.result().close()
        else:
            pending.add_done_callback(_close_when_open)

    # -- life -----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event, ready_fd: int | None = None) -> None:
        """Serve until ``stop`` is set or the gateway process is gone."""
        await self.server.start()
        if ready_fd is not None:
            os.write(ready_fd, READY_LINE)
        watcher = asyncio.ensure_future(self._watch_parent(stop))
        reporter = asyncio.ensure_future(self._report(stop))
        try:
            await stop.wait()
        finally:
            watcher.cancel()
            reporter.cancel()
            await self.server.close()
            for pending in self._links.values():
                pending.add_done_callback(_close_when_open)
            self.versions.close()
            log.info(
                "read front stopped: %d route answers from copies, %d fetched, "
                "%d broker connections handed over, %d broker requests refused by the ACL",
                self.hits,
                self.fetches,
                self.handed_over,
                self.refused_before_handover,
            )

    async def _report(self, stop: asyncio.Event) -> None:
        """Tell the gateway, every second, how many route queries the copies answered."""
        reported = 0
        link: Link | None = None
        while not stop.is_set():
            await asyncio.sleep(STATS_PERIOD_S)
            hits = self.hits
            if hits == reported:
                continue
            try:
                if link is None or link.closed:
                    _, link = await asyncio.get_running_loop().create_unix_connection(
                        lambda: Link(None), self.options.upstream_path
                    )
                link.forward(
                    RemotingCommand(
                        code=FRONT_STATS_CODE,
                        flag=FLAG_ONEWAY,
                        ext_fields={ROUTE_ANSWERS_FIELD: str(hits - reported)},
                    )
                )
                reported = hits
            except OSError as exc:
                log.warning("cannot report to the gateway: %s", exc)

    async def _watch_parent(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            if os.getppid() != self.options.parent_pid:
                log.error("the gateway process is gone: the read front stops")
                stop.set()
                return
            await asyncio.sleep(PARENT_CHECK_S)


class FrontProcess:
    """The gateway's side: binds the public port, runs the front on it, restarts it when
    it dies, stops it first on shutdown.

    The listening socket stays open here for the gateway's whole life, so connections
    that arrive while a front restarts wait in its backlog instead of being refused.

    A front runs at the priority the gateway had when it started the first one: the
    gateway may lower its own afterwards (:func:`lower_priority`), and a restarted
    front, which inherits the gateway's, is set back (when the user may: raising a
    priority again needs ``CAP_SYS_NICE``; otherwise it stays at the gateway's, with a
    warning).
    """

    def __init__(self, options: FrontOptions) -> None:
        self.options = options
        self.nice = os.getpriority(os.PRIO_PROCESS, 0)
        self._sock: socket.socket | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._stopping = False
        self.restarts = 0

    @property
    def port(self) -> int:
        """The bound public port."""
        if self._sock is None:
            return self.options.port
        return int(self._sock.getsockname()[1])

    @property
    def pid(self) -> int | None:
        """The running front's process id."""
        return None if self._process is None else self._process.pid

    async def start(self) -> None:
        """Bind the port, start the front and wait until it accepts; OSError if it cannot."""
        self._sock = bind_listener(self.options.host, self.options.port)
        self.options = dataclasses.replace(self.options, listen_fd=self._sock.fileno())
        await self._spawn()
        self._supervisor = asyncio.ensure_future(self._supervise())
        log.info("read front pid %s serves %s:%d", self.pid, self.options.host, self.port)

    async def _spawn(self) -> None:
        assert self._sock is not None
        root = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (root, env.get("PYTHONPATH"))))
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway.front",
            self.options.to_json(),
            stdout=asyncio.subprocess.PIPE,
            pass_fds=(self._sock.fileno(),),
            cwd=root,
            env=env,
        )
        self._process = process
        self._keep_priority(process.pid)
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), FRONT_READY_TIMEOUT_S)
        except TimeoutError:
            line = b""
        if line != READY_LINE:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise OSError(f"the read front did not start (exit code {process.returncode})")

    def _keep_priority(self, pid: int) -> None:
        # A front that is already gone has no priority to keep.
        with contextlib.suppress(ProcessLookupError):
            if os.getpriority(os.PRIO_PROCESS, pid) == self.nice:
                return
            try:
                os.setpriority(os.PRIO_PROCESS, pid, self.nice)
            except PermissionError:
                log.warning(
                    "the restarted read front runs at the gateway's lower priority "
                    "(raising it back needs CAP_SYS_NICE); restart the node to undo"
                )

    async def _supervise(self) -> None:
        while not self._stopping:
            process = self._process
            assert process is not None
            code = await process.wait()
            if self._stopping:
                return
            self.restarts += 1
            log.error("read front pid %d exited with %s: restarting it", process.pid, code)
            await asyncio.sleep(FRONT_RESTART_DELAY_S)
            try:
                await self._spawn()
            except OSError as exc:
                log.error("%s; retrying", exc)

    async def stop(self, timeout_s: float) -> None:
        """Stop the front (it drains its clients) and close the port."""
        self._stopping = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                await asyncio.wait_for(process.wait(), timeout_s)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if self._sock is not None:
            self._sock.close()


def lower_priority(steps: int) -> int:
    """Raise this process's nice value by ``steps`` (lower its CPU priority), thread
    by thread; the number of threads changed. Threads started later inherit it from
    the thread that starts them.

    Linux's nice value belongs to each thread, so every thread of the process is set;
    elsewhere nothing is changed. Raising it needs no privilege.
    """
    if steps <= 0 or not sys.platform.startswith("linux"):
        return 0
    changed = 0
    for tid in thread_ids(os.getpid()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            now = os.getpriority(os.PRIO_PROCESS, tid)
            os.setpriority(os.PRIO_PROCESS, tid, min(NICE_STEPS_MAX, now + steps))
            changed += 1
    return changed


def bind_listener(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (its first address), inheritable."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(ACCEPT_BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _close_when_open(pending: asyncio.Future[Link]) -> None:
    if not pending.cancelled() and pending.exception() is None:
        pending.result().close()


def die_with_parent() -> None:
    """Linux: be killed the moment the gateway dies (``PR_SET_PDEATHSIG``), so the port
    is free for its restart at once; elsewhere the parent check (1 s) does it."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    """``python -m gateway.front OPTIONS_JSON``: run a front (the gateway starts it)."""
    parser = ExactArgumentParser(prog="python -m gateway.front", description=__doc__)
    parser.add_argument("options", help="FrontOptions as JSON")
    args = parser.parse_args(argv)
    die_with_parent()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s front %(name)s: %(message)s"
    )
    try:
        options = FrontOptions.from_json(args.options)
        if os.getppid() != options.parent_pid:
            return 1  # the gateway died before the death signal was set
        acl = None
        if options.acl_enabled:
            acl = namesrv_acl(None if options.acl_file is None else Path(options.acl_file))
        # Each client may hold a link to the gateway too: half the cap (remoting/listener.py).
        raise_open_files_limit(descriptors_per_connection=2)
        front = ReadFront(options, acl=acl)
    except (ValueError, TypeError, OSError) as exc:
        print(f"read front: {exc}", file=sys.stderr)
        return 2

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await front.run(stop, ready_fd=sys.stdout.fileno())

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
