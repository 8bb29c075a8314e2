"""The frame-reading side of one :class:`~remoting.connection.Connection`: its
decoder, the bytes of its unfinished frame held in the server's budget, and the
deadline that frame must arrive by.

Kept apart from the connection's request loop and write side, which only ask it
to account a read, to give its bytes back, and to restart the frame clock when
reading resumes.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from remoting.frame import FrameDecoder

if TYPE_CHECKING:
    from remoting.limits import RefusalLog, UnfinishedFrameBudget


class ReadingConnection(Protocol):
    """What the reader asks of its connection (:class:`remoting.connection.Connection`)."""

    @property
    def id(self) -> str: ...

    @property
    def is_closed(self) -> bool: ...

    @property
    def reading_paused(self) -> bool: ...

    def close(self) -> None: ...


class FrameLimits(Protocol):
    """What the reader asks of the server (part of
    :class:`remoting.connection.ConnectionOwner`)."""

    @property
    def frame_bytes_max(self) -> int: ...

    @property
    def frame_deadline_s(self) -> float: ...

    @property
    def unfinished_frames(self) -> UnfinishedFrameBudget: ...

    @property
    def refusal_log(self) -> RefusalLog: ...


class FrameReader:
    """The decoder of one connection and the clock and budget of its unfinished frame.

    The connection feeds ``decoder`` directly on every read; the rest runs only
    when a frame spans reads.
    """

    __slots__ = ("_conn", "_loop", "_server", "_timer", "decoder", "started_s", "unfinished_bytes")

    def __init__(
        self, conn: ReadingConnection, server: FrameLimits, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._conn = conn
        self._server = server
        self._loop = loop
        self.decoder = FrameDecoder(server.frame_bytes_max)
        # Bytes of the unfinished frame this connection holds in the server's
        # budget (what the decoder held after the last read), and since when.
        self.unfinished_bytes = 0
        self.started_s: float | None = None
        self._timer: asyncio.TimerHandle | None = None

    def account(self, completed: bool, now_s: float) -> bool:
        """Move the decoder's unfinished bytes into the server's budget after a read.

        False when the growth does not fit: the connection is then cut, and the
        frames the read completed are dropped with it.
        """
        buffered = self.decoder.buffered_bytes
        if not self._server.unfinished_frames.reserve(buffered - self.unfinished_bytes):
            self.cut(
                "an unfinished frame of %d bytes would take the unfinished frames of all "
                "connections past the budget of %d bytes",
                buffered,
                self._server.unfinished_frames.bytes_max,
            )
            return False
        self.unfinished_bytes = buffered
        if not buffered:
            # The timer, if armed, finds nothing to check and lapses.
            self.started_s = None
        elif completed or self.started_s is None:
            # The partial frame began in this read.
            self.started_s = now_s
            if self._timer is None:
                self._schedule_check(self._server.frame_deadline_s)
        return True

    def release(self) -> None:
        """Give the unfinished frame's bytes back to the server's budget."""
        if self.unfinished_bytes:
            self._server.unfinished_frames.reserve(-self.unfinished_bytes)
            self.unfinished_bytes = 0
        self.started_s = None

    def reading_resumed(self) -> None:
        """Time spent not reading is the server's, not the peer's: restart the clock."""
        if self.started_s is not None:
            self.started_s = self._loop.time()

    def stop(self) -> None:
        """The connection is lost: disarm the deadline and give the bytes back."""
        if self._timer is not None:
            self._timer.cancel()
        self.release()

    def cut(self, reason: str, *args: object) -> None:
        """Close the connection for exceeding a limit and free its buffer at once."""
        conn = self._conn
        self._server.refusal_log.warning(self._loop.time(), "closing %s: " + reason, conn.id, *args)
        self.release()
        # The transport stops reading on close, so nothing feeds this decoder
        # again; replacing it frees the partial frame now, not at collection.
        self.decoder = FrameDecoder(self._server.frame_bytes_max)
        conn.close()

    def _schedule_check(self, delay_s: float) -> None:
        # Like the idle check: armed when a frame starts, re-armed lazily when
        # it fires, never reset per read.
        self._timer = self._loop.call_later(delay_s, self._check_deadline)

    def _check_deadline(self) -> None:
        self._timer = None
        started_s = self.started_s
        if started_s is None or self._conn.is_closed:
            return
        deadline_s = self._server.frame_deadline_s
        if self._conn.reading_paused:
            # The server is not reading: the peer cannot finish. The clock
            # starts again when reading resumes (reading_resumed).
            self._schedule_check(deadline_s)
            return
        taken_s = self._loop.time() - started_s
        if taken_s >= deadline_s:
            self.cut(
                "frame unfinished after %.1f s (%d bytes so far, deadline %.1f s)",
                taken_s,
                self.unfinished_bytes,
                deadline_s,
            )
            return
        self._schedule_check(deadline_s - taken_s)
