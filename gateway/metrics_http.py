"""The gateway's metrics port: ``GET /metrics`` inside the gateway's event loop (the
metrics themselves are :mod:`gateway.metrics`, encoded by prometheus_client's
``choose_encoder`` for the request's ``Accept``).

One request per connection, a bounded request head (:data:`HEAD_BYTES_MAX`, else 431),
a deadline for the whole head however slowly it arrives (:data:`HEAD_TIMEOUT_S`, else
408), 404 for other paths, 405 for other methods, 400 for a malformed head (an HTTP/1.1
one without ``Host`` included), and at most :data:`CONNECTIONS_MAX` connections at once
(more wait in the listening socket's backlog). A refusal is followed by a lingering
close (:data:`LINGER_S`), so a peer still sending reads its answer.

prometheus_client's ``start_http_server`` cannot keep these limits: it starts one thread
per connection with no bound and no head deadline, so a peer sending its head byte by
byte holds a thread and a descriptor as long as it likes, and at EMFILE its accept loop
spins on a listening socket that stays readable. So connections are accepted by
:class:`remoting.listener.Listener`, as on the remoting ports (accepts pause at the
bound, and back off with one rate-limited line at EMFILE), and the HTTP/1.1 head is
parsed and the response written by ``h11``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from dataclasses import dataclass, replace
from http import HTTPStatus
from typing import Protocol

import h11

from remoting.limits import RefusalLog
from remoting.listener import ConnectionBudget, Listener, Slot, bind_tcp

log = logging.getLogger(__name__)

METRICS_PATH = b"/metrics"
HEAD_BYTES_MAX = 8 * 1024
"""A scrape's request head is a few hundred bytes; anything longer is refused (431)."""
HEAD_TIMEOUT_S = 5.0
"""The whole request head must arrive within this (else 408), however it is split."""
CONNECTIONS_MAX = 32
"""Scrapers served at once; more wait in the listening socket's backlog."""
WRITE_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 1.0
LINGER_S = 1.0
LINGER_BYTES_MAX = 64 * 1024
"""After a refusal (408, 431, 400), what the peer still sends is read and dropped for
at most this long and this much before the close, as HTTP servers do: closing a socket
with unread input makes the kernel reset the connection, and a reset can reach the peer
before the answer it was about to read, which is then lost."""
ACCEPT_BACKLOG = 128
READ_CHUNK = 4096


class HeadTooLarge(Exception):
    """A request head longer than the server's ``head_bytes_max`` (431)."""


class Exposition(Protocol):
    """What the port serves (``gateway.metrics.GatewayMetrics``)."""

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """The metrics rendered for an ``Accept`` header: (body, content type)."""
        ...


@dataclass(frozen=True, slots=True)
class Answer:
    """One response of the port (it always closes the connection)."""

    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    extra_headers: tuple[tuple[str, str], ...] = ()
    headers_only: bool = False
    """The answer to a HEAD request: its body is not sent."""


def response_bytes(conn: h11.Connection, answer: Answer) -> bytes:
    """``answer`` as h11 writes it on ``conn`` (h11 leaves the reason phrase empty
    unless given one: the standard library's)."""
    headers = [
        ("Content-Type", answer.content_type),
        ("Content-Length", str(len(answer.body))),
        ("Cache-Control", "no-store"),
        ("Connection", "close"),
        *answer.extra_headers,
    ]
    events: list[h11.Event] = [
        h11.Response(
            status_code=answer.status,
            headers=headers,
            reason=HTTPStatus(answer.status).phrase.encode("ascii"),
        )
    ]
    if not answer.headers_only:
        events.append(h11.Data(data=answer.body))
    events.append(h11.EndOfMessage())
    return b"".join(conn.send(event) or b"" for event in events)


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Half-close, then drop what the peer still sends until it closes too, for at most
    :data:`LINGER_S` and :data:`LINGER_BYTES_MAX` (a lingering close)."""
    if not writer.can_write_eof():
        return
    writer.write_eof()
    dropped = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(LINGER_S):
            while dropped < LINGER_BYTES_MAX:
                data = await reader.read(READ_CHUNK)
                if not data:
                    return
                dropped += len(data)


class MetricsHttpServer:
    """``GET /metrics`` on ``host:port`` (port 0: any free port; see :attr:`port`)."""

    def __init__(
        self,
        metrics: Exposition,
        host: str,
        port: int,
        *,
        head_bytes_max: int = HEAD_BYTES_MAX,
        head_timeout_s: float = HEAD_TIMEOUT_S,
        connections_max: int = CONNECTIONS_MAX,
    ) -> None:
        self.metrics = metrics
        self.host = host
        self._port = port
        self.head_bytes_max = head_bytes_max
        self.head_timeout_s = head_timeout_s
        self.connections_max = connections_max
        # Its own budget: scrapers never take the public ports' slots, nor they its.
        self.budget = ConnectionBudget(connections_max)
        self._refusals = RefusalLog(logger=log)
        self._listeners: list[Listener] = []

    @property
    def port(self) -> int:
        """The bound port once started (else the configured one)."""
        if self._listeners:
            return int(self._listeners[0].sock.getsockname()[1])
        return self._port

    @property
    def listeners(self) -> tuple[Listener, ...]:
        """The accept loops (one per address of the host; none before start)."""
        return tuple(self._listeners)

    async def start(self) -> None:
        """Listen."""
        for sock in bind_tcp(self.host, self._port, ACCEPT_BACKLOG):
            listener = Listener(
                sock,
                self._serve,
                budget=self.budget,
                refusals=self._refusals,
                name=f"metrics port {self.host}:{sock.getsockname()[1]}",
                log_at_cap=False,  # scrapers waiting in the backlog are no news
            )
            listener.start()
            self._listeners.append(listener)

    async def close(self) -> None:
        """Stop listening and drop the connections in progress."""
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            await listener.close()

    async def _serve(self, sock: socket.socket, slot: Slot) -> None:
        """One scraper's connection: its request answered, then closed."""
        try:
            try:
                # The limit bounds what the transport buffers ahead (twice it).
                reader, writer = await asyncio.open_connection(sock=sock, limit=self.head_bytes_max)
            except OSError:
                sock.close()
                return
            try:
                conn = h11.Connection(h11.SERVER)
                # A scraper that hangs up or stalls costs its own connection only.
                with contextlib.suppress(ConnectionError, TimeoutError):
                    answer = await self._answer(reader, conn)
                    if answer is not None:
                        writer.write(response_bytes(conn, answer))
                        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
                        if answer.status >= 400:
                            await _linger(reader, writer)
            finally:
                writer.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(writer.wait_closed(), CLOSE_TIMEOUT_S)
        finally:
            slot.release()

    async def _read_request(
        self, reader: asyncio.StreamReader, conn: h11.Connection
    ) -> h11.Request | None:
        """The request head, parsed by h11; None when the peer leaves before one.
        TimeoutError past the head deadline, HeadTooLarge past ``head_bytes_max``,
        h11.RemoteProtocolError when malformed."""
        received = 0
        async with asyncio.timeout(self.head_timeout_s):
            while True:
                event = conn.next_event()
                if isinstance(event, h11.Request):
                    return event
                if event is not h11.NEED_DATA:
                    return None
                if received >= self.head_bytes_max:
                    raise HeadTooLarge
                # Never read past the bound: h11's own bound is on its buffer, which a
                # complete head read in one go passes.
                data = await reader.read(min(READ_CHUNK, self.head_bytes_max - received))
                if not data:
                    return None  # gone before the end of its head: nobody to answer
                received += len(data)
                conn.receive_data(data)

    async def _answer(self, reader: asyncio.StreamReader, conn: h11.Connection) -> Answer | None:
        try:
            request = await self._read_request(reader, conn)
        except TimeoutError:
            return Answer(408, b"request head too slow\n")
        except HeadTooLarge:
            return Answer(431, b"request head too large\n")
        except h11.RemoteProtocolError:
            return Answer(400, b"bad request\n")
        if request is None:
            return None
        answer = await self._route(request)
        return replace(answer, headers_only=True) if request.method == b"HEAD" else answer

    async def _route(self, request: h11.Request) -> Answer:
        if request.target.split(b"?", 1)[0] != METRICS_PATH:
            return Answer(404, b"not found: try /metrics\n")
        if request.method != b"GET":
            return Answer(405, b"only GET\n", extra_headers=(("Allow", "GET"),))
        accept = b", ".join(value for name, value in request.headers if name == b"accept")
        try:
            body, content_type = await asyncio.to_thread(
                self.metrics.exposition, accept.decode("latin-1")
            )
        except Exception:
            log.exception("metrics exposition failed")
            return Answer(500, b"metrics exposition failed\n")
        return Answer(200, body, content_type)
