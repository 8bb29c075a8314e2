"""The write side of one :class:`~remoting.connection.Connection`: the answers of a
loop iteration gathered into one send, the stamping and encoding of each answer,
and the event a pusher waits on while the peer does not read.

The connection decides when to pause reading (it owns the request loop); this
only buffers, encodes and writes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Protocol

from remoting.codes import FLAG_ONEWAY, FLAG_RESPONSE, ResponseCode
from remoting.command import RemotingCommand, make_response
from remoting.frame import encode_frame, encode_frame_prefix


class NamedConnection(Protocol):
    """What the writer asks of its connection: the name its log lines give."""

    @property
    def id(self) -> str: ...


# The connection's logger: what is logged here was logged there before the split.
log = logging.getLogger("remoting.connection")


def describe_exception(exc: BaseException) -> str:
    """A one-line description of ``exc`` for a SYSTEM_ERROR remark.

    Mirrors ``UtilAll.exceptionSimpleDesc``: the exception text, then the
    innermost frame it was raised in, so an operator can find the failing code.
    """
    text = f"{type(exc).__name__}: {exc}"
    tb = exc.__traceback__
    if tb is None:
        return text
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    file_name = code.co_filename.rsplit("/", 1)[-1]
    return f"{text}, {code.co_name}({file_name}:{tb.tb_lineno})"


class ResponseWriter:
    """The output buffer of one connection, and the answers that go into it.

    ``receiving`` is set by the connection while it dispatches one read: answers
    given then are written together when it returns (one send per read, as the
    frames arrived together). ``last_write_s`` is when output last left, for the
    idle clock.
    """

    __slots__ = (
        "_conn",
        "_flush_scheduled",
        "_loop",
        "last_write_s",
        "outgoing",
        "outgoing_bytes",
        "receiving",
        "transport",
        "writable",
    )

    def __init__(self, conn: NamedConnection, loop: asyncio.AbstractEventLoop) -> None:
        self._conn = conn
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        # Answers of this loop iteration, written together by flush: at most
        # one per request of the last read plus one per in-flight request.
        self.outgoing: list[bytes] = []
        self.outgoing_bytes = 0
        self._flush_scheduled = False
        self.receiving = False
        self.last_write_s = loop.time()
        # Set while the transport takes more output; pushers wait on it.
        self.writable = asyncio.Event()
        self.writable.set()

    @property
    def buffered_bytes(self) -> int:
        """Bytes written and not yet taken by the kernel."""
        if self.transport is None:
            return self.outgoing_bytes
        return self.outgoing_bytes + self.transport.get_write_buffer_size()

    def answer_from(
        self, request: RemotingCommand, done: asyncio.Future[RemotingCommand | None]
    ) -> None:
        """Answer ``request`` with what its finished handler gave (nothing if cancelled)."""
        if done.cancelled():
            return
        exc = done.exception()
        if exc is not None:
            self.answer_failure(request, exc)
        else:
            self.answer(request, done.result())

    def answer_failure(self, request: RemotingCommand, exc: BaseException) -> None:
        """Answer ``request`` whose handler raised ``exc`` with SYSTEM_ERROR."""
        log.warning("%s: handler failed on code %d", self._conn.id, request.code, exc_info=exc)
        remark = describe_exception(exc)
        self.answer(request, make_response(request, ResponseCode.SYSTEM_ERROR, remark=remark))

    def answer(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        """Write ``response`` unless it is None or ``request`` was one-way."""
        # One-way requests never get an answer, not even an error (Netty's rule).
        if response is None or request.flag & FLAG_ONEWAY:
            return
        self.write_response(request, response)

    def write_response(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Write ``response`` as the answer to ``request``."""
        if response.opaque != request.opaque or not response.flag & FLAG_RESPONSE:
            # Netty stamps the request's opaque and the response bit on whatever
            # the processor returned; do the same so handlers cannot get it wrong.
            response = dataclasses.replace(
                response, opaque=request.opaque, flag=response.flag | FLAG_RESPONSE
            )
        try:
            prefix = encode_frame_prefix(response)
        except Exception as exc:
            log.warning(
                "%s: cannot encode answer to code %d", self._conn.id, request.code, exc_info=True
            )
            self.write(
                encode_frame(
                    make_response(
                        request, ResponseCode.SYSTEM_ERROR, remark=describe_exception(exc)
                    )
                )
            )
            return
        # The body goes out as it is: joined with the other answers of this
        # iteration when they are flushed, never copied onto its prefix first.
        self.write(prefix, response.body)

    def write(self, frame: bytes, body: bytes | None = None) -> None:
        """Queue ``frame`` (and ``body`` after it) for this iteration's send."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        # Answers finished in the same loop iteration leave in one send() (see
        # docs/BENCHMARKS.md, "route query").
        outgoing = self.outgoing
        outgoing.append(frame)
        if body:
            outgoing.append(body)
            self.outgoing_bytes += len(frame) + len(body)
        else:
            self.outgoing_bytes += len(frame)
        if not self._flush_scheduled and not self.receiving:
            self._flush_scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Hand everything queued to the transport in one write."""
        self._flush_scheduled = False
        frames, self.outgoing = self.outgoing, []
        self.outgoing_bytes = 0
        transport = self.transport
        if not frames or transport is None or transport.is_closing():
            return
        self.last_write_s = self._loop.time()
        transport.write(frames[0] if len(frames) == 1 else b"".join(frames))
