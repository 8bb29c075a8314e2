"""The server's limits against hostile peers, over real sockets on 127.0.0.1.

A budget for the bytes of unfinished frames over all connections, a deadline
for finishing a started frame, and caps on the connections of one address and of
one /24 (Linux routes all of 127.0.0.0/8 to lo, so peers connect from several).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.frame import encode_frame
from remoting.limits import REFUSAL_LOG_LINES_MAX
from remoting.server import RemotingServer
from tests.waiting import eventually

ServerFactory = Callable[..., Awaitable[RemotingServer]]
PeerFactory = Callable[[int], Awaitable[Any]]

BUDGET_BYTES = 64 * 1024
PEER_HOST = "127.0.0.1"
WAIT_S = 5.0


def big_echo(opaque: int, body_bytes: int, processor: Any) -> bytes:
    """An echo request frame carrying ``body_bytes`` of body."""
    request = processor.echo_request(opaque)
    request.body = b"x" * body_bytes
    return encode_frame(request)


def holds(server: RemotingServer, unfinished_bytes: int) -> Callable[[], bool]:
    """A condition: ``server`` holds exactly ``unfinished_bytes`` of unfinished frames."""
    return lambda: server.unfinished_frames_bytes == unfinished_bytes


async def echo_is_answered(peer: Any, processor: Any, opaque: int) -> bool:
    """Send a small echo request on ``peer``; True when its answer comes back."""
    await peer.send(processor.echo_request(opaque))
    answer: RemotingCommand = await peer.read_command()
    return answer.opaque == opaque and answer.code == ResponseCode.SUCCESS


async def is_cut(peer: Any, timeout_s: float = 5.0) -> bool:
    """True when the server closes ``peer``'s connection within ``timeout_s``."""
    try:
        await peer.read_until_eof(timeout_s)
    except ConnectionError:
        return True
    except TimeoutError:
        return False
    return True


# ---------------------------------------------------------------- the budget


async def test_the_connection_that_pushes_past_the_budget_is_closed_and_the_others_go_on(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory(unfinished_frames_bytes_max=BUDGET_BYTES)
    holder, grower, bystander = [await raw_peer_factory(server.port) for _ in range(3)]
    held_frame = big_echo(1, 40 * 1024, scripted_processor)
    await holder.send_bytes(held_frame[:-10])
    await eventually(
        lambda: server.unfinished_frames_bytes == len(held_frame) - 10,
        what="the held frame counted",
        timeout_s=WAIT_S,
    )

    await grower.send_bytes(big_echo(2, 40 * 1024, scripted_processor)[: 30 * 1024])

    assert await is_cut(grower)
    assert server.unfinished_frames_bytes == len(held_frame) - 10
    assert await echo_is_answered(bystander, scripted_processor, 3)
    await holder.send_bytes(held_frame[-10:])
    answer = await holder.read_command()
    assert answer.opaque == 1 and answer.body == b"x" * 40 * 1024
    assert server.unfinished_frames_bytes == 0


async def test_the_budget_freed_by_a_closed_connection_serves_a_later_client(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory(unfinished_frames_bytes_max=BUDGET_BYTES)
    quitter = await raw_peer_factory(server.port)
    await quitter.send_bytes(big_echo(1, 50 * 1024, scripted_processor)[:-1])
    await eventually(
        lambda: server.unfinished_frames_bytes > 50 * 1024,
        what="the quitter's frame counted",
        timeout_s=WAIT_S,
    )

    await quitter.close()
    await eventually(
        lambda: server.unfinished_frames_bytes == 0, what="the budget given back", timeout_s=WAIT_S
    )

    later = await raw_peer_factory(server.port)
    frame = big_echo(2, 50 * 1024, scripted_processor)
    await later.send_bytes(frame[:-1])
    await eventually(
        lambda: server.unfinished_frames_bytes == len(frame) - 1,
        what="the later frame counted",
        timeout_s=WAIT_S,
    )
    await later.send_bytes(frame[-1:])
    assert (await later.read_command()).opaque == 2
    assert server.unfinished_frames_bytes == 0


async def test_frames_completed_one_after_another_never_add_up_against_the_budget(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory(unfinished_frames_bytes_max=BUDGET_BYTES)
    peer = await raw_peer_factory(server.port)

    for opaque in range(5):
        frame = big_echo(opaque, 40 * 1024, scripted_processor)
        await peer.send_bytes(frame[:-100])
        await eventually(
            holds(server, len(frame) - 100), what=f"frame {opaque} held", timeout_s=WAIT_S
        )
        await peer.send_bytes(frame[-100:])
        assert (await peer.read_command()).opaque == opaque

    assert server.unfinished_frames_bytes == 0


async def test_a_bad_frame_releases_what_its_connection_held(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory(unfinished_frames_bytes_max=BUDGET_BYTES)
    peer = await raw_peer_factory(server.port)
    await peer.send_bytes((1000).to_bytes(4, "big") + b"\x09" + b"\0" * 100)
    await eventually(
        lambda: server.unfinished_frames_bytes == 105,
        what="the frame start counted",
        timeout_s=WAIT_S,
    )

    await peer.send_bytes(b"\0" * 900)  # serialize type 9 does not exist

    assert await is_cut(peer)
    assert server.unfinished_frames_bytes == 0


# ---------------------------------------------------------------- the frame deadline


async def test_a_peer_sending_a_byte_at_a_time_is_cut_at_the_frame_deadline(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory(frame_deadline_s=0.5)
    dripper = await raw_peer_factory(server.port)
    frame = encode_frame(scripted_processor.echo_request(1))
    loop = asyncio.get_running_loop()
    started_s = loop.time()

    async def drip() -> None:
        for offset in range(len(frame)):
            await dripper.send_bytes(frame[offset : offset + 1])
            await asyncio.sleep(0.05)

    dripping = asyncio.ensure_future(drip())
    try:
        assert await is_cut(dripper, timeout_s=3.0)
    finally:
        dripping.cancel()
        await asyncio.gather(dripping, return_exceptions=True)

    assert 0.5 <= loop.time() - started_s < 2.0
    assert server.unfinished_frames_bytes == 0
    assert scripted_processor.seen == []


async def test_an_idle_connection_between_frames_outlives_the_frame_deadline(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory(frame_deadline_s=0.3)
    peer = await raw_peer_factory(server.port)
    assert await echo_is_answered(peer, scripted_processor, 1)

    await asyncio.sleep(1.0)

    assert not await is_cut(peer, timeout_s=0.1)
    assert await echo_is_answered(peer, scripted_processor, 2)


async def test_frames_each_finished_in_time_keep_a_connection_past_the_deadline(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory(frame_deadline_s=0.6)
    peer = await raw_peer_factory(server.port)

    for opaque in range(5):  # 5 x 0.25 s: twice the deadline in all
        frame = encode_frame(scripted_processor.echo_request(opaque))
        await peer.send_bytes(frame[:10])
        await asyncio.sleep(0.25)
        await peer.send_bytes(frame[10:])
        assert (await peer.read_command()).opaque == opaque


async def test_time_the_server_spends_not_reading_does_not_count_against_the_peer(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory(frame_deadline_s=0.4, max_inflight_per_connection=1)
    peer = await raw_peer_factory(server.port)
    slow = encode_frame(scripted_processor.sleep_request(1, 1000))
    waiting = encode_frame(scripted_processor.echo_request(2))
    partial = encode_frame(scripted_processor.echo_request(3))

    # The slow request takes the only handler slot and the next one waits for
    # it, so the server stops reading for a second with a partial frame held.
    await peer.send_bytes(slow + waiting + partial[:10])
    answers = [await peer.read_command(timeout_s=3.0) for _ in range(2)]
    await peer.send_bytes(partial[10:])

    assert [a.opaque for a in answers] == [1, 2]
    assert (await peer.read_command()).opaque == 3


# ---------------------------------------------------------------- connections per address


async def test_the_connection_past_the_per_address_cap_is_refused_and_the_others_kept(
    remoting_server_factory: ServerFactory,
    raw_peer_factory: PeerFactory,
    scripted_processor: Any,
    closed_log: Any,
) -> None:
    server = await remoting_server_factory(
        connections_per_address_max=3, on_connection_closed=closed_log
    )
    admitted = [await raw_peer_factory(server.port) for _ in range(3)]
    for opaque, peer in enumerate(admitted):
        assert await echo_is_answered(peer, scripted_processor, opaque)

    refused = await raw_peer_factory(server.port)

    assert await is_cut(refused)
    assert server.connections_from(PEER_HOST) == 3
    assert closed_log.closed == []
    for opaque, peer in enumerate(admitted, start=10):
        assert await echo_is_answered(peer, scripted_processor, opaque)


async def test_a_new_connection_is_admitted_once_one_of_the_address_closes(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory, scripted_processor: Any
) -> None:
    server = await remoting_server_factory(connections_per_address_max=2)
    first, _second = [await raw_peer_factory(server.port) for _ in range(2)]
    await eventually(
        lambda: server.connections_from(PEER_HOST) == 2, what="two connections", timeout_s=WAIT_S
    )

    await first.close()
    await eventually(
        lambda: server.connections_from(PEER_HOST) == 1, what="one connection", timeout_s=WAIT_S
    )
    newcomer = await raw_peer_factory(server.port)

    assert await echo_is_answered(newcomer, scripted_processor, 1)
    assert server.connections_from(PEER_HOST) == 2


async def test_a_flood_of_refused_connections_logs_a_bounded_number_of_lines(
    remoting_server_factory: ServerFactory,
    raw_peer_factory: PeerFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = await remoting_server_factory(connections_per_address_max=1)
    await raw_peer_factory(server.port)
    caplog.set_level(logging.WARNING, logger="remoting.server")

    flood = [await raw_peer_factory(server.port) for _ in range(3 * REFUSAL_LOG_LINES_MAX)]
    for peer in flood:
        assert await is_cut(peer)

    refusals = [r for r in caplog.records if "refusing" in r.getMessage()]
    assert len(refusals) == REFUSAL_LOG_LINES_MAX
    assert "maximum per address" in refusals[0].getMessage()
    assert server.connections_from(PEER_HOST) == 1


async def test_a_flood_of_bad_frames_logs_a_bounded_number_of_lines(
    remoting_server_factory: ServerFactory,
    raw_peer_factory: PeerFactory,
    scripted_processor: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A peer reconnecting with garbage again and again is cut every time, and the
    log gets a bounded number of lines; a good client is served meanwhile."""
    server = await remoting_server_factory()
    good = await raw_peer_factory(server.port)
    caplog.set_level(logging.WARNING, logger="remoting.server")

    for _ in range(3 * REFUSAL_LOG_LINES_MAX):
        bad = await raw_peer_factory(server.port)
        await bad.send_bytes((12).to_bytes(4, "big") + (1_000).to_bytes(4, "big") + b"x" * 8)
        assert await is_cut(bad)

    bad_frames = [r for r in caplog.records if "bad frame" in r.getMessage()]
    assert len(bad_frames) == REFUSAL_LOG_LINES_MAX
    assert await echo_is_answered(good, scripted_processor, 7)


# ---------------------------------------------------------------- connections per prefix


async def test_a_prefix_at_its_cap_is_refused_from_every_address_and_another_is_served(
    remoting_server_factory: ServerFactory,
    raw_peer_factory: Callable[..., Awaitable[Any]],
    scripted_processor: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = await remoting_server_factory(
        connections_per_address_max=2, connections_per_prefix_max=4
    )
    caplog.set_level(logging.WARNING, logger="remoting.server")
    admitted = [await raw_peer_factory(server.port, f"127.0.5.{host}") for host in (1, 1, 2, 2)]
    for opaque, peer in enumerate(admitted):
        assert await echo_is_answered(peer, scripted_processor, opaque)

    refused = await raw_peer_factory(server.port, "127.0.5.3")  # a new address, same /24
    newcomer = await raw_peer_factory(server.port, "127.0.6.1")

    assert await is_cut(refused)
    assert await echo_is_answered(newcomer, scripted_processor, 9)
    assert server.connections_from_prefix("127.0.5.200") == 4
    assert server.connections_from_prefix("127.0.6.1") == 1
    refusals = [r.getMessage() for r in caplog.records if "refusing" in r.getMessage()]
    assert refusals and "127.0.5.0/24 already holds 4 connections" in refusals[0]
    await admitted[0].close()
    await eventually(
        lambda: server.connections_from_prefix("127.0.5.1") == 3,
        what="three connections from the /24",
        timeout_s=WAIT_S,
    )
    assert await echo_is_answered(
        await raw_peer_factory(server.port, "127.0.5.3"), scripted_processor, 10
    )


# ---------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "argument",
    [
        "unfinished_frames_bytes_max",
        "frame_deadline_s",
        "connections_per_address_max",
        "connections_per_prefix_max",
    ],
)
@pytest.mark.parametrize("value", [0, -1])
def test_every_limit_must_be_positive(argument: str, value: int, scripted_processor: Any) -> None:
    with pytest.raises(ValueError, match=argument):
        limit: dict[str, Any] = {argument: value}
        RemotingServer(scripted_processor, **limit)


def test_the_limits_default_to_their_named_constants(scripted_processor: Any) -> None:
    server = RemotingServer(scripted_processor)

    assert server.unfinished_frames_bytes_max == 64 * 1024 * 1024
    assert server.frame_deadline_s == 30.0
    assert server.connections_per_address_max == 4096
    assert server.connections_per_prefix_max == 8192
