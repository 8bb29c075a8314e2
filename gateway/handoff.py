"""Broker connections move from the read front to the gateway (SCM_RIGHTS).

The read front answers route queries itself and relays every other request to the
gateway: for a producer's or consumer's occasional write that is cheap, but a broker
sends its whole topic table every 30 s, and in a fleet restart hundreds of them do at
once. Relayed, each of those frames was read, decoded, encoded and written by the front,
then read again by the gateway, and its answer went the same way back: about a fifth
of the CPU of a registration storm (docs/BENCHMARKS.md, "Brokers' connections handed
over").

So at a connection's first request that only a broker sends (:data:`BROKER_CODES`) and
that the front's ACL admits (one it refuses is answered by the front, as the gateway
would, and the connection stays there: see ``ReadFront._broker_request``), the front
gives the connection itself to the gateway:

1. the front stops reading the client, lets the answers of earlier requests leave, and
   takes the frames it read but did not handle (:meth:`remoting.connection.Connection.detach`);
2. it connects to the gateway's hand-over socket (a Unix socket in the folder only this
   user can enter, beside the relay socket) and sends one message (:func:`send`):
   :data:`MAGIC`, the length of those bytes, and the socket's descriptor as ancillary
   data; then the bytes;
3. the gateway serves the socket as if it had accepted it
   (:meth:`remoting.server.RemotingServer.adopt`): the same limits, idle timeout, ACL
   and channel-close hook, the client's own address from the socket, and the bytes
   first.

The broker notices nothing: the same TCP connection, answers in order. When the
hand-over fails (the gateway restarting, its socket gone), the front has already
stopped serving the connection, so it is closed and the refusal logged: the broker
connects again, as after any lost connection, and its next connection moves. A
restarted front no longer drops its brokers' connections: they live in the gateway.

What the gateway takes from the socket is checked: one descriptor of a connected TCP
socket, from a process of this user, with at most :data:`STREAM_BYTES_MAX` bytes, else
it closes everything it received.

A fleet of brokers coming back at once must all move. Two things lost half of such a
burst: Linux answers a non-blocking connect to a Unix socket whose backlog is full
with EAGAIN, which asyncio's ``sock_connect`` takes for "in progress" and returns an
unconnected socket (the hand-over then failed with ENOTCONN, ``[Errno 107]``); and the
gateway accepted one hand-over per turn of its loop. Now :func:`send` connects with
:func:`remoting.listener.connect_unix`, which tries again while the backlog is full,
the front sends at most :data:`SENDS_IN_FLIGHT_MAX` at once, and the gateway accepts in
batches (:class:`remoting.listener.Listener`) with at most
:data:`RECEIVES_IN_FLIGHT_MAX` messages being read at once. A connection the gateway
has no room for (its connection cap, :mod:`remoting.listener`) is closed and counted
(``over_cap``): the broker connects again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

from remoting.codes import RequestCode
from remoting.connection import describe_exception
from remoting.frame import FRAME_BYTES_MAX
from remoting.limits import RefusalLog
from remoting.listener import (
    BudgetExhausted,
    ConnectionBudget,
    Listener,
    Slot,
    bind_unix,
    connect_unix,
)
from remoting.server import ACCEPT_BACKLOG

log = logging.getLogger(__name__)

BROKER_CODES = frozenset(
    {
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.BROKER_HEARTBEAT,
        RequestCode.QUERY_DATA_VERSION,
    }
)
"""Requests only a broker sends: the first of them on a connection moves it."""

MAGIC = b"NSH1"
_HEADER = struct.Struct(">4sI")
STREAM_BYTES_MAX = 2 * FRAME_BYTES_MAX + 256 * 1024
"""The most a front can hold of a connection: the frame handed over, the frames of
one read after it (asyncio reads at most 256 KiB), and an unfinished frame."""
MESSAGE_TIMEOUT_S = 5.0
"""How long the gateway waits for the bytes announced in a hand-over message."""
CONNECT_TIMEOUT_S = 5.0
"""How long the front tries to reach a gateway whose hand-over backlog is full."""
SENDS_IN_FLIGHT_MAX = 64
"""Hand-overs a front sends at once (each holds a socket and a descriptor's copy)."""
RECEIVES_IN_FLIGHT_MAX = 64
"""Hand-over messages the gateway reads at once; more wait in the socket's backlog."""

Adopt = Callable[[socket.socket, bytes], Awaitable[None]]


class HandoffRefused(ConnectionError):
    """The gateway's hand-over socket could not be reached."""


async def send(path: str, fd: int, stream: bytes) -> None:
    """Pass the descriptor ``fd`` and the bytes read from it to the gateway's hand-over
    socket at ``path`` (:class:`HandoffRefused` when there is none; another OSError
    when the message did not go out whole). ``fd`` stays the caller's to close."""
    loop = asyncio.get_running_loop()
    try:
        sock = await connect_unix(path, CONNECT_TIMEOUT_S)
    except OSError as exc:
        raise HandoffRefused(f"hand-over socket {path}: {exc}") from exc
    try:
        header = _HEADER.pack(MAGIC, len(stream))
        # Eight bytes into an empty socket buffer: sent whole or not at all.
        sent = socket.send_fds(sock, [header], [fd])
        if sent != len(header):
            raise ConnectionError("hand-over header cut short")
        if stream:
            await loop.sock_sendall(sock, stream)
    finally:
        sock.close()


class HandoffServer:
    """The gateway's end: accepts hand-over messages on a Unix socket at ``path``
    (this user's only) and gives each socket to ``adopt``."""

    def __init__(self, path: Path, adopt: Adopt) -> None:
        self.path = path
        self._adopt = adopt
        self._listener: Listener | None = None
        self._refusals = RefusalLog(logger=log)
        self.adopted = 0
        self.refused = 0
        self.over_cap = 0
        """Connections closed because the gateway was at its connection cap."""

    async def start(self) -> None:
        """Listen on :attr:`path` (this user's only)."""
        listener = Listener(
            bind_unix(str(self.path), ACCEPT_BACKLOG),
            self._receive_accepted,
            budget=ConnectionBudget(RECEIVES_IN_FLIGHT_MAX),
            refusals=self._refusals,
            name="hand-over socket",
            log_at_cap=False,  # a burst of brokers waits in the backlog: no news
        )
        listener.start()
        self._listener = listener

    async def close(self) -> None:
        """Stop listening; messages being read are dropped (their descriptors closed)."""
        if self._listener is not None:
            await self._listener.close()
            self._listener = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _receive_accepted(self, conn: socket.socket, slot: Slot) -> None:
        try:
            await self._receive(conn)
        finally:
            slot.release()

    async def _receive(self, conn: socket.socket) -> None:
        try:
            with conn:
                conn.setblocking(False)
                received, stream = await asyncio.wait_for(
                    self._read_message(conn), MESSAGE_TIMEOUT_S
                )
            # adopt() owns the socket from here, closing it when it cannot serve it.
            await self._adopt(received, stream)
            self.adopted += 1
        except BudgetExhausted as exc:
            self.over_cap += 1
            self._refusals.warning(asyncio.get_running_loop().time(), "hand-over refused: %s", exc)
        except (OSError, ValueError, TimeoutError) as exc:
            self.refused += 1
            self._refusals.warning(
                asyncio.get_running_loop().time(), "hand-over refused: %s", describe_exception(exc)
            )

    async def _read_message(self, conn: socket.socket) -> tuple[socket.socket, bytes]:
        """The socket and the bytes of one hand-over message; ValueError when it is
        not one (every descriptor received is closed then)."""
        _check_same_user(conn)
        loop = asyncio.get_running_loop()
        await _readable(loop, conn)
        data, fds, flags, _ = socket.recv_fds(conn, _HEADER.size, 4)
        if flags & socket.MSG_CTRUNC or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise ValueError(f"{len(fds)} descriptors instead of one")
        received = _tcp_socket(fds[0])
        try:
            while len(data) < _HEADER.size:
                more = await loop.sock_recv(conn, _HEADER.size - len(data))
                if not more:
                    raise ValueError("the header was cut short")
                data += more
            magic, length = _HEADER.unpack(data)
            if magic != MAGIC:
                raise ValueError("not a hand-over message")
            if length > STREAM_BYTES_MAX:
                raise ValueError(f"{length} bytes announced, at most {STREAM_BYTES_MAX}")
            chunks = []
            remaining = length
            while remaining:
                chunk = await loop.sock_recv(conn, min(remaining, 256 * 1024))
                if not chunk:
                    raise ValueError(f"{remaining} of the {length} bytes announced are missing")
                chunks.append(chunk)
                remaining -= len(chunk)
        except BaseException:
            received.close()
            raise
        return received, b"".join(chunks)


def _tcp_socket(fd: int) -> socket.socket:
    """``fd`` as a socket object, when it is a connected TCP socket; else it is closed
    and ValueError raised."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        os.close(fd)
        raise ValueError(f"the descriptor is not a socket: {exc}") from exc
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
        sock.close()
        raise ValueError("the descriptor is not a TCP socket")
    try:
        sock.getpeername()
    except OSError as exc:
        sock.close()
        raise ValueError("the TCP socket is not connected") from exc
    return sock


def _check_same_user(conn: socket.socket) -> None:
    """ValueError unless the process at the other end runs as this user (the folder
    already keeps others out; this says so where the descriptor is taken)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    if uid != os.getuid():
        raise ValueError(f"a process of user {uid} is not this gateway's front")


async def _readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    """Wait until ``sock`` has something to read."""
    ready: asyncio.Future[None] = loop.create_future()
    fd = sock.fileno()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
