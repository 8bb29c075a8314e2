"""One accepted peer of a remoting server: reading frames, running the handler on the
requests, writing the answers, and the clocks and bounds of that one connection.

Bytes go into the sans-IO :class:`~remoting.frame.FrameDecoder`, decoded requests go
to one :data:`Handler`, and the commands it returns go out through
:func:`~remoting.frame.encode_frame`. Behaviour follows ``NettyRemotingServer`` /
``NettyRemotingAbstract``:

* requests are processed concurrently, so answers on one connection may leave
  out of order (clients match them by ``opaque``);
* a one-way request never gets an answer, not even an error;
* a frame with the response flag arriving at the server is ignored (the
  NameServer never sends requests to its peers, so nothing waits for it);
* a frame the decoder rejects closes that connection only, with no answer,
  as ``NettyDecoder`` does;
* a handler exception becomes ``SYSTEM_ERROR`` with a short description, as
  ``UtilAll.exceptionSimpleDesc`` gives;
* a connection with no read and no write for ``idle_timeout_s`` is closed
  (``IdleStateHandler(0, 0, 120)``), and every closure, whatever its cause,
  fires the server's closed hook exactly once (the channel-destroy hook).

The request loop, back-pressure and the hand-over share one piece of state per
connection, so they stay one class; its decoder, unfinished-frame budget and frame
deadline are remoting/frame_reader.py's :class:`FrameReader`, its output buffer
remoting/response_writer.py's :class:`ResponseWriter`; what the connection needs
of its server is :class:`ConnectionOwner` (the server-wide limits are
remoting/limits.py's).
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import itertools
import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from remoting.codes import FLAG_ONEWAY, FLAG_RESPONSE
from remoting.command import RemotingCommand
from remoting.errors import ProtocolError
from remoting.frame import encode_frame
from remoting.frame_reader import FrameReader
from remoting.limits import RefusalLog, UnfinishedFrameBudget
from remoting.listener import Slot
from remoting.response_writer import ResponseWriter, describe_exception as describe_exception
from remoting.tls import peer_subject

log = logging.getLogger(__name__)

Handler = Callable[
    [RemotingCommand, "Connection"],
    Awaitable[RemotingCommand | None] | RemotingCommand | None,
]
"""Processes one request. Returns an awaitable of the answer (None: answer nothing),
or, for a request it can answer without waiting, the answer itself (or None): the
server then writes it at once, with no Task and no Future."""

# asyncio resumes writing once the buffer falls to the low-water mark; a quarter
# of the high-water mark gives hysteresis without starving the socket.
WRITE_LOW_WATER_DIVISOR = 4
# Connection.detach waits at most this long for the answers of earlier requests.
DETACH_TIMEOUT_S = 5.0
DETACH_POLL_S = 0.002

_connection_ids = itertools.count(1)


class ConnectionOwner(Protocol):
    """What a :class:`Connection` needs of the server that accepted it
    (:class:`remoting.server.RemotingServer`)."""

    @property
    def handler(self) -> Handler:
        """Runs every request of the connection."""
        ...

    @property
    def frame_bytes_max(self) -> int:
        """The largest frame the decoder takes."""
        ...

    @property
    def idle_timeout_s(self) -> float:
        """How long a connection may go without a read or a write."""
        ...

    @property
    def read_high_water_bytes(self) -> int:
        """Unsent output above which reading pauses."""
        ...

    @property
    def read_buffer(self) -> memoryview:
        """Where every connection of the server receives (see :meth:`Connection.get_buffer`)."""
        ...

    @property
    def max_inflight_per_connection(self) -> int:
        """Requests in progress at which reading pauses."""
        ...

    @property
    def frame_deadline_s(self) -> float:
        """How long a started frame may take to arrive."""
        ...

    @property
    def unfinished_frames(self) -> UnfinishedFrameBudget:
        """The bytes of unfinished frames held over all the server's connections."""
        ...

    @property
    def refusal_log(self) -> RefusalLog:
        """Where connections cut for a limit are logged."""
        ...

    def connection_opened(self, conn: Connection) -> bool:
        """Admit ``conn``; False: refused, the connection closes unseen."""
        ...

    def connection_closed(self, conn: Connection) -> None:
        """``conn`` (admitted) is gone: fire the closed hook."""
        ...

    def drain_progress(self) -> None:
        """A draining connection finished its last handler."""
        ...


def ready(response: RemotingCommand | None) -> asyncio.Future[RemotingCommand | None]:
    """An already-answered awaitable for handlers that need not wait.

    A handler may be a plain function returning ``ready(answer)`` (or simply the
    answer): the server then writes the answer without creating a Task for the
    request. A coroutine handler works too; it just costs one Task per request.
    """
    future: asyncio.Future[RemotingCommand | None] = asyncio.get_running_loop().create_future()
    future.set_result(response)
    return future


def _is_loopback_host(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


class Connection(asyncio.BufferedProtocol):
    """One accepted peer of a :class:`ConnectionOwner` (a remoting server).

    Handlers receive it with every request. Its public surface is ``id``,
    ``peer_host``, ``peer_port``, ``is_loopback``, ``send`` and ``close``; the
    ``asyncio.BufferedProtocol`` callbacks belong to the event loop.

    It receives into its server's one read buffer rather than a new 256 KiB bytes
    object per read: that allocation cost one to three system calls per read,
    depending on the allocator's history (see docs/BENCHMARKS.md, "the read buffer").
    Sharing is safe because the loop fills the buffer and calls
    :meth:`buffer_updated` in one step, and the decoder copies what it keeps.
    """

    def __init__(
        self, server: ConnectionOwner, preamble: bytes = b"", slot: Slot | None = None
    ) -> None:
        self.id = ""
        self.peer_host = ""
        self.peer_port = 0
        self.peer_subject: str | None = None
        """The subject of the peer's verified TLS client certificate, normalised as
        accounts name it (:func:`remoting.tls.peer_subject`); None without one."""
        self._server = server
        # Read on every request: kept here rather than looked up through the server.
        self._handler = server.handler
        self._max_inflight = server.max_inflight_per_connection
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        # The decoder, the unfinished frame's budget and its deadline.
        self._reader = FrameReader(self, server, self._loop)
        self._tasks: set[asyncio.Future[RemotingCommand | None]] = set()
        # Requests decoded while max_inflight handlers were already running.
        # Reading is paused whenever it is non-empty, so it never holds more
        # than the frames of one read (at most the server's read buffer).
        self._backlog: deque[RemotingCommand] = deque()
        self._writing_paused = False
        self._reading_paused = False
        self._draining = False
        self._lost: asyncio.Future[None] = self._loop.create_future()
        self._last_activity_s = self._loop.time()
        self._idle_timer: asyncio.TimerHandle | None = None
        # False when the per-address cap refused the connection: it was never
        # opened, so no handler and no hook ever sees it.
        self._admitted = False
        # The output buffer; its ``last_write_s`` is the idle clock's write side.
        self._out = ResponseWriter(self, self._loop)
        # What another process read of an adopted connection (the server's adopt):
        # served first, as if it had just arrived.
        self._preamble = preamble
        # Set by detach(): the frames read after the one handed over, kept unhandled.
        self._detached: list[RemotingCommand] | None = None
        # The connection's place in the server's budget, given back when it is lost.
        self._slot = slot

    def __repr__(self) -> str:
        return f"<Connection {self.id}>"

    @property
    def is_loopback(self) -> bool:
        """True when the peer connected from a loopback address."""
        return _is_loopback_host(self.peer_host)

    @property
    def is_tls(self) -> bool:
        """True when the peer speaks TLS to us (remoting/tls.py)."""
        transport = self._transport
        return transport is not None and transport.get_extra_info("ssl_object") is not None

    @property
    def is_closed(self) -> bool:
        """True once the connection is closing or closed."""
        return self._transport is None or self._transport.is_closing()

    @property
    def reading_paused(self) -> bool:
        """True while back-pressure keeps the server from reading this peer."""
        return self._reading_paused

    @property
    def write_buffer_bytes(self) -> int:
        """Bytes written by the server and not yet taken by the kernel."""
        return self._out.buffered_bytes

    @property
    def inflight(self) -> int:
        """Requests of this peer being handled or waiting for a handler slot."""
        return len(self._tasks) + len(self._backlog)

    async def send(self, cmd: RemotingCommand) -> None:
        """Push ``cmd`` (typically a one-way request) to the peer.

        Waits while the write buffer is above the high-water mark, so a slow
        peer cannot make pushes pile up. Raises ``ConnectionError`` when the
        connection is already closed.
        """
        if self.is_closed:
            raise ConnectionError(f"connection {self.id} is closed")
        self._out.write(encode_frame(cmd))
        await self._out.writable.wait()

    def close(self) -> None:
        """Close the connection after flushing what was already written."""
        if self._transport is not None:
            self._out.flush()
            self._transport.close()

    # -- asyncio.Protocol callbacks -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Register the connection with its server and start the idle clock."""
        assert isinstance(transport, asyncio.Transport)
        self._transport = self._out.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer_host, self.peer_port = str(peer[0]), int(peer[1])
        self.peer_subject = peer_subject(transport)
        self.id = f"c{next(_connection_ids)}/{self.peer_host}:{self.peer_port}"
        high_water_bytes = self._server.read_high_water_bytes
        transport.set_write_buffer_limits(
            high=high_water_bytes, low=high_water_bytes // WRITE_LOW_WATER_DIVISOR
        )
        self._admitted = self._server.connection_opened(self)
        if not self._admitted:
            transport.close()
            return
        self._schedule_idle_check(self._server.idle_timeout_s)
        if self._preamble:
            # Before the transport's first read (it is scheduled after this callback).
            preamble, self._preamble = self._preamble, b""
            self.data_received(preamble)

    def connection_lost(self, exc: Exception | None) -> None:
        """Fail nothing silently: wake writers and fire the closed hook once."""
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self._reader.stop()
        self._backlog.clear()
        self._out.writable.set()
        if self._slot is not None:
            self._slot.release()
        if not self._lost.done():
            self._lost.set_result(None)
            if self._admitted:
                self._server.connection_closed(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        """The server's read buffer: the loop receives into it."""
        return self._server.read_buffer

    def buffer_updated(self, nbytes: int) -> None:
        """The loop received ``nbytes`` into the read buffer."""
        self.data_received(self._server.read_buffer[:nbytes])

    def data_received(self, data: bytes | memoryview) -> None:
        """Decode whatever frames ``data`` completes and dispatch them (``data`` is
        only read during the call)."""
        now_s = self._last_activity_s = self._loop.time()
        reader = self._reader
        try:
            commands = reader.decoder.feed(data)
        except ProtocolError as exc:
            reader.release()
            # Rate-limited: a peer reconnecting with garbage must not flood the log.
            self._server.refusal_log.warning(now_s, "closing %s: bad frame: %s", self.id, exc)
            # Frames completed before the fault are processed, as Netty does;
            # their answers are dropped with the connection.
            for cmd in exc.decoded:
                self._dispatch(cmd)
            self.close()
            return
        # Frames that complete within the read they started in (every ordinary
        # request) leave nothing behind: for them this test is all it costs.
        if (reader.unfinished_bytes or reader.decoder.buffered_bytes) and not reader.account(
            bool(commands), now_s
        ):
            return
        out = self._out
        out.receiving = True
        try:
            for cmd in commands:
                self._dispatch(cmd)
        finally:
            out.receiving = False
        if out.outgoing:
            # Answers given without waiting leave now, in one send.
            out.flush()

    def eof_received(self) -> bool:
        """Half-closed peers are closed fully, as Netty does."""
        return False

    def pause_writing(self) -> None:
        """The write buffer passed the high-water mark: stop taking requests."""
        self._writing_paused = True
        self._out.writable.clear()
        self._update_reading()

    def resume_writing(self) -> None:
        """The write buffer drained: take requests again."""
        self._writing_paused = False
        self._out.writable.set()
        self._pump_backlog()
        self._update_reading()

    # -- request handling ---------------------------------------------------------

    def _dispatch(self, cmd: RemotingCommand) -> None:
        if self._detached is not None:
            self._detached.append(cmd)  # the next owner's to handle
            return
        if cmd.flag & FLAG_RESPONSE:
            # Nothing on the server side ever waits for an answer.
            log.debug("%s: ignoring response frame opaque=%d", self.id, cmd.opaque)
            return
        if self._backlog or self._writing_paused or len(self._tasks) >= self._max_inflight:
            self._backlog.append(cmd)
            self._update_reading()
            return
        self._start(cmd)

    def _pump_backlog(self) -> None:
        # Waiting requests start only while the output can take their answers,
        # so the write buffer stays within high water + one answer per slot.
        while (
            self._backlog
            and not self._writing_paused
            and self._detached is None
            and not self.is_closed
            and len(self._tasks) < self._server.max_inflight_per_connection
        ):
            self._start(self._backlog.popleft())

    def _start(self, request: RemotingCommand) -> None:
        try:
            pending = self._handler(request, self)
        except Exception as exc:
            self._out.answer_failure(request, exc)
            return
        if pending is None or isinstance(pending, RemotingCommand):
            # Answered without waiting (the cached route query): write it now,
            # unless there is nothing to say or the request was one-way.
            if pending is not None and not request.flag & FLAG_ONEWAY:
                self._out.write_response(request, pending)
            return
        if isinstance(pending, asyncio.Future) and pending.done():
            # The handler answered without waiting (see ``ready``): skip the Task.
            self._out.answer_from(request, pending)
            return
        task = asyncio.ensure_future(pending)
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._on_handled, request))

    def _on_handled(
        self, request: RemotingCommand, task: asyncio.Future[RemotingCommand | None]
    ) -> None:
        self._tasks.discard(task)
        self._out.answer_from(request, task)
        self._pump_backlog()
        self._update_reading()
        if self._draining and not self._tasks:
            self._server.drain_progress()

    # -- handing the connection over -----------------------------------------------

    def detach(
        self, first: RemotingCommand, timeout_s: float = DETACH_TIMEOUT_S
    ) -> Coroutine[Any, Any, tuple[int, bytes]]:
        """Give the peer's connection to another process, called by the handler of
        ``first`` itself (not in a coroutine it returns, which runs only after the rest
        of the read was dispatched): from now on nothing more is read or handled here.

        The returned coroutine waits for the handlers of earlier requests and for every
        answer to leave, then gives a duplicate of the socket's descriptor (the
        caller's to pass on and close) and the bytes the next owner must serve before
        anything it reads: ``first`` and the frames read after it, encoded again, then
        the start of an unfinished frame. This connection then closes as any other (its
        closed hook fires), but only this process's descriptor: the peer's connection
        stays open. It raises ``ConnectionError`` when the connection closed meanwhile
        or the earlier answers did not leave within ``timeout_s`` (the connection is
        closed then)."""
        if self._detached is not None:
            raise RuntimeError(f"connection {self.id} is already being handed over")
        # At once, not when the coroutine first runs: frames later in the same read
        # must not reach the handler.
        self._detached = []
        self._update_reading()
        current = asyncio.current_task()  # the handler's own, when it runs in one
        earlier = [task for task in self._tasks if task is not current]
        return self._finish_detach(first, earlier, timeout_s)

    async def _finish_detach(
        self,
        first: RemotingCommand,
        earlier: list[asyncio.Future[RemotingCommand | None]],
        timeout_s: float,
    ) -> tuple[int, bytes]:
        assert self._detached is not None
        deadline_s = self._loop.time() + timeout_s
        if earlier:
            await asyncio.wait(earlier, timeout=timeout_s)
        self._out.flush()
        transport = self._transport
        while (
            transport is not None
            and not transport.is_closing()
            and transport.get_write_buffer_size()
            and self._loop.time() < deadline_s
        ):
            await asyncio.sleep(DETACH_POLL_S)
        if (
            transport is None
            or transport.is_closing()
            or transport.get_write_buffer_size()
            or any(not task.done() for task in earlier)
        ):
            self.close()
            raise ConnectionError(f"connection {self.id} could not be handed over")
        # A started request is older than every waiting one, and those than the
        # frames read after the hand-over began.
        frames = [first, *self._backlog, *self._detached]
        buffered = self._reader.decoder.take_buffered()
        stream = b"".join([*(encode_frame(cmd) for cmd in frames), buffered])
        self._backlog.clear()
        self._detached = []
        self._reader.release()
        fd = os.dup(transport.get_extra_info("socket").fileno())
        # asyncio closes its socket object without a shutdown: the duplicate keeps
        # the TCP connection whole.
        transport.close()
        return fd, stream

    # -- flow control -------------------------------------------------------------

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        should_pause = (
            self._writing_paused
            or self._draining
            or self._detached is not None
            or bool(self._backlog)
            or len(self._tasks) >= self._server.max_inflight_per_connection
        )
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            self._reader.reading_resumed()
            transport.resume_reading()

    # -- idle timeout -------------------------------------------------------------

    def _schedule_idle_check(self, delay_s: float) -> None:
        # One lazily re-armed timer per connection instead of resetting a timer
        # on every read and write: the hot path only stores a timestamp.
        self._idle_timer = self._loop.call_later(delay_s, self._check_idle)

    def _check_idle(self) -> None:
        idle_timeout_s = self._server.idle_timeout_s
        idle_for_s = self._loop.time() - max(self._last_activity_s, self._out.last_write_s)
        if idle_for_s >= idle_timeout_s:
            log.info("closing %s: idle for %.1f s", self.id, idle_for_s)
            self.close()
            return
        self._schedule_idle_check(idle_timeout_s - idle_for_s)

    # -- shutdown, driven by the server ---------------------------------------------

    @property
    def handler_tasks(self) -> tuple[asyncio.Future[RemotingCommand | None], ...]:
        """The handlers of this connection still running."""
        return tuple(self._tasks)

    @property
    def lost(self) -> asyncio.Future[None]:
        """Done once the connection is lost."""
        return self._lost

    def begin_drain(self) -> None:
        """Read nothing more; requests already read still get their answers."""
        self._draining = True
        self._update_reading()

    def abort(self) -> None:
        """Cancel the running handlers and drop the connection without flushing."""
        for task in self._tasks:
            task.cancel()
        if self._transport is not None:
            self._transport.abort()
