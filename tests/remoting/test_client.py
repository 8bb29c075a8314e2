"""The asyncio remoting client against a real RemotingServer on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from remoting.client import (
    RemotingClient,
    RemotingClientError,
    RemotingConnectError,
    RemotingConnectionClosed,
    RemotingTimeoutError,
)
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.frame import FRAME_BYTES_MAX, FrameDecoder, encode_frame
from remoting.server import RemotingServer

# Fixtures and their types come from tests/remoting/conftest.py.
ServerFactory = Callable[..., Awaitable[RemotingServer]]


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    """A remoting client closed after the test."""
    remoting_client = RemotingClient(connect_timeout_s=1.0)
    yield remoting_client
    await remoting_client.close()


def addr_of(server: RemotingServer) -> str:
    """The host:port a client uses for ``server``."""
    return f"127.0.0.1:{server.port}"


def unused_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_invoke_returns_the_answer_to_its_own_request(
    remoting_server_factory: ServerFactory, client: RemotingClient, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()

    answer = await client.invoke(addr_of(server), scripted_processor.echo_request(41))

    assert answer.code == ResponseCode.SUCCESS
    assert answer.body == b"payload-41"
    assert scripted_processor.seen[0].opaque == 0  # the client numbers from 0


async def test_concurrent_invokes_answered_out_of_order_each_get_their_own_answer(
    remoting_server_factory: ServerFactory, client: RemotingClient, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()
    delays_ms = [300, 200, 100, 0]

    answers = await asyncio.gather(
        *(
            client.invoke(addr_of(server), scripted_processor.sleep_request(0, delay))
            for delay in delays_ms
        )
    )

    assert [a.ext_fields for a in answers] == [{"delay_ms": str(d)} for d in delays_ms]
    delay_of = {r.opaque: r.ext_fields["delay_ms"] for r in scripted_processor.seen}
    assert [delay_of[o] for o in scripted_processor.finished] == ["0", "100", "200", "300"]
    assert sorted(scripted_processor.finished) == [0, 1, 2, 3]  # opaque 0 is one of them


async def test_invoke_times_out_and_the_connection_stays_usable(
    remoting_server_factory: ServerFactory, client: RemotingClient, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()
    addr = addr_of(server)

    with pytest.raises(RemotingTimeoutError):
        await client.invoke(addr, scripted_processor.sleep_request(0, 400), timeout_s=0.1)
    await asyncio.sleep(0.4)  # the late answer arrives and is dropped
    answer = await client.invoke(addr, scripted_processor.echo_request(5))

    assert answer.body == b"payload-5"
    assert server.connection_count == 1


async def test_invoke_raises_connect_error_when_nothing_listens(client: RemotingClient) -> None:
    with pytest.raises(RemotingConnectError):
        await client.invoke(f"127.0.0.1:{unused_port()}", RemotingCommand.request(105))


async def test_invoke_raises_connect_error_for_a_bad_address(client: RemotingClient) -> None:
    with pytest.raises(RemotingConnectError):
        await client.invoke("no-port-here", RemotingCommand.request(105))


async def test_invoke_raises_connection_closed_when_the_server_drops_the_connection(
    remoting_server_factory: ServerFactory, client: RemotingClient, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()
    addr = addr_of(server)
    slow = client.invoke(addr, scripted_processor.sleep_request(0, 2000), timeout_s=5.0)
    pending = asyncio.ensure_future(slow)
    await asyncio.sleep(0.1)

    with pytest.raises(RemotingConnectionClosed):
        await client.invoke(addr, RemotingCommand.request(scripted_processor.CLOSE_CODE))
    with pytest.raises(RemotingConnectionClosed):
        await pending


async def test_connections_are_reused_per_address(
    remoting_server_factory: ServerFactory, client: RemotingClient, scripted_processor: Any
) -> None:
    first = await remoting_server_factory()
    second = await remoting_server_factory()

    await asyncio.gather(
        *(client.invoke(addr_of(first), scripted_processor.echo_request(n)) for n in range(5))
    )
    for n in range(3):
        await client.invoke(addr_of(second), scripted_processor.echo_request(n))

    assert first.connection_count == 1
    assert second.connection_count == 1
    assert len({conn.id for conn in scripted_processor.connections}) == 2


async def test_it_reconnects_after_a_server_restart(
    remoting_server_factory: ServerFactory, client: RemotingClient, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()
    port = server.port
    await client.invoke(addr_of(server), scripted_processor.echo_request(1))

    await server.close()
    restarted = await remoting_server_factory(port=port)
    answer = await client.invoke(f"127.0.0.1:{port}", scripted_processor.echo_request(2))

    assert answer.body == b"payload-2"
    assert restarted.connection_count == 1


async def test_invoke_oneway_sets_the_flag_and_waits_for_nothing(
    remoting_server_factory: ServerFactory, client: RemotingClient, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()
    addr = addr_of(server)

    await client.invoke_oneway(addr, scripted_processor.sleep_request(0, 2000))
    answer = await client.invoke(addr, scripted_processor.echo_request(1), timeout_s=1.0)

    assert answer.body == b"payload-1"
    assert scripted_processor.seen[0].is_oneway
    assert [r.opaque for r in scripted_processor.seen] == [0, 1]


async def test_a_server_pushed_request_reaches_on_request(
    remoting_server_factory: ServerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()
    received: asyncio.Queue[tuple[RemotingCommand, str]] = asyncio.Queue(maxsize=8)

    async def on_request(request: RemotingCommand, addr: str) -> None:
        await received.put((request, addr))

    client = RemotingClient(on_request=on_request)
    push = RemotingCommand.request(scripted_processor.PUSH_CODE, {"note": "min broker id"})
    try:
        await client.invoke(addr_of(server), push)
        pushed, addr = await asyncio.wait_for(received.get(), 2.0)
    finally:
        await client.close()

    assert pushed.code == scripted_processor.PUSHED_NOTIFICATION_CODE
    assert pushed.ext_fields == {"note": "min broker id"}
    assert pushed.is_oneway
    assert addr == addr_of(server)


async def test_a_two_way_push_is_answered_by_on_request_or_refused_without_it() -> None:
    answers: asyncio.Queue[RemotingCommand] = asyncio.Queue(maxsize=8)

    async def scripted_broker_side(reader: asyncio.StreamReader, writer: Any) -> None:
        # A hand-written server: it pushes a two-way request and reads the answer.
        writer.write(encode_frame(RemotingCommand.request(905, {"x": "1"}, opaque=77)))
        decoder = FrameDecoder(FRAME_BYTES_MAX)
        frames: list[RemotingCommand] = []
        while not frames:
            frames = decoder.feed(await reader.read(65536))
        await answers.put(frames[0])
        writer.close()

    async def on_request(request: RemotingCommand, addr: str) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, remark="got it")

    listener = await asyncio.start_server(scripted_broker_side, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        for handler, code in [(on_request, ResponseCode.SUCCESS), (None, 3)]:
            client = RemotingClient(on_request=handler)
            # Open the connection with a one-way request; the push arrives on it.
            await client.invoke_oneway(f"127.0.0.1:{port}", RemotingCommand.request(1))
            answer = await asyncio.wait_for(answers.get(), 2.0)
            await client.close()

            assert answer.is_response
            assert answer.opaque == 77
            assert answer.code == code
    finally:
        listener.close()
        await listener.wait_closed()


async def test_close_fails_waiting_requests(
    remoting_server_factory: ServerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory()
    client = RemotingClient()
    pending = asyncio.ensure_future(
        client.invoke(addr_of(server), scripted_processor.sleep_request(0, 2000), timeout_s=5.0)
    )
    await asyncio.sleep(0.1)

    await client.close()

    with pytest.raises(RemotingConnectionClosed):
        await pending
    with pytest.raises(RemotingClientError):
        await client.invoke(addr_of(server), scripted_processor.echo_request(1))


async def test_opaques_count_up_from_zero_and_stay_non_negative() -> None:
    client = RemotingClient()

    first = [client.next_opaque() for _ in range(3)]
    client._next_opaque = 2**31 - 1
    wrapped = [client.next_opaque() for _ in range(2)]

    assert first == [0, 1, 2]
    assert wrapped == [2**31 - 1, 0]


async def test_a_malformed_answer_fails_the_waiting_request(client: RemotingClient) -> None:
    async def garbage_server(reader: asyncio.StreamReader, writer: Any) -> None:
        await reader.read(65536)
        writer.write(b"\x7f\xff\xff\xff" + b"\0" * 64)  # a 2 GiB length word
        # Stay open: the client, not an EOF from us, must end the connection.
        await reader.read()
        writer.close()

    listener = await asyncio.start_server(garbage_server, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        with pytest.raises(RemotingConnectionClosed):
            await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(105))
    finally:
        listener.close()
        await listener.wait_closed()
