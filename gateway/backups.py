"""A node's backup: the replicated state read at a linearizable point, as a backup file.

The internal request BACKUP (:class:`~gateway.private_codes.InternalCode`) lands here.
In raft mode the node first commits a barrier through the log (the same no-op a
``consistency=linearizable`` route read waits for), so the state it then reads holds
every write committed anywhere before the request; it reads the table, the log index
and the term under one hold of the apply lock, at an entry boundary
(:meth:`~raftstore.raft.RaftReplicator.read_at`), and serializes, compresses and
hashes the copy after letting go (:mod:`raftstore.backup`), on a worker thread so the
event loop keeps answering. In eventual mode the state is this node's own, and the
header says so.

Ext ``consistency=local`` skips the barrier: the state is what this node has applied,
read at an entry boundary all the same. A node without a quorum cannot commit a
barrier, and recovery after quorum loss (``cluster recover``, ``run_node
--force-new-cluster``) starts a new one-member cluster from exactly that state; the
header's ``source`` says it was read this way.
"""

from __future__ import annotations

import asyncio
from typing import Any

from raftstore import backup
from raftstore.raft import RaftReplicator
from raftstore.replicator import MODE_EVENTUAL, MODE_RAFT, Replicator
from raftstore.route_table import RouteTable
from remoting.frame import FRAME_BYTES_MAX

ANSWER_HEADER_BYTES_MAX = 4096
"""Room left in the answer frame for its own header."""
BACKUP_BYTES_MAX = FRAME_BYTES_MAX - ANSWER_HEADER_BYTES_MAX
"""A backup travels in one remoting answer. Compressed, 16 MiB holds a table of about
150 MiB of JSON (a 5,000-topic table is 0.4 MB)."""


class BackupTooLarge(ValueError):
    """The backup does not fit in one answer of the internal port."""


Captured = tuple[dict[str, Any], int, int]
"""The state document and its two version counters, copied under the apply lock."""


def _capture(table: RouteTable) -> Captured:
    return table.state_document(), table.applied_version, table.routes_version


async def take_backup(
    replicator: Replicator, cluster: str, now_ms: int, *, linearizable: bool = True
) -> bytes:
    """The backup file of this node's state, named for ``cluster``, stamped ``now_ms``.

    Raft: after a barrier (NoQuorumError without a quorum, within the propose
    bound); with ``linearizable`` False, this node's applied state without one, which
    a node that lost its quorum can still give (recovery after quorum loss: the header's
    ``source`` says so). Eventual: at once either way. BackupTooLarge when the file does
    not fit in an answer; raftstore.backup.BackupError for a bad cluster name (checked
    before any work).
    """
    backup.check_cluster_name(cluster)
    if linearizable:
        await replicator.barrier()
    (state, applied, routes), index, term = await asyncio.to_thread(replicator.read_at, _capture)
    members: tuple[str, ...] = ()
    if isinstance(replicator, RaftReplicator):
        members = tuple(sorted(replicator.members()))
    header = backup.BackupHeader(
        cluster=cluster,
        mode=MODE_RAFT if members else MODE_EVENTUAL,
        node=replicator.node_id,
        index=index,
        term=term,
        members=members,
        taken_at_ms=now_ms,
        applied_version=applied,
        routes_version=routes,
        linearizable=linearizable or not members,
    )
    data = await asyncio.to_thread(backup.encode, header, state)
    if len(data) > BACKUP_BYTES_MAX:
        raise BackupTooLarge(
            f"the backup is {len(data)} bytes, more than one answer carries "
            f"({BACKUP_BYTES_MAX}); the table is too large to back up this way"
        )
    return data
