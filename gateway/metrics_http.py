"""The gateway's metrics port: ``GET /metrics`` over a minimal HTTP/1.1 server inside
the gateway's event loop (the metrics themselves are :mod:`gateway.metrics`).

One request per connection, a bounded request head (:data:`HEAD_BYTES_MAX`, else 431),
a head deadline (:data:`HEAD_TIMEOUT_S`, else 408), 404 for other paths, 405 for other
methods, and at most :data:`CONNECTIONS_MAX` connections at once.

It accepts through :class:`remoting.listener.Listener`, as the remoting ports do, not
asyncio's ``start_server``: at its connection bound it stops accepting (scrapers wait
in the backlog) instead of accepting and closing, and when the process runs out of
descriptors it pauses and tries again (50 ms, doubling to 1 s), one rate-limited line
each. asyncio's own accept loop (Python 3.11) went on calling ``accept`` a hundred
times per wake-up after EMFILE, logging a traceback and arming one more retry timer
each time: a gateway out of descriptors for two seconds wrote 2,400 log lines from
this port alone (tests/integration/test_ports_after_descriptor_exhaustion.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterable
from typing import Protocol

from remoting.limits import RefusalLog
from remoting.listener import ConnectionBudget, Listener, Slot, bind_tcp

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
HEAD_BYTES_MAX = 8 * 1024
"""A scrape's request head is a few hundred bytes; anything longer is refused (431)."""
HEAD_TIMEOUT_S = 5.0
CONNECTIONS_MAX = 32
"""Scrapers served at once; more wait in the listening socket's backlog."""
WRITE_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 1.0
ACCEPT_BACKLOG = 128

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class Exposition(Protocol):
    """What the port serves (``gateway.metrics.GatewayMetrics``)."""

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """The metrics rendered for an ``Accept`` header: (body, content type)."""
        ...


def http_response(
    status: int,
    body: bytes,
    content_type: str = "text/plain; charset=utf-8",
    extra_headers: Iterable[tuple[str, str]] = (),
) -> bytes:
    """One complete HTTP/1.1 response that closes the connection."""
    headers = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Cache-Control: no-store",
        "Connection: close",
        *(f"{name}: {value}" for name, value in extra_headers),
    ]
    return ("\r\n".join(headers) + "\r\n\r\n").encode("latin-1") + body


def parse_head(head: bytes) -> tuple[str, str, dict[str, str]] | None:
    """(method, path, lower-cased headers) of a request head; None when malformed."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        return None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[1]:
        return None
    method, target, _version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            return None
        headers[name.lower()] = value.strip()
    return method, target.split("?", 1)[0], headers


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
                reader, writer = await asyncio.open_connection(sock=sock, limit=self.head_bytes_max)
            except OSError:
                sock.close()
                return
            try:
                # A scraper that hangs up or stalls costs its own connection only.
                with contextlib.suppress(ConnectionError, TimeoutError):
                    answer = await self._answer(reader)
                    if answer is not None:
                        writer.write(answer)
                        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
            finally:
                writer.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(writer.wait_closed(), CLOSE_TIMEOUT_S)
        finally:
            slot.release()

    async def _answer(self, reader: asyncio.StreamReader) -> bytes | None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.head_timeout_s)
        except asyncio.LimitOverrunError:
            return http_response(431, b"request head too large\n")
        except TimeoutError:
            return http_response(408, b"request head too slow\n")
        except asyncio.IncompleteReadError:
            return None
        parsed = parse_head(head)
        if parsed is None:
            return http_response(400, b"bad request\n")
        method, path, headers = parsed
        if path != METRICS_PATH:
            return http_response(404, b"not found: try /metrics\n")
        if method != "GET":
            return http_response(405, b"only GET\n", extra_headers=[("Allow", "GET")])
        try:
            body, content_type = await asyncio.to_thread(
                self.metrics.exposition, headers.get("accept", "")
            )
        except Exception:
            log.exception("metrics exposition failed")
            return http_response(500, b"metrics exposition failed\n")
        return http_response(200, body, content_type)
