"""Raft mode's settings: the PySyncObj configuration we ship and the timing constants.

Each choice is explained in docs/RAFT.md; :meth:`RaftSettings.sync_conf` turns
them into PySyncObj's ``SyncObjConf`` (its public configuration API).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pysyncobj import SyncObjConf

DEFAULT_PROPOSE_TIMEOUT_S = 3.0
VERIFY_OWN_ENTRIES_ENV = "NAMESRV_RAFT_VERIFY_OWN_ENTRIES"
"""Set to ``1`` to turn :attr:`RaftSettings.verify_own_entries` on by default (the
test suite does, for every node it starts)."""
DEFAULT_READY_TIMEOUT_S = 5.0
DEFAULT_SKEW_ALLOWANCE_MS = 5_000
RETRY_BACKOFF_S = 0.05
"""A proposal PySyncObj refused (no leader yet) is offered again after this long."""
BATCH_ANSWER_TIMEOUT_S = 1.0
"""A batch PySyncObj has not answered for this long (its node lost track of it, e.g. a
snapshot replaced the entries) frees its in-flight slot and its proposals are retried."""
STATUS_REFRESH_S = 0.05
START_REPLAY_TIMEOUT_S = 30.0


class SnapshotSerializer(Protocol):
    """What PySyncObj calls to write and install a snapshot file
    (:class:`raftstore.raft.snapshots.SnapshotHooks`)."""

    def serialize(self, file_name: str, data: Any) -> None:
        """Write PySyncObj's ``data`` and the applied state to ``file_name``."""

    def deserialize(self, file_name: str) -> tuple[Any, Any, list[Any]]:
        """Install the snapshot in ``file_name``; return what PySyncObj needs back."""


@dataclass(frozen=True, slots=True)
class RaftSettings:
    """The PySyncObj settings we ship; see docs/RAFT.md for each choice.

    ``send_at_once`` (PySyncObj's ``appendEntriesUseBatch`` off) wakes the tick
    thread when an entry is queued and sends it at once, and sends the new commit
    index right after the leader applies; ``append_entries_period_s`` is then only
    the heartbeat. That many AppendEntries in flight made PySyncObj 0.3.17 truncate
    applied entries; :mod:`raftstore.raft.append` trims re-sent entries on the
    follower, so it no longer does. Group commit bounds the entries anyway: at most
    ``max_batches_in_flight`` log entries per node are pending, each holding up to
    ``max_batch_commands`` commands and at most ``max_batch_bytes`` (a batch is applied
    in one tick of PySyncObj's thread, which also sends the heartbeats; see
    docs/BENCHMARKS.md, "registration storm").

    ``announce_commit_first``: PySyncObj's leader tells the followers a new commit
    index only after it has applied every newly committed entry; with this on it
    tells them before applying, so the followers apply alongside the leader instead
    of after it (and are free to acknowledge the next batch sooner). Only for a run
    worth it (more than one entry, a batch or compressed entry, or a plain one of
    ``ANNOUNCE_MIN_BYTES`` or more, ``raftstore.raft.glue``): for a lone small entry
    the extra round costs commit latency and buys nothing, its apply being short (see
    docs/BENCHMARKS.md, "Tables left out of the log, the leader's flush overlapped").

    Election timeouts are drawn from [``raft_min_timeout_s``, ``raft_max_timeout_s``].
    The minimum is what keeps a busy leader leading (see ``RouteLog.heartbeat_if_due``);
    the maximum only spreads the candidates. Failover takes about the earlier of the
    two followers' timeouts after the last heartbeat (0.68 s on average, 0.85 s at
    most), then one vote round trip and the forwarded write's commit: under the
    1.0 s a failover may take. 0.25 s of spread still puts two followers' candidacies
    about 80 ms apart on average, against a vote round trip of a few milliseconds
    (see docs/BENCHMARKS.md, "The first failover").

    ``quorum_window_s``: how long a node keeps its contact with a quorum after the
    last sign of one (docs/RAFT.md, "A node without a quorum says so").

    ``apply_slice_s``: a tick applies committed entries for about this long (plus the
    entry it is in), then sends its round and reads its sockets before the next tick
    applies the rest (``raftstore.raft.glue.RouteLog``'s apply loop). One heartbeat period:
    a tick's stall stays far below the shortest election timeout even when large
    topic tables commit several at a time.

    ``linger_s``: a proposal made with ``linger`` (a broker's registrations and
    heartbeats, which it sends every 30 s and waits seconds for) may wait this long
    for others to share its log entry, unless one that may not wait joins the
    queue first: every entry costs each member a journal flush and a round of
    messages, and the answer comes at most one tick later (see docs/BENCHMARKS.md,
    "Reads decoded from memory, registrations sharing log entries").

    A node applies the entries it proposed from the command objects it encoded
    rather than decoding its own bytes again. That equals the decode as long as
    every field holds exactly its annotated type; ``verify_own_entries`` decodes
    anyway and raises an alarm on any difference (applying the decoded commands,
    as the other nodes do). The test suite turns it on for every node.
    """

    append_entries_period_s: float = 0.05
    send_at_once: bool = True
    max_batches_in_flight: int = 2
    max_batch_commands: int = 1024
    max_batch_bytes: int = 256 * 1024
    raft_min_timeout_s: float = 0.6
    raft_max_timeout_s: float = 0.85
    quorum_window_s: float = 1.0
    connection_timeout_s: float = 3.0
    connection_retry_s: float = 0.5
    leader_fallback_timeout_s: float = 2.0
    auto_tick_period_s: float = 0.02
    append_entries_batch_bytes: int = 4 * 1024 * 1024
    log_compaction_min_entries: int = 5000
    log_compaction_min_time_s: float = 300.0
    commands_queue_size: int = 10_000
    bind_retry_s: float = 0.25
    bind_retries_max: int = 40
    fsync: bool = True
    announce_commit_first: bool = True
    apply_slice_s: float = 0.05
    linger_s: float = 0.02
    verify_own_entries: bool = field(
        default_factory=lambda: os.environ.get(VERIFY_OWN_ENTRIES_ENV) == "1"
    )

    def max_entry_bytes(self) -> int:
        """Entries at or above the batch size take PySyncObj's chunked path, which
        mislabels its last chunk in 0.3.17; we refuse them instead."""
        return self.append_entries_batch_bytes - 64 * 1024

    def to_conf(
        self,
        journal: Path,
        dump: Path,
        hooks: SnapshotSerializer,
        security: Mapping[str, str],
    ) -> Any:
        """The SyncObjConf for one node; ``security`` binds the port and sets the
        cluster secret (:func:`raftstore.raft.transport.conf_security`)."""
        return SyncObjConf(
            **security,
            appendEntriesPeriod=self.append_entries_period_s,
            raftMinTimeout=self.raft_min_timeout_s,
            raftMaxTimeout=self.raft_max_timeout_s,
            connectionTimeout=self.connection_timeout_s,
            connectionRetryTime=self.connection_retry_s,
            leaderFallbackTimeout=self.leader_fallback_timeout_s,
            autoTickPeriod=self.auto_tick_period_s,
            appendEntriesUseBatch=not self.send_at_once,
            appendEntriesBatchSizeBytes=self.append_entries_batch_bytes,
            logCompactionMinEntries=self.log_compaction_min_entries,
            logCompactionMinTime=self.log_compaction_min_time_s,
            commandsQueueSize=self.commands_queue_size,
            commandsWaitLeader=False,
            dynamicMembershipChange=True,
            journalFile=str(journal),
            fullDumpFile=str(dump),
            serializer=hooks.serialize,
            deserializer=hooks.deserialize,
            useFork=False,
            bindRetryTime=self.bind_retry_s,
            maxBindRetries=self.bind_retries_max,
        )
