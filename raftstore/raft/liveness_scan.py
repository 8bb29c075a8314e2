"""The periodic liveness scan: expiring silent brokers is one replicated decision.

In raft mode only the node that believes it leads proposes one ``ExpireBrokers``
(with the skew allowance, as the leader's clock may be ahead of the brokers' last
touches); followers skip. In eventual mode every node expires its own table.
"""

from __future__ import annotations

from raftstore.commands import ExpireBrokers
from raftstore.raft.replicator import RaftReplicator
from raftstore.raft.settings import DEFAULT_SKEW_ALLOWANCE_MS
from raftstore.replicator import MODE_RAFT, Replicator
from raftstore.results import ApplyResult


async def scan_liveness(
    replicator: Replicator, now_ms: int, skew_allowance_ms: int = DEFAULT_SKEW_ALLOWANCE_MS
) -> ApplyResult | None:
    """The periodic scan: in raft mode only the leader proposes one ExpireBrokers;
    followers skip (None). In eventual mode every node expires its own table."""
    if isinstance(replicator, RaftReplicator) and not replicator.is_leader():
        return None
    skew = skew_allowance_ms if replicator.mode == MODE_RAFT else 0
    return await replicator.propose(ExpireBrokers(now_ms=now_ms, skew_allowance_ms=skew))
