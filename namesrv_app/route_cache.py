"""The encoded GET_ROUTEINFO_BY_TOPIC body, cached per (topic, routes version, JSON style).

Route queries are the hot path (every client polls every topic every 30 s), and
encoding the fastjson body costs far more than the table lookup. The key holds
the table's ``routes_version``, which moves on every change that may alter a
route answer (never on heartbeats), so a stale entry is simply never hit again
and ages out of the bounded LRU. Route queries never touch the DB.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from namesrv_app import selectors
from raftstore.replicator import Replicator
from remoting.bodies import encode_topic_route_data

ROUTE_CACHE_ENTRIES_MAX = 65_536

_NOT_FOUND = b""
"""Cached marker for "no route": an encoded route is never empty."""


class RouteCache:
    """A bounded LRU of encoded route bodies; thread-safe."""

    def __init__(self, replicator: Replicator, entries_max: int = ROUTE_CACHE_ENTRIES_MAX) -> None:
        if entries_max <= 0:
            raise ValueError("entries_max must be positive")
        self.replicator = replicator
        self.entries_max = entries_max
        self._entries: OrderedDict[tuple[str, int, bool], bytes] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def route_body(self, topic: str, *, standard: bool) -> bytes | None:
        """The encoded route of ``topic`` (None when it has none), from cache when current."""
        version = selectors.routes_version(self.replicator)
        cached = self._get((topic, version, standard))
        if cached is not None:
            return cached or None
        read_version, route = selectors.route_with_version(self.replicator, topic)
        body = _NOT_FOUND if route is None else encode_topic_route_data(route, standard=standard)
        # Stored under the version it was read at: a write between the two reads
        # only means this entry serves the newer version, which is correct.
        self._put((topic, read_version, standard), body)
        return body or None

    def _get(self, key: tuple[str, int, bool]) -> bytes | None:
        with self._lock:
            body = self._entries.get(key)
            if body is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return body

    def _put(self, key: tuple[str, int, bool], body: bytes) -> None:
        with self._lock:
            self._entries[key] = body
            self._entries.move_to_end(key)
            while len(self._entries) > self.entries_max:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()
