"""asyncio adapter that serves the RocketMQ remoting protocol over TCP.

The adapter is deliberately thin (the h11 / uvicorn split). What it owns is what the
codec cannot: accepting, the connections' shared limits and shutdown. Each job has
its module:

* remoting/listener.py: the accept loops, within a budget of descriptors, and the
  step between accept and protocol (TLS, remoting/tls.py);
* remoting/connection.py: one peer (the request loop, back-pressure, idle and frame
  clocks, the hand-over of a connection to another process);
* remoting/limits.py: what all peers together may hold, and the rate-limited log of
  the peers refused or cut;
* this module: :class:`RemotingServer`, which starts the listeners, admits and
  counts the connections, adopts handed-over ones and drains them at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable

from remoting.connection import Connection, Handler
from remoting.frame import FRAME_BYTES_MAX
from remoting.limits import (
    CONNECTIONS_PER_ADDRESS_MAX,
    FRAME_DEADLINE_S,
    IDLE_TIMEOUT_S,
    MAX_INFLIGHT_PER_CONNECTION,
    READ_HIGH_WATER_BYTES,
    UNFINISHED_FRAMES_BYTES_MAX,
    RefusalLog,
    Source,
    SourceCounts,
    UnfinishedFrameBudget,
    check_positive,
    configured_connections_per_prefix_max,
    source_of,
)
from remoting.listener import (
    PREPARE_TIMEOUT_S,
    SSL_HANDSHAKE_TIMEOUT_S,
    BudgetExhausted,
    ConnectionBudget,
    Listener,
    Prepare,
    listening_sockets,
    process_budget,
    start_listeners,
)

log = logging.getLogger(__name__)

ConnectionClosedCallback = Callable[[Connection], None]

DEFAULT_PORT = 9876
DRAIN_TIMEOUT_S = 5.0
# Netty's default serverSocketBacklog; asyncio's default of 100 drops bursts of
# simultaneous connects (every broker and client reconnecting after a restart).
ACCEPT_BACKLOG = 1024
# After the drain deadline, cancelled handlers get this long to unwind.
CANCEL_GRACE_S = 1.0
# Adopted connections leave this share of the budget to the ones accepted here (a
# gateway's links from its read front), so route queries the front fetches get through.
ADOPT_RESERVE_DIVISOR = 8
# The most one read takes from a socket (asyncio's own size for a plain read): one
# buffer per server, shared by its connections (remoting/connection.py says why).
READ_BUFFER_BYTES = 256 * 1024


def _refusal_log() -> RefusalLog:
    # The server's refusals keep the server's logger, whichever part finds them.
    return RefusalLog(logger=log)


class RemotingServer:
    """A RocketMQ remoting server: accepts connections and runs ``handler``.

    ``read_high_water_bytes`` bounds the unsent output per connection (reading
    pauses above it) and ``max_inflight_per_connection`` bounds the requests a
    peer may have in progress (reading pauses at it), so a peer that sends
    without reading cannot grow the server's memory.

    ``unfinished_frames_bytes_max`` bounds the bytes of unfinished frames summed
    over all connections, ``frame_deadline_s`` the time a started frame may take,
    ``connections_per_address_max`` the connections of one remote address and
    ``connections_per_prefix_max`` those of its /24 or /64 (and the loopback network's,
    remoting/limits.py), so peers that never finish a frame or open connections by the
    thousand, from one address or from every address of a subnet, cannot take what
    everyone else needs.
    """

    def __init__(
        self,
        handler: Handler,
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        on_connection_closed: ConnectionClosedCallback | None = None,
        frame_bytes_max: int = FRAME_BYTES_MAX,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        read_high_water_bytes: int = READ_HIGH_WATER_BYTES,
        max_inflight_per_connection: int = MAX_INFLIGHT_PER_CONNECTION,
        unfinished_frames_bytes_max: int = UNFINISHED_FRAMES_BYTES_MAX,
        frame_deadline_s: float = FRAME_DEADLINE_S,
        connections_per_address_max: int = CONNECTIONS_PER_ADDRESS_MAX,
        connections_per_prefix_max: int | None = None,
        sock: socket.socket | None = None,
        unix_path: str | None = None,
        listen: bool = True,
        budget: ConnectionBudget | None = None,
        prepare: Prepare | None = None,
        prepare_timeout_s: float = PREPARE_TIMEOUT_S,
        ssl_handshake_timeout_s: float = SSL_HANDSHAKE_TIMEOUT_S,
    ) -> None:
        """A server for ``handler``; ValueError when a limit is not positive.

        By default it binds ``host:port``. ``sock``: accept on this already listening
        socket instead (another process bound it). ``unix_path``: listen on a Unix socket
        at that path, readable and writable by this user only. ``listen`` False: accept
        nothing, serve only the connections given to :meth:`adopt`.

        ``connections_per_prefix_max`` None: the process's setting
        (``NAMESRV_CONNECTIONS_PER_PREFIX_MAX``, else 8192; remoting/limits.py).

        Every connection holds a slot of ``budget`` (default: the process's,
        ``remoting.listener.process_budget``); accepts pause while none is free.
        ``prepare``: the step between accept and protocol (TLS), see
        ``remoting.listener.Prepare``, bounded by ``prepare_timeout_s`` and then
        ``ssl_handshake_timeout_s``.
        """
        if sock is not None and unix_path is not None:
            raise ValueError("give sock or unix_path, not both")
        if idle_timeout_s <= 0:
            raise ValueError("idle_timeout_s must be positive")
        if read_high_water_bytes <= 0 or max_inflight_per_connection <= 0:
            raise ValueError("back-pressure bounds must be positive")
        check_positive("unfinished_frames_bytes_max", unfinished_frames_bytes_max)
        check_positive("frame_deadline_s", frame_deadline_s)
        check_positive("connections_per_address_max", connections_per_address_max)
        if connections_per_prefix_max is None:
            connections_per_prefix_max = configured_connections_per_prefix_max()
        self.handler = handler
        self.host = host
        self.frame_bytes_max = frame_bytes_max
        self.idle_timeout_s = idle_timeout_s
        self.read_high_water_bytes = read_high_water_bytes
        self.read_buffer = memoryview(bytearray(READ_BUFFER_BYTES))
        self.max_inflight_per_connection = max_inflight_per_connection
        self.unfinished_frames = UnfinishedFrameBudget(unfinished_frames_bytes_max)
        self.frame_deadline_s = frame_deadline_s
        self._sources = SourceCounts(connections_per_address_max, connections_per_prefix_max)
        self._requested_port = port
        self._sock = sock
        self.unix_path = unix_path
        self.listen = listen
        self._started = False
        self._on_connection_closed = on_connection_closed
        self.budget = budget if budget is not None else process_budget()
        self._prepare = prepare
        self._prepare_timeout_s = prepare_timeout_s
        self._ssl_handshake_timeout_s = ssl_handshake_timeout_s
        self._listeners: list[Listener] = []
        # Each admitted connection with the source it was counted under: a link from
        # the read front names its client only after it was admitted (gateway/front.py).
        self._connections: dict[Connection, Source] = {}
        self.refusal_log = _refusal_log()
        self._drain_waiter: asyncio.Future[None] | None = None
        self._closing = False

    @property
    def port(self) -> int:
        """The bound port (useful with ``port=0``)."""
        if self.unix_path is not None:
            return 0
        if self._listeners:
            return int(self._listeners[0].sock.getsockname()[1])
        if self._sock is not None:
            return int(self._sock.getsockname()[1])
        return self._requested_port

    @property
    def listeners(self) -> tuple[Listener, ...]:
        """The accept loops of the listening sockets (none before start)."""
        return tuple(self._listeners)

    @property
    def connection_count(self) -> int:
        """How many connections are open."""
        return len(self._connections)

    @property
    def connections(self) -> tuple[Connection, ...]:
        """A snapshot of the open connections, oldest first."""
        return tuple(self._connections)

    @property
    def unfinished_frames_bytes(self) -> int:
        """Bytes held in unfinished frames over all connections (within the budget)."""
        return self.unfinished_frames.held_bytes

    @property
    def unfinished_frames_bytes_max(self) -> int:
        """The budget of bytes in unfinished frames over all connections."""
        return self.unfinished_frames.bytes_max

    @property
    def connections_per_address_max(self) -> int:
        """How many connections one remote address may hold."""
        return self._sources.per_address_max

    @property
    def connections_per_prefix_max(self) -> int:
        """How many connections one /24 or /64 prefix may hold."""
        return self._sources.per_prefix_max

    def connections_from(self, host: str) -> int:
        """How many open connections the remote address ``host`` holds."""
        return self._sources.count(host)

    def connections_from_prefix(self, host: str) -> int:
        """How many open connections the /24 or /64 of ``host`` holds."""
        return self._sources.prefix_count(host)

    async def start(self) -> None:
        """Bind and start accepting connections (with ``listen`` False: only start)."""
        if self._started:
            raise RuntimeError("server already started")
        self._started = True
        if not self.listen:
            return
        # A Unix socket's peers are trusted with the peer address they announce: it is
        # this user's alone (and its folder should be too, between bind and chmod).
        sockets = listening_sockets(
            self.host,
            self._requested_port,
            ACCEPT_BACKLOG,
            sock=self._sock,
            unix_path=self.unix_path,
        )
        # asyncio's create_server cannot stop accepting: these pause at the budget's
        # capacity and when descriptors run out (remoting/listener.py).
        self._listeners = start_listeners(
            sockets,
            lambda slot: Connection(self, slot=slot),
            budget=self.budget,
            refusals=self.refusal_log,
            prepare=self._prepare,
            prepare_timeout_s=self._prepare_timeout_s,
            ssl_handshake_timeout_s=self._ssl_handshake_timeout_s,
            listener_refusals=_refusal_log,
        )
        where = self.unix_path or f"{self.host}:{self.port}"
        log.info(
            "remoting server listening on %s (at most %d connections in this process)",
            where,
            self.budget.capacity,
        )

    async def adopt(self, sock: socket.socket, preamble: bytes = b"") -> None:
        """Serve ``sock``, a connected TCP socket another process accepted and read
        ``preamble`` from (see :meth:`Connection.detach`), as if accepted here: the
        same limits, timeouts and hooks. Closes ``sock`` and raises ConnectionError
        when the server is not running, BudgetExhausted when fewer than an eighth of
        its budget's slots are free (they are kept for connections accepted here)."""
        if not self._started or self._closing:
            sock.close()
            raise ConnectionError("the server is not running")
        slot = self.budget.acquire(reserve=self.budget.capacity // ADOPT_RESERVE_DIVISOR)
        if slot is None:
            sock.close()
            raise BudgetExhausted(
                f"at the connection cap ({self.budget.in_use} of {self.budget.capacity} open)"
            )
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(lambda: Connection(self, preamble, slot), sock)
        except BaseException:
            slot.release()
            sock.close()
            raise

    async def close(self, drain_timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """Stop accepting, let in-flight requests answer, then close everything.

        Connections stop being read at once; requests already read finish and
        their answers are flushed. Whatever is still running or unflushed at
        the deadline is cancelled and the connection aborted.
        """
        if not self._started or self._closing:
            return
        self._closing = True
        loop = asyncio.get_running_loop()
        deadline_s = loop.time() + drain_timeout_s
        for listener in self._listeners:
            await listener.close()
        connections = list(self._connections)
        for conn in connections:
            conn.begin_drain()
        await self._wait_for_handlers(connections, deadline_s)
        for conn in connections:
            conn.close()
        await self._wait_for_lost(connections, deadline_s)
        leftovers = [task for conn in connections for task in conn.handler_tasks]
        for conn in connections:
            conn.abort()
        grace_deadline_s = loop.time() + CANCEL_GRACE_S
        await self._wait_for_lost(connections, grace_deadline_s)
        if leftovers:
            await asyncio.wait(leftovers, timeout=max(0.0, grace_deadline_s - loop.time()))

    async def _wait_for_handlers(self, connections: list[Connection], deadline_s: float) -> None:
        loop = asyncio.get_running_loop()
        while any(conn.handler_tasks for conn in connections):
            remaining_s = deadline_s - loop.time()
            if remaining_s <= 0:
                return
            self._drain_waiter = loop.create_future()
            try:
                await asyncio.wait_for(self._drain_waiter, remaining_s)
            except TimeoutError:
                return
            finally:
                self._drain_waiter = None

    async def _wait_for_lost(self, connections: list[Connection], deadline_s: float) -> None:
        pending = [conn.lost for conn in connections if not conn.lost.done()]
        remaining_s = deadline_s - asyncio.get_running_loop().time()
        if pending and remaining_s > 0:
            await asyncio.wait(pending, timeout=remaining_s)

    # -- what the connections call (remoting.connection.ConnectionOwner) ------------

    def drain_progress(self) -> None:
        """A draining connection finished its last handler: wake :meth:`close`."""
        waiter = self._drain_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def connection_opened(self, conn: Connection) -> bool:
        """Admit ``conn`` unless its address, prefix or the loopback network is at its
        cap; False: refused, close it."""
        source = source_of(conn.peer_host)
        refusal = self._sources.admit(source)
        if refusal is not None:
            self.refusal_log.warning(
                asyncio.get_running_loop().time(), "refusing %s: %s", conn.id, refusal
            )
            return False
        self._connections[conn] = source
        if self._closing:
            # Accepted in the same loop turn as close(): not in its snapshot.
            conn.close()
        return True

    def connection_closed(self, conn: Connection) -> None:
        """Forget ``conn`` (admitted) and fire the ``on_connection_closed`` hook."""
        source = self._connections.pop(conn, None)
        if source is not None:
            self._sources.release(source)
        self.drain_progress()
        if self._on_connection_closed is None:
            return
        try:
            self._on_connection_closed(conn)
        except Exception:
            log.exception("on_connection_closed failed for %s", conn.id)
