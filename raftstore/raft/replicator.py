"""Raft mode: a :class:`Replicator` backed by one PySyncObj node.

The PySyncObj object (:class:`~raftstore.raft.glue.RouteLog`) has exactly one replicated
method, ``apply_entry(entry: bytes)``, which hands the bytes to
:meth:`RaftReplicator._apply_entry`; that applies them to the node's
:class:`~raftstore.raft.applier.AppliedState`. Everything PySyncObj does runs on its own
tick thread; the asyncio side only submits entries and awaits futures.

:class:`RaftReplicator` is the node's face and its lifecycle; each job is one module
(the why of each rule is in ``docs/RAFT.md``):

* :mod:`~raftstore.raft.batching`: group commit, lingering, deadlines and retries (a
  proposal id in every entry, so a retry after an ambiguous failure applies once);
* :mod:`~raftstore.raft.applier`: the apply, the replicated dedupe window, checkpoints;
* :mod:`~raftstore.raft.barrier`, :mod:`~raftstore.raft.membership`,
  :mod:`~raftstore.raft.snapshots` (the table's codec plus the few Raft fields
  PySyncObj needs, never a pickle), :mod:`~raftstore.raft.status` (view, alarms).

A proposal is reported only after this node's journal is flushed (one flush per tick
serves every proposal applied in that tick); followers flush before they acknowledge
entries, and term/vote metadata is fsynced before votes go out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from raftstore import snapshot
from raftstore.commands import Command
from raftstore.raft.applier import AppliedState
from raftstore.raft.barrier import Barriers
from raftstore.raft.batching import GroupCommit
from raftstore.raft.glue import (
    ALARMS,
    DIAL,
    DialNode,
    Durability,
    RouteLog,
    is_leader,
    journal_of,
    raft_port,
)
from raftstore.raft.membership import Membership
from raftstore.raft.settings import (
    DEFAULT_PROPOSE_TIMEOUT_S,
    DEFAULT_READY_TIMEOUT_S,
    START_REPLAY_TIMEOUT_S,
    STATUS_REFRESH_S,
    RaftSettings,
)
from raftstore.raft.snapshots import SnapshotHooks
from raftstore.raft.status import (
    Alarms,
    QuorumContact,
    RaftStatus,
    RaftView,
    TickGaps,
    read_view,
)
from raftstore.raft.transport import conf_security
from raftstore.replicator import MODE_RAFT, ApplyListener, NoQuorumError, ReplicationError
from raftstore.results import ApplyResult
from raftstore.route_table import RouteTable

T = TypeVar("T")

READ_AT_TIMEOUT_S = 10.0
"""How long :meth:`RaftReplicator.read_at` waits for an entry boundary (a batch entry
applies in well under a second even on a busy host)."""


class RaftReplicator:
    """Raft mode: commands go through a PySyncObj log and apply in order everywhere."""

    mode = MODE_RAFT

    def __init__(
        self,
        node_id: str,
        self_addr: str,
        peers: Sequence[str],
        data_dir: Path,
        *,
        settings: RaftSettings | None = None,
        propose_timeout_s: float = DEFAULT_PROPOSE_TIMEOUT_S,
        ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
        dial: Mapping[str, str] | None = None,
        table_factory: type[RouteTable] = RouteTable,
        secret: str,
        bind_host: str | None = None,
    ) -> None:
        self.node_id = node_id
        self.self_addr = self_addr
        # Checked here, so a bad secret fails the constructor, not the tick thread.
        self._security = conf_security(self_addr, bind_host, secret)
        self._peers = [p for p in peers if p != self_addr]
        self._data_dir = Path(data_dir)
        self._settings = settings if settings is not None else RaftSettings()
        self._ready_timeout_s = ready_timeout_s
        DIAL.update(dial or {})
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sync: RouteLog | None = None
        self._durability = Durability(self._data_dir / "raft.journal", self._settings.fsync)
        self._view = RaftView()
        self._alarms = Alarms(node_id)
        self._tick_gaps = TickGaps()
        self._quorum = QuorumContact(self._settings.quorum_window_s)
        self._applied = AppliedState(
            node_id,
            table_factory,
            verify_own_entries=self._settings.verify_own_entries,
            raise_alarm=self._alarms.raise_alarm,
        )
        self._commits = GroupCommit(
            node_id,
            self._settings,
            propose_timeout_s,
            sync=lambda: self._sync,
            view=lambda: self._view,
        )
        self._barriers = Barriers(node_id, self.propose)
        self._membership = Membership(self_addr, propose_timeout_s, self._require_started)

    # -------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Bind the Raft port, load snapshot + journal and replay the committed log."""
        self._loop = asyncio.get_running_loop()
        self._commits.bind(self._loop)
        self._data_dir.mkdir(parents=True, exist_ok=True)
        conf = self._settings.to_conf(
            self._data_dir / "raft.journal",
            self.snapshot_file(),
            SnapshotHooks(self._applied, self._durability, fsync=self._settings.fsync),
            self._security,
        )
        self._sync = await self._loop.run_in_executor(None, self._construct, conf)
        try:
            await self._loop.run_in_executor(None, self._sync.waitBinded)
        except Exception as exc:
            await self.stop()
            raise ReplicationError(f"cannot bind raft port {self.self_addr}: {exc}") from exc
        await self._await_replay()

    def _construct(self, conf: Any) -> RouteLog:
        sync = RouteLog(
            self._apply_entry,
            self._settings,
            self.self_addr,
            list(self._peers),
            conf,
            DialNode,
            self._durability,
        )
        self._durability.bind(journal_of(sync))
        sync.addOnTickCallback(self._on_tick)
        return sync

    async def _await_replay(self) -> None:
        # First the local journal up to the persisted commit index (saved about
        # once a second), then, bounded, the entries a leader says are committed
        # (PySyncObj's isReady), so a restarted node does not serve an old state.
        assert self._sync is not None
        target = self._sync.raftCommitIndex
        deadline = time.monotonic() + START_REPLAY_TIMEOUT_S
        while self._sync.raftLastApplied < target and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        deadline = time.monotonic() + self._ready_timeout_s
        while not self._sync.isReady() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        """Stop the tick thread and close the journal; pending proposals fail."""
        sync, self._sync = self._sync, None
        if sync is not None:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, sync.destroy_synchronous)
        self._commits.stop()
        self._barriers.stop()

    # -------------------------------------------------------------- writes

    async def propose(self, command: Command, *, linger_for: str | None = None) -> ApplyResult:
        """Commit ``command`` and return its result once applied on this node.

        The command joins the next group-commit batch
        (:class:`~raftstore.raft.batching.GroupCommit`); its answer is its own
        sub-result of that batch. ``linger_for``: the broker whose write it is; it may
        wait up to ``RaftSettings.linger_s`` for other brokers' writes to share its log
        entry, while another broker has written within that time
        (:meth:`~raftstore.raft.batching.GroupCommit.propose`).
        """
        self._require_started()
        return await self._commits.propose(command, linger_for)

    async def barrier(self) -> None:
        """Commit a no-op through the leader; return once it is applied here.

        Calls that arrive while a barrier is in flight share the next one.
        """
        self._require_started()
        await self._barriers.wait()

    # -------------------------------------------------------------- tick thread

    def _apply_entry(self, entry: bytes, index: int, term: int) -> bool:
        """Apply ``entry`` (log index ``index``, term ``term``); True when this node
        proposed it."""
        own = self._commits.take_own(entry)
        batch, decoded = (None, None) if own is None else own
        sync = self._sync
        ready = self._applied.apply(
            entry,
            index,
            term,
            decoded,
            self._commits.waiters,
            None if sync is None else sync.heartbeat_if_due,
        )
        if ready or batch is not None:
            # Handed over at once, before PySyncObj sends the next AppendEntries
            # round: the entry is durable here (RouteLog._onTick flushed the
            # journal before this tick counted or learnt the commit) and on a
            # majority, so nothing is answered early.
            loop = self._loop
            if loop is not None:
                loop.call_soon_threadsafe(self._commits.settle, ready, batch)
        return own is not None

    def _on_tick(self) -> None:
        """Tick-thread callback: the leader's flush of what it just sent, tick-gap
        accounting and the status view."""
        if not self._tick_gaps.tick(time.monotonic()):
            ALARMS.register(self._alarms.raise_alarm)
        # The leader's flush of the entries it just sent (they are on their way to
        # the followers meanwhile). A no-op when nothing changed.
        self._durability.flush_journal()
        sync = self._sync
        if sync is not None:
            sync.release_commit_notice()
            self._quorum.observe(sync.quorum_contact_at(), sync.tick_started_s)
            if time.monotonic() - self._view.at >= STATUS_REFRESH_S:
                self._view = read_view(
                    sync, self.self_addr, self._view, self.node_id, self._tick_gaps.max_s
                )

    def seed(self, table: RouteTable) -> None:
        """Before :meth:`start`: the state the log applies on instead of an empty table
        (a restored backup, ``gateway/restore.py``). Every member must be seeded with the
        same table, from an empty Raft folder, or their states differ."""
        if self._sync is not None:
            raise ReplicationError(f"{self.node_id}: a running replicator cannot be seeded")
        with self._applied.lock:
            self._applied.table = table

    def snapshot_file(self) -> Path:
        """Where PySyncObj keeps this node's snapshot (present once the log was compacted)."""
        return self._data_dir / "raft.snapshot"

    def force_snapshot(self) -> None:
        """Ask PySyncObj to compact the log at its next tick (tests, operators)."""
        self._require_started().forceLogCompaction()

    # -------------------------------------------------------------- reads

    def read(self, reader: Callable[[RouteTable], T]) -> T:
        """Run ``reader`` against the applied state under the apply lock."""
        return self._applied.read(reader)

    def read_at(
        self, reader: Callable[[RouteTable], T], timeout_s: float = READ_AT_TIMEOUT_S
    ) -> tuple[T, int, int]:
        """``reader``'s result with the log index and the term it was read at: under one
        hold of the apply lock, at an entry boundary (every entry up to the index
        applied, none after), the term being this node's current one. Blocks (call it
        off the event loop); after a :meth:`barrier` it is a linearizable read."""
        sync = self._require_started()
        value, index = self._applied.read_whole(
            reader, lambda: int(sync.raftLastApplied), timeout_s
        )
        return value, index, int(sync.raftCurrentTerm)

    def subscribe(self, listener: ApplyListener) -> None:
        """Call ``listener(command, result)`` on the apply thread after each apply."""
        self._applied.subscribe(listener)

    def subscribe_snapshot(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(applied_index)`` when a snapshot replaced the whole table
        (restart or install from the leader): projections must rebuild."""
        self._applied.subscribe_snapshot(listener)

    @property
    def resends_trimmed(self) -> int:
        """AppendEntries this follower trimmed because it already held their entries."""
        sync = self._sync
        return sync.resends_trimmed if sync is not None else 0

    def is_leader(self) -> bool:
        """True when this node currently believes it leads (may be briefly stale)."""
        sync = self._sync
        return sync is not None and is_leader(sync)

    def quorum_refusal(self, *, proposing: bool = False) -> NoQuorumError | None:
        """The error a write gets while this node has no contact with a quorum, else
        None; a clock read and a comparison (:class:`~raftstore.raft.status.QuorumContact`;
        ``proposing``: the write is about to be proposed)."""
        return self._quorum.refusal(time.monotonic(), proposing=proposing)

    def leadership(self) -> tuple[str | None, int]:
        """(leader address, term) as last observed; refreshed every 50 ms, costs no digest."""
        view = self._view
        return view.leader, view.term

    def members(self) -> tuple[str, ...]:
        """Raft addresses of the current configuration, self included."""
        return self._view.members or tuple(sorted([self.self_addr, *self._peers]))

    def digest_checkpoints(self) -> dict[int, str]:
        """Digest of the state at the log indexes ``checkpoint_due`` picks
        (bounded): compare across nodes to detect divergence while running."""
        return self._applied.digest_checkpoints()

    def status(self) -> RaftStatus:
        """This node's replication state (Raft fields refreshed every 50 ms)."""
        sync = self._sync
        view = self._view
        state = self._applied
        with state.lock:
            raft_applied = sync.raftLastApplied if sync is not None else 0
            applied = max(int(raft_applied), state.last_command_index)
            applied_version = state.table.applied_version
            # The copy under the lock, the hashing after it (two thirds of the cost).
            document = state.table.state_document()
        digests = snapshot.digests_of(document)
        port, accept_pauses, port_alarms = raft_port(sync, self.self_addr)
        now_s = time.monotonic()
        contact = sync is not None and self._quorum.has_contact(now_s)
        silence_s = self._quorum.silence_s(now_s)
        quorum_alarms = () if sync is None else self._quorum.alarms(now_s)
        return RaftStatus(
            node_id=self.node_id,
            mode=self.mode,
            state=view.state if sync is not None else "stopped",
            leader=view.leader,
            term=view.term,
            commit_index=max(view.commit_index, applied),
            applied_index=applied,
            log_length=view.log_length,
            has_quorum=view.has_quorum and contact,
            applied_version=applied_version,
            digest=digests.full,
            view_digest=digests.client_view,
            live_brokers=digests.live_brokers,
            peers=view.peers,
            self_addr=self.self_addr,
            members=self.members(),
            ready=view.ready,
            membership_pending=self._membership.pending,
            alarms=(*self._alarms.current(), *port_alarms, *quorum_alarms),
            resends_trimmed=self.resends_trimmed,
            tick_gap_max_ms=round(self._tick_gaps.max_s * 1000.0, 1),
            long_tick_gaps=self._tick_gaps.long_gaps,
            apply_slices_cut=0 if self._sync is None else self._sync.apply_slices_cut,
            raft_port=port,
            raft_accept_pauses=accept_pauses,
            quorum_contact=contact,
            quorum_silence_ms=None if silence_s is None else round(silence_s * 1000.0, 1),
        )

    # -------------------------------------------------------------- membership

    async def add_node(self, addr: str) -> None:
        """Add one Raft member (start it first with the current members as peers)."""
        await self._membership.add(addr, self.members(), self._view.has_quorum)

    async def remove_node(self, addr: str) -> None:
        """Remove one Raft member (not this node: ask another member)."""
        await self._membership.remove(addr, self.members())

    def _require_started(self) -> RouteLog:
        if self._sync is None:
            raise ReplicationError(f"{self.node_id}: replicator not started")
        return self._sync
