"""Raft mode: the route table replicated through a PySyncObj log.

* :mod:`~raftstore.raft.replicator`: :class:`RaftReplicator`, the proposal/apply core;
* :mod:`~raftstore.raft.settings`: :class:`RaftSettings` and the timing constants;
* :mod:`~raftstore.raft.glue`: the only code below PySyncObj's public API (with
  :mod:`~raftstore.raft.transport`, the authenticated Raft port);
* :mod:`~raftstore.raft.codec` (+ ``codec_legacy``): the log entry format;
* :mod:`~raftstore.raft.append`: the conflict-only truncation of re-sent entries.

The names below are the package's public face; ``DialNode`` must stay importable
as ``raftstore.raft.DialNode``, the path pickled into membership log entries.
"""

from raftstore.raft.glue import DialNode
from raftstore.raft.replicator import (
    MembershipError,
    RaftReplicator,
    RaftStatus,
    find_divergence,
    scan_liveness,
)
from raftstore.raft.settings import (
    DEFAULT_PROPOSE_TIMEOUT_S,
    DEFAULT_READY_TIMEOUT_S,
    DEFAULT_SKEW_ALLOWANCE_MS,
    VERIFY_OWN_ENTRIES_ENV,
    RaftSettings,
)

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
