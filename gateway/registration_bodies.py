"""REGISTER_BROKER bodies, decoded off the gateway's event loop.

The gateway's event loop answers every broker of the node, and PySyncObj's thread and
the projection writer share its interpreter lock. A body that passes every limit of
:mod:`remoting.register_body` may still cost up to a few seconds to decode (16 MiB of
the densest legal JSON; docs/BENCHMARKS.md, "one hostile REGISTER_BROKER body"), and
the C JSON decoder holds the interpreter lock for all of one document: decoded on the
loop, or in a thread of the gateway, such a body stalls every other broker's
registration for as long. So:

* a body whose decode is bounded small (:data:`INLINE_BYTES_MAX` decoded bytes: a
  JSON body of at most that length, or a compressed one that cannot inflate past it)
  is decoded on the loop, where it costs less than the trip to a worker;
* any other body goes to one worker process (:class:`BodyDecoder`), spawned on first
  use and again if it dies, which runs the same bounded decoder. It sends the topic
  table back as msgpack chunks of :data:`CHUNK_TOPICS` topics, and the loop decodes one
  chunk at a time (typed, with msgspec: no pickle of what a peer sent), yielding
  between them, so the loop is never held for more than a chunk.

A legal but expensive body therefore delays its own sender (and other large bodies
queued behind it in the worker), not the node's other brokers. The figures are in
docs/BENCHMARKS.md, "registration bodies off the event loop".
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import multiprocessing
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import msgspec

from remoting import register_body
from remoting.command import RemotingCommand
from remoting.errors import BodyDecodeError
from remoting.headers import header_bool
from remoting.model import RegisterBrokerBody, TopicConfig

log = logging.getLogger(__name__)

INLINE_BYTES_MAX = 64 * 1024
"""Bodies that decode to at most this many bytes are decoded on the loop: a few
milliseconds at the costliest legal density, less than a round trip to the worker
costs a small body (docs/BENCHMARKS.md)."""
CHUNK_TOPICS = 1024
"""Topics per chunk the worker sends back: about 2.5 ms of the loop to decode each."""
WORKERS = 1
"""Worker processes: one keeps a core for the gateway and its read front on a 2-core
host; only bodies past :data:`INLINE_BYTES_MAX` wait for it."""

_ENCODER = msgspec.msgpack.Encoder()
_TABLE_CHUNK = msgspec.msgpack.Decoder(dict[str, TopicConfig])
_REST = msgspec.msgpack.Decoder(RegisterBrokerBody)


class BodyWorkerLost(BodyDecodeError):
    """The worker process died while decoding a body (it is started again)."""


def decoded_bytes_max(body: bytes | bytearray | memoryview, *, compressed: bool) -> int:
    """The most bytes decoding ``body`` can read: its length, or for a compressed body
    the most it may inflate to (:func:`remoting.register_body.inflated_bytes_max`)."""
    size = len(body)
    return register_body.inflated_bytes_max(size) if compressed else size


def decode_request_body(request: RemotingCommand) -> RegisterBrokerBody:
    """``request``'s body decoded here and now (the bounded decoder of
    :mod:`remoting.register_body`)."""
    return register_body.decode_register_broker_request_body(
        request.body,
        compressed=bool(header_bool(request, "compressed")),
        version=request.version,
    )


def _decode_in_worker(body: bytes, compressed: bool, version: int) -> tuple[bytes, list[bytes]]:
    """In the worker: the body decoded, as (everything but the topic table, the table in
    chunks), each msgpack. Refusals travel back as the exception they are."""
    decoded = register_body.decode_register_broker_request_body(
        body, compressed=compressed, version=version
    )
    wrapper = decoded.topic_config_wrapper
    items = list(wrapper.topic_config_table.items())
    chunks = [
        _ENCODER.encode(dict(items[start : start + CHUNK_TOPICS]))
        for start in range(0, len(items), CHUNK_TOPICS)
    ]
    rest = dataclasses.replace(
        decoded, topic_config_wrapper=dataclasses.replace(wrapper, topic_config_table={})
    )
    return _ENCODER.encode(rest), chunks


class BodyDecoder:
    """Decodes REGISTER_BROKER bodies for one gateway: small ones on the loop, the rest
    in a worker process (see the module docstring). Used from the event loop only."""

    def __init__(self, *, inline_bytes_max: int = INLINE_BYTES_MAX) -> None:
        self.inline_bytes_max = inline_bytes_max
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self.decoded_in_worker = 0
        """Bodies the worker decoded (for tests and the bench)."""

    async def decode(self, request: RemotingCommand) -> RegisterBrokerBody:
        """``request``'s body; :class:`~remoting.errors.BodyDecodeError` (a
        ``RegisterBodyRefused`` past a limit) when it cannot be read."""
        body = request.body
        compressed = bool(header_bool(request, "compressed"))
        if not body or decoded_bytes_max(body, compressed=compressed) <= self.inline_bytes_max:
            return decode_request_body(request)
        rest, chunks = await self._in_worker(bytes(body), compressed, request.version)
        self.decoded_in_worker += 1
        table: dict[str, TopicConfig] = {}
        for chunk in chunks:
            await asyncio.sleep(0)  # the loop serves others between chunks
            table.update(_TABLE_CHUNK.decode(chunk))
        decoded = _REST.decode(rest)
        wrapper = dataclasses.replace(decoded.topic_config_wrapper, topic_config_table=table)
        return dataclasses.replace(decoded, topic_config_wrapper=wrapper)

    async def _in_worker(
        self, body: bytes, compressed: bool, version: int
    ) -> tuple[bytes, list[bytes]]:
        pool = self._pool
        if pool is None:
            # Spawned, not forked: the gateway runs threads (PySyncObj, the projection
            # writer) that a fork would copy mid-step.
            pool = self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=WORKERS, mp_context=multiprocessing.get_context("spawn")
            )
        loop = asyncio.get_running_loop()
        try:
            result: Any = await loop.run_in_executor(
                pool, _decode_in_worker, body, compressed, version
            )
        except BrokenProcessPool as exc:
            if self._pool is pool:
                self._pool = None
                pool.shutdown(wait=False, cancel_futures=True)
            log.warning("the body decoding worker died (%s); it starts again", exc)
            raise BodyWorkerLost(
                f"REGISTER_BROKER body of {len(body)} bytes not decoded: the decoding "
                "worker process died; send it again"
            ) from exc
        return result  # type: ignore[no-any-return]

    def close(self) -> None:
        """Stop the worker (queued decodes are cancelled)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
