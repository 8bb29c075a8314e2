"""The apply side of a raft node: the route table and what travels with it.

:class:`AppliedState` holds the table, the replicated dedupe window of proposal ids,
the last applied index and the digest checkpoints, all under one lock. Its
:meth:`~AppliedState.apply` runs on PySyncObj's tick thread, in log order, and reads
no clock, randomness or environment: every node applies the same entries to the
same state. Readers take the same lock (one command at a time, never a whole batch).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Container, Iterable
from typing import TypeVar

from raftstore.commands import Command
from raftstore.raft.checkpoints import Checkpoints, checkpoint_due
from raftstore.raft.codec import CodecError, LogEntry, decode_entries
from raftstore.replicator import ApplyListener, ReplicationError
from raftstore.results import ApplyResult
from raftstore.route_table import RouteTable

T = TypeVar("T")

logger = logging.getLogger("raftstore.raft")

DEDUPE_WINDOW_ENTRIES = 8192
ENTRY_BOUNDARY_POLL_S = 0.0005
"""How long :meth:`AppliedState.read_whole` lets the apply go on before it looks again."""

Outcome = ApplyResult | BaseException
Ready = list[tuple[str, Outcome]]
"""The answers of one applied entry for the proposals waiting on this node."""


class AppliedState:
    """One node's applied state: the table, the dedupe window, the applied index and
    the checkpoints, with the listeners told of each apply."""

    def __init__(
        self,
        node_id: str,
        table_factory: type[RouteTable],
        *,
        verify_own_entries: bool,
        raise_alarm: Callable[[str], None],
    ) -> None:
        self.node_id = node_id
        self.table_factory = table_factory
        self.table = table_factory()
        self.lock = threading.RLock()
        self.last_command_index = 0
        self.applied_entries = 0
        self.entry_open = False
        """True between an entry's first command and its end (under the lock): a reader
        that needs a state at an entry boundary (:meth:`read_whole`) waits it out."""
        self._verify_own_entries = verify_own_entries
        self._raise_alarm = raise_alarm
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._checkpoints = Checkpoints()
        self._listeners: list[ApplyListener] = []
        self._snapshot_listeners: list[Callable[[int], None]] = []

    # -------------------------------------------------------------- apply (tick thread)

    def apply(
        self,
        entry: bytes,
        index: int,
        term: int,
        own: list[LogEntry] | None,
        waiters: Container[str],
        heartbeat: Callable[[], None] | None,
    ) -> Ready:
        """Apply ``entry`` (log index ``index``, term ``term``): ``own`` is the proposer's
        own commands when this node made it; the answers for ``waiters`` come back, each
        result with the entry's index and term (``ApplyResult.log_index``)."""
        decoded = own
        if decoded is None or self._verify_own_entries:
            decoded = self.decode(entry, index, decoded)
        ready: Ready = []
        lock = self.lock
        for part in decoded:
            if heartbeat is not None:
                # A batch can take long to apply on a busy machine: keep leading.
                heartbeat()
            # A batch applies its commands in order, each with the time its
            # proposer stamped: the same on every node. The lock is taken per
            # command, not per batch: readers (route misses, touches, status) wait
            # for one command at most, never for a whole batch of registrations,
            # and every state they see is a committed prefix of the log.
            with lock:
                self.entry_open = True
                if part.proposal_id in self._seen:
                    continue
                self._remember(part.proposal_id)
                outcome: Outcome
                try:
                    outcome = self.table.apply(part.command)
                except Exception as exc:
                    # Deterministic: every node raises on the same command and skips it.
                    logger.exception("apply failed at %d", index)
                    outcome = ReplicationError(f"apply failed: {exc}")
                self.applied_entries += 1
                if isinstance(outcome, ApplyResult):
                    self._notify(part.command, outcome)
            if part.proposal_id in waiters:
                if isinstance(outcome, ApplyResult):
                    outcome = dataclasses.replace(outcome, log_index=index, log_term=term)
                ready.append((part.proposal_id, outcome))
        with lock:
            self.last_command_index = index
            self.entry_open = False
            if checkpoint_due(index, self.table.queue_row_count):
                self._checkpoints.record(index, self.table.digest())
        return ready

    def decode(self, entry: bytes, index: int, own: list[LogEntry] | None) -> list[LogEntry]:
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

    def _notify(self, command: Command, result: ApplyResult) -> None:
        for listener in self._listeners:
            try:
                listener(command, result)
            except Exception:
                # A listener must never stop the log: PySyncObj would re-apply.
                logger.exception("apply listener failed on %s", self.node_id)

    # -------------------------------------------------------------- snapshots

    def capture(self) -> tuple[bytes, int, list[str]]:
        """(table snapshot bytes, applied index, dedupe window), taken together."""
        with self.lock:
            return self.table.snapshot(), self.last_command_index, list(self._seen)

    def install(self, table: RouteTable, seen: Iterable[str], index: int) -> None:
        """Replace the whole state with a snapshot's (applied up to ``index``); tell
        the snapshot listeners."""
        with self.lock:
            self.table = table
            self._seen = OrderedDict((pid, None) for pid in seen)
            self.last_command_index = index
            self.entry_open = False
        for listener in self._snapshot_listeners:
            listener(index)

    # -------------------------------------------------------------- reads

    def read(self, reader: Callable[[RouteTable], T]) -> T:
        """Run ``reader`` against the applied state under the apply lock."""
        with self.lock:
            return reader(self.table)

    def read_whole(
        self, reader: Callable[[RouteTable], T], extra: Callable[[], int], timeout_s: float
    ) -> tuple[T, int]:
        """``reader``'s result on a state at an entry boundary (every command of the
        entries up to the index applied, none of later ones), with that index: the
        larger of ``extra()`` (PySyncObj's applied count, which also counts its no-ops)
        and the last entry applied here, read under the same lock hold.

        A batch entry's commands take the lock one by one, so a reader that finds an
        entry half applied lets go and tries again; ReplicationError after ``timeout_s``
        (the clock only bounds this reader's wait: nothing applied reads it).
        """
        deadline = time.monotonic() + timeout_s
        while True:
            with self.lock:
                if not self.entry_open:
                    return reader(self.table), max(extra(), self.last_command_index)
            if time.monotonic() > deadline:
                raise ReplicationError(
                    f"{self.node_id}: no entry boundary to read at within {timeout_s:.0f} s"
                )
            time.sleep(ENTRY_BOUNDARY_POLL_S)

    def subscribe(self, listener: ApplyListener) -> None:
        """Call ``listener(command, result)`` on the apply thread after each apply."""
        with self.lock:
            self._listeners.append(listener)

    def subscribe_snapshot(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(applied_index)`` when a snapshot replaced the whole table."""
        with self.lock:
            self._snapshot_listeners.append(listener)

    def digest_checkpoints(self) -> dict[int, str]:
        """The digest checkpoints kept (see :mod:`raftstore.raft.checkpoints`)."""
        with self.lock:
            return self._checkpoints.copy()
