"""The accept loop within a connection budget, over real sockets on 127.0.0.1.

A server at its cap stops accepting and starts again when a connection closes; one
whose process runs out of descriptors pauses and resumes after a backoff; the step
before the protocol (where TLS peeks) holds a slot and is bounded in time; a Unix
connect to a full backlog waits instead of returning an unconnected socket; the
descriptor limit is raised at start and the cap derived from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import socket
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.frame import FrameDecoder, encode_frame
from remoting.limits import REFUSAL_LOG_LINES_MAX
from remoting.listener import (
    CONNECTIONS_MAX_ENV,
    PAUSE_AT_CAP,
    PAUSE_OUT_OF_DESCRIPTORS,
    BudgetExhausted,
    ConnectionBudget,
    connect_unix,
    default_connections_max,
)
from tests.descriptors import descriptors_left
from tests.remoting.conftest import PeerFactory, ScriptedProcessor, ServerFactory
from tests.waiting import eventually

REPO_ROOT = Path(__file__).resolve().parents[2]
QUIET_S = 0.3
"""How long a peer that is not served waits to see that no answer comes."""
WAIT_S = 5.0


async def answered(peer: Any, opaque: int, timeout_s: float = 5.0) -> bool:
    """Send an echo request on ``peer``; True when its answer arrives in time."""
    await peer.send(ScriptedProcessor.echo_request(opaque))
    try:
        answer: RemotingCommand = await peer.read_command(timeout_s)
    except TimeoutError:
        return False
    return answer.opaque == opaque and answer.code == ResponseCode.SUCCESS


async def test_at_its_cap_a_server_stops_accepting_and_resumes_when_a_connection_closes(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory
) -> None:
    budget = ConnectionBudget(2)
    server = await remoting_server_factory(budget=budget)
    first = await raw_peer_factory(server.port)
    second = await raw_peer_factory(server.port)
    assert await answered(first, 1) and await answered(second, 2)

    waiting = await raw_peer_factory(server.port)  # in the kernel's backlog, not accepted
    assert not await answered(waiting, 3, timeout_s=QUIET_S)
    assert server.listeners[0].paused == PAUSE_AT_CAP
    assert server.connection_count == 2 and budget.in_use == 2

    await first.close()
    assert (await waiting.read_command()).opaque == 3  # the request sent while it waited
    assert await answered(waiting, 4)
    assert budget.in_use == 2
    assert budget.pauses[PAUSE_AT_CAP] >= 1


async def test_closed_connections_give_their_slots_back(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory
) -> None:
    budget = ConnectionBudget(4)
    server = await remoting_server_factory(budget=budget)
    for round_no in range(3):  # three times the cap, one after the other
        peers = [await raw_peer_factory(server.port) for _ in range(4)]
        for opaque, peer in enumerate(peers):
            assert await answered(peer, round_no * 10 + opaque)
        for peer in peers:
            await peer.close()
        await eventually(
            lambda: budget.in_use == 0, what="every budget slot given back", timeout_s=WAIT_S
        )


async def test_out_of_descriptors_a_server_pauses_accepting_and_resumes_after_a_backoff(
    remoting_server_factory: ServerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    server = await remoting_server_factory(budget=ConnectionBudget(100))
    listener = server.listeners[0]
    # Made before the limit is lowered: connecting takes no new descriptor here.
    clients = [socket.socket() for _ in range(6)]
    try:
        with caplog.at_level(logging.WARNING, logger="remoting.server"), descriptors_left(2):
            for client in clients:
                client.setblocking(False)
                client.connect_ex(("127.0.0.1", server.port))
            await eventually(
                lambda: listener.paused == PAUSE_OUT_OF_DESCRIPTORS,
                what="a pause for descriptors",
                timeout_s=WAIT_S,
            )
            await asyncio.sleep(0.5)  # several backoffs, each failing again
            assert server.connection_count < len(clients)  # the rest wait in the backlog
        await eventually(
            lambda: server.connection_count == len(clients),
            what="every client accepted",
            timeout_s=WAIT_S,
        )
        assert listener.paused is None
        assert server.budget.pauses[PAUSE_OUT_OF_DESCRIPTORS] >= 1
        lines = [r for r in caplog.records if "accept failed" in r.getMessage()]
        assert 1 <= len(lines) <= REFUSAL_LOG_LINES_MAX
        assert all(r.exc_info is None for r in lines)  # a line each, never a traceback
        for opaque, client in enumerate(clients):
            await loop_of().sock_sendall(
                client, encode_frame(ScriptedProcessor.echo_request(opaque))
            )
            assert (await _read_frame(client)).opaque == opaque
    finally:
        for client in clients:
            client.close()


def loop_of() -> asyncio.AbstractEventLoop:
    """The running loop (the server shares it with the test's sockets)."""
    return asyncio.get_running_loop()


async def _read_frame(sock: socket.socket) -> RemotingCommand:
    decoder = FrameDecoder(1 << 20)
    while True:
        chunk = await asyncio.wait_for(loop_of().sock_recv(sock, 65536), 5.0)
        assert chunk, "the server closed the connection"
        frames = decoder.feed(chunk)
        if frames:
            return frames[0]


async def test_a_socket_in_its_prepare_step_holds_a_slot_until_the_step_times_out(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory
) -> None:
    seen: list[socket.socket] = []

    async def never_decides(sock: socket.socket) -> ssl.SSLContext | None:
        seen.append(sock)
        await asyncio.Event().wait()
        return None

    budget = ConnectionBudget(1)
    server = await remoting_server_factory(
        budget=budget, prepare=never_decides, prepare_timeout_s=0.5
    )
    stuck = await raw_peer_factory(server.port)
    await eventually(lambda: len(seen) == 1, what="the first connection prepared", timeout_s=WAIT_S)
    assert budget.in_use == 1
    behind = await raw_peer_factory(server.port)
    await asyncio.sleep(QUIET_S)
    assert len(seen) == 1  # the cap holds the second one in the backlog

    assert await stuck.read_until_eof() == []  # closed at the deadline, nothing served
    await eventually(
        lambda: len(seen) == 2,
        what="the second connection prepared (the stuck one's slot)",
        timeout_s=WAIT_S,
    )
    assert await behind.read_until_eof() == []
    await eventually(
        lambda: budget.in_use == 0, what="every budget slot given back", timeout_s=WAIT_S
    )
    assert server.connection_count == 0


async def test_a_plain_answer_from_the_prepare_step_serves_the_socket_as_it_came(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory
) -> None:
    first_bytes: list[bytes] = []

    async def peek(sock: socket.socket) -> ssl.SSLContext | None:
        while True:
            try:
                first_bytes.append(sock.recv(4, socket.MSG_PEEK))
                return None
            except BlockingIOError:
                await asyncio.sleep(0.005)

    server = await remoting_server_factory(budget=ConnectionBudget(4), prepare=peek)
    peer = await raw_peer_factory(server.port)
    assert await answered(peer, 7)  # every byte reached the protocol, peeked ones too
    assert first_bytes == [encode_frame(ScriptedProcessor.echo_request(7))[:4]]


async def test_a_refusal_from_the_prepare_step_closes_the_socket_and_frees_its_slot(
    remoting_server_factory: ServerFactory, raw_peer_factory: PeerFactory
) -> None:
    async def refuse(sock: socket.socket) -> ssl.SSLContext | None:
        raise ConnectionRefusedError("plain text on a TLS-only port")

    budget = ConnectionBudget(1)
    server = await remoting_server_factory(budget=budget, prepare=refuse)
    for _ in range(3):
        peer = await raw_peer_factory(server.port)
        assert await peer.read_until_eof() == []
    await eventually(
        lambda: budget.in_use == 0, what="every budget slot given back", timeout_s=WAIT_S
    )


async def test_an_adopted_connection_leaves_an_eighth_of_the_budget_to_accepted_ones(
    remoting_server_factory: ServerFactory,
) -> None:
    budget = ConnectionBudget(8)
    server = await remoting_server_factory(budget=budget, listen=False)
    pairs: list[tuple[socket.socket, socket.socket]] = []
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        for _ in range(8):
            client = socket.create_connection(listener.getsockname())
            accepted, _ = listener.accept()
            pairs.append((client, accepted))
        for _client, accepted in pairs[:7]:
            await server.adopt(accepted)
        assert budget.in_use == 7
        with pytest.raises(BudgetExhausted):
            await server.adopt(pairs[7][1])
        assert pairs[7][1].fileno() == -1  # closed, not leaked
        assert budget.in_use == 7
    finally:
        listener.close()
        for client, _accepted in pairs:
            client.close()


async def test_a_unix_connect_waits_while_the_backlog_is_full(tmp_path: Path) -> None:
    path = str(tmp_path / "full.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)  # holds two; the other connects find it full
    listener.setblocking(False)
    try:
        connects = [asyncio.ensure_future(connect_unix(path, timeout_s=5.0)) for _ in range(8)]
        await asyncio.sleep(QUIET_S)
        accepted: list[socket.socket] = []
        while not all(c.done() for c in connects):
            with contextlib.suppress(BlockingIOError):
                accepted.append(listener.accept()[0])
            await asyncio.sleep(0.005)
        socks = [c.result() for c in connects]
        for index, sock in enumerate(socks):
            # asyncio's sock_connect returned unconnected sockets here: ENOTCONN.
            assert socket.send_fds(sock, [b"%d" % index], [sock.fileno()]) == 1
            sock.close()
        for sock in accepted:
            sock.close()
    finally:
        listener.close()


async def test_a_unix_connect_gives_up_at_its_deadline(tmp_path: Path) -> None:
    path = str(tmp_path / "never.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(0)
    held = []
    try:
        with pytest.raises(ConnectionError, match="backlog stayed full"):
            for _ in range(4):  # fill the backlog, then one more
                held.append(await connect_unix(path, timeout_s=0.2))
    finally:
        for sock in held:
            sock.close()
        listener.close()


def _run_limits(soft: int, hard: int, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = (
        "import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout)\n"
        "from remoting.listener import raise_open_files_limit, process_budget\n"
        "info = raise_open_files_limit()\n"
        "print('RESULT', info.soft, info.before, info.connections_max, process_budget().capacity)\n"
    )

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        preexec_fn=limit,
        env={**os.environ, **env},
    )


def test_the_soft_descriptor_limit_is_raised_to_the_hard_one_and_sizes_the_cap() -> None:
    env = {CONNECTIONS_MAX_ENV: ""}
    done = _run_limits(300, 900, env)
    assert done.returncode == 0, done.stderr
    result = next(line for line in done.stdout.splitlines() if line.startswith("RESULT"))
    cap = default_connections_max(900)
    assert result.split()[1:] == ["900", "300", str(cap), str(cap)]
    assert f"open files limit 900 (was 300, hard 900): at most {cap} connections" in done.stdout


def test_a_bad_connection_cap_in_the_environment_is_a_clear_error() -> None:
    done = _run_limits(300, 900, {CONNECTIONS_MAX_ENV: "lots"})
    assert done.returncode != 0
    assert f"{CONNECTIONS_MAX_ENV} must be a positive integer, got 'lots'" in done.stderr


def test_the_default_cap_keeps_descriptors_for_the_node_itself() -> None:
    assert default_connections_max(1024) == 1024 - 256 - 128
    assert default_connections_max(65536) == 65536 - 256 - 8192
    assert default_connections_max(1024, descriptors_per_connection=2) == (1024 - 256 - 128) // 2
    assert default_connections_max(100) == 16  # a floor, not a negative cap
