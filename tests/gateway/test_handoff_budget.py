"""Hand-overs within the gateway's connection budget, over real sockets.

A burst of more hand-overs than the gateway reads at a time all arrive (its accepts
pause and resume, the senders wait), and a connection the gateway has no room for is
closed and counted, not adopted.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway import handoff
from gateway.handoff import HandoffServer
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, make_response
from remoting.connection import Connection
from remoting.frame import FrameDecoder, encode_frame
from remoting.listener import ConnectionBudget
from remoting.server import RemotingServer

BURST = 300
ECHO_CODE = 9001


def echo(request: RemotingCommand, conn: Connection) -> RemotingCommand:
    """Answer every request with its own opaque."""
    return make_response(request, ResponseCode.SUCCESS)


@pytest.fixture
async def adopting(tmp_path: Path) -> AsyncIterator[tuple[HandoffServer, RemotingServer]]:
    """A gateway's side: a hand-over socket feeding a server with a budget of 16."""
    server = RemotingServer(echo, listen=False, budget=ConnectionBudget(16))
    await server.start()
    made = HandoffServer(tmp_path / "handoff.sock", server.adopt)
    await made.start()
    yield made, server
    await made.close()
    await server.close(drain_timeout_s=1.0)


async def hand_over(path: Path, listener: socket.socket, opaque: int) -> socket.socket:
    """A new client connection whose accepted end (with one request read from it) is
    handed over to ``path``; the client's end."""
    loop = asyncio.get_running_loop()
    client = socket.socket()
    client.setblocking(False)
    await loop.sock_connect(client, listener.getsockname())
    accepted, _ = await loop.sock_accept(listener)
    with accepted:
        request = RemotingCommand.request(ECHO_CODE, {}, opaque=opaque)
        await handoff.send(str(path), accepted.fileno(), encode_frame(request))
    return client


async def answer_of(client: socket.socket) -> RemotingCommand | None:
    """The first frame the client reads, None when its connection is closed first."""
    decoder = FrameDecoder(1 << 20)
    loop = asyncio.get_running_loop()
    while True:
        chunk = await asyncio.wait_for(loop.sock_recv(client, 65536), 5.0)
        if not chunk:
            return None
        frames = decoder.feed(chunk)
        if frames:
            return frames[0]


async def test_more_hand_overs_at_once_than_the_gateway_reads_at_a_time_all_arrive(
    tmp_path: Path,
) -> None:
    server = RemotingServer(echo, listen=False, budget=ConnectionBudget(BURST * 2))
    await server.start()
    made = HandoffServer(tmp_path / "handoff.sock", server.adopt)
    await made.start()
    listener = socket.create_server(("127.0.0.1", 0), backlog=BURST)
    listener.setblocking(False)
    try:
        # Far more senders at once than handoff.RECEIVES_IN_FLIGHT_MAX.
        clients = await asyncio.gather(*(hand_over(made.path, listener, i) for i in range(BURST)))
        answers = await asyncio.gather(*(answer_of(c) for c in clients))
        assert [a.opaque if a else None for a in answers] == list(range(BURST))
        assert made.adopted == BURST and made.refused == 0 and made.over_cap == 0
        for client in clients:
            client.close()
    finally:
        listener.close()
        await made.close()
        await server.close(drain_timeout_s=1.0)


async def test_a_connection_the_gateway_has_no_room_for_is_closed_and_counted(
    adopting: tuple[HandoffServer, RemotingServer],
) -> None:
    made, server = adopting
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    clients = []
    try:
        # 16 slots, two of them (an eighth) kept for connections the server accepts.
        for opaque in range(16):
            clients.append(await hand_over(made.path, listener, opaque))
        answers = [await answer_of(client) for client in clients]
        assert [a.opaque if a else None for a in answers[:14]] == list(range(14))
        assert answers[14:] == [None, None]  # closed, never served
        assert made.adopted == 14 and made.over_cap == 2
        assert server.connection_count == 14 and server.budget.in_use == 14
    finally:
        listener.close()
        for client in clients:
            client.close()
