"""The asyncio remoting server, exercised over real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from remoting.client import RemotingClient
from remoting.codes import FLAG_RESPONSE, ResponseCode, SerializeType
from remoting.command import RemotingCommand, make_response
from remoting.connection import Connection, ready
from remoting.frame import encode_frame
from remoting.server import RemotingServer
from tests.waiting import eventually

# Fixtures and their types come from tests/remoting/conftest.py.
ServerFactory = Callable[..., Awaitable[RemotingServer]]
PeerFactory = Callable[[int], Awaitable[Any]]

SHORT_WAIT_S = 0.3
WAIT_S = 5.0


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
async def test_it_answers_a_request_in_both_serialize_types(
    remoting_server_factory: ServerFactory,
    raw_peer_factory: PeerFactory,
    serialize_type: SerializeType,
    scripted_processor: Any,
) -> None:
    server = await remoting_server_factory()
    peer = await raw_peer_factory(server.port)

    await peer.send(scripted_processor.echo_request(7, serialize_type))
    answer = await peer.read_command()

    assert answer.is_response
    assert answer.opaque == 7
    assert answer.code == ResponseCode.SUCCESS
    assert answer.ext_fields == {"topic": "TopicTest", "n": "7"}
    assert answer.body == b"payload-7"


async def test_it_answers_pipelined_requests_out_of_order_matched_by_opaque(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()
    peer = await raw_peer_factory(server.port)

    await peer.send_bytes(
        encode_frame(scripted_processor.sleep_request(0, 300))
        + encode_frame(scripted_processor.sleep_request(1, 150))
        + encode_frame(scripted_processor.sleep_request(2, 0))
    )
    answers = [await peer.read_command() for _ in range(3)]

    assert [a.opaque for a in answers] == [2, 1, 0]
    assert all(a.is_response and a.code == ResponseCode.SUCCESS for a in answers)


async def test_it_never_answers_a_one_way_request(
    remoting_server_factory: ServerFactory,
    raw_peer_factory: PeerFactory,
    scripted_processor: Any,
) -> None:
    server = await remoting_server_factory()
    peer = await raw_peer_factory(server.port)
    oneway = RemotingCommand.request(
        scripted_processor.ECHO_CODE, {"n": "1"}, opaque=1, oneway=True
    )

    await peer.send(oneway)
    await peer.send(scripted_processor.echo_request(2))
    first = await peer.read_command()

    assert first.opaque == 2
    assert [r.opaque for r in scripted_processor.seen] == [1, 2]
    assert scripted_processor.seen[0].is_oneway


async def test_it_never_answers_a_failing_one_way_request(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()
    peer = await raw_peer_factory(server.port)

    await peer.send(RemotingCommand.request(scripted_processor.FAIL_CODE, opaque=1, oneway=True))
    await peer.send(scripted_processor.echo_request(2))

    assert (await peer.read_command()).opaque == 2


async def test_a_handler_exception_answers_system_error_with_a_remark(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()
    peer = await raw_peer_factory(server.port)

    await peer.send(RemotingCommand.request(scripted_processor.FAIL_CODE, opaque=5))
    answer = await peer.read_command()

    assert answer.code == int(ResponseCode.SYSTEM_ERROR) == 1
    assert answer.opaque == 5
    assert answer.remark is not None
    assert answer.remark.startswith("ValueError: scripted failure")
    assert "conftest.py" in answer.remark


async def test_a_handler_returning_nothing_answers_nothing(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()
    peer = await raw_peer_factory(server.port)

    await peer.send(RemotingCommand.request(scripted_processor.SILENT_CODE, opaque=1))
    await peer.send(scripted_processor.echo_request(2))

    assert (await peer.read_command()).opaque == 2


async def test_it_stamps_the_request_opaque_and_response_flag_on_the_answer(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    async def careless(request: RemotingCommand, conn: Connection) -> RemotingCommand:
        # A handler that builds its answer as a request: the adapter fixes it.
        return RemotingCommand.request(ResponseCode.SUCCESS, opaque=999)

    server = await remoting_server_factory(handler=careless)
    peer = await raw_peer_factory(server.port)

    await peer.send(scripted_processor.echo_request(3))
    answer = await peer.read_command()

    assert answer.opaque == 3
    assert answer.flag & FLAG_RESPONSE


async def test_a_plain_function_handler_can_answer_without_a_task(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    def route_query(
        request: RemotingCommand, conn: Connection
    ) -> Awaitable[RemotingCommand | None]:
        if request.code == scripted_processor.FAIL_CODE:
            raise KeyError("no such topic table")
        return ready(make_response(request, ResponseCode.SUCCESS, body=b"route"))

    server = await remoting_server_factory(handler=route_query)
    peer = await raw_peer_factory(server.port)

    await peer.send_bytes(
        encode_frame(scripted_processor.echo_request(0))
        + encode_frame(RemotingCommand.request(scripted_processor.FAIL_CODE, opaque=1))
        + encode_frame(scripted_processor.echo_request(2))
    )
    answers = [await peer.read_command() for _ in range(3)]

    assert [(a.opaque, a.code) for a in answers] == [(0, 0), (1, 1), (2, 0)]
    assert answers[0].body == b"route"
    assert answers[1].remark is not None and answers[1].remark.startswith("KeyError")


async def test_a_handler_may_return_the_answer_itself(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    """A plain answer (or None) from a plain function is written at once, no awaitable.

    One-way requests still get nothing, and answers given directly and answers of
    coroutines share the connection, matched by opaque.
    """

    async def later(request: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(0.01)
        return make_response(request, ResponseCode.SUCCESS, body=b"later")

    def mixed(
        request: RemotingCommand, conn: Connection
    ) -> RemotingCommand | Awaitable[RemotingCommand] | None:
        if request.code == scripted_processor.SILENT_CODE:
            return None
        if request.code == scripted_processor.SLEEP_CODE:
            return later(request)
        return make_response(request, ResponseCode.SUCCESS, body=b"now-%d" % request.opaque)

    server = await remoting_server_factory(handler=mixed)
    peer = await raw_peer_factory(server.port)
    oneway = scripted_processor.echo_request(4)
    oneway.flag = 2

    await peer.send_bytes(
        encode_frame(RemotingCommand.request(scripted_processor.SLEEP_CODE, opaque=0))
        + encode_frame(scripted_processor.echo_request(1))
        + encode_frame(RemotingCommand.request(scripted_processor.SILENT_CODE, opaque=2))
        + encode_frame(scripted_processor.echo_request(3, SerializeType.ROCKETMQ))
        + encode_frame(oneway)
        + encode_frame(scripted_processor.echo_request(5))
    )
    answers = [await peer.read_command() for _ in range(4)]

    assert [(a.opaque, a.body) for a in answers] == [
        (1, b"now-1"),
        (3, b"now-3"),
        (5, b"now-5"),
        (0, b"later"),
    ]
    assert answers[1].serialize_type == SerializeType.ROCKETMQ
    assert all(a.flag & FLAG_RESPONSE for a in answers)
    with pytest.raises(TimeoutError):  # nothing for the silent and the one-way request
        await peer.read_command(SHORT_WAIT_S)


async def test_it_ignores_response_frames_sent_to_it(
    remoting_server_factory: ServerFactory,
    raw_peer_factory: PeerFactory,
    scripted_processor: Any,
) -> None:
    server = await remoting_server_factory()
    peer = await raw_peer_factory(server.port)
    stray = make_response(scripted_processor.echo_request(1), ResponseCode.SUCCESS)

    await peer.send(stray)
    await peer.send(scripted_processor.echo_request(2))

    assert (await peer.read_command()).opaque == 2
    assert [r.opaque for r in scripted_processor.seen] == [2]


async def test_a_connection_knows_its_peer(
    remoting_server_factory: ServerFactory,
    raw_peer_factory: PeerFactory,
    scripted_processor: Any,
) -> None:
    server = await remoting_server_factory()
    peer = await raw_peer_factory(server.port)
    await peer.send(scripted_processor.echo_request(0))
    await peer.read_command()

    conn = scripted_processor.connections[0]
    local_port = peer.writer.get_extra_info("sockname")[1]
    assert conn.peer_host == "127.0.0.1"
    assert conn.peer_port == local_port
    assert conn.is_loopback
    assert conn.id.endswith(f"/127.0.0.1:{local_port}")
    assert server.connection_count == 1
    assert server.connections == (conn,)


def too_long_frame() -> bytes:
    """A length field above the 16 MiB frame limit."""
    return struct.pack(">ii", 16 * 1024 * 1024 + 1, 20)


def header_longer_than_frame() -> bytes:
    """A header length that runs past the end of its frame."""
    return struct.pack(">ii", 12, 100) + b"\0" * 8


MALFORMED_FRAMES = {
    "length over the max": too_long_frame(),
    "random bytes": os.urandom(4096),
    "header longer than frame": header_longer_than_frame(),
}


@pytest.mark.parametrize("garbage", MALFORMED_FRAMES.values(), ids=MALFORMED_FRAMES.keys())
async def test_a_malformed_frame_closes_only_that_connection(
    remoting_server_factory: ServerFactory,
    raw_peer_factory: PeerFactory,
    garbage: bytes,
    scripted_processor: Any,
    closed_log: Any,
) -> None:
    closed = closed_log
    server = await remoting_server_factory(on_connection_closed=closed)
    healthy = await raw_peer_factory(server.port)
    await healthy.send(scripted_processor.echo_request(1))
    await healthy.read_command()
    bad = await raw_peer_factory(server.port)

    await bad.send_bytes(garbage)

    assert await bad.read_until_eof() == []
    await eventually(
        lambda: len(closed.closed) == 1, what="the bad connection reported closed", timeout_s=WAIT_S
    )
    await healthy.send(scripted_processor.echo_request(2))
    assert (await healthy.read_command()).opaque == 2
    assert server.connection_count == 1


async def test_closed_hook_fires_once_when_the_client_closes(
    remoting_server_factory: ServerFactory,
    raw_peer_factory: PeerFactory,
    scripted_processor: Any,
    closed_log: Any,
) -> None:
    closed = closed_log
    server = await remoting_server_factory(on_connection_closed=closed)
    peer = await raw_peer_factory(server.port)
    await peer.send(scripted_processor.echo_request(1))
    await peer.read_command()

    await peer.close()

    await eventually(
        lambda: server.connection_count == 0, what="no connection left", timeout_s=WAIT_S
    )
    await asyncio.sleep(SHORT_WAIT_S)
    assert len(closed.closed) == 1


async def test_closed_hook_fires_once_when_the_server_closes(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, closed_log: Any
) -> None:
    closed = closed_log
    server = await remoting_server_factory(on_connection_closed=closed)
    peers = [await raw_peer_factory(server.port) for _ in range(3)]
    await eventually(
        lambda: server.connection_count == 3, what="three connections", timeout_s=WAIT_S
    )

    await server.close()

    assert len(closed.closed) == 3
    assert len({conn.id for conn in closed.closed}) == 3
    for peer in peers:
        assert await peer.read_until_eof() == []


async def test_frames_before_a_bad_one_in_the_same_read_are_still_processed(
    remoting_server_factory: ServerFactory,
    raw_peer_factory: PeerFactory,
    scripted_processor: Any,
    closed_log: Any,
) -> None:
    server = await remoting_server_factory(on_connection_closed=closed_log)
    peer = await raw_peer_factory(server.port)

    await peer.send_bytes(encode_frame(scripted_processor.echo_request(7)) + too_long_frame())

    await peer.read_until_eof()
    await eventually(
        lambda: len(closed_log.closed) == 1, what="the connection reported closed", timeout_s=WAIT_S
    )
    assert [cmd.opaque for cmd in scripted_processor.seen] == [7]


async def test_closed_hook_fires_once_after_a_protocol_error(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, closed_log: Any
) -> None:
    closed = closed_log
    server = await remoting_server_factory(on_connection_closed=closed)
    peer = await raw_peer_factory(server.port)

    await peer.send_bytes(too_long_frame())
    await peer.read_until_eof()
    await peer.close()

    await eventually(
        lambda: len(closed.closed) >= 1, what="the connection reported closed", timeout_s=WAIT_S
    )
    await asyncio.sleep(SHORT_WAIT_S)
    assert len(closed.closed) == 1


async def test_it_closes_idle_connections_and_keeps_busy_ones(
    remoting_server_factory: ServerFactory,
    raw_peer_factory: PeerFactory,
    scripted_processor: Any,
    closed_log: Any,
) -> None:
    closed = closed_log
    server = await remoting_server_factory(idle_timeout_s=0.4, on_connection_closed=closed)
    idle = await raw_peer_factory(server.port)
    busy = await raw_peer_factory(server.port)
    started_s = asyncio.get_running_loop().time()

    for n in range(8):
        await busy.send(scripted_processor.echo_request(n))
        await busy.read_command()
        await asyncio.sleep(0.1)

    assert await idle.read_until_eof() == []
    assert asyncio.get_running_loop().time() - started_s >= 0.4
    assert len(closed.closed) == 1
    await busy.send(scripted_processor.echo_request(99))
    assert (await busy.read_command()).opaque == 99


async def test_a_client_that_never_reads_cannot_grow_server_memory(
    remoting_server_factory: ServerFactory, scripted_processor: Any
) -> None:
    high_water_bytes = 256 * 1024
    max_inflight = 8
    body_bytes = 64 * 1024
    server = await remoting_server_factory(
        read_high_water_bytes=high_water_bytes, max_inflight_per_connection=max_inflight
    )
    frame = encode_frame(
        RemotingCommand.request(scripted_processor.ECHO_CODE, body=b"x" * body_bytes)
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # A small receive window keeps the kernel from soaking up the echoes.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    sock.connect(("127.0.0.1", server.port))
    sock.setblocking(False)
    try:
        sent_bytes = await send_until_blocked(sock, frame, limit_bytes=256 * 1024 * 1024)
        conn = server.connections[0]

        assert conn.reading_paused
        assert conn.write_buffer_bytes <= high_water_bytes + max_inflight * (body_bytes + 1024)
        assert conn.inflight <= max_inflight + 256 * 1024 // len(frame) + 1
        assert sent_bytes < 256 * 1024 * 1024
    finally:
        sock.close()


async def test_it_stops_reading_a_peer_with_too_many_requests_in_flight(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory(max_inflight_per_connection=4)
    peer = await raw_peer_factory(server.port)

    await peer.send_bytes(
        b"".join(encode_frame(scripted_processor.sleep_request(n, 100)) for n in range(40))
    )
    await eventually(
        lambda: len(scripted_processor.seen) == 4, what="four requests seen", timeout_s=WAIT_S
    )
    await asyncio.sleep(0.05)
    conn = server.connections[0]

    assert conn.reading_paused
    assert len(scripted_processor.seen) == 4
    answers = [await peer.read_command() for _ in range(40)]
    assert sorted(a.opaque for a in answers) == list(range(40))
    assert not conn.reading_paused


async def test_pushing_to_a_closed_connection_raises(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()
    peer = await raw_peer_factory(server.port)
    await peer.send(scripted_processor.echo_request(0))
    await peer.read_command()
    conn = server.connections[0]

    conn.close()

    with pytest.raises(ConnectionError):
        await conn.send(RemotingCommand.request(scripted_processor.PUSHED_NOTIFICATION_CODE))


async def send_until_blocked(sock: socket.socket, frame: bytes, limit_bytes: int) -> int:
    """Send ``frame`` repeatedly until the peer stops reading for a while."""
    sent_bytes = 0
    pending = memoryview(frame)
    blocked_since_s: float | None = None
    loop = asyncio.get_running_loop()
    while sent_bytes < limit_bytes:
        try:
            n = sock.send(pending)
        except BlockingIOError:
            now_s = loop.time()
            blocked_since_s = blocked_since_s or now_s
            if now_s - blocked_since_s > 1.0:
                return sent_bytes
            await asyncio.sleep(0.02)
            continue
        blocked_since_s = None
        sent_bytes += n
        pending = pending[n:] if n < len(pending) else memoryview(frame)
        await asyncio.sleep(0)
    return sent_bytes


async def test_graceful_close_lets_slow_handlers_answer(
    remoting_server_factory: ServerFactory,
    raw_peer_factory: PeerFactory,
    scripted_processor: Any,
    closed_log: Any,
) -> None:
    closed = closed_log
    server = await remoting_server_factory(on_connection_closed=closed)
    peer = await raw_peer_factory(server.port)
    await peer.send_bytes(
        b"".join(encode_frame(scripted_processor.sleep_request(n, 300)) for n in range(3))
    )
    await asyncio.sleep(0.05)

    await server.close(drain_timeout_s=5.0)

    answers = await peer.read_until_eof()
    assert sorted(a.opaque for a in answers) == [0, 1, 2]
    assert all(a.code == ResponseCode.SUCCESS for a in answers)
    assert len(closed.closed) == 1


async def test_close_gives_up_on_handlers_slower_than_the_drain_timeout(
    remoting_server_factory: ServerFactory,
    raw_peer_factory: PeerFactory,
    scripted_processor: Any,
    closed_log: Any,
) -> None:
    closed = closed_log
    server = await remoting_server_factory(on_connection_closed=closed)
    peer = await raw_peer_factory(server.port)
    await peer.send_bytes(
        encode_frame(scripted_processor.sleep_request(0, 50))
        + encode_frame(scripted_processor.sleep_request(1, 30_000))
    )
    await asyncio.sleep(0.1)
    loop = asyncio.get_running_loop()
    started_s = loop.time()

    await server.close(drain_timeout_s=0.3)

    assert loop.time() - started_s < 2.0
    assert len(closed.closed) == 1
    with pytest.raises((EOFError, ConnectionError)):
        for _ in range(2):
            await peer.read_command()


async def test_it_stops_accepting_after_close(remoting_server_factory: ServerFactory) -> None:
    server = await remoting_server_factory()
    port = server.port

    await server.close()

    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)


async def test_a_thousand_idle_connections_do_not_slow_a_new_client(
    remoting_server_factory: ServerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()
    idle: list[socket.socket] = []
    try:
        for _ in range(1000):
            idle.append(socket.create_connection(("127.0.0.1", server.port)))
            if len(idle) % 100 == 0:
                await asyncio.sleep(0)  # let the server accept
        await eventually(
            lambda: server.connection_count == 1000, what="1000 connections", timeout_s=10.0
        )
        client = RemotingClient()
        loop = asyncio.get_running_loop()
        started_s = loop.time()

        answer = await client.invoke(
            f"127.0.0.1:{server.port}", scripted_processor.echo_request(0), timeout_s=2.0
        )

        assert loop.time() - started_s < 0.5
        assert answer.body == b"payload-0"
        assert server.connection_count == 1001
        await client.close()
    finally:
        for sock in idle:
            sock.close()


async def test_a_server_rejects_nonsense_bounds() -> None:
    async def handler(request: RemotingCommand, conn: Connection) -> None:
        return None

    with pytest.raises(ValueError):
        RemotingServer(handler, idle_timeout_s=0)
    with pytest.raises(ValueError):
        RemotingServer(handler, max_inflight_per_connection=0)
