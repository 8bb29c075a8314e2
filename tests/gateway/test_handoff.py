"""The hand-over socket (gateway/handoff.py): a front passes a client's TCP socket and
the bytes it read to the gateway; anything else sent there is refused and every
descriptor received is closed."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from gateway import handoff
from gateway.handoff import MAGIC, STREAM_BYTES_MAX, HandoffServer
from tests.waiting import eventually
from tools import process_facts

WAIT_S = 5.0


class Adopted:
    def __init__(self) -> None:
        self.sockets: list[tuple[socket.socket, bytes]] = []
        self.arrived = asyncio.Event()

    async def __call__(self, sock: socket.socket, stream: bytes) -> None:
        self.sockets.append((sock, stream))
        self.arrived.set()


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[HandoffServer, Adopted]]:
    adopted = Adopted()
    made = HandoffServer(tmp_path / "handoff.sock", adopted)
    await made.start()
    yield made, adopted
    await made.close()
    for sock, _ in adopted.sockets:
        sock.close()


@pytest.fixture
def tcp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(the client's end, the accepted end) of a loopback TCP connection."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
    with client, accepted:
        yield client, accepted


def open_fds() -> int:
    return process_facts.open_fds(os.getpid())


async def test_a_connection_and_its_bytes_reach_the_gateway(
    server: tuple[HandoffServer, Adopted], tcp_pair: tuple[socket.socket, socket.socket]
) -> None:
    made, adopted = server
    client, accepted = tcp_pair
    await handoff.send(str(made.path), accepted.fileno(), b"frames read so far")
    await asyncio.wait_for(adopted.arrived.wait(), 5)
    ((sock, stream),) = adopted.sockets
    assert stream == b"frames read so far"
    assert sock.getpeername() == client.getsockname()
    # The same TCP connection: what the gateway writes, the client reads.
    accepted.close()
    sock.setblocking(True)
    sock.sendall(b"answer")
    client.settimeout(2)
    assert client.recv(16) == b"answer"
    assert made.adopted == 1 and made.refused == 0


async def test_the_socket_is_private_to_its_user(server: tuple[HandoffServer, Adopted]) -> None:
    made, _ = server
    assert made.path.stat().st_mode & 0o777 == 0o600


def unix_client(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    return sock


def header(length: int, magic: bytes = MAGIC) -> bytes:
    return struct.pack(">4sI", magic, length)


async def test_anything_else_is_refused_and_its_descriptors_closed(
    server: tuple[HandoffServer, Adopted], tcp_pair: tuple[socket.socket, socket.socket]
) -> None:
    made, adopted = server
    _, accepted = tcp_pair
    read_end, write_end = os.pipe()
    before = open_fds()
    cases = [
        ("bytes without a descriptor", lambda s: s.sendall(header(3) + b"abc")),
        # Another protocol's first bytes where the magic belongs.
        ("a wrong magic", lambda s: socket.send_fds(s, [header(0, b"GET ")], [accepted.fileno()])),
        (
            "too many bytes announced",
            lambda s: socket.send_fds(s, [header(STREAM_BYTES_MAX + 1)], [accepted.fileno()]),
        ),
        ("a pipe, not a TCP socket", lambda s: socket.send_fds(s, [header(0)], [read_end])),
        (
            "two descriptors",
            lambda s: socket.send_fds(s, [header(0)], [accepted.fileno(), accepted.fileno()]),
        ),
        (
            "fewer bytes than announced",
            lambda s: socket.send_fds(s, [header(100) + b"short"], [accepted.fileno()]),
        ),
    ]
    for number, (_, send) in enumerate(cases, start=1):
        with unix_client(made.path) as sock:
            send(sock)
        await eventually(
            lambda n=number: made.refused == n,  # type: ignore[misc]
            what=f"refusal {number}",
            timeout_s=WAIT_S,
        )
    assert adopted.sockets == []
    await eventually(lambda: open_fds() == before, what="every descriptor closed", timeout_s=WAIT_S)
    os.close(read_end)
    os.close(write_end)
    # Still serving: a proper hand-over after all that is taken.
    await handoff.send(str(made.path), accepted.fileno(), b"")
    await asyncio.wait_for(adopted.arrived.wait(), 5)
    assert made.adopted == 1


async def test_a_silent_peer_is_dropped_after_the_message_timeout(
    server: tuple[HandoffServer, Adopted], monkeypatch: pytest.MonkeyPatch
) -> None:
    made, _ = server
    monkeypatch.setattr(handoff, "MESSAGE_TIMEOUT_S", 0.2)
    with unix_client(made.path) as sock:
        await eventually(
            lambda: made.refused == 1, what="the silent peer refused", timeout_s=WAIT_S
        )
        sock.settimeout(1)
        assert sock.recv(1) == b""


async def test_sending_where_no_gateway_listens_is_refused(
    tmp_path: Path, tcp_pair: tuple[socket.socket, socket.socket]
) -> None:
    _, accepted = tcp_pair
    with pytest.raises(handoff.HandoffRefused):
        await handoff.send(str(tmp_path / "absent.sock"), accepted.fileno(), b"")
