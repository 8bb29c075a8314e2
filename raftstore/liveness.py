"""Liveness touches in raft mode: which member proposes a broker's heartbeat, and when.

Brokers heartbeat every NameServer at about the same moment. In raft mode each
heartbeat that changed nothing but the time would be a log entry on every node,
so :class:`TouchCoalescer` lets one designated member (rendezvous hash) propose a
touch once per interval and the others only when the designated one is silent.
Eventual mode proposes every touch (it is a local apply).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from raftstore.commands import BrokerHeartbeat, QueryDataVersion
from raftstore.raft import RaftReplicator
from raftstore.replicator import Replicator
from raftstore.results import ApplyResult, QueryDataVersionOutcome
from raftstore.route_table import RouteTable

DEFAULT_TOUCH_INTERVAL_MS = 15_000
DEFAULT_BACKUP_TOUCH_INTERVAL_MS = 45_000
DESIGNATED_TOUCH_TIMEOUT_DIVISOR = 4
BACKUP_TOUCH_TIMEOUT_DIVISOR = 2
"""A broker with a short heartbeat timeout (fast detection, failover) is touched at least
every timeout/4 by its designated member and every timeout/2 by the others, so coalescing
never lets it expire between two touches."""

Touch = BrokerHeartbeat | QueryDataVersion



class TouchCoalescer:
    """Proposes a broker's liveness touch at most once per interval, cluster-wide.

    Each broker has one designated member (rendezvous hash over the members),
    which proposes a touch when the replicated ``last_update_ms`` is older than
    ``touch_interval_ms``; the other members propose only when it is older than
    ``backup_touch_interval_ms`` (the designated one cannot hear the broker).
    Brokers heartbeat every member at about the same moment, so without a
    designated member every node would see the same stale time and propose.
    Both intervals are capped by a fraction of the broker's own heartbeat timeout.
    """

    def __init__(
        self,
        replicator: Replicator,
        *,
        touch_interval_ms: int = DEFAULT_TOUCH_INTERVAL_MS,
        backup_touch_interval_ms: int = DEFAULT_BACKUP_TOUCH_INTERVAL_MS,
    ) -> None:
        assert backup_touch_interval_ms >= touch_interval_ms
        self._replicator = replicator
        self._interval_ms = touch_interval_ms
        self._backup_interval_ms = backup_touch_interval_ms
        self._in_flight: set[tuple[str, str]] = set()
        self.proposed = 0
        self.skipped = 0

    async def touch(self, command: Touch) -> ApplyResult:
        """Apply or skip ``command``; QUERY_DATA_VERSION still gets its answer."""
        if self._should_propose(command):
            key = (command.cluster_name, command.broker_addr)
            self._in_flight.add(key)
            try:
                self.proposed += 1
                return await self._replicator.propose(command)
            finally:
                self._in_flight.discard(key)
        self.skipped += 1
        return self._replicator.read(lambda table: _local_answer(table, command))

    def _should_propose(self, command: Touch) -> bool:
        if not isinstance(self._replicator, RaftReplicator):
            return True
        key = (command.cluster_name, command.broker_addr)
        entry = self._replicator.read(lambda table: table.live_broker(*key))
        if entry is None or key in self._in_flight:
            # No live entry: a touch changes nothing (QDV answers "changed").
            return False
        if isinstance(command, QueryDataVersion) and entry.data_version != command.data_version:
            return False
        designated = (
            designated_member(self._replicator.members(), key) == self._replicator.self_addr
        )
        interval, divisor = (
            (self._interval_ms, DESIGNATED_TOUCH_TIMEOUT_DIVISOR)
            if designated
            else (self._backup_interval_ms, BACKUP_TOUCH_TIMEOUT_DIVISOR)
        )
        interval = min(interval, entry.heartbeat_timeout_ms // divisor)
        return entry.last_update_ms < command.now_ms - interval


def designated_member(members: Sequence[str], key: tuple[str, str]) -> str:
    """Rendezvous hash: the member that touches broker ``key`` first."""
    def weight(member: str) -> bytes:
        return hashlib.sha256(f"{member}|{key[0]}|{key[1]}".encode()).digest()

    return max(members, key=weight)


def _local_answer(table: RouteTable, command: Touch) -> ApplyResult:
    """The answer a skipped touch gets: what the applied state says, nothing changed."""
    if isinstance(command, QueryDataVersion):
        entry = table.live_broker(command.cluster_name, command.broker_addr)
        changed = entry is None or entry.data_version != command.data_version
        outcome = QueryDataVersionOutcome(
            changed=changed, data_version=None if entry is None else entry.data_version
        )
        return ApplyResult(applied_version=table.applied_version, outcome=outcome)
    return ApplyResult(applied_version=table.applied_version)


