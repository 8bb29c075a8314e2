"""The metrics port's HTTP limits, on a :class:`MetricsHttpServer` of its own with short
limits and a fixed exposition (no gateway): the head deadline whatever the pace, the
head size, the connection bound, HEAD and the reason phrases."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from gateway.metrics_http import MetricsHttpServer

HEAD_TIMEOUT_S = 0.5
HEAD_BYTES_MAX = 1024
BODY = b"namesrv_up 1\n"
ANSWER_TIMEOUT_S = 5.0


class FixedExposition:
    """Always the same body; remembers the Accept headers it was asked for."""

    def __init__(self) -> None:
        self.accepts: list[str] = []

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        self.accepts.append(accept)
        return BODY, "text/plain; version=0.0.4; charset=utf-8"


@pytest.fixture
async def server() -> AsyncIterator[MetricsHttpServer]:
    """A started server on a free loopback port, one connection at a time."""
    http = MetricsHttpServer(
        FixedExposition(),
        "127.0.0.1",
        0,
        head_bytes_max=HEAD_BYTES_MAX,
        head_timeout_s=HEAD_TIMEOUT_S,
        connections_max=1,
    )
    await http.start()
    try:
        yield http
    finally:
        await http.close()


async def exchange(port: int, raw: bytes) -> bytes:
    """Send ``raw`` at once; everything the server writes before it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), ANSWER_TIMEOUT_S)
    finally:
        writer.close()


async def test_a_head_sent_byte_by_byte_gets_408_at_the_deadline_and_the_connection_closes(
    server: MetricsHttpServer,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    started = time.monotonic()
    head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
    read = asyncio.ensure_future(reader.read())
    try:
        for byte in head:  # one byte every 20 ms: always some progress, never the end
            # Still sending after the 408 was written: the server reads and drops it
            # before closing (a lingering close), or the kernel's reset of a socket
            # closed with unread input could overtake the 408.
            if read.done():
                break
            with contextlib.suppress(ConnectionError):
                writer.write(bytes([byte]))
                await writer.drain()
            await asyncio.sleep(0.02)
        answer = await asyncio.wait_for(read, ANSWER_TIMEOUT_S)  # then EOF: closed
    finally:
        writer.close()
    took_s = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
    assert HEAD_TIMEOUT_S <= took_s < HEAD_TIMEOUT_S + 2.0


def head_of(size: int) -> bytes:
    """A complete GET /metrics head of exactly ``size`` bytes."""
    start, end = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Filler: ", b"\r\n\r\n"
    return start + b"a" * (size - len(start) - len(end)) + end


async def test_a_head_over_the_size_bound_gets_431(server: MetricsHttpServer) -> None:
    # Complete heads, sent in one write: the bound counts the head, not h11's buffer.
    at_bound = await exchange(server.port, head_of(HEAD_BYTES_MAX))
    assert at_bound.startswith(b"HTTP/1.1 200 OK\r\n"), at_bound
    for size in (HEAD_BYTES_MAX + 1, 3 * HEAD_BYTES_MAX):
        answer = await exchange(server.port, head_of(size))
        assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), answer


async def test_methods_paths_and_malformed_heads(server: MetricsHttpServer) -> None:
    port = server.port
    assert (await exchange(port, b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n")).startswith(
        b"HTTP/1.1 404 Not Found\r\n"
    )
    refused = await exchange(port, b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert refused.startswith(b"HTTP/1.1 405 Method Not Allowed\r\n")
    assert b"\r\nAllow: GET\r\n" in refused and refused.endswith(b"only GET\n")
    head_only = await exchange(port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert head_only.startswith(b"HTTP/1.1 405 ") and head_only.endswith(b"\r\n\r\n")
    # Not HTTP, and HTTP/1.1 without the Host it requires.
    for raw in (b"nonsense\r\n\r\n", b"GET /metrics HTTP/1.1\r\n\r\n"):
        assert (await exchange(port, raw)).startswith(b"HTTP/1.1 400 Bad Request\r\n")
    # A peer that leaves in the middle of its head gets nothing and frees its place
    # (the only one) at once.
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /metr")
        writer.write_eof()
        assert await asyncio.wait_for(reader.read(), ANSWER_TIMEOUT_S) == b""
    finally:
        writer.close()
    started = time.monotonic()
    assert (await exchange(port, b"GET / HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.1 404 ")
    assert time.monotonic() - started < HEAD_TIMEOUT_S


async def test_a_scrape_gets_the_exposition_for_its_accept_header(
    server: MetricsHttpServer,
) -> None:
    answer = await exchange(
        server.port,
        b"GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\nAccept: */*\r\n\r\n",
    )
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"\r\nConnection: close\r\n" in head + b"\r\n"
    assert f"\r\nContent-Length: {len(BODY)}\r\n".encode() in head + b"\r\n"
    assert body == BODY
    assert server.metrics.accepts == ["text/plain, */*"]  # type: ignore[attr-defined]


async def test_connections_past_the_bound_wait_for_a_free_place(
    server: MetricsHttpServer,
) -> None:
    # The only place is taken by a silent peer until its head deadline.
    silent_reader, silent_writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        await asyncio.sleep(0.1)
        started = time.monotonic()
        answer = await exchange(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        waited_s = time.monotonic() - started
        silent = await asyncio.wait_for(silent_reader.read(), ANSWER_TIMEOUT_S)
    finally:
        silent_writer.close()
    assert silent.startswith(b"HTTP/1.1 408 ")
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert waited_s >= HEAD_TIMEOUT_S / 2
