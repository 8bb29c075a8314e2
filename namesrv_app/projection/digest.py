"""When the projection refreshes the state digest it stores with its rows.

The digest costs a pass over the whole table (its copy under the apply lock, the
hashing after), so a busy writer stores it only now and then and leaves the stored one
stale meanwhile; an idle writer or a flush makes it exact. NODE_STATUS computes the
exact digest on demand, never from here.
"""

from __future__ import annotations

import time
from typing import Any

from namesrv_app import models
from raftstore import snapshot
from raftstore.replicator import Replicator
from raftstore.route_table import RouteTable

DIGEST_INTERVAL_S = 10.0
"""A busy node whose routes changed refreshes the stored digest at most this often; an
idle one catches up at once (after the writer's idle poll without deltas), and a flush
makes it exact."""
DIGEST_COST_FACTOR = 50
"""A busy node's stored digest is refreshed no more often than every this many times
what the last one cost (at most a fiftieth of the time), since its copy holds the apply
lock; see docs/BENCHMARKS.md, "Reads first, the writer's share held, fewer Raft
messages"."""
LIVENESS_DIGEST_INTERVAL_S = 300.0
"""Heartbeats change the state too (last-update times), but at 1k brokers every 30 s a
node is never idle: while only liveness rows change, the stored digest is refreshed at
most this often, so the cadence does not pay a whole-table pass every few seconds (see
docs/BENCHMARKS.md, "route query")."""


class DigestSchedule:
    """Decides when the writer stores a fresh digest, and takes it from the table."""

    def __init__(
        self,
        replicator: Replicator,
        *,
        digest_interval_s: float = DIGEST_INTERVAL_S,
        liveness_digest_interval_s: float = LIVENESS_DIGEST_INTERVAL_S,
    ) -> None:
        self.replicator = replicator
        self.digest_interval_s = digest_interval_s
        self.liveness_digest_interval_s = liveness_digest_interval_s
        self.computed = 0
        self.stale = False
        """True when a written batch left the stored digest behind the rows."""
        self._last_s = 0.0
        self._cost_s = 0.0
        self._routes_version = -1
        """The routes version the stored digest was taken at (-1: none yet)."""

    def taken_by_rebuild(self, routes_version: int) -> None:
        """Record the digest a rebuild stored with its full state."""
        self._last_s = time.monotonic()
        self._routes_version = routes_version
        self.computed += 1

    def due(self, applied_version: int, routes_version: int) -> str | None:
        """The digest to store with a batch at these versions, or None to leave the
        stored one (stale)."""
        elapsed_s = time.monotonic() - self._last_s
        if routes_version != self._routes_version:
            interval_s = self.digest_interval_s
        else:
            interval_s = self.liveness_digest_interval_s
        # A big table's digest waits longer: its copy holds the apply lock.
        due = elapsed_s >= max(interval_s, DIGEST_COST_FACTOR * self._cost_s)
        return self.current(applied_version) if due else None

    def current(self, applied_version: int) -> str | None:
        """The table's digest if the table is still at ``applied_version``, else None."""

        def read(table: RouteTable) -> tuple[dict[str, Any], int] | None:
            if table.applied_version != applied_version:
                return None
            return table.state_document(), table.routes_version  # hashed after the lock

        began_s = time.monotonic()
        taken = self.replicator.read(read)
        if taken is None:
            return None
        document, routes_version = taken
        digest = snapshot.digest_of(document)
        self._last_s = time.monotonic()
        self._cost_s = self._last_s - began_s
        self._routes_version = routes_version
        self.computed += 1
        return digest

    def refresh(self, node_id: str) -> None:
        """Store the exact digest in ``node_id``'s NodeState row if the table is still
        at the version the row holds."""
        self.stale = False
        state = models.NodeState.objects.filter(node_id=node_id).first()
        if state is None:
            return
        digest = self.current(state.applied_version)
        if digest is not None and digest != state.digest:
            models.NodeState.objects.filter(node_id=node_id).update(digest=digest)
