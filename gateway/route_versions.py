"""Per-topic change counters in shared memory: how a read front knows, without asking,
that a route answer it holds is still the one the gateway would give.

The gateway process (the writer) owns the route table and its
:class:`~gateway.route_cache.RouteCache`. Every time that cache drops a topic's body
(an apply changed the topic or a broker its route names, the body was evicted, or the
whole cache was emptied), the writer bumps the topic's counter here, under the same
lock and before the write that caused it is acknowledged. A read front
(:mod:`gateway.front`, another process) keeps the answers it got from the gateway with
the counter it read *before* asking; an answer is served again only while the counter
is unchanged. So a front never serves a body older than the gateway's: any change the
gateway acknowledged has bumped the counter, and a body fetched across a change is
tagged with the older counter and fetched again at the next read.

Layout of the file (native byte order, both processes run on one host): one 8-byte
epoch (bumped when every body is dropped) followed by ``SLOTS`` 8-byte counters; a
topic's slot is its CRC-32 modulo ``SLOTS``. Two topics sharing a slot only cost an
extra fetch. Every counter is an aligned 8-byte word written by one process, so a
reader sees either the old or the new value.
"""

from __future__ import annotations

import mmap
import os
import zlib
from pathlib import Path

SLOTS = 1 << 16
_WORD = 8
FILE_BYTES = (SLOTS + 1) * _WORD


def slot_of(topic: str) -> int:
    """The counter slot of ``topic`` (1-based: slot 0 is the epoch)."""
    return 1 + zlib.crc32(topic.encode("utf-8", "surrogatepass")) % SLOTS


class RouteVersions:
    """The counters file, opened by the gateway (``writable``) or by a front (read-only)."""

    def __init__(self, path: Path, *, writable: bool) -> None:
        self.path = path
        self.writable = writable
        if writable:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.ftruncate(fd, FILE_BYTES)
                self._map = mmap.mmap(fd, FILE_BYTES, access=mmap.ACCESS_WRITE)
            finally:
                os.close(fd)
        else:
            fd = os.open(path, os.O_RDONLY)
            try:
                if os.fstat(fd).st_size != FILE_BYTES:
                    raise ValueError(f"{path} is not a route versions file")
                self._map = mmap.mmap(fd, FILE_BYTES, access=mmap.ACCESS_READ)
            finally:
                os.close(fd)
        self._words = memoryview(self._map).cast("Q")

    def version(self, topic: str) -> tuple[int, int]:
        """(epoch, counter) of ``topic``: equal pairs mean no body of it was dropped."""
        words = self._words
        return words[0], words[slot_of(topic)]

    def bump(self, topic: str) -> None:
        """Writer: a body of ``topic`` was dropped."""
        slot = slot_of(topic)
        self._words[slot] += 1

    def bump_all(self) -> None:
        """Writer: every body was dropped."""
        self._words[0] += 1

    def close(self) -> None:
        """Unmap the file (the writer leaves removing it to whoever made its folder)."""
        self._words.release()
        self._map.close()
