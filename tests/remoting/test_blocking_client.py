"""The blocking client (for CLIs, Celery tasks and Django views) against a real server.

The server runs on the test's event loop; every blocking call runs in a worker
thread through ``asyncio.to_thread`` so the loop keeps serving it.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from remoting.blocking import BlockingClient
from remoting.client import (
    RemotingConnectError,
    RemotingConnectionClosed,
    RemotingTimeoutError,
)
from remoting.codes import ResponseCode, SerializeType
from remoting.command import RemotingCommand
from remoting.server import RemotingServer

# Fixtures and their types come from tests/remoting/conftest.py.
ServerFactory = Callable[..., Awaitable[RemotingServer]]


def addr_of(server: RemotingServer) -> str:
    """The host:port a client uses for ``server``."""
    return f"127.0.0.1:{server.port}"


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
async def test_invoke_returns_the_answer(
    remoting_server_factory: ServerFactory, scripted_processor: Any, serialize_type: SerializeType
) -> None:
    server = await remoting_server_factory()

    with BlockingClient(addr_of(server)) as client:
        request = scripted_processor.echo_request(9, serialize_type)
        answer = await asyncio.to_thread(client.invoke, request)

    assert answer.code == ResponseCode.SUCCESS
    assert answer.body == b"payload-9"
    assert answer.serialize_type == serialize_type
    assert scripted_processor.seen[0].opaque == 0


async def test_successive_invokes_share_one_connection(
    remoting_server_factory: ServerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()

    with BlockingClient(addr_of(server)) as client:
        for n in range(3):
            await asyncio.to_thread(client.invoke, scripted_processor.echo_request(n))

    assert [r.opaque for r in scripted_processor.seen] == [0, 1, 2]
    assert len({conn.id for conn in scripted_processor.connections}) == 1


async def test_a_one_way_request_gets_no_answer_and_the_next_answer_is_ours(
    remoting_server_factory: ServerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()

    with BlockingClient(addr_of(server)) as client:
        await asyncio.to_thread(client.invoke_oneway, scripted_processor.echo_request(1))
        answer = await asyncio.to_thread(client.invoke, scripted_processor.echo_request(2))

    assert answer.body == b"payload-2"
    assert scripted_processor.seen[0].is_oneway


async def test_a_timeout_raises_and_the_next_call_reconnects(
    remoting_server_factory: ServerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()

    with BlockingClient(addr_of(server), timeout_s=0.2) as client:
        with pytest.raises(RemotingTimeoutError):
            await asyncio.to_thread(client.invoke, scripted_processor.sleep_request(0, 600))
        answer = await asyncio.to_thread(client.invoke, scripted_processor.echo_request(3))

    assert answer.body == b"payload-3"
    assert len({conn.id for conn in scripted_processor.connections}) == 2


async def test_connecting_to_a_closed_port_raises_connect_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    with BlockingClient(f"127.0.0.1:{port}") as client, pytest.raises(RemotingConnectError):
        await asyncio.to_thread(client.invoke, RemotingCommand.request(105))


async def test_a_dropped_connection_raises_connection_closed(
    remoting_server_factory: ServerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()
    close_request = RemotingCommand.request(scripted_processor.CLOSE_CODE)

    with BlockingClient(addr_of(server)) as client:
        with pytest.raises(RemotingConnectionClosed):
            await asyncio.to_thread(client.invoke, close_request)
        answer = await asyncio.to_thread(client.invoke, scripted_processor.echo_request(4))

    assert answer.body == b"payload-4"


async def test_a_server_pushed_request_is_skipped_while_waiting_for_the_answer(
    remoting_server_factory: ServerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()
    push = RemotingCommand.request(scripted_processor.PUSH_CODE, {"note": "hello"})

    with BlockingClient(addr_of(server)) as client:
        answer = await asyncio.to_thread(client.invoke, push)

    assert answer.is_response
    assert answer.ext_fields == {"note": "hello"}


async def test_it_reopens_a_connection_the_server_closed_while_idle(
    remoting_server_factory: ServerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory(idle_timeout_s=0.2)

    with BlockingClient(addr_of(server)) as client:
        await asyncio.to_thread(client.invoke, scripted_processor.echo_request(1))
        await asyncio.sleep(0.5)
        assert server.connection_count == 0
        answer = await asyncio.to_thread(client.invoke, scripted_processor.echo_request(2))

    assert answer.body == b"payload-2"
    assert len({conn.id for conn in scripted_processor.connections}) == 2
