"""Connection.detach and RemotingServer.adopt: a connection moves from one server to
another (the read front giving a broker's connection to its gateway) without the peer
noticing: every request answered once, in order, by whoever held it then."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, make_response
from remoting.connection import Connection
from remoting.frame import encode_frame
from remoting.server import RemotingServer
from tests.waiting import eventually

# Fixtures and their types come from tests/remoting/conftest.py.
ServerFactory = Callable[..., Awaitable[RemotingServer]]
PeerFactory = Callable[[int], Awaitable[Any]]

MOVE_CODE = 9201
"""Requests of this code move their connection to the second server."""
SLOW_CODE = 9202
PLAIN_CODE = 9203


def request(code: int, opaque: int, delay_ms: int = 0) -> RemotingCommand:
    return RemotingCommand.request(code, {"delay_ms": str(delay_ms)}, opaque=opaque)


class Pair:
    """A listening server whose MOVE requests hand their connection to a second,
    non-listening one; each answers with its own name in the remark."""

    def __init__(self, on_closed: Callable[[Connection], None] | None = None) -> None:
        self.first: RemotingServer | None = None
        self.second = RemotingServer(
            self._answer("second"), listen=False, on_connection_closed=on_closed
        )
        self.moved = 0

    def _answer(self, name: str) -> Callable[[RemotingCommand, Connection], Any]:
        async def answer(req: RemotingCommand) -> RemotingCommand | None:
            await asyncio.sleep(int((req.ext_fields or {}).get("delay_ms", "0")) / 1000)
            return make_response(req, ResponseCode.SUCCESS, remark=name)

        def handle(req: RemotingCommand, conn: Connection) -> Any:
            # detach() is called by the handler itself, not in the coroutine it returns:
            # the frames behind this one in the same read must not be handled here.
            if name == "first" and req.code == MOVE_CODE:
                return self._move(conn.detach(req))
            return answer(req)

        return handle

    async def _move(self, detaching: Any) -> None:
        fd, stream = await detaching
        try:
            await self.second.adopt(socket.socket(fileno=os.dup(fd)), stream)
            self.moved += 1
        finally:
            os.close(fd)

    async def start(self, factory: ServerFactory) -> RemotingServer:
        self.first = await factory(handler=self._answer("first"))
        await self.second.start()
        return self.first


@pytest.fixture
async def pair(remoting_server_factory: ServerFactory) -> Any:
    made = Pair()
    await made.start(remoting_server_factory)
    yield made
    await made.second.close(0.5)


async def answers(peer: Any, count: int) -> dict[int, str | None]:
    found = {}
    for _ in range(count):
        answer = await peer.read_command()
        assert answer.code == ResponseCode.SUCCESS
        found[answer.opaque] = answer.remark
    return found


async def test_requests_after_the_move_are_answered_by_the_new_owner_in_one_stream(
    pair: Pair, raw_peer_factory: PeerFactory
) -> None:
    assert pair.first is not None
    peer = await raw_peer_factory(pair.first.port)
    # One write: a request the first server answers, the one that moves the connection,
    # two more behind it in the same read, and half of a fifth frame.
    fifth = encode_frame(request(PLAIN_CODE, 5))
    await peer.send_bytes(
        encode_frame(request(PLAIN_CODE, 1))
        + encode_frame(request(MOVE_CODE, 2))
        + encode_frame(request(PLAIN_CODE, 3))
        + encode_frame(request(PLAIN_CODE, 4))
        + fifth[:20]
    )
    assert await answers(peer, 4) == {1: "first", 2: "second", 3: "second", 4: "second"}
    # The rest of the unfinished frame reaches the new owner, on the same connection.
    await peer.send_bytes(fifth[20:])
    assert await answers(peer, 1) == {5: "second"}
    await peer.send(request(PLAIN_CODE, 6))
    assert await answers(peer, 1) == {6: "second"}
    assert pair.moved == 1
    assert pair.first.connection_count == 0
    assert pair.second.connection_count == 1
    (adopted,) = pair.second.connections
    assert adopted.peer_host == "127.0.0.1" and adopted.peer_port > 0


async def test_the_answer_of_an_earlier_slow_request_leaves_before_the_move(
    pair: Pair, raw_peer_factory: PeerFactory
) -> None:
    assert pair.first is not None
    peer = await raw_peer_factory(pair.first.port)
    await peer.send_bytes(
        encode_frame(request(SLOW_CODE, 1, delay_ms=300)) + encode_frame(request(MOVE_CODE, 2))
    )
    first = await peer.read_command()
    second = await peer.read_command()
    assert (first.opaque, first.remark) == (1, "first")
    assert (second.opaque, second.remark) == (2, "second")


async def test_closing_the_adopted_connection_fires_the_new_owner_s_hook(
    raw_peer_factory: PeerFactory, remoting_server_factory: ServerFactory
) -> None:
    closed: list[str] = []
    made = Pair(on_closed=lambda conn: closed.append(conn.id))
    first = await made.start(remoting_server_factory)
    try:
        peer = await raw_peer_factory(first.port)
        await peer.send(request(MOVE_CODE, 1))
        assert await answers(peer, 1) == {1: "second"}
        await peer.close()
        await eventually(lambda: closed, what="the new owner's close hook", timeout_s=5)
        assert len(closed) == 1 and made.second.connection_count == 0
    finally:
        await made.second.close(0.5)


async def test_a_server_that_is_not_running_refuses_to_adopt_and_closes_the_socket() -> None:
    server = RemotingServer(lambda req, conn: None, listen=False)
    left, right = socket.socketpair()
    with right:
        with pytest.raises(ConnectionError):
            await server.adopt(left, b"")
        assert left.fileno() == -1
        right.settimeout(1)
        assert right.recv(1) == b""  # the other end sees the close


async def test_a_connection_cannot_be_moved_twice(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory
) -> None:
    seen: list[BaseException] = []

    def handler(req: RemotingCommand, conn: Connection) -> Any:
        detaching = conn.detach(req)
        try:
            conn.detach(req)
        except RuntimeError as exc:
            seen.append(exc)
        detaching.close()
        conn.close()
        return None

    server = await remoting_server_factory(handler=handler)
    peer = await raw_peer_factory(server.port)
    await peer.send(request(MOVE_CODE, 1))
    assert await peer.read_until_eof() == []
    assert len(seen) == 1
