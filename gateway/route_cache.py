"""The encoded GET_ROUTEINFO_BY_TOPIC body, cached per (topic, routes version, JSON style).

Route queries are the hot path (every client polls every topic every 30 s), and
encoding the fastjson body costs far more than the table lookup. Bodies live in
a :class:`RouteView`: the routes version and the NamesrvConfig they were read
at, plus the bodies encoded at that version keyed by (topic, standard). The
table's ``routes_version`` moves on every change that may alter a route answer
(never on heartbeats), and a new version starts a new, empty view, so a body of
an older version is never served. Route queries never touch the database.

A cache hit takes no lock: the cache subscribes to the replicator and bumps an
epoch counter after every apply that may change routes; a view stamped with an
older epoch is re-read (one ``replicator.read``) before it is used. The epoch is
read before the table, so a change that lands between the two only makes the
next query re-read once more. A view is replaced whole, never edited in place
except to add bodies of its own version, so a reader on another thread always
sees one consistent (version, config, bodies) triple.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from gateway import selectors
from raftstore.commands import Command
from raftstore.config import NamesrvConfig
from raftstore.replicator import Replicator
from raftstore.results import ApplyResult
from raftstore.route_table import RouteTable
from remoting.bodies import encode_topic_route_data

ROUTE_CACHE_ENTRIES_MAX = 65_536

_NOT_FOUND = b""
"""Cached marker for "no route": an encoded route is never empty."""


@dataclass(frozen=True, slots=True)
class RouteView:
    """The route-relevant state at one routes version, and the bodies encoded at it."""

    epoch: int
    routes_version: int
    config: NamesrvConfig
    bodies: dict[tuple[str, bool], bytes] = field(default_factory=dict, compare=False)


def _read_view_state(table: RouteTable) -> tuple[int, NamesrvConfig]:
    return table.routes_version, table.config


class RouteCache:
    """Bounded per-version caches of encoded route bodies; thread-safe, lock-free hits."""

    def __init__(self, replicator: Replicator, entries_max: int = ROUTE_CACHE_ENTRIES_MAX) -> None:
        if entries_max <= 0:
            raise ValueError("entries_max must be positive")
        self.replicator = replicator
        self.entries_max = entries_max
        self._epoch = 0
        self._view: RouteView | None = None
        # Taken by view refreshes, inserts and clear; never by a hit, never
        # inside the replicator's lock (the apply listener does not take it).
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        replicator.subscribe(self._applied)
        # Raft mode: a snapshot can replace the whole table without an apply.
        replicator.subscribe_snapshot(self._snapshot_installed)

    def __len__(self) -> int:
        view = self._view
        return 0 if view is None else len(view.bodies)

    # -- invalidation ---------------------------------------------------------------

    def _applied(self, command: Command, result: ApplyResult) -> None:
        """Apply listener (apply thread, under the replicator's lock): no locks taken."""
        if result.changes.affects_routes:
            self._epoch += 1

    def _snapshot_installed(self, applied_index: int) -> None:
        self.clear()

    def clear(self) -> None:
        """Drop every body (a snapshot replaced the whole table)."""
        with self._lock:
            self._epoch += 1
            self._view = None

    # -- reads ----------------------------------------------------------------------

    def view(self) -> RouteView:
        """The current view: the cached one unless an apply changed routes since."""
        view = self._view
        if view is not None and view.epoch == self._epoch:
            return view
        return self._refresh()

    def _refresh(self) -> RouteView:
        with self._lock:
            epoch = self._epoch
            view = self._view
            if view is not None and view.epoch == epoch:
                return view  # another thread refreshed it meanwhile
            version, config = self.replicator.read(_read_view_state)
            # Same version, same state: keep the bodies (clear() sets _view to None).
            bodies = view.bodies if view is not None and view.routes_version == version else {}
            view = RouteView(epoch, version, config, bodies)
            self._view = view
            return view

    def route_body(
        self, topic: str, *, standard: bool, view: RouteView | None = None
    ) -> bytes | None:
        """The encoded route of ``topic`` (None when it has none), from cache when current."""
        if view is None:
            view = self.view()
        cached = view.bodies.get((topic, standard))
        if cached is not None:
            self.hits += 1
            return cached or None
        return self.fill(view, topic, standard) or None

    def fill(self, view: RouteView, topic: str, standard: bool) -> bytes:
        """Encode the route of ``topic`` and store it in ``view`` if still current;
        ``b""`` when it has no route."""
        self.misses += 1
        read_version, route = selectors.route_with_version(self.replicator, topic)
        body = _NOT_FOUND if route is None else encode_topic_route_data(route, standard=standard)
        if read_version != view.routes_version:
            # The table moved on since the view was taken: the body is right for
            # the newer version (which is what the caller gets) but not for the
            # view, so it is not stored there.
            return body
        with self._lock:
            bodies = view.bodies
            if (topic, standard) not in bodies:
                while len(bodies) >= self.entries_max:
                    del bodies[next(iter(bodies))]  # the oldest entry of this version
            bodies[(topic, standard)] = body
        return body
