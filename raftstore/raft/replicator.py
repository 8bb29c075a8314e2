"""Raft mode: a :class:`Replicator` backed by one PySyncObj node (the proposal/apply core).

The PySyncObj object (:class:`~raftstore.raft.glue.RouteLog`) has exactly one replicated method,
``apply_entry(entry: bytes)``, a one-line delegation to the owning
:class:`RaftReplicator`, which decodes the entry with :mod:`raftstore.raft.codec`
and applies it to the :class:`RouteTable`. Everything PySyncObj does runs on its
own tick thread; the asyncio side only submits entries and awaits futures.

Rules this module implements (the why is in ``docs/RAFT.md``):

* ``propose`` correlates by a unique proposal id carried in the entry, retries
  on every PySyncObj failure until ``propose_timeout_s``, and the apply side drops
  a second copy of an id it already applied (a bounded, replicated window), so a
  retry after an ambiguous failure never applies a command twice.
* Group commit: proposals queue on the event loop; while a node has
  ``max_batches_in_flight`` entries in flight, the rest wait and then leave
  together as one batch entry, applied in order with each sub-result routed to
  its own caller. PySyncObj sends each entry as soon as it is queued.
* A proposal is reported only after this node's journal is flushed (one msync per
  tick serves every proposal applied in that tick); followers flush before they
  acknowledge entries, and term/vote metadata is fsynced before votes go out.
* Snapshots are the route table's own codec plus the few Raft fields PySyncObj
  needs, never a pickle of the object.

Why one module of ~800 lines: :class:`RaftReplicator` is one object whose proposal
side (event loop) and apply side (PySyncObj's tick thread) share the waiters, the
dedupe window and one lock; split across modules, each half would reach into the
other's private state.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import secrets
import struct
import threading
import time
import weakref
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pysyncobj.config import FAIL_REASON

from raftstore import snapshot
from raftstore.commands import Barrier, Command, ExpireBrokers
from raftstore.raft.codec import (
    BATCH_OVERHEAD_BYTES,
    BATCH_PART_BYTES,
    CodecError,
    LogEntry,
    decode_entries,
    encode_batch,
    encode_entry,
)
from raftstore.raft.glue import (
    ALARMS,
    DIAL,
    FAIL_NAMES,
    STATE_NAMES,
    DialNode,
    Durability,
    RouteLog,
    SnapshotHooks,
    is_leader,
    journal_of,
    raft_port,
)
from raftstore.raft.settings import (
    ALARMS_KEPT,
    BATCH_ANSWER_TIMEOUT_S,
    CHECKPOINTS_KEPT,
    DEDUPE_WINDOW_ENTRIES,
    DEFAULT_PROPOSE_TIMEOUT_S,
    DEFAULT_READY_TIMEOUT_S,
    DEFAULT_SKEW_ALLOWANCE_MS,
    RETRY_BACKOFF_S,
    SNAPSHOT_MAGIC,
    START_REPLAY_TIMEOUT_S,
    STATUS_REFRESH_S,
    RaftSettings,
    checkpoint_due,
)
from raftstore.raft.transport import PORT_LISTENING, conf_security
from raftstore.replicator import (
    MODE_RAFT,
    ApplyListener,
    NoQuorumError,
    PeerStatus,
    ReplicationError,
    Replicator,
    ReplicatorStatus,
)
from raftstore.results import ApplyResult
from raftstore.route_table import RouteTable

T = TypeVar("T")

logger = logging.getLogger("raftstore.raft")


class MembershipError(ReplicationError):
    """A membership change was refused (unsafe now) or failed."""


@dataclass(frozen=True, slots=True)
class RaftStatus(ReplicatorStatus):
    """:class:`ReplicatorStatus` plus what only raft mode knows."""

    self_addr: str = ""
    members: tuple[str, ...] = ()
    ready: bool = False
    membership_pending: bool = False
    alarms: tuple[str, ...] = ()
    resends_trimmed: int = 0
    tick_gap_max_ms: float = 0.0
    """The longest time between two ends of PySyncObj ticks since start: heartbeats
    leave from ticks, so gaps near the election timeout cost elections."""
    long_tick_gaps: int = 0
    """Gaps between ticks longer than :data:`LONG_TICK_GAP_S`."""
    apply_slices_cut: int = 0
    """Ticks that left committed entries for the next one (``apply_slice_s``)."""
    raft_port: str = PORT_LISTENING
    """This node's Raft port: ``listening``, ``paused`` (bound, accepting again after a
    short pause: the process ran out of descriptors) or ``not listening`` (peers cannot
    connect; the node binds it again every ``bind_retry_s``). Alarmed unless listening."""
    raft_accept_pauses: int = 0
    """Times the Raft port stopped accepting for a while after a failed accept."""


LONG_TICK_GAP_S = 0.25
"""Tick gaps longer than this are counted: near half the shortest election timeout
(0.6 s), a follower is close to starting an election."""

LINGER_BATCH_COMMANDS = 32
"""Proposals that may linger stop waiting for company once this many are queued."""

# ------------------------------------------------------------------ replicator


@dataclass(slots=True, eq=False)
class _Proposal:
    """One command waiting for its batch: the command, its entry bytes, its caller's
    future and the loop time at which the caller stops waiting."""

    proposal_id: str
    command: Command
    entry: bytes
    future: asyncio.Future[ApplyResult]
    deadline: float
    last_failure: str = "none"
    abandoned: bool = False
    linger_until: float = 0.0
    """Loop time until which it may wait for company in its batch (0: none)."""

    @property
    def waiting(self) -> bool:
        """Its caller still waits for an answer."""
        return not (self.abandoned or self.future.done())


@dataclass(slots=True, eq=False)
class _Batch:
    """Proposals submitted together as one log entry (``data``); in flight while it is
    in ``RaftReplicator._in_flight``."""

    proposals: list[_Proposal]
    data: bytes
    timer: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class _BarrierGroup:
    future: asyncio.Future[None]


@dataclass(slots=True)
class _RaftView:
    """What the tick thread last read from PySyncObj's getStatus()."""

    state: str = "follower"
    leader: str | None = None
    term: int = 0
    commit_index: int = 0
    log_length: int = 0
    has_quorum: bool = False
    peers: tuple[PeerStatus, ...] = ()
    members: tuple[str, ...] = ()
    ready: bool = False
    at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


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
        self._propose_timeout_s = propose_timeout_s
        self._ready_timeout_s = ready_timeout_s
        DIAL.update(dial or {})
        self._table_factory = table_factory
        self._table = table_factory()
        self._lock = threading.RLock()
        self._listeners: list[ApplyListener] = []
        self._snapshot_listeners: list[Callable[[int], None]] = []
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._last_command_index = 0
        self._checkpoints: OrderedDict[int, str] = OrderedDict()
        self._alarms: list[str] = []
        self._waiters: dict[str, asyncio.Future[ApplyResult]] = {}
        self._queue: deque[_Proposal] = deque()
        # Every proposal still (possibly) waiting, oldest first: deadlines come in
        # this order, so one timer at the head's deadline expires them all.
        self._pending: deque[_Proposal] = deque()
        self._expiry: asyncio.TimerHandle | None = None
        # Entries this node proposed and has not yet applied, by their bytes: apply
        # uses the proposer's own commands instead of decoding, and frees the
        # batch's in-flight slot with the same hand-over (see _apply_entry).
        self._own_entries: dict[bytes, tuple[_Batch, list[LogEntry]]] = {}
        self._in_flight: set[_Batch] = set()
        self._flush_scheduled = False
        self._linger_timer: asyncio.TimerHandle | None = None
        self.batches_submitted = 0
        self._ids = itertools.count(1)
        self._boot = secrets.token_hex(4)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sync: RouteLog | None = None
        self._durability = Durability(self._data_dir / "raft.journal", self._settings.fsync)
        self._view = _RaftView()
        self._barrier_next: _BarrierGroup | None = None
        self._barrier_task: asyncio.Task[None] | None = None
        self._membership_pending = False
        self._tick_registered = False
        self._last_tick_s = 0.0
        self.tick_gap_max_s = 0.0
        self.long_tick_gaps = 0
        self.applied_entries = 0

    # -------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Bind the Raft port, load snapshot + journal and replay the committed log."""
        self._loop = asyncio.get_running_loop()
        self._data_dir.mkdir(parents=True, exist_ok=True)
        conf = self._settings.to_conf(
            self._data_dir / "raft.journal",
            self._data_dir / "raft.snapshot",
            SnapshotHooks(self),
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
            self,
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
        for waiter in list(self._waiters.values()):
            if not waiter.done():
                waiter.set_exception(ReplicationError(f"{self.node_id} stopped"))
        self._waiters.clear()
        self._queue.clear()
        self._pending.clear()
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None
        self._own_entries.clear()
        for batch in self._in_flight:
            if batch.timer is not None:
                batch.timer.cancel()
        self._in_flight.clear()
        if self._barrier_task is not None:
            self._barrier_task.cancel()
            self._barrier_task = None
        if self._barrier_next is not None:
            self._barrier_next.future.set_exception(ReplicationError(f"{self.node_id} stopped"))
            self._barrier_next = None

    # -------------------------------------------------------------- writes

    async def propose(self, command: Command, *, linger: bool = False) -> ApplyResult:
        """Commit ``command`` and return its result once applied on this node.

        The command joins the next group-commit batch (see :meth:`_flush`); its
        answer is its own sub-result of that batch. ``linger``: it may wait up to
        ``RaftSettings.linger_s`` for other proposals to share its log entry.
        """
        self._require_started()
        loop = self._loop_for_proposals()
        proposal_id = f"{self.node_id}/{self._boot}/{next(self._ids)}"
        entry = encode_entry(proposal_id, command)
        if len(entry) >= self._settings.max_entry_bytes() - BATCH_OVERHEAD_BYTES:
            raise ReplicationError(f"{type(command).__name__} too large: {len(entry)} bytes")
        applied: asyncio.Future[ApplyResult] = loop.create_future()
        now = loop.time()
        proposal = _Proposal(proposal_id, command, entry, applied, now + self._propose_timeout_s)
        if linger and self._settings.linger_s > 0:
            proposal.linger_until = now + self._settings.linger_s
        self._waiters[proposal_id] = applied
        self._queue.append(proposal)
        self._await_deadline(proposal)
        self._kick()
        try:
            return await applied
        finally:
            proposal.abandoned = True
            self._waiters.pop(proposal_id, None)

    def _loop_for_proposals(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            raise ReplicationError(f"{self.node_id}: propose from a foreign event loop")
        return loop

    def _await_deadline(self, proposal: _Proposal) -> None:
        """Track ``proposal`` for expiry. One timer serves every pending proposal:
        it fires at the oldest one's deadline (all share the same timeout, so
        deadlines are in proposal order), much cheaper than a timer per proposal."""
        pending = self._pending
        while pending and not pending[0].waiting:
            pending.popleft()
        pending.append(proposal)
        if self._expiry is None and self._loop is not None:
            self._expiry = self._loop.call_at(pending[0].deadline, self._expire_due)

    def _expire_due(self) -> None:
        """Fail every proposal whose deadline has passed; re-arm for the next one."""
        self._expiry = None
        loop = self._loop
        if loop is None:
            return
        pending, now = self._pending, loop.time()
        while pending:
            head = pending[0]
            if head.waiting:
                if head.deadline > now:
                    self._expiry = loop.call_at(head.deadline, self._expire_due)
                    return
                head.future.set_exception(
                    self._no_quorum(type(head.command).__name__, head.last_failure)
                )
            pending.popleft()

    def _kick(self) -> None:
        """Form a batch on the next loop iteration: everything proposed in this
        iteration (and while earlier batches are in flight) travels together."""
        if not self._flush_scheduled and self._loop is not None:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Group commit: while fewer than ``max_batches_in_flight`` batches are in
        flight, submit the queued proposals as one log entry (a batch entry when
        there are several, the plain entry when there is one). While every queued
        proposal may linger and their time has not run out, nothing leaves yet."""
        self._flush_scheduled = False
        if self._lingering():
            return
        sync = self._sync
        settings = self._settings
        limit_bytes = min(settings.max_entry_bytes(), settings.max_batch_bytes)
        while self._queue and len(self._in_flight) < settings.max_batches_in_flight:
            picked: list[_Proposal] = []
            size = BATCH_OVERHEAD_BYTES
            while self._queue and len(picked) < settings.max_batch_commands:
                head = self._queue[0]
                if not head.waiting:
                    self._queue.popleft()
                    continue
                if picked and size + len(head.entry) + BATCH_PART_BYTES >= limit_bytes:
                    break
                picked.append(self._queue.popleft())
                size += len(head.entry) + BATCH_PART_BYTES
            if not picked:
                break
            if sync is None:
                for proposal in picked:
                    if not proposal.future.done():
                        proposal.future.set_exception(ReplicationError(f"{self.node_id} stopped"))
                continue
            self._submit(sync, picked)

    def _lingering(self) -> bool:
        """Whether the queue waits for company: a few proposals, all of them willing
        to wait, less than a full entry's bytes, the oldest one's linger not over.
        Arms one timer for when it is."""
        queue, loop = self._queue, self._loop
        if not queue or len(queue) >= LINGER_BATCH_COMMANDS or loop is None:
            return False
        until = 0.0
        size = BATCH_OVERHEAD_BYTES
        for proposal in queue:
            if proposal.waiting:
                if not proposal.linger_until:
                    return False
                until = until or proposal.linger_until
                size += len(proposal.entry) + BATCH_PART_BYTES
        if until <= loop.time() or size >= self._settings.max_batch_bytes:
            return False
        if self._linger_timer is None:
            self._linger_timer = loop.call_at(until, self._linger_over)
        return True

    def _linger_over(self) -> None:
        self._linger_timer = None
        self._flush()

    def _submit(self, sync: RouteLog, picked: list[_Proposal]) -> None:
        loop = self._loop
        assert loop is not None
        data = picked[0].entry if len(picked) == 1 else encode_batch([p.entry for p in picked])
        batch = _Batch(picked, data)
        self._own_entries[data] = (batch, [LogEntry(p.proposal_id, p.command) for p in picked])
        self._in_flight.add(batch)
        batch.timer = loop.call_later(
            BATCH_ANSWER_TIMEOUT_S, self._batch_done, batch, FAIL_REASON.UNKNOWN_OUTCOME
        )

        def on_result(_result: object, error: int) -> None:
            # Runs on the tick thread, right after the entry applied. Success needs
            # nothing more: the apply already handed the answers and the in-flight
            # slot to the loop, in one wake-up.
            if error != FAIL_REASON.SUCCESS:
                loop.call_soon_threadsafe(self._batch_done, batch, error)

        self.batches_submitted += 1
        sync.apply_entry(data, callback=on_result)

    def _batch_done(self, batch: _Batch, error: int) -> None:
        if batch not in self._in_flight:
            return  # already answered (or the node stopped)
        self._in_flight.discard(batch)
        if batch.timer is not None:
            batch.timer.cancel()
        # Applied by now if it succeeded; otherwise a late apply decodes the bytes.
        self._own_entries.pop(batch.data, None)
        if error != FAIL_REASON.SUCCESS:
            # Retry what is still waiting, after a pause; a copy that did commit
            # after all is dropped at apply by its proposal id.
            reason = FAIL_NAMES.get(error, str(error))
            for proposal in batch.proposals:
                proposal.last_failure = reason
            if self._loop is not None:
                self._loop.call_later(RETRY_BACKOFF_S, self._requeue, batch.proposals)
        self._kick()

    def _requeue(self, proposals: list[_Proposal]) -> None:
        live = [p for p in proposals if p.waiting]
        if live:
            self._queue.extendleft(reversed(live))
            self._kick()

    def _no_quorum(self, command_name: str, last_failure: str) -> NoQuorumError:
        view = self._view
        return NoQuorumError(
            f"no quorum: {command_name} was not applied on {self.node_id} within "
            f"{self._propose_timeout_s:.1f} s (state={view.state}, leader={view.leader}, "
            f"has_quorum={view.has_quorum}, last failure={last_failure}); it may still "
            f"apply later if a leader accepted it"
        )

    async def barrier(self) -> None:
        """Commit a no-op through the leader; return once it is applied here.

        Calls that arrive while a barrier is in flight share the next one.
        """
        self._require_started()
        if self._barrier_next is None:
            self._barrier_next = _BarrierGroup(asyncio.get_running_loop().create_future())
        group = self._barrier_next
        if self._barrier_task is None or self._barrier_task.done():
            self._barrier_task = asyncio.get_running_loop().create_task(self._run_barriers())
        await asyncio.shield(group.future)

    async def _run_barriers(self) -> None:
        while self._barrier_next is not None:
            group, self._barrier_next = self._barrier_next, None
            try:
                await self.propose(Barrier())
            except asyncio.CancelledError:
                group.future.set_exception(ReplicationError(f"{self.node_id} stopped"))
                raise
            except Exception as exc:
                group.future.set_exception(exc)
            else:
                group.future.set_result(None)

    # -------------------------------------------------------------- apply (tick thread)

    def _apply_entry(self, entry: bytes, index: int) -> bool:
        """Apply ``entry`` (log index ``index``); True when this node proposed it."""
        own = self._own_entries.pop(entry, None)
        batch, decoded = (None, None) if own is None else own
        if decoded is None or self._settings.verify_own_entries:
            decoded = self._decode(entry, index, decoded)
        ready: list[tuple[str, ApplyResult | BaseException]] = []
        waiters = self._waiters
        lock = self._lock
        sync = self._sync
        for part in decoded:
            if sync is not None:
                # A batch can take long to apply on a busy machine: keep leading.
                sync.heartbeat_if_due()
            # A batch applies its commands in order, each with the time its
            # proposer stamped: the same on every node. The lock is taken per
            # command, not per batch: readers (route misses, touches, status) wait
            # for one command at most, never for a whole batch of registrations,
            # and every state they see is a committed prefix of the log.
            with lock:
                if part.proposal_id in self._seen:
                    continue
                self._remember(part.proposal_id)
                outcome: ApplyResult | BaseException
                try:
                    outcome = self._table.apply(part.command)
                except Exception as exc:
                    # Deterministic: every node raises on the same command and skips it.
                    logger.exception("apply failed at %d", index)
                    outcome = ReplicationError(f"apply failed: {exc}")
                self.applied_entries += 1
                if isinstance(outcome, ApplyResult):
                    self._notify(part.command, outcome)
            if part.proposal_id in waiters:
                ready.append((part.proposal_id, outcome))
        with lock:
            self._last_command_index = index
            if checkpoint_due(index, self._table.queue_row_count):
                self._checkpoint(index)
        if ready or batch is not None:
            # Handed over at once, before PySyncObj sends the next AppendEntries
            # round: the entry is durable here (RouteLog._onTick flushed the
            # journal before this tick counted or learnt the commit) and on a
            # majority, so nothing is answered early.
            loop = self._loop
            if loop is not None:
                loop.call_soon_threadsafe(self._settle, ready, batch)
        return own is not None

    def _decode(self, entry: bytes, index: int, own: list[LogEntry] | None) -> list[LogEntry]:
        """The commands of ``entry``, decoded. With ``own`` (the proposer's objects,
        checked under ``verify_own_entries``), a difference raises an alarm and the
        decoded commands win, as every other node applies those."""
        try:
            decoded = decode_entries(entry)
        except CodecError as exc:
            # Skipping would diverge from nodes that can decode it: halt instead
            # (PySyncObj retries the entry on every tick until upgraded).
            self._raise_alarm(f"undecodable entry at {index}: {exc}")
            raise
        if own is not None and own != decoded:
            self._raise_alarm(f"entry at {index} differs from the commands it was made from")
        return decoded

    def _remember(self, proposal_id: str) -> None:
        self._seen[proposal_id] = None
        while len(self._seen) > DEDUPE_WINDOW_ENTRIES:
            self._seen.popitem(last=False)

    def _checkpoint(self, index: int) -> None:
        self._checkpoints[index] = self._table.digest()
        while len(self._checkpoints) > CHECKPOINTS_KEPT:
            self._checkpoints.popitem(last=False)

    def _notify(self, command: Command, result: ApplyResult) -> None:
        for listener in self._listeners:
            try:
                listener(command, result)
            except Exception:
                # A listener must never stop the log: PySyncObj would re-apply.
                logger.exception("apply listener failed on %s", self.node_id)

    def _on_tick(self) -> None:
        """Tick-thread callback: the leader's flush of what it just sent, tick-gap
        accounting and the status view."""
        now_s = time.monotonic()
        if not self._tick_registered:
            ALARMS.by_thread[threading.get_ident()] = weakref.ref(self)
            self._tick_registered = True
        else:
            gap_s = now_s - self._last_tick_s
            if gap_s > self.tick_gap_max_s:
                self.tick_gap_max_s = gap_s
            if gap_s > LONG_TICK_GAP_S:
                self.long_tick_gaps += 1
        self._last_tick_s = now_s
        # The leader's flush of the entries it just sent (they are on their way to
        # the followers meanwhile). A no-op when nothing changed.
        self._durability.flush_journal()
        sync = self._sync
        if sync is not None:
            sync.release_commit_notice()
        if time.monotonic() - self._view.at >= STATUS_REFRESH_S:
            self._refresh_view()

    def _settle(
        self, ready: list[tuple[str, ApplyResult | BaseException]], batch: _Batch | None
    ) -> None:
        """Event loop: answer the proposals of an applied entry and, when it was this
        node's own, free its in-flight slot (the next batch may leave)."""
        for proposal_id, outcome in ready:
            waiter = self._waiters.get(proposal_id)
            if waiter is None or waiter.done():
                continue
            if isinstance(outcome, BaseException):
                waiter.set_exception(outcome)
            else:
                waiter.set_result(outcome)
        if batch is not None:
            self._batch_done(batch, FAIL_REASON.SUCCESS)

    def _refresh_view(self) -> None:
        sync = self._sync
        if sync is None:
            return
        raw = sync.getStatus()
        others = sorted(node.id for node in sync.otherNodes)
        peers = tuple(
            PeerStatus(
                address=addr,
                connected=raw.get(f"partner_node_status_server_{addr}") == 2,
                match_index=int(raw.get(f"match_idx_server_{addr}", -1)),
                next_index=int(raw.get(f"next_node_idx_server_{addr}", -1)),
            )
            for addr in others
        )
        leader = raw.get("leader")
        term = int(raw["raft_term"])
        if term != self._view.term and self._view.term:
            # An election: worth a line, with what the tick thread went through.
            logger.warning(
                "raft term %d -> %d on %s (%s, leader %s); longest tick gap so far %.0f ms",
                self._view.term,
                term,
                self.node_id,
                STATE_NAMES.get(raw["state"], raw["state"]),
                leader and leader.id,
                self.tick_gap_max_s * 1000.0,
            )
        self._view = _RaftView(
            state=STATE_NAMES.get(raw["state"], str(raw["state"])),
            leader=None if leader is None else str(leader.id),
            term=term,
            commit_index=int(raw["commit_idx"]),
            log_length=int(raw["log_len"]),
            has_quorum=bool(raw["has_quorum"]),
            peers=peers,
            members=tuple(sorted([self.self_addr, *others])),
            ready=bool(sync.isReady()),
            at=time.monotonic(),
        )

    def _raise_alarm(self, message: str) -> None:
        logger.error("raft safety alarm on %s: %s", self.node_id, message)
        with self._lock:
            self._alarms.append(message)
            del self._alarms[:-ALARMS_KEPT]

    # -------------------------------------------------------------- snapshots

    def _write_snapshot(self, path: Path, last: Any, prev: Any, cluster: list[str]) -> None:
        with self._lock:
            table_bytes = self._table.snapshot()
            header = {
                "v": 1,
                "index": self._last_command_index,
                "last": [bytes(last[0]).hex(), last[1], last[2]],
                "prev": [bytes(prev[0]).hex(), prev[1], prev[2]],
                "cluster": sorted(cluster),
                "seen": list(self._seen),
                "table_crc": zlib.crc32(table_bytes),
            }
        head = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
        with path.open("wb") as out:
            out.write(SNAPSHOT_MAGIC + struct.pack(">I", len(head)) + head + table_bytes)
            out.flush()
            if self._settings.fsync:
                os.fsync(out.fileno())
        # PySyncObj renames it into place next; the next journal flush syncs the dir.
        self._durability.dir_dirty = True

    def _read_snapshot(self, path: Path) -> tuple[Any, Any, list[Any]]:
        data = path.read_bytes()
        if not data.startswith(SNAPSHOT_MAGIC):
            raise ReplicationError(f"{path} is not a route snapshot")
        offset = len(SNAPSHOT_MAGIC)
        (head_len,) = struct.unpack(">I", data[offset : offset + 4])
        header = json.loads(data[offset + 4 : offset + 4 + head_len])
        table_bytes = data[offset + 4 + head_len :]
        if header.get("v") != 1 or zlib.crc32(table_bytes) != header["table_crc"]:
            raise ReplicationError(f"{path}: unsupported or corrupt snapshot")
        table = self._table_factory.restore(table_bytes)
        last = (bytes.fromhex(header["last"][0]), header["last"][1], header["last"][2])
        prev = (bytes.fromhex(header["prev"][0]), header["prev"][1], header["prev"][2])
        with self._lock:
            self._table = table
            self._seen = OrderedDict((pid, None) for pid in header["seen"])
            self._last_command_index = max(int(header["index"]), last[1])
            index = self._last_command_index
        for listener in self._snapshot_listeners:
            listener(index)
        return last, prev, [DialNode(addr) for addr in header["cluster"]]

    def force_snapshot(self) -> None:
        """Ask PySyncObj to compact the log at its next tick (tests, operators)."""
        self._require_started().forceLogCompaction()

    # -------------------------------------------------------------- reads

    def read(self, reader: Callable[[RouteTable], T]) -> T:
        """Run ``reader`` against the applied state under the apply lock."""
        with self._lock:
            return reader(self._table)

    def subscribe(self, listener: ApplyListener) -> None:
        """Call ``listener(command, result)`` on the apply thread after each apply."""
        with self._lock:
            self._listeners.append(listener)

    def subscribe_snapshot(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(applied_index)`` when a snapshot replaced the whole table
        (restart or install from the leader): projections must rebuild."""
        with self._lock:
            self._snapshot_listeners.append(listener)

    @property
    def resends_trimmed(self) -> int:
        """AppendEntries this follower trimmed because it already held their entries."""
        sync = self._sync
        return sync.resends_trimmed if sync is not None else 0

    def is_leader(self) -> bool:
        """True when this node currently believes it leads (may be briefly stale)."""
        sync = self._sync
        return sync is not None and is_leader(sync)

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
        with self._lock:
            return dict(self._checkpoints)

    def status(self) -> RaftStatus:
        """This node's replication state (Raft fields refreshed every 50 ms)."""
        sync = self._sync
        view = self._view
        with self._lock:
            raft_applied = sync.raftLastApplied if sync is not None else 0
            applied = max(int(raft_applied), self._last_command_index)
            applied_version = self._table.applied_version
            # The copy under the lock, the hashing after it (two thirds of the cost).
            document = self._table.state_document()
        digests = snapshot.digests_of(document)
        port, accept_pauses, port_alarms = raft_port(sync, self.self_addr)
        return RaftStatus(
            node_id=self.node_id,
            mode=self.mode,
            state=view.state if sync is not None else "stopped",
            leader=view.leader,
            term=view.term,
            commit_index=max(view.commit_index, applied),
            applied_index=applied,
            log_length=view.log_length,
            has_quorum=view.has_quorum,
            applied_version=applied_version,
            digest=digests.full,
            view_digest=digests.client_view,
            live_brokers=digests.live_brokers,
            peers=view.peers,
            self_addr=self.self_addr,
            members=self.members(),
            ready=view.ready,
            membership_pending=self._membership_pending,
            alarms=(*self._alarms, *port_alarms),
            resends_trimmed=self.resends_trimmed,
            tick_gap_max_ms=round(self.tick_gap_max_s * 1000.0, 1),
            long_tick_gaps=self.long_tick_gaps,
            apply_slices_cut=0 if self._sync is None else self._sync.apply_slices_cut,
            raft_port=port,
            raft_accept_pauses=accept_pauses,
        )

    # -------------------------------------------------------------- membership

    async def add_node(self, addr: str) -> None:
        """Add one Raft member (start it first with the current members as peers)."""
        if addr in self.members():
            raise MembershipError(f"{addr} is already a member")
        if not self._view.has_quorum:
            raise MembershipError("refusing to add a member without quorum")
        await self._change_membership("add", addr)

    async def remove_node(self, addr: str) -> None:
        """Remove one Raft member (not this node: ask another member)."""
        members = self.members()
        if addr not in members:
            raise MembershipError(f"{addr} is not a member")
        if addr == self.self_addr:
            raise MembershipError("a node does not remove itself; ask another member")
        if len(members) - 1 < 1:
            raise MembershipError("refusing to shrink the cluster below one member")
        await self._change_membership("remove", addr)

    async def _change_membership(self, action: str, addr: str) -> None:
        sync = self._require_started()
        if self._membership_pending:
            raise MembershipError("another membership change is pending")
        self._membership_pending = True
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()

        def on_result(_result: object, error: int) -> None:
            loop.call_soon_threadsafe(_set_if_pending, done, error)

        try:
            if action == "add":
                sync.addNodeToCluster(addr, callback=on_result)
            else:
                sync.removeNodeFromCluster(addr, callback=on_result)
            try:
                error = await asyncio.wait_for(done, self._propose_timeout_s)
            except TimeoutError as exc:
                raise NoQuorumError(f"membership change {action} {addr} not committed") from exc
            if error != FAIL_REASON.SUCCESS:
                raise MembershipError(
                    f"{action} {addr} refused: {FAIL_NAMES.get(error, error)} (a change may "
                    f"be pending on the leader, or its first entry is not committed yet)"
                )
        finally:
            self._membership_pending = False

    # -------------------------------------------------------------- helpers

    def _require_started(self) -> RouteLog:
        if self._sync is None:
            raise ReplicationError(f"{self.node_id}: replicator not started")
        return self._sync


def _set_if_pending(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


# ------------------------------------------------------------------ liveness helpers


def find_divergence(checkpoints: Mapping[str, Mapping[int, str]]) -> list[str]:
    """Every log index at which two nodes' digests differ, as readable lines."""
    by_index: dict[int, dict[str, str]] = {}
    for node, points in checkpoints.items():
        for index, digest in points.items():
            by_index.setdefault(index, {})[node] = digest
    return [
        f"index {index}: {sorted(digests.items())}"
        for index, digests in sorted(by_index.items())
        if len(set(digests.values())) > 1
    ]


async def scan_liveness(
    replicator: Replicator, now_ms: int, skew_allowance_ms: int = DEFAULT_SKEW_ALLOWANCE_MS
) -> ApplyResult | None:
    """The periodic scan: in raft mode only the leader proposes one ExpireBrokers;
    followers skip (None). In eventual mode every node expires its own table."""
    if isinstance(replicator, RaftReplicator) and not replicator.is_leader():
        return None
    skew = skew_allowance_ms if replicator.mode == MODE_RAFT else 0
    return await replicator.propose(ExpireBrokers(now_ms=now_ms, skew_allowance_ms=skew))
