"""The one route-answer store: answers keyed by (topic, answer style), each kept with the
routes version it was computed at, and served only while that version is still current.

Three places keep route answers, and all three use :class:`RouteAnswers` with this one
rule; they differ only in where the version comes from:

* the gateway (:class:`~gateway.route_cache.RouteCache`): encoded GET_ROUTEINFO_BY_TOPIC
  bodies, versioned by the topic's counter in :class:`RouteVersions`, which the gateway's
  apply listener bumps under the replicator's lock for every topic an apply may change;
* the read front (:mod:`gateway.front`, another process): the gateway's answers,
  versioned by the same counters, read from shared memory;
* the REST route reads (:mod:`namesrv_app.api.route_reads`, the web process): the route JSON of
  the projection, versioned by the projection's ``(node_id, routes_version)``.

A version is read *before* the answer is computed (or under the lock that orders it with
the changes), so an answer computed across a change carries the older version and is
computed again at the next read: an answer is never served past a change its reader
could see.

:class:`RouteVersions` layout (native byte order, one host): one 8-byte epoch (bumped
when every answer goes stale), the node's routes version (the table's ``routes_version``,
which every route answer carries in ext ``routesVersion``), then ``SLOTS`` 8-byte
counters; a topic's slot is its CRC-32 modulo ``SLOTS``. Two topics sharing a slot only
cost an extra computation.
Every counter is an aligned 8-byte word written by one process (the gateway), so a reader
sees either the old or the new value. Without a read front the counters live in private
memory.
"""

from __future__ import annotations

import mmap
import os
import zlib
from collections.abc import Hashable
from pathlib import Path
from typing import Generic, TypeVar

from remoting.consistency import ROUTES_VERSION_FIELD

SLOTS = 1 << 16
_WORD = 8
_HEADER_WORDS = 2
"""The epoch, then the routes version."""
FILE_BYTES = (SLOTS + _HEADER_WORDS) * _WORD

Version = tuple[int, int]
"""(epoch, topic counter) of :class:`RouteVersions`."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
A = TypeVar("A")


def slot_of(topic: str) -> int:
    """The counter slot of ``topic`` (after the two header words)."""
    return _HEADER_WORDS + zlib.crc32(topic.encode("utf-8", "surrogatepass")) % SLOTS


class RouteVersions:
    """Per-topic route versions: in a file shared with a read front (the gateway opens it
    ``writable``, the front read-only), or private (``path`` None: no front)."""

    def __init__(self, path: Path | None, *, writable: bool) -> None:
        self.path = path
        self.writable = writable
        if path is None:
            self._map = mmap.mmap(-1, FILE_BYTES)
        elif writable:
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

    @classmethod
    def private(cls) -> RouteVersions:
        """Counters only this process reads (a gateway without a read front)."""
        return cls(None, writable=True)

    def version(self, topic: str) -> Version:
        """(epoch, counter) of ``topic``: an answer held at this version is current."""
        words = self._words
        # slot_of, inlined: this runs once per route query.
        return words[0], words[
            _HEADER_WORDS + zlib.crc32(topic.encode("utf-8", "surrogatepass")) % SLOTS
        ]

    def answer_fields(self) -> dict[str, str]:
        """The ext fields of a route answer: ``routesVersion``, the routes version of the
        table the current answers come from. Read before the answer, so the answer's
        routes are at least that new."""
        return {ROUTES_VERSION_FIELD: str(self._words[1])}

    def set_routes_version(self, version: int) -> None:
        """Writer (under the replicator's lock, after the apply that reached ``version``)."""
        self._words[1] = version

    def bump(self, topic: str) -> None:
        """Writer: answers of ``topic`` computed before now are stale."""
        slot = slot_of(topic)
        self._words[slot] += 1

    def bump_all(self) -> None:
        """Writer: every answer computed before now is stale."""
        self._words[0] += 1

    def close(self) -> None:
        """Unmap the file (the writer leaves removing it to whoever made its folder)."""
        self._words.release()
        self._map.close()


class RouteAnswers(Generic[K, V, A]):
    """Bounded answers by key, each with its version; the oldest goes first when full.

    Safe to share between threads without a lock: every step is one dict operation.
    """

    def __init__(self, entries_max: int) -> None:
        if entries_max <= 0:
            raise ValueError("entries_max must be positive")
        self.entries_max = entries_max
        self._entries: dict[K, tuple[V, A]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: K) -> bool:
        return key in self._entries

    def get(self, key: K, version: V) -> A | None:
        """The answer held for ``key`` if it was computed at ``version``, else None."""
        entry = self._entries.get(key)
        if entry is None or entry[0] != version:
            return None
        return entry[1]

    def put(self, key: K, version: V, answer: A) -> K | None:
        """Hold ``answer`` for ``key`` at ``version``; the key evicted to make room, if any."""
        evicted = None if key in self._entries else self.make_room()
        self._entries[key] = (version, answer)
        return evicted

    def make_room(self) -> K | None:
        """When full, drop the oldest entry and return its key."""
        entries = self._entries
        if len(entries) < self.entries_max:
            return None
        oldest = next(iter(entries), None)
        if oldest is not None:
            entries.pop(oldest, None)
        return oldest

    def clear(self) -> None:
        """Forget every answer."""
        self._entries = {}
