"""Raft mode: the route table replicated through a PySyncObj log.

* :mod:`~raftstore.raft.replicator`: :class:`RaftReplicator`, a node's face and lifecycle,
  over one module per job: :mod:`~raftstore.raft.batching` (group commit),
  :mod:`~raftstore.raft.applier` (the apply), :mod:`~raftstore.raft.barrier`,
  :mod:`~raftstore.raft.membership`, :mod:`~raftstore.raft.snapshots` (the snapshot
  file) and :mod:`~raftstore.raft.status` (status, view, alarms);
* :mod:`~raftstore.raft.checkpoints`: digest checkpoints and :func:`find_divergence`;
  :mod:`~raftstore.raft.liveness_scan`: :func:`scan_liveness`;
* :mod:`~raftstore.raft.settings`: :class:`RaftSettings` and the timing constants;
* :mod:`~raftstore.raft.glue`: the only code below PySyncObj's public API (with
  :mod:`~raftstore.raft.transport`, the authenticated Raft port);
* :mod:`~raftstore.raft.codec` (+ ``codec_legacy``): the log entry format;
* :mod:`~raftstore.raft.append`: the conflict-only truncation of re-sent entries.

Imports run one way: the leaves (settings, checkpoints, codec, append, cipher,
transport), then glue and applier, then status, membership, snapshots and barrier,
then batching, the replicator and, last, the scan. The names below are the package's public
face; ``DialNode`` must stay importable as ``raftstore.raft.DialNode``, the path
pickled into membership log entries.
"""

from raftstore.raft.checkpoints import find_divergence
from raftstore.raft.glue import DialNode
from raftstore.raft.liveness_scan import scan_liveness
from raftstore.raft.membership import MembershipError
from raftstore.raft.replicator import RaftReplicator
from raftstore.raft.settings import (
    DEFAULT_PROPOSE_TIMEOUT_S,
    DEFAULT_READY_TIMEOUT_S,
    DEFAULT_SKEW_ALLOWANCE_MS,
    VERIFY_OWN_ENTRIES_ENV,
    RaftSettings,
)
from raftstore.raft.status import RaftStatus

__all__ = [
    "DEFAULT_PROPOSE_TIMEOUT_S",
    "DEFAULT_READY_TIMEOUT_S",
    "DEFAULT_SKEW_ALLOWANCE_MS",
    "VERIFY_OWN_ENTRIES_ENV",
    "DialNode",
    "MembershipError",
    "RaftReplicator",
    "RaftSettings",
    "RaftStatus",
    "find_divergence",
    "scan_liveness",
]
