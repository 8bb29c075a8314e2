"""Group commit: a raft node's proposals, queued on the event loop, leave as log entries.

* While a node has ``max_batches_in_flight`` entries in flight, the proposals that
  follow wait and then leave together as one batch entry, applied in order with
  each sub-result routed to its own caller.
* A broker's proposal (made ``linger_for`` it) may wait up to
  ``RaftSettings.linger_s`` for company, unless one that may not wait joins the queue
  or it fills; and only while another broker has proposed within ``linger_s``: a
  lone broker's writes, one at a time, would wait for nobody.
* Every PySyncObj failure is retried until the caller's deadline; the apply side
  drops a second copy of a proposal id, so a retry never applies a command twice.

Everything here runs on the event loop, except that :meth:`GroupCommit.take_own` is
called from the apply (PySyncObj's tick thread) for the entry being applied.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import secrets
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from pysyncobj.config import FAIL_REASON

from raftstore.commands import Command
from raftstore.raft.applier import Ready
from raftstore.raft.codec import (
    BATCH_OVERHEAD_BYTES,
    BATCH_PART_BYTES,
    LogEntry,
    encode_batch,
    encode_entry,
)
from raftstore.raft.glue import FAIL_NAMES, RouteLog
from raftstore.raft.settings import BATCH_ANSWER_TIMEOUT_S, RETRY_BACKOFF_S, RaftSettings
from raftstore.raft.status import RaftView
from raftstore.replicator import NoQuorumError, ReplicationError
from raftstore.results import ApplyResult

LINGER_BATCH_COMMANDS = 32
"""Proposals that may linger stop waiting for company once this many are queued."""


@dataclass(slots=True, eq=False)
class Proposal:
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
class Batch:
    """Proposals submitted together as one log entry (``data``); in flight while it is
    in ``GroupCommit._in_flight``."""

    proposals: list[Proposal]
    data: bytes
    timer: asyncio.TimerHandle | None = None


class GroupCommit:
    """One node's proposal queue: batches, in-flight slots, deadlines and retries."""

    def __init__(
        self,
        node_id: str,
        settings: RaftSettings,
        propose_timeout_s: float,
        *,
        sync: Callable[[], RouteLog | None],
        view: Callable[[], RaftView],
    ) -> None:
        self._node_id = node_id
        self._settings = settings
        self._propose_timeout_s = propose_timeout_s
        self._sync = sync
        self._view = view
        self._loop: asyncio.AbstractEventLoop | None = None
        self.waiters: dict[str, asyncio.Future[ApplyResult]] = {}
        self._queue: deque[Proposal] = deque()
        # Every proposal still (possibly) waiting, oldest first: deadlines come in
        # this order, so one timer at the head's deadline expires them all.
        self._pending: deque[Proposal] = deque()
        self._expiry: asyncio.TimerHandle | None = None
        # Entries this node proposed and has not yet applied, by their bytes: apply
        # uses the proposer's own commands instead of decoding, and frees the
        # batch's in-flight slot with the same hand-over (see take_own).
        self.own_entries: dict[bytes, tuple[Batch, list[LogEntry]]] = {}
        self._in_flight: set[Batch] = set()
        self._flush_scheduled = False
        self._linger_timer: asyncio.TimerHandle | None = None
        # The two most recent distinct brokers that proposed, with the loop time.
        self._recent_sources: tuple[tuple[str, float], tuple[str, float]] = (
            ("", -math.inf),
            ("", -math.inf),
        )
        self.batches_submitted = 0
        self._ids = itertools.count(1)
        self._boot = secrets.token_hex(4)

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve proposals made on ``loop`` (the node's event loop)."""
        self._loop = loop

    async def propose(self, command: Command, linger_for: str | None) -> ApplyResult:
        """Queue ``command`` for the next batch; its answer once applied here.
        ``linger_for``: the broker whose write it is (see the module docstring)."""
        loop = self._loop_for_proposals()
        proposal_id = f"{self._node_id}/{self._boot}/{next(self._ids)}"
        entry = encode_entry(proposal_id, command)
        if len(entry) >= self._settings.max_entry_bytes() - BATCH_OVERHEAD_BYTES:
            raise ReplicationError(f"{type(command).__name__} too large: {len(entry)} bytes")
        applied: asyncio.Future[ApplyResult] = loop.create_future()
        now = loop.time()
        proposal = Proposal(proposal_id, command, entry, applied, now + self._propose_timeout_s)
        if linger_for is not None and self._company_likely(linger_for, now):
            proposal.linger_until = now + self._settings.linger_s
        self.waiters[proposal_id] = applied
        self._queue.append(proposal)
        self._await_deadline(proposal)
        self._kick()
        try:
            return await applied
        finally:
            proposal.abandoned = True
            self.waiters.pop(proposal_id, None)

    def _company_likely(self, source: str, now: float) -> bool:
        """Whether a broker other than ``source`` proposed within ``linger_s`` (only
        then may this proposal wait for company); records this one. The two most recent
        distinct brokers are enough to tell."""
        linger_s = self._settings.linger_s
        if linger_s <= 0:
            return False
        since = now - linger_s
        latest, other = self._recent_sources
        likely = any(seen != source and at >= since for seen, at in (latest, other))
        self._recent_sources = ((source, now), other if latest[0] == source else latest)
        return likely

    def _loop_for_proposals(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            raise ReplicationError(f"{self._node_id}: propose from a foreign event loop")
        return loop

    def _await_deadline(self, proposal: Proposal) -> None:
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
        sync = self._sync()
        settings = self._settings
        limit_bytes = min(settings.max_entry_bytes(), settings.max_batch_bytes)
        while self._queue and len(self._in_flight) < settings.max_batches_in_flight:
            picked: list[Proposal] = []
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
                        proposal.future.set_exception(ReplicationError(f"{self._node_id} stopped"))
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

    def _submit(self, sync: RouteLog, picked: list[Proposal]) -> None:
        loop = self._loop
        assert loop is not None
        data = picked[0].entry if len(picked) == 1 else encode_batch([p.entry for p in picked])
        batch = Batch(picked, data)
        self.own_entries[data] = (batch, [LogEntry(p.proposal_id, p.command) for p in picked])
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

    def _batch_done(self, batch: Batch, error: int) -> None:
        if batch not in self._in_flight:
            return  # already answered (or the node stopped)
        self._in_flight.discard(batch)
        if batch.timer is not None:
            batch.timer.cancel()
        # Applied by now if it succeeded; otherwise a late apply decodes the bytes.
        self.own_entries.pop(batch.data, None)
        if error != FAIL_REASON.SUCCESS:
            # Retry what is still waiting, after a pause; a copy that did commit
            # after all is dropped at apply by its proposal id.
            reason = FAIL_NAMES.get(error, str(error))
            for proposal in batch.proposals:
                proposal.last_failure = reason
            if self._loop is not None:
                self._loop.call_later(RETRY_BACKOFF_S, self._requeue, batch.proposals)
        self._kick()

    def _requeue(self, proposals: list[Proposal]) -> None:
        live = [p for p in proposals if p.waiting]
        if live:
            self._queue.extendleft(reversed(live))
            self._kick()

    def _no_quorum(self, command_name: str, last_failure: str) -> NoQuorumError:
        view = self._view()
        return NoQuorumError(
            f"no quorum: {command_name} was not applied on {self._node_id} within "
            f"{self._propose_timeout_s:.1f} s (state={view.state}, leader={view.leader}, "
            f"has_quorum={view.has_quorum}, last failure={last_failure}); it may still "
            f"apply later if a leader accepted it"
        )

    # -------------------------------------------------------------- the apply's hand-over

    def take_own(self, entry: bytes) -> tuple[Batch, list[LogEntry]] | None:
        """Tick thread: the batch and commands of ``entry`` when this node proposed it
        (and has not given up on it), else None."""
        return self.own_entries.pop(entry, None)

    def settle(self, ready: Ready, batch: Batch | None) -> None:
        """Event loop: answer the proposals of an applied entry and, when it was this
        node's own, free its in-flight slot (the next batch may leave)."""
        for proposal_id, outcome in ready:
            waiter = self.waiters.get(proposal_id)
            if waiter is None or waiter.done():
                continue
            if isinstance(outcome, BaseException):
                waiter.set_exception(outcome)
            else:
                waiter.set_result(outcome)
        if batch is not None:
            self._batch_done(batch, FAIL_REASON.SUCCESS)

    def stop(self) -> None:
        """Fail every waiting proposal (the node stopped) and drop all queued state."""
        for waiter in list(self.waiters.values()):
            if not waiter.done():
                waiter.set_exception(ReplicationError(f"{self._node_id} stopped"))
        self.waiters.clear()
        self._queue.clear()
        self._pending.clear()
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None
        self.own_entries.clear()
        for batch in self._in_flight:
            if batch.timer is not None:
                batch.timer.cancel()
        self._in_flight.clear()
