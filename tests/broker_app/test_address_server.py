"""broker_app following an address server: upstream's URL rule, the config keys, and the
bounded fetch against a real HTTP server on loopback (what the test serves plays the
address server; the broker's own process against a launched cluster is in
tests/integration/test_address_server.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from broker_app.address_server import (
    AddressServerError,
    NamesrvAddrFollower,
    fetch_namesrv_addrs,
    ws_addr,
)
from broker_app.config import ConfigError, build_config
from broker_app.management.commands.run_broker import settings_from_options

LIST = "10.0.0.1:9876;10.0.0.2:9876"
FAST_S = 0.5

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def test_the_url_follows_mixall_get_ws_addr() -> None:
    assert str(ws_addr("ns.example.com")) == "http://ns.example.com:8080/rocketmq/nsaddr"
    assert (
        str(ws_addr("10.0.0.1:8000", "nsaddr-prod")) == "http://10.0.0.1:8000/rocketmq/nsaddr-prod"
    )
    where = ws_addr("[::1]:8000")
    assert (where.host, where.port, where.path) == ("::1", 8000, "/rocketmq/nsaddr")
    for domain in ("", "http://x", "x/y", "x:0", "x:99999", "a b", "x:8000:1"):
        with pytest.raises(ValueError, match=r"rocketmq\.namesrv\.domain"):
            ws_addr(domain)
    for subgroup in ("", "a/b", "a?b", "x" * 65):
        with pytest.raises(ValueError, match="subgroup"):
            ws_addr("x", subgroup)


def test_the_keys_as_set_flags_and_as_broker_conf_names(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    settings = settings_from_options(
        {
            "store_dir": store,
            "set": [
                "fetchNamesrvAddrByAddressServer=true",
                "rocketmq.namesrv.domain=127.0.0.1:8000",
                "rocketmq.namesrv.domain.subgroup=nsaddr-a",
                "fetchNamesrvAddrInterval=1000",
            ],
        }
    )
    config = build_config(settings)
    assert config.fetch_namesrv_addr_interval_ms == 1000
    assert str(config.address_server()) == "http://127.0.0.1:8000/rocketmq/nsaddr-a"
    conf_names = {
        "storePathRootDir": store,
        "fetchNamesrvAddrByAddressServer": "true",
        "rmqAddressServerDomain": "ns.example.com",
        "rmqAddressServerSubGroup": "nsaddr",
    }
    assert str(build_config(conf_names).address_server()) == (
        "http://ns.example.com:8080/rocketmq/nsaddr"
    )
    off = build_config({"storePathRootDir": store})
    assert off.address_server() is None and off.fetch_namesrv_addr_interval_ms == 120_000


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({}, "needs rocketmq.namesrv.domain"),
        ({"rocketmq.namesrv.domain": "x/y"}, "rocketmq.namesrv.domain must be"),
        ({"rocketmq.namesrv.domain": "x", "namesrvAddr": "10.0.0.1:9876"}, "both set"),
        ({"rocketmq.namesrv.domain": "x", "fetchNamesrvAddrInterval": "10"}, "at least 1000"),
    ],
)
def test_a_config_that_cannot_work_is_refused(
    tmp_path: Path, extra: dict[str, str], says: str
) -> None:
    settings = {"storePathRootDir": str(tmp_path), "fetchNamesrvAddrByAddressServer": "true"}
    with pytest.raises(ConfigError, match=says):
        build_config({**settings, **extra})


async def _serving(answer: Answer, work: Callable[[int], Awaitable[object]]) -> object:
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        return await work(port)
    finally:
        server.close()
        await server.wait_closed()


def _replying(head: bytes, body: bytes, seen: list[bytes] | None = None) -> Answer:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        if seen is not None:
            seen.append(request)
        writer.write(head + b"\r\n\r\n" + body)
        with contextlib.suppress(ConnectionError):  # a client that stopped reading early
            await writer.drain()
        writer.close()

    return answer


def _fetch(answer: Answer, subgroup: str = "nsaddr") -> object:
    async def work(port: int) -> object:
        where = ws_addr(f"127.0.0.1:{port}", subgroup)
        try:
            return await fetch_namesrv_addrs(where, timeout_s=FAST_S)
        except AddressServerError as exc:
            return f"error: {exc}"

    return asyncio.run(_serving(answer, work))


def test_a_fetch_reads_the_list_with_one_plain_get() -> None:
    seen: list[bytes] = []
    reply = _replying(b"HTTP/1.1 200 OK\r\nContent-Length: 27", LIST.encode() + b"junk", seen)
    assert _fetch(reply, "nsaddr-x") == ("10.0.0.1:9876", "10.0.0.2:9876")
    request_line, *headers = seen[0].decode().split("\r\n")
    assert request_line == "GET /rocketmq/nsaddr-x HTTP/1.0"
    assert any(h.startswith("Host: 127.0.0.1:") for h in headers)


@pytest.mark.parametrize(
    ("head", "body", "says"),
    [
        (b"HTTP/1.1 503 Service Unavailable", b"the gateway does not answer", "status 503"),
        (b"HTTP/1.1 301 Moved\r\nLocation: https://x/", b"", "status 301"),  # not followed
        (b"HTTP/1.1 200 OK", b"", "not a NameServer list: the list is empty"),
        (b"HTTP/1.1 200 OK", b"<html>login</html>", "not a NameServer list"),
        (b"HTTP/1.1 200 OK", b"\xff\xfe", "not ASCII"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 99", b"10.0.0.1:9876", "shorter than"),
        (b"HTTP/1.1 200 OK", b"9" * (64 * 1024), "larger than 65536 bytes"),
        (b"SSH-2.0-OpenSSH", b"", "not HTTP"),
    ],
)
def test_a_failed_or_malformed_answer_is_an_error(head: bytes, body: bytes, says: str) -> None:
    result = _fetch(_replying(head, body))
    assert isinstance(result, str) and says in result, result


def test_a_silent_server_costs_the_timeout_and_no_more() -> None:
    async def never(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(10 * FAST_S)
        writer.close()

    async def timed(port: int) -> tuple[object, float]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            await fetch_namesrv_addrs(ws_addr(f"127.0.0.1:{port}"), timeout_s=FAST_S)
        except AddressServerError as exc:
            return str(exc), loop.time() - started
        return "answered", 0.0

    result = asyncio.run(_serving(never, timed))
    assert isinstance(result, tuple)
    said, took_s = result
    assert said == f"no answer within {FAST_S:g} s" and took_s < 4 * FAST_S


def test_the_follower_keeps_its_list_through_failures_and_logs_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers = [LIST.encode(), b"not a list", b"not a list either", b"10.0.0.3:9876"]

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n" + answers.pop(0))
        await writer.drain()
        writer.close()

    async def follow(port: int) -> list[tuple[str, ...]]:
        follower = NamesrvAddrFollower(ws_addr(f"127.0.0.1:{port}"), timeout_s=FAST_S)
        return [await follower.refresh() for _ in range(4)]

    with caplog.at_level(logging.WARNING, logger="broker_app.address_server"):
        lists = asyncio.run(_serving(answer, follow))
    first = ("10.0.0.1:9876", "10.0.0.2:9876")
    assert lists == [first, first, first, ("10.0.0.3:9876",)]
    failures = [r for r in caplog.records if "failed" in r.getMessage()]
    assert len(failures) == 1 and "keeping 10.0.0.1:9876;10.0.0.2:9876" in failures[0].getMessage()
