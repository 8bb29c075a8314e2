"""asyncio client for the RocketMQ remoting protocol.

Like ``NettyRemotingClient`` it keeps one connection per address, numbers
requests from a per-client counter (``opaque``, starting at 0) and matches
answers by that number, so many requests may be in flight on one connection
and answers may come back in any order. The codec is the sans-IO
:mod:`remoting.frame`; this module only moves bytes and futures.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable

from remoting.acl import Credentials, sign
from remoting.codes import FLAG_ONEWAY, FLAG_RESPONSE, ResponseCode
from remoting.command import RemotingCommand, make_response
from remoting.errors import ProtocolError
from remoting.frame import FRAME_BYTES_MAX, FrameDecoder, encode_frame
from remoting.tls import ClientTls, ClientTlsChoice, resolve_client_tls

log = logging.getLogger(__name__)

RequestHandler = Callable[[RemotingCommand, str], Awaitable[RemotingCommand | None]]
"""Processes a request the server pushed; gets the command and the server address."""

CONNECT_TIMEOUT_S = 3.0
INVOKE_TIMEOUT_S = 3.0
# Java's opaque is an AtomicInteger; keep ours a non-negative int32 so every
# peer (and the ROCKETMQ binary header) can carry it.
OPAQUE_MODULUS = 2**31
# Server-pushed requests handled at once per connection; more are refused with
# SYSTEM_BUSY so a chatty server cannot grow the client's task set.
MAX_PUSHED_INFLIGHT = 64
# How long close() lets queued bytes (a last one-way request) reach the kernel.
CLOSE_FLUSH_TIMEOUT_S = 1.0
OVERLOAD_REMARK = "[OVERLOAD]system busy, start flow control for a while"


class RemotingClientError(Exception):
    """Base of the errors a remoting client raises."""


class RemotingConnectError(RemotingClientError):
    """The client could not connect to the address."""


class RemotingTimeoutError(RemotingClientError):
    """No answer arrived within the timeout."""


class RemotingConnectionClosed(RemotingClientError):
    """The connection dropped while a request waited for its answer."""


def split_addr(addr: str) -> tuple[str, int]:
    """Split ``"host:port"`` (or ``"[v6]:port"``) into host and port."""
    host, sep, port_text = addr.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ValueError(f"bad address {addr!r}, expected host:port")
    return host.strip("[]"), int(port_text)


def not_supported_response(request: RemotingCommand) -> RemotingCommand:
    """The answer Netty gives to a request code with no processor."""
    return make_response(
        request,
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        remark=f" request type {request.code} not supported",
    )


class _ClientConnection(asyncio.Protocol):
    """One connection of a :class:`RemotingClient` to one address."""

    def __init__(self, client: RemotingClient, addr: str) -> None:
        self.addr = addr
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._client = client
        self._loop = asyncio.get_running_loop()
        frame_bytes_max = client.frame_bytes_max  # answers: headers as long as the frame
        self._decoder = FrameDecoder(frame_bytes_max, header_bytes_max=frame_bytes_max)
        self._transport: asyncio.Transport | None = None
        self._pushed: set[asyncio.Task[None]] = set()
        self._writable = asyncio.Event()
        self._writable.set()
        self.lost: asyncio.Future[None] = self._loop.create_future()

    @property
    def is_open(self) -> bool:
        """True until the connection starts closing."""
        return self._transport is not None and not self._transport.is_closing()

    def write(self, frame: bytes) -> None:
        """Queue ``frame``; raises when the connection is already closing."""
        if self._transport is None or self._transport.is_closing():
            raise RemotingConnectionClosed(f"connection to {self.addr} is closed")
        self._transport.write(frame)

    async def wait_writable(self) -> None:
        """Wait while the write buffer is above its high-water mark."""
        await self._writable.wait()

    def close(self) -> None:
        """Close after flushing queued bytes."""
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Close at once, dropping queued bytes."""
        for task in self._pushed:
            task.cancel()
        if self._transport is not None:
            self._transport.abort()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport."""
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        """Fail every waiting request and forget this connection."""
        self._writable.set()
        reason = f"connection to {self.addr} closed" + (f": {exc}" if exc else "")
        for future in self.pending.values():
            if not future.done():
                future.set_exception(RemotingConnectionClosed(reason))
        self.pending.clear()
        if not self.lost.done():
            self.lost.set_result(None)
        self._client._forget(self)

    def data_received(self, data: bytes) -> None:
        """Resolve answers by opaque; hand pushed requests to ``on_request``."""
        try:
            commands = self._decoder.feed(data)
        except ProtocolError as exc:
            log.warning("closing connection to %s: bad frame: %s", self.addr, exc)
            self.abort()
            return
        for cmd in commands:
            if cmd.is_response:
                self._resolve(cmd)
            else:
                self._on_pushed(cmd)

    def pause_writing(self) -> None:
        """Make writers wait until the kernel takes the buffered bytes."""
        self._writable.clear()

    def resume_writing(self) -> None:
        """Let writers go on."""
        self._writable.set()

    def _resolve(self, response: RemotingCommand) -> None:
        future = self.pending.pop(response.opaque, None)
        if future is None or future.done():
            # The caller gave up (timeout or cancel) before the answer came.
            log.debug("%s: dropping late answer opaque=%d", self.addr, response.opaque)
            return
        future.set_result(response)

    def _on_pushed(self, request: RemotingCommand) -> None:
        if self._client.on_request is None:
            if not request.is_oneway:
                self._answer(request, not_supported_response(request))
            return
        if len(self._pushed) >= MAX_PUSHED_INFLIGHT:
            log.warning("%s: too many pushed requests, refusing code %d", self.addr, request.code)
            if not request.is_oneway:
                busy = make_response(request, ResponseCode.SYSTEM_BUSY, remark=OVERLOAD_REMARK)
                self._answer(request, busy)
            return
        task = self._loop.create_task(self._serve_pushed(request))
        self._pushed.add(task)
        task.add_done_callback(self._pushed.discard)

    async def _serve_pushed(self, request: RemotingCommand) -> None:
        handler = self._client.on_request
        assert handler is not None
        try:
            response = await handler(request, self.addr)
        except Exception as exc:
            log.warning("%s: on_request failed on code %d", self.addr, request.code, exc_info=True)
            response = make_response(request, ResponseCode.SYSTEM_ERROR, remark=repr(exc))
        if response is not None and not request.is_oneway:
            self._answer(request, response)

    def _answer(self, request: RemotingCommand, response: RemotingCommand) -> None:
        response = dataclasses.replace(
            response, opaque=request.opaque, flag=response.flag | FLAG_RESPONSE
        )
        if self.is_open:
            self.write(encode_frame(response))


class RemotingClient:
    """Sends requests to remoting servers, one reused connection per address.

    ``on_request`` receives requests a server pushes on one of the client's
    connections (a broker gets NOTIFY_MIN_BROKER_ID_CHANGE this way); without
    it two-way pushes are answered REQUEST_CODE_NOT_SUPPORTED. With
    ``credentials`` every request is signed (RocketMQ's ACL, :mod:`remoting.acl`),
    as a client with ``AclClientRPCHook`` does. ``tls``: a context to speak TLS with
    to every address, or :class:`~remoting.tls.ClientTls` (by default the process's
    ``NAMESRV_TLS_CONFIG_FILE`` decides, as ``-Dtls.enable`` does for a Java client).
    """

    def __init__(
        self,
        *,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        frame_bytes_max: int = FRAME_BYTES_MAX,
        on_request: RequestHandler | None = None,
        credentials: Credentials | None = None,
        tls: ClientTlsChoice = ClientTls.PROCESS,
    ) -> None:
        self.ssl_context = resolve_client_tls(tls)
        self.connect_timeout_s = connect_timeout_s
        self.credentials = credentials
        self.frame_bytes_max = frame_bytes_max
        self.on_request = on_request
        self._connections: dict[str, _ClientConnection] = {}
        self._connecting: dict[str, asyncio.Task[_ClientConnection]] = {}
        self._next_opaque = 0
        self._closed = False

    def next_opaque(self) -> int:
        """The next request number of this client (0, 1, 2 ... wrapping at 2**31)."""
        opaque = self._next_opaque
        self._next_opaque = (opaque + 1) % OPAQUE_MODULUS
        return opaque

    async def invoke(
        self, addr: str, request: RemotingCommand, timeout_s: float = INVOKE_TIMEOUT_S
    ) -> RemotingCommand:
        """Send ``request`` to ``addr`` and return its answer.

        The request is sent with a fresh opaque (the caller's object is not
        changed). ``timeout_s`` covers connecting, sending and waiting, as in
        ``invokeSync``. Raises RemotingConnectError, RemotingTimeoutError or
        RemotingConnectionClosed.
        """
        loop = asyncio.get_running_loop()
        deadline_s = loop.time() + timeout_s
        conn = await self._connection(addr)
        opaque = self.next_opaque()
        future: asyncio.Future[RemotingCommand] = loop.create_future()
        conn.pending[opaque] = future
        timer = loop.call_at(deadline_s, _expire, future, addr, opaque, timeout_s)
        try:
            conn.write(encode_frame(self._outgoing(request, opaque)))
            return await future
        finally:
            timer.cancel()
            if conn.pending.get(opaque) is future:
                del conn.pending[opaque]

    def _outgoing(self, request: RemotingCommand, opaque: int) -> RemotingCommand:
        """``request`` as it leaves: with this call's opaque, signed if we hold an account."""
        if self.credentials is not None:
            request = sign(request, self.credentials)
        return dataclasses.replace(request, opaque=opaque)

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Send ``request`` with the one-way flag; no answer is awaited.

        Returns once the frame is queued and the write buffer is below its
        high-water mark, so a loop of one-way sends cannot outrun the socket.
        """
        conn = await self._connection(addr)
        oneway = dataclasses.replace(
            self._outgoing(request, self.next_opaque()), flag=request.flag | FLAG_ONEWAY
        )
        conn.write(encode_frame(oneway))
        await conn.wait_writable()

    async def close(self) -> None:
        """Close every connection; waiting requests fail with RemotingConnectionClosed."""
        self._closed = True
        for task in list(self._connecting.values()):
            task.cancel()
        connections = list(self._connections.values())
        for conn in connections:
            conn.close()
        lost = [conn.lost for conn in connections]
        if lost:
            await asyncio.wait(lost, timeout=CLOSE_FLUSH_TIMEOUT_S)
        for conn in connections:
            conn.abort()
        if lost:
            await asyncio.wait(lost)

    async def _connection(self, addr: str) -> _ClientConnection:
        if self._closed:
            raise RemotingClientError("client is closed")
        conn = self._connections.get(addr)
        if conn is not None and conn.is_open:
            return conn
        task = self._connecting.get(addr)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._connect(addr))
            self._connecting[addr] = task
            task.add_done_callback(lambda done: self._connect_finished(addr, done))
        # Shielded: one caller giving up must not cancel the others' connect.
        return await asyncio.shield(task)

    def _connect_finished(self, addr: str, task: asyncio.Task[_ClientConnection]) -> None:
        if self._connecting.get(addr) is task:
            del self._connecting[addr]
        if not task.cancelled():
            # Mark the error retrieved even if every waiter was cancelled.
            task.exception()

    async def _connect(self, addr: str) -> _ClientConnection:
        try:
            host, port = split_addr(addr)
        except ValueError as exc:
            raise RemotingConnectError(str(exc)) from exc
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _ClientConnection(self, addr), host, port, ssl=self.ssl_context
                ),
                self.connect_timeout_s,
            )
        except (OSError, TimeoutError) as exc:
            raise RemotingConnectError(f"cannot connect to {addr}: {exc!r}") from exc
        if self._closed:
            conn.abort()
            raise RemotingClientError("client is closed")
        self._connections[addr] = conn
        return conn

    def _forget(self, conn: _ClientConnection) -> None:
        if self._connections.get(conn.addr) is conn:
            del self._connections[conn.addr]


def _expire(
    future: asyncio.Future[RemotingCommand], addr: str, opaque: int, timeout_s: float
) -> None:
    if not future.done():
        future.set_exception(
            RemotingTimeoutError(f"no answer from {addr} to opaque {opaque} in {timeout_s} s")
        )
