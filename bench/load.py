"""The route-query load both route benchmarks drive: pipelined connections that keep a
fixed number of GET_ROUTEINFO_BY_TOPIC requests in flight and time each answer."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench import _util
from remoting.codes import ResponseCode
from remoting.frame import FrameDecoder, encode_frame

CONNECT_TIMEOUT_S = 10.0
# Answers are received into this one buffer (the server's read path does the same),
# so the load's own cost per read is not an allocator's system calls. One per
# process: a bench process runs one event loop.
_READ_BUFFER = memoryview(bytearray(256 * 1024))


@dataclass
class LoadStats:
    """What the connections of one run recorded inside the measured window."""

    latencies_s: list[float] = field(default_factory=list)
    errors: int = 0
    measuring: bool = False
    running: bool = True


class LoadConnection(asyncio.BufferedProtocol):
    """Keeps ``depth`` route requests in flight: each answer sends the next request.

    Frames are encoded once up front, opaque i asking for topic i, so the
    generator's own cost per request is one write and one header decode.
    """

    def __init__(self, frames: Sequence[bytes], offset: int, depth: int, stats: LoadStats) -> None:
        self._frames = frames
        self._next = offset
        self._depth = depth
        self._stats = stats
        self._sent_at: dict[int, float] = {}
        self._decoder = FrameDecoder()
        self._transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Fill the pipeline."""
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        for _ in range(self._depth):
            self._send()

    def _send(self) -> None:
        assert self._transport is not None
        opaque = self._next % len(self._frames)
        self._next += 1
        self._sent_at[opaque] = time.perf_counter()
        self._transport.write(self._frames[opaque])

    def get_buffer(self, sizehint: int) -> memoryview:
        """The process's read buffer."""
        return _READ_BUFFER

    def buffer_updated(self, nbytes: int) -> None:
        """Record each answer's latency and keep the pipeline full while running."""
        now = time.perf_counter()
        stats = self._stats
        for response in self._decoder.feed(_READ_BUFFER[:nbytes]):
            sent = self._sent_at.pop(response.opaque)
            if stats.measuring:
                stats.latencies_s.append(now - sent)
                if response.code != ResponseCode.SUCCESS:
                    stats.errors += 1
            if stats.running:
                self._send()

    def connection_lost(self, exc: Exception | None) -> None:
        """Let the runner know."""
        if not self.closed.done():
            self.closed.set_result(None)

    def close(self) -> None:
        """Close the socket."""
        if self._transport is not None:
            self._transport.close()


def request_frames(topics: Sequence[str]) -> list[bytes]:
    """One encoded route request per topic, opaque = the topic's index."""
    frames = []
    for opaque, topic in enumerate(topics):
        request = _util.route_request(topic)
        request.opaque = opaque
        frames.append(encode_frame(request))
    return frames


async def open_load(
    host: str,
    port: int,
    frames: Sequence[bytes],
    connections: int,
    depth: int,
    stats: LoadStats,
    *,
    spread: bool = False,
) -> list[LoadConnection]:
    """``connections`` connections to ``host:port``, each with ``depth`` requests in
    flight; ``spread``: each starts at its own share of ``frames`` (else all at the first)."""
    loop = asyncio.get_running_loop()
    step = len(frames) // connections if spread else 0
    opened: list[LoadConnection] = []
    for index in range(connections):
        _, conn = await asyncio.wait_for(
            loop.create_connection(
                functools.partial(LoadConnection, frames, index * step, depth, stats), host, port
            ),
            CONNECT_TIMEOUT_S,
        )
        opened.append(conn)
    return opened


async def close_load(opened: Sequence[LoadConnection], stats: LoadStats) -> None:
    """Stop sending, close every connection and wait until each is gone."""
    stats.running = False
    for conn in opened:
        conn.close()
    await asyncio.gather(*(conn.closed for conn in opened))
