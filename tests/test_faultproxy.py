"""The fault proxy forwards, delays, blackholes, cuts one way and drops links."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator

import pytest

from tests.raftstore.raft_node import free_port
from tools.faultproxy import FaultProxy, LinkMode


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(1024):
        writer.write(data)
        await writer.drain()
    writer.close()


@pytest.fixture
async def echo_link() -> AsyncIterator[tuple[FaultProxy, str]]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    target = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    proxy = FaultProxy()
    addr = await proxy.add_link("a->b", target)
    yield proxy, addr
    await proxy.close()
    server.close()


async def _connect(addr: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = addr.rsplit(":", 1)
    return await asyncio.open_connection(host, int(port))


async def _roundtrip(addr: str, payload: bytes, timeout_s: float = 1.0) -> bytes | None:
    reader, writer = await _connect(addr)
    try:
        writer.write(payload)
        await writer.drain()
        return await asyncio.wait_for(reader.readexactly(len(payload)), timeout_s)
    except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
        return None
    finally:
        writer.close()


async def test_it_forwards_bytes_both_ways(echo_link: tuple[FaultProxy, str]) -> None:
    proxy, addr = echo_link
    assert await _roundtrip(addr, b"hello") == b"hello"
    forwarded, discarded = proxy.stats("a->b")
    assert forwarded == 10 and discarded == 0


async def test_a_blackholed_link_keeps_the_connection_but_loses_every_byte(
    echo_link: tuple[FaultProxy, str],
) -> None:
    proxy, addr = echo_link
    proxy.set_mode("a->b", LinkMode.BLACKHOLE)
    assert await _roundtrip(addr, b"lost", timeout_s=0.3) is None
    assert proxy.stats("a->b")[1] == 4


async def test_a_backward_cut_delivers_requests_but_not_replies(
    echo_link: tuple[FaultProxy, str],
) -> None:
    proxy, addr = echo_link
    proxy.set_mode("a->b", LinkMode.CUT_BACKWARD)
    assert await _roundtrip(addr, b"one-way", timeout_s=0.3) is None
    forwarded, discarded = proxy.stats("a->b")
    assert forwarded == 7 and discarded == 7


async def test_a_dropped_link_closes_connections_and_refuses_new_ones(
    echo_link: tuple[FaultProxy, str],
) -> None:
    proxy, addr = echo_link
    reader, writer = await _connect(addr)
    writer.write(b"up")
    assert await reader.readexactly(2) == b"up"
    proxy.set_mode("a->b", LinkMode.DROP)
    assert await asyncio.wait_for(reader.read(10), 1) == b""
    writer.close()
    assert await _roundtrip(addr, b"x", timeout_s=0.3) is None
    proxy.heal_all()
    assert await _roundtrip(addr, b"back") == b"back"


async def test_a_delayed_link_adds_latency(echo_link: tuple[FaultProxy, str]) -> None:
    proxy, addr = echo_link
    proxy.set_mode("a->b", LinkMode.PASS, delay_ms=150)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await _roundtrip(addr, b"slow") == b"slow"
    assert loop.time() - started >= 0.3


async def test_the_cli_takes_orders_on_its_control_port() -> None:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    target_port = server.sockets[0].getsockname()[1]
    listen, control = free_port(), free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tools.faultproxy",
        "--link",
        f"x={listen}:127.0.0.1:{target_port}",
        "--control",
        str(control),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert json.loads(await proc.stdout.readline())["link"] == "x"
        assert json.loads(await proc.stdout.readline())["control"] == control
        assert await _roundtrip(f"127.0.0.1:{listen}", b"cli") == b"cli"
        reader, writer = await _connect(f"127.0.0.1:{control}")
        writer.write(b'{"link": "x", "mode": "blackhole"}\n')
        assert json.loads(await reader.readline()) == {"ok": True}
        writer.close()
        assert await _roundtrip(f"127.0.0.1:{listen}", b"cli", timeout_s=0.3) is None
    finally:
        proc.kill()
        with contextlib.suppress(ProcessLookupError):
            await proc.wait()
        server.close()
