"""asyncio adapter that serves the RocketMQ remoting protocol over TCP.

The adapter is deliberately thin (the h11 / uvicorn split): bytes go into the
sans-IO :class:`~remoting.frame.FrameDecoder`, decoded requests go to one
``Handler`` coroutine, and the commands it returns go out through
:func:`~remoting.frame.encode_frame`. What the adapter owns is the part the
codec cannot: concurrency, back-pressure, idle timeouts and shutdown.

Behaviour follows ``NettyRemotingServer`` / ``NettyRemotingAbstract``:

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
  fires ``on_connection_closed`` exactly once (the channel-destroy hook).

Limits Netty leaves to the operating system, so that hostile peers cannot take
the memory or the connections of everyone else (each closure is logged, at
most ``REFUSAL_LOG_LINES_MAX`` lines per ``REFUSAL_LOG_INTERVAL_S``):

* the bytes held in unfinished frames, summed over every connection, stay
  within ``unfinished_frames_bytes_max``: the connection whose read would push
  the sum past it is closed, its bytes released;
* a frame, once started, must be complete within ``frame_deadline_s`` (time
  the server itself is not reading does not count), else its connection is
  closed: a peer dripping one byte a second cannot keep a buffer forever;
* at most ``connections_per_address_max`` connections per remote address: one
  past it is closed at once, before any handler or hook sees it;
* every connection holds a slot of a ``ConnectionBudget`` (the process's by
  default, sized from its open-files limit): at the cap, or out of descriptors,
  accepting pauses instead of failing in a loop (``remoting/listener.py``).

Why one module of ~800 lines: the connection loop, back-pressure, the frame
budget and shutdown share one piece of state per connection and one accounting
of the server's bytes; split, each half would reach into the other's fields.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import ipaddress
import itertools
import logging
import os
import socket
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from remoting.codes import FLAG_ONEWAY, FLAG_RESPONSE, ResponseCode
from remoting.command import RemotingCommand, make_response
from remoting.errors import ProtocolError
from remoting.frame import FRAME_BYTES_MAX, FrameDecoder, encode_frame, encode_frame_prefix
from remoting.listener import (
    PREPARE_TIMEOUT_S,
    SSL_HANDSHAKE_TIMEOUT_S,
    BudgetExhausted,
    ConnectionBudget,
    Listener,
    Prepare,
    Slot,
    listening_sockets,
    process_budget,
    start_listeners,
)

log = logging.getLogger(__name__)

Handler = Callable[
    [RemotingCommand, "Connection"],
    Awaitable[RemotingCommand | None] | RemotingCommand | None,
]
"""Processes one request. Returns an awaitable of the answer (None: answer nothing),
or, for a request it can answer without waiting, the answer itself (or None): the
server then writes it at once, with no Task and no Future."""

ConnectionClosedCallback = Callable[["Connection"], None]

DEFAULT_PORT = 9876
IDLE_TIMEOUT_S = 120.0
READ_HIGH_WATER_BYTES = 4 * 1024 * 1024
MAX_INFLIGHT_PER_CONNECTION = 1024
DRAIN_TIMEOUT_S = 5.0
# Netty's default serverSocketBacklog; asyncio's default of 100 drops bursts of
# simultaneous connects (every broker and client reconnecting after a restart).
ACCEPT_BACKLOG = 1024
# asyncio resumes writing once the buffer falls to the low-water mark; a quarter
# of the high-water mark gives hysteresis without starving the socket.
WRITE_LOW_WATER_DIVISOR = 4
# After the drain deadline, cancelled handlers get this long to unwind.
CANCEL_GRACE_S = 1.0
# Four maximum-size (16 MiB) frames arriving at once fit; real requests are far
# smaller (a register of thousands of topics is a few MiB), and 30 peers each
# holding 15 MiB of a never-finished frame took a gateway from 85 MiB to 536 MiB.
UNFINISHED_FRAMES_BYTES_MAX = 64 * 1024 * 1024
# Longer than any RocketMQ client waits for its own answer (a broker's register
# times out after 24 s, other requests after 3 s), so a frame still unfinished
# then is useless to its sender; a 16 MiB frame needs about 4.5 Mbit/s to make it.
FRAME_DEADLINE_S = 30.0
# Each RocketMQ client instance or broker holds one channel per NameServer, so
# thousands from one address is a whole fleet behind a NAT. Twice the 2000 idle
# loopback connections tests/integration/test_bad_input.py holds against one
# gateway; the route-query bench opens 2 x --connections (32 by default).
CONNECTIONS_PER_ADDRESS_MAX = 4096
# Closures for the limits above are logged at most this many lines per interval;
# a flood of them (peers reconnecting in a loop) must not fill the disk.
REFUSAL_LOG_LINES_MAX = 10
REFUSAL_LOG_INTERVAL_S = 10.0
# Adopted connections leave this share of the budget to the ones accepted here (a
# gateway's links from its read front), so route queries the front fetches get through.
ADOPT_RESERVE_DIVISOR = 8
# Connection.detach waits at most this long for the answers of earlier requests.
DETACH_TIMEOUT_S = 5.0
DETACH_POLL_S = 0.002

_connection_ids = itertools.count(1)


def _check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")


def describe_exception(exc: BaseException) -> str:
    """A one-line description of ``exc`` for a SYSTEM_ERROR remark.

    Mirrors ``UtilAll.exceptionSimpleDesc``: the exception text, then the
    innermost frame it was raised in, so an operator can find the failing code.
    """
    text = f"{type(exc).__name__}: {exc}"
    tb = exc.__traceback__
    if tb is None:
        return text
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    file_name = code.co_filename.rsplit("/", 1)[-1]
    return f"{text}, {code.co_name}({file_name}:{tb.tb_lineno})"


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


class RefusalLog:
    """Warnings about refused or cut peers, at most ``lines_max`` per ``interval_s``.

    Lines past the allowance are counted, not written; the next line written
    says how many were left out, so the log stays honest about the flood.
    """

    def __init__(
        self,
        lines_max: int = REFUSAL_LOG_LINES_MAX,
        interval_s: float = REFUSAL_LOG_INTERVAL_S,
        logger: logging.Logger | None = None,
    ) -> None:
        """A log allowing ``lines_max`` lines in each window of ``interval_s``, written
        to ``logger`` (this module's by default)."""
        self.lines_max = lines_max
        self.interval_s = interval_s
        self._log = log if logger is None else logger
        self._window_start_s = float("-inf")
        self._lines = 0
        self._suppressed = 0

    def warning(self, now_s: float, message: str, *args: object) -> bool:
        """Log ``message % args`` unless this window's allowance is spent; True if logged."""
        if now_s - self._window_start_s >= self.interval_s:
            self._window_start_s = now_s
            self._lines = 0
        if self._lines >= self.lines_max:
            self._suppressed += 1
            return False
        self._lines += 1
        if self._suppressed:
            message += " (%d similar lines left out)"
            args = (*args, self._suppressed)
            self._suppressed = 0
        self._log.warning(message, *args)
        return True


class Connection(asyncio.Protocol):
    """One accepted peer of a :class:`RemotingServer`.

    Handlers receive it with every request. Its public surface is ``id``,
    ``peer_host``, ``peer_port``, ``is_loopback``, ``send`` and ``close``; the
    ``asyncio.Protocol`` callbacks belong to the event loop.
    """

    def __init__(
        self, server: RemotingServer, preamble: bytes = b"", slot: Slot | None = None
    ) -> None:
        self.id = ""
        self.peer_host = ""
        self.peer_port = 0
        self._server = server
        # Read on every request: kept here rather than looked up through the server.
        self._handler = server.handler
        self._max_inflight = server.max_inflight_per_connection
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._decoder = FrameDecoder(server.frame_bytes_max)
        self._tasks: set[asyncio.Future[RemotingCommand | None]] = set()
        # Requests decoded while max_inflight handlers were already running.
        # Reading is paused whenever it is non-empty, so it never holds more
        # than the frames of one read (asyncio reads at most 256 KiB at once).
        self._backlog: deque[RemotingCommand] = deque()
        self._writing_paused = False
        self._reading_paused = False
        self._draining = False
        self._writable = asyncio.Event()
        self._writable.set()
        self._lost: asyncio.Future[None] = self._loop.create_future()
        self._last_activity_s = self._loop.time()
        self._idle_timer: asyncio.TimerHandle | None = None
        # Bytes of the unfinished frame this connection holds in the server's
        # budget (what the decoder held after the last read), and since when.
        self._unfinished_bytes = 0
        self._frame_started_s: float | None = None
        self._frame_timer: asyncio.TimerHandle | None = None
        # False when the per-address cap refused the connection: it was never
        # opened, so no handler and no hook ever sees it.
        self._admitted = False
        # Answers of this loop iteration, written together by _flush: at most
        # one per request of the last read plus one per in-flight request.
        self._outgoing: list[bytes] = []
        self._outgoing_bytes = 0
        self._flush_scheduled = False
        # True inside data_received: answers given there are written together
        # when it returns (one send per read, as the frames arrived together).
        self._receiving = False
        # What another process read of an adopted connection (RemotingServer.adopt):
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
        if self._transport is None:
            return self._outgoing_bytes
        return self._outgoing_bytes + self._transport.get_write_buffer_size()

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
        self._write(encode_frame(cmd))
        await self._writable.wait()

    def close(self) -> None:
        """Close the connection after flushing what was already written."""
        if self._transport is not None:
            self._flush()
            self._transport.close()

    # -- asyncio.Protocol callbacks -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Register the connection with its server and start the idle clock."""
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer_host, self.peer_port = str(peer[0]), int(peer[1])
        self.id = f"c{next(_connection_ids)}/{self.peer_host}:{self.peer_port}"
        high_water_bytes = self._server.read_high_water_bytes
        transport.set_write_buffer_limits(
            high=high_water_bytes, low=high_water_bytes // WRITE_LOW_WATER_DIVISOR
        )
        self._admitted = self._server._connection_opened(self)
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
        if self._frame_timer is not None:
            self._frame_timer.cancel()
        self._release_unfinished()
        self._backlog.clear()
        self._writable.set()
        if self._slot is not None:
            self._slot.release()
        if not self._lost.done():
            self._lost.set_result(None)
            if self._admitted:
                self._server._connection_closed(self)

    def data_received(self, data: bytes) -> None:
        """Decode whatever frames ``data`` completes and dispatch them."""
        now_s = self._last_activity_s = self._loop.time()
        try:
            commands = self._decoder.feed(data)
        except ProtocolError as exc:
            self._release_unfinished()
            # Rate-limited: a peer reconnecting with garbage must not flood the log.
            self._server._refusal_log.warning(now_s, "closing %s: bad frame: %s", self.id, exc)
            # Frames completed before the fault are processed, as Netty does;
            # their answers are dropped with the connection.
            for cmd in exc.decoded:
                self._dispatch(cmd)
            self.close()
            return
        # Frames that complete within the read they started in (every ordinary
        # request) leave nothing behind: for them this test is all it costs.
        if (self._unfinished_bytes or self._decoder.buffered_bytes) and not self._account(
            bool(commands), now_s
        ):
            return
        self._receiving = True
        try:
            for cmd in commands:
                self._dispatch(cmd)
        finally:
            self._receiving = False
        if self._outgoing:
            # Answers given without waiting leave now, in one send.
            self._flush()

    def eof_received(self) -> bool:
        """Half-closed peers are closed fully, as Netty does."""
        return False

    def pause_writing(self) -> None:
        """The write buffer passed the high-water mark: stop taking requests."""
        self._writing_paused = True
        self._writable.clear()
        self._update_reading()

    def resume_writing(self) -> None:
        """The write buffer drained: take requests again."""
        self._writing_paused = False
        self._writable.set()
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
            self._answer(request, self._failure(request, exc))
            return
        if pending is None or isinstance(pending, RemotingCommand):
            # Answered without waiting (the cached route query): write it now,
            # unless there is nothing to say or the request was one-way.
            if pending is not None and not request.flag & FLAG_ONEWAY:
                self._write_response(request, pending)
            return
        if isinstance(pending, asyncio.Future) and pending.done():
            # The handler answered without waiting (see ``ready``): skip the Task.
            self._answer_from(request, pending)
            return
        task = asyncio.ensure_future(pending)
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._on_handled, request))

    def _on_handled(
        self, request: RemotingCommand, task: asyncio.Future[RemotingCommand | None]
    ) -> None:
        self._tasks.discard(task)
        self._answer_from(request, task)
        self._pump_backlog()
        self._update_reading()
        if self._draining and not self._tasks:
            self._server._drain_progress()

    def _answer_from(
        self, request: RemotingCommand, done: asyncio.Future[RemotingCommand | None]
    ) -> None:
        if done.cancelled():
            return
        exc = done.exception()
        if exc is not None:
            self._answer(request, self._failure(request, exc))
        else:
            self._answer(request, done.result())

    def _failure(self, request: RemotingCommand, exc: BaseException) -> RemotingCommand:
        log.warning("%s: handler failed on code %d", self.id, request.code, exc_info=exc)
        return make_response(request, ResponseCode.SYSTEM_ERROR, remark=describe_exception(exc))

    def _answer(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        # One-way requests never get an answer, not even an error (Netty's rule).
        if response is None or request.flag & FLAG_ONEWAY:
            return
        self._write_response(request, response)

    def _write_response(self, request: RemotingCommand, response: RemotingCommand) -> None:
        if response.opaque != request.opaque or not response.flag & FLAG_RESPONSE:
            # Netty stamps the request's opaque and the response bit on whatever
            # the processor returned; do the same so handlers cannot get it wrong.
            response = dataclasses.replace(
                response, opaque=request.opaque, flag=response.flag | FLAG_RESPONSE
            )
        try:
            prefix = encode_frame_prefix(response)
        except Exception as exc:
            log.warning("%s: cannot encode answer to code %d", self.id, request.code, exc_info=True)
            self._write(
                encode_frame(
                    make_response(
                        request, ResponseCode.SYSTEM_ERROR, remark=describe_exception(exc)
                    )
                )
            )
            return
        # The body goes out as it is: joined with the other answers of this
        # iteration when they are flushed, never copied onto its prefix first.
        self._write(prefix, response.body)

    def _write(self, frame: bytes, body: bytes | None = None) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        # Answers finished in the same loop iteration leave in one send():
        # under pipelined load a syscall per answer costs more than the answer.
        outgoing = self._outgoing
        outgoing.append(frame)
        if body:
            outgoing.append(body)
            self._outgoing_bytes += len(frame) + len(body)
        else:
            self._outgoing_bytes += len(frame)
        if not self._flush_scheduled and not self._receiving:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        frames, self._outgoing = self._outgoing, []
        self._outgoing_bytes = 0
        transport = self._transport
        if not frames or transport is None or transport.is_closing():
            return
        self._last_activity_s = self._loop.time()
        transport.write(frames[0] if len(frames) == 1 else b"".join(frames))

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
        self._flush()
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
        stream = b"".join([*(encode_frame(cmd) for cmd in frames), self._decoder.take_buffered()])
        self._backlog.clear()
        self._detached = []
        self._release_unfinished()
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
            if self._frame_started_s is not None:
                # Time spent not reading is the server's, not the peer's.
                self._frame_started_s = self._loop.time()
            transport.resume_reading()

    # -- unfinished frames: the server's budget and the frame deadline ---------------

    def _account(self, completed: bool, now_s: float) -> bool:
        """Move the decoder's unfinished bytes into the server's budget after a read.

        False when the growth does not fit: the connection is then cut, and the
        frames the read completed are dropped with it.
        """
        buffered = self._decoder.buffered_bytes
        if not self._server._reserve_unfinished(buffered - self._unfinished_bytes):
            self._cut(
                "an unfinished frame of %d bytes would take the unfinished frames of all "
                "connections past the budget of %d bytes",
                buffered,
                self._server.unfinished_frames_bytes_max,
            )
            return False
        self._unfinished_bytes = buffered
        if not buffered:
            # The timer, if armed, finds nothing to check and lapses.
            self._frame_started_s = None
        elif completed or self._frame_started_s is None:
            # The partial frame began in this read.
            self._frame_started_s = now_s
            if self._frame_timer is None:
                self._schedule_frame_check(self._server.frame_deadline_s)
        return True

    def _release_unfinished(self) -> None:
        if self._unfinished_bytes:
            self._server._reserve_unfinished(-self._unfinished_bytes)
            self._unfinished_bytes = 0
        self._frame_started_s = None

    def _cut(self, reason: str, *args: object) -> None:
        """Close the connection for exceeding a limit and free its buffer at once."""
        self._server._refusal_log.warning(
            self._loop.time(), "closing %s: " + reason, self.id, *args
        )
        self._release_unfinished()
        # The transport stops reading on close, so nothing feeds this decoder
        # again; replacing it frees the partial frame now, not at collection.
        self._decoder = FrameDecoder(self._server.frame_bytes_max)
        self.close()

    def _schedule_frame_check(self, delay_s: float) -> None:
        # Like the idle check: armed when a frame starts, re-armed lazily when
        # it fires, never reset per read.
        self._frame_timer = self._loop.call_later(delay_s, self._check_frame_deadline)

    def _check_frame_deadline(self) -> None:
        self._frame_timer = None
        started_s = self._frame_started_s
        if started_s is None or self.is_closed:
            return
        deadline_s = self._server.frame_deadline_s
        if self._reading_paused:
            # The server is not reading: the peer cannot finish. The clock
            # starts again when reading resumes (_update_reading).
            self._schedule_frame_check(deadline_s)
            return
        taken_s = self._loop.time() - started_s
        if taken_s >= deadline_s:
            self._cut(
                "frame unfinished after %.1f s (%d bytes so far, deadline %.1f s)",
                taken_s,
                self._unfinished_bytes,
                deadline_s,
            )
            return
        self._schedule_frame_check(deadline_s - taken_s)

    # -- idle timeout -------------------------------------------------------------

    def _schedule_idle_check(self, delay_s: float) -> None:
        # One lazily re-armed timer per connection instead of resetting a timer
        # on every read and write: the hot path only stores a timestamp.
        self._idle_timer = self._loop.call_later(delay_s, self._check_idle)

    def _check_idle(self) -> None:
        idle_timeout_s = self._server.idle_timeout_s
        idle_for_s = self._loop.time() - self._last_activity_s
        if idle_for_s >= idle_timeout_s:
            log.info("closing %s: idle for %.1f s", self.id, idle_for_s)
            self.close()
            return
        self._schedule_idle_check(idle_timeout_s - idle_for_s)

    # -- shutdown -----------------------------------------------------------------

    def _begin_drain(self) -> None:
        self._draining = True
        self._update_reading()

    def _abort(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._transport is not None:
            self._transport.abort()


class RemotingServer:
    """A RocketMQ remoting server: accepts connections and runs ``handler``.

    ``read_high_water_bytes`` bounds the unsent output per connection (reading
    pauses above it) and ``max_inflight_per_connection`` bounds the requests a
    peer may have in progress (reading pauses at it), so a peer that sends
    without reading cannot grow the server's memory.

    ``unfinished_frames_bytes_max`` bounds the bytes of unfinished frames summed
    over all connections, ``frame_deadline_s`` the time a started frame may take
    and ``connections_per_address_max`` the connections of one remote address
    (see the module docstring), so peers that never finish a frame or open
    connections by the thousand cannot take what everyone else needs.
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
        _check_positive("unfinished_frames_bytes_max", unfinished_frames_bytes_max)
        _check_positive("frame_deadline_s", frame_deadline_s)
        _check_positive("connections_per_address_max", connections_per_address_max)
        self.handler = handler
        self.host = host
        self.frame_bytes_max = frame_bytes_max
        self.idle_timeout_s = idle_timeout_s
        self.read_high_water_bytes = read_high_water_bytes
        self.max_inflight_per_connection = max_inflight_per_connection
        self.unfinished_frames_bytes_max = unfinished_frames_bytes_max
        self.frame_deadline_s = frame_deadline_s
        self.connections_per_address_max = connections_per_address_max
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
        self._connections: dict[Connection, None] = {}
        self._unfinished_bytes = 0
        self._connections_by_host: dict[str, int] = {}
        self._refusal_log = RefusalLog()
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
        return self._unfinished_bytes

    def connections_from(self, host: str) -> int:
        """How many open connections the remote address ``host`` holds."""
        return self._connections_by_host.get(host, 0)

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
            refusals=self._refusal_log,
            prepare=self._prepare,
            prepare_timeout_s=self._prepare_timeout_s,
            ssl_handshake_timeout_s=self._ssl_handshake_timeout_s,
            listener_refusals=RefusalLog,
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
            conn._begin_drain()
        await self._wait_for_handlers(connections, deadline_s)
        for conn in connections:
            conn.close()
        await self._wait_for_lost(connections, deadline_s)
        leftovers = [task for conn in connections for task in conn._tasks]
        for conn in connections:
            conn._abort()
        grace_deadline_s = loop.time() + CANCEL_GRACE_S
        await self._wait_for_lost(connections, grace_deadline_s)
        if leftovers:
            await asyncio.wait(leftovers, timeout=max(0.0, grace_deadline_s - loop.time()))

    async def _wait_for_handlers(self, connections: list[Connection], deadline_s: float) -> None:
        loop = asyncio.get_running_loop()
        while any(conn._tasks for conn in connections):
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
        pending = [conn._lost for conn in connections if not conn._lost.done()]
        remaining_s = deadline_s - asyncio.get_running_loop().time()
        if pending and remaining_s > 0:
            await asyncio.wait(pending, timeout=remaining_s)

    def _drain_progress(self) -> None:
        waiter = self._drain_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _reserve_unfinished(self, delta_bytes: int) -> bool:
        """Add ``delta_bytes`` (negative: a release) to the unfinished-frame total.

        False, changing nothing, when a growth would pass the budget.
        """
        total_bytes = self._unfinished_bytes + delta_bytes
        if delta_bytes > 0 and total_bytes > self.unfinished_frames_bytes_max:
            return False
        self._unfinished_bytes = total_bytes
        return True

    def _connection_opened(self, conn: Connection) -> bool:
        """Admit ``conn`` unless its address is at the cap; False: refused, close it."""
        host = conn.peer_host
        count = self._connections_by_host.get(host, 0)
        if count >= self.connections_per_address_max:
            self._refusal_log.warning(
                asyncio.get_running_loop().time(),
                "refusing %s: %s already holds %d connections (the maximum per address)",
                conn.id,
                host,
                count,
            )
            return False
        self._connections_by_host[host] = count + 1
        self._connections[conn] = None
        if self._closing:
            # Accepted in the same loop turn as close(): not in its snapshot.
            conn.close()
        return True

    def _connection_closed(self, conn: Connection) -> None:
        self._connections.pop(conn, None)
        host = conn.peer_host
        count = self._connections_by_host.get(host, 0) - 1
        if count > 0:
            self._connections_by_host[host] = count
        else:
            self._connections_by_host.pop(host, None)
        self._drain_progress()
        if self._on_connection_closed is None:
            return
        try:
            self._on_connection_closed(conn)
        except Exception:
            log.exception("on_connection_closed failed for %s", conn.id)
