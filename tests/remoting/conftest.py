"""Shared cast of the remoting adapter tests.

* ``ScriptedProcessor``: a handler whose behaviour is chosen by the request
  code (echo, sleep, fail, close the connection, push a request back).
* ``remoting_server_factory``: starts real ``RemotingServer`` instances on
  127.0.0.1 with port 0 and closes them after the test.
* ``raw_peer_factory``: opens plain TCP connections that speak frames through
  the sans-IO codec only, so tests can send malformed bytes, pipeline
  requests and look at every frame the server writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from remoting.codes import ResponseCode, SerializeType
from remoting.command import RemotingCommand, make_response
from remoting.connection import Connection
from remoting.frame import FRAME_BYTES_MAX, FrameDecoder, encode_frame
from remoting.server import RemotingServer

READ_TIMEOUT_S = 5.0


class ScriptedProcessor:
    """A server handler scripted by request code; it records what it saw.

    The request builders live here too, so every adapter test file speaks the
    same small script without importing from this conftest.
    """

    ECHO_CODE = 9001
    SLEEP_CODE = 9002
    FAIL_CODE = 9003
    CLOSE_CODE = 9004
    PUSH_CODE = 9005
    SILENT_CODE = 9006
    PUSHED_NOTIFICATION_CODE = 9100

    def __init__(self) -> None:
        self.seen: list[RemotingCommand] = []
        self.connections: list[Connection] = []
        self.finished: list[int] = []

    @staticmethod
    def echo_request(
        opaque: int = 0, serialize_type: SerializeType = SerializeType.JSON
    ) -> RemotingCommand:
        """A request answered with its own ext fields and body."""
        return RemotingCommand.request(
            ScriptedProcessor.ECHO_CODE,
            {"topic": "TopicTest", "n": str(opaque)},
            body=b"payload-%d" % opaque,
            opaque=opaque,
            serialize_type=serialize_type,
        )

    @staticmethod
    def sleep_request(opaque: int, delay_ms: int) -> RemotingCommand:
        """A request answered after ``delay_ms``."""
        return RemotingCommand.request(
            ScriptedProcessor.SLEEP_CODE, {"delay_ms": str(delay_ms)}, opaque=opaque
        )

    async def __call__(self, request: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        self.seen.append(request)
        self.connections.append(conn)
        fields = request.ext_fields or {}
        if request.code == self.SLEEP_CODE:
            await asyncio.sleep(int(fields.get("delay_ms", "0")) / 1000)
        elif request.code == self.FAIL_CODE:
            raise ValueError("scripted failure")
        elif request.code == self.CLOSE_CODE:
            conn.close()
            await asyncio.sleep(0.5)
        elif request.code == self.PUSH_CODE:
            notification = RemotingCommand.request(
                self.PUSHED_NOTIFICATION_CODE, {"note": fields.get("note", "")}, oneway=True
            )
            await conn.send(notification)
        elif request.code == self.SILENT_CODE:
            return None
        self.finished.append(request.opaque)
        return make_response(
            request, ResponseCode.SUCCESS, ext_fields=request.ext_fields, body=request.body
        )


class RawPeer:
    """A TCP peer that writes raw bytes and reads frames with the codec."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._decoder = FrameDecoder(FRAME_BYTES_MAX)
        self._decoded: list[RemotingCommand] = []

    async def send(self, cmd: RemotingCommand) -> None:
        """Encode and write one command."""
        await self.send_bytes(encode_frame(cmd))

    async def send_bytes(self, data: bytes) -> None:
        """Write raw bytes."""
        self.writer.write(data)
        await self.writer.drain()

    async def read_command(self, timeout_s: float = READ_TIMEOUT_S) -> RemotingCommand:
        """The next frame the server wrote."""
        while not self._decoded:
            chunk = await asyncio.wait_for(self.reader.read(65536), timeout_s)
            if not chunk:
                raise EOFError("server closed the connection")
            self._decoded.extend(self._decoder.feed(chunk))
        return self._decoded.pop(0)

    async def read_until_eof(self, timeout_s: float = READ_TIMEOUT_S) -> list[RemotingCommand]:
        """Every frame until the server closes the connection."""
        frames = list(self._decoded)
        self._decoded.clear()
        while True:
            chunk = await asyncio.wait_for(self.reader.read(65536), timeout_s)
            if not chunk:
                return frames
            frames.extend(self._decoder.feed(chunk))

    async def close(self) -> None:
        """Close the socket."""
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            return


class ClosedLog:
    """An ``on_connection_closed`` hook that records every call."""

    def __init__(self) -> None:
        self.closed: list[Connection] = []

    def __call__(self, conn: Connection) -> None:
        self.closed.append(conn)


ServerFactory = Callable[..., Awaitable[RemotingServer]]
PeerFactory = Callable[[int], Awaitable[RawPeer]]


@pytest.fixture
def closed_log() -> ClosedLog:
    """A fresh recorder for ``on_connection_closed``."""
    return ClosedLog()


@pytest.fixture
def scripted_processor() -> ScriptedProcessor:
    """A fresh scripted handler."""
    return ScriptedProcessor()


@pytest.fixture
async def remoting_server_factory(
    scripted_processor: ScriptedProcessor,
) -> AsyncIterator[ServerFactory]:
    """Start servers on 127.0.0.1:0 (the scripted processor by default)."""
    servers: list[RemotingServer] = []

    async def start(**kwargs: Any) -> RemotingServer:
        kwargs.setdefault("handler", scripted_processor)
        kwargs.setdefault("port", 0)
        server = RemotingServer(**kwargs)
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.close(drain_timeout_s=1.0)


@pytest.fixture
async def raw_peer_factory() -> AsyncIterator[PeerFactory]:
    """Open raw frame-speaking connections to a local port."""
    peers: list[RawPeer] = []

    async def connect(port: int, source: str = "") -> RawPeer:
        # ``source``: the local address to connect from (any of 127.0.0.0/8 on Linux).
        local = (source, 0) if source else None
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=local)
        peer = RawPeer(reader, writer)
        peers.append(peer)
        return peer

    yield connect
    for peer in peers:
        await peer.close()
