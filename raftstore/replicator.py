"""Replicators: how a node turns a proposed command into an applied one.

Services call :meth:`Replicator.propose` and never touch the route table's
write path themselves. Two implementations share one contract:

* :class:`LocalReplicator` ("eventual" mode, the original design): the command
  is applied on this node at once, on its apply thread, and nothing is sent to other
  nodes.
* ``raftstore.raft.RaftReplicator`` ("raft" mode): the command goes through a
  PySyncObj log and is applied in the same order on every node; ``propose``
  returns once it is applied on this node.

Reads run under the same lock as apply (:meth:`Replicator.read`) because in raft
mode apply happens on PySyncObj's own thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from raftstore import snapshot
from raftstore.commands import Command, RegisterBroker
from raftstore.results import ApplyResult
from raftstore.route_table import RouteTable
from raftstore.vocab import MODE_EVENTUAL as MODE_EVENTUAL, MODE_RAFT as MODE_RAFT

T = TypeVar("T")

ApplyListener = Callable[[Command, ApplyResult], None]


class ReplicationError(Exception):
    """A proposal could not be applied."""


class NoQuorumError(ReplicationError):
    """Raft mode: no quorum answered within the bounded wait; nothing was applied here."""


@dataclass(frozen=True, slots=True)
class PeerStatus:
    """What the leader knows of one peer (match index is -1 when unknown)."""

    address: str
    connected: bool
    match_index: int = -1
    next_index: int = -1


@dataclass(frozen=True, slots=True)
class ReplicatorStatus:
    """A node's replication state, as the console and the API show it."""

    node_id: str
    mode: str
    state: str
    leader: str | None
    term: int
    commit_index: int
    applied_index: int
    log_length: int
    has_quorum: bool
    applied_version: int
    digest: str
    peers: tuple[PeerStatus, ...] = field(default_factory=tuple)
    view_digest: str = ""
    """What clients can observe (see :class:`raftstore.snapshot.StateDigests`): nodes
    agree when these are equal."""
    live_brokers: tuple[str, ...] = ()
    """``cluster/addr`` of every live broker, compared apart from the digests."""


class Replicator(Protocol):
    """The contract services rely on, whatever the mode."""

    node_id: str
    mode: str

    async def start(self) -> None:
        """Start replicating (bind ports, load persisted state)."""

    async def stop(self) -> None:
        """Stop and release resources; persisted state stays on disk."""

    async def propose(self, command: Command, *, linger_for: str | None = None) -> ApplyResult:
        """Apply ``command`` (through the log in raft mode) and return its result here.

        ``linger_for``: the broker whose periodic write this is; the caller does not
        mind waiting a little for the command to share a log entry with other brokers'
        (raft mode)."""

    async def barrier(self) -> None:
        """Return once every command committed before the call is applied locally."""

    def read(self, reader: Callable[[RouteTable], T]) -> T:
        """Run ``reader`` against the applied state, excluded from concurrent apply."""

    def read_at(self, reader: Callable[[RouteTable], T]) -> tuple[T, int, int]:
        """``reader``'s result with the log index and term it was read at (one hold of
        the apply lock; may block: call it off the event loop)."""

    def seed(self, table: RouteTable) -> None:
        """Before anything is applied: start from ``table`` (a restored backup)."""

    def subscribe(self, listener: ApplyListener) -> None:
        """Call ``listener`` after each applied command, in apply order, on the apply thread."""

    def subscribe_snapshot(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(applied_index)`` whenever a snapshot replaces the whole table."""

    def status(self) -> ReplicatorStatus:
        """A snapshot of this node's replication state."""


APPLY_ON_LOOP_TOPICS_MAX = 1024
"""Eventual mode applies a proposal carrying at most this many topics on the proposer's
event loop, unless earlier ones still wait on the apply thread (order is kept). Handing
every small apply to the thread halved the registrations/s a node acknowledges (the loop
and the thread trade the interpreter lock at each hand-off; docs/BENCHMARKS.md,
"registration bodies off the event loop"), while a table of thousands of topics would
hold the loop for as long as its apply takes."""


def _topics_carried(command: Command) -> int:
    wrapper = command.topic_config_wrapper if isinstance(command, RegisterBroker) else None
    return 0 if wrapper is None else len(wrapper.topic_config_table)


class LocalReplicator:
    """Eventual mode: apply at once on this node only, exactly as the original NameServer.

    Proposals are applied in the order they were proposed: a small one on the proposer's
    event loop, a registration of more than :data:`APPLY_ON_LOOP_TOPICS_MAX` topics (and
    whatever is proposed while it waits or applies) on one apply thread, as raft mode's
    are on PySyncObj's. A table of tens of thousands of topics takes its apply a good part
    of a second, and the loop keeps answering other brokers meanwhile (the interpreter
    switches threads every few milliseconds of Python)."""

    mode = MODE_EVENTUAL

    def __init__(self, node_id: str, table: RouteTable | None = None) -> None:
        self.node_id = node_id
        self._table = table if table is not None else RouteTable()
        self._lock = threading.RLock()
        self._listeners: list[ApplyListener] = []
        self._applied_index = 0
        self._applier: concurrent.futures.ThreadPoolExecutor | None = None
        self._queued = 0
        """Proposals handed to the apply thread and not yet applied (event loop only)."""

    async def start(self) -> None:
        """Nothing to start: the table lives in memory."""

    async def stop(self) -> None:
        """Let the proposals already made apply, then end the apply thread."""
        applier, self._applier = self._applier, None
        if applier is not None:
            await asyncio.to_thread(applier.shutdown, wait=True)

    async def propose(self, command: Command, *, linger_for: str | None = None) -> ApplyResult:
        """Apply ``command`` after every command proposed before it, and notify listeners
        before returning (nothing to share a log entry with: ``linger_for`` changes
        nothing):
        here, or on the apply thread (see the class docstring)."""
        if not self._queued and _topics_carried(command) <= APPLY_ON_LOOP_TOPICS_MAX:
            return self.apply_now(command)
        if self._applier is None:
            self._applier = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"apply-{self.node_id}"
            )
        loop = asyncio.get_running_loop()
        self._queued += 1

        def apply_and_count() -> ApplyResult:
            # Counted down on the loop only once applied, even if the proposer stopped
            # waiting: until then no later proposal may apply on the loop ahead of it.
            try:
                return self.apply_now(command)
            finally:
                loop.call_soon_threadsafe(self._one_applied)

        return await loop.run_in_executor(self._applier, apply_and_count)

    def _one_applied(self) -> None:
        self._queued -= 1

    def apply_now(self, command: Command) -> ApplyResult:
        """Synchronous form of :meth:`propose`, for callers outside an event loop."""
        with self._lock:
            result = self._table.apply(command)
            self._applied_index += 1
            for listener in self._listeners:
                listener(command, result)
        return result

    async def barrier(self) -> None:
        """A single node is always up to date with itself."""

    def read(self, reader: Callable[[RouteTable], T]) -> T:
        """Run ``reader`` under the apply lock."""
        with self._lock:
            return reader(self._table)

    def read_at(self, reader: Callable[[RouteTable], T]) -> tuple[T, int, int]:
        """``reader``'s result with the commands this node applied so far and term 0,
        under one hold of the apply lock (the raft replicator's ``read_at`` shape)."""
        with self._lock:
            return reader(self._table), self._applied_index, 0

    def seed(self, table: RouteTable) -> None:
        """Before anything is proposed: ``table`` (a restored backup) replaces the empty one."""
        with self._lock:
            if self._applied_index:
                raise ReplicationError(f"{self.node_id}: a table in use cannot be seeded")
            self._table = table

    def subscribe(self, listener: ApplyListener) -> None:
        """Register ``listener`` for every later apply."""
        with self._lock:
            self._listeners.append(listener)

    def subscribe_snapshot(self, listener: Callable[[int], None]) -> None:
        """Accepted and never called: a local table is only changed by its own applies."""

    def status(self) -> ReplicatorStatus:
        """A standalone node: its own leader, always with quorum."""
        with self._lock:
            applied_index, applied_version = self._applied_index, self._table.applied_version
            document = self._table.state_document()  # hashed after the lock
        digests = snapshot.digests_of(document)
        return ReplicatorStatus(
            node_id=self.node_id,
            mode=self.mode,
            state="standalone",
            leader=self.node_id,
            term=0,
            commit_index=applied_index,
            applied_index=applied_index,
            log_length=0,
            has_quorum=True,
            applied_version=applied_version,
            digest=digests.full,
            view_digest=digests.client_view,
            live_brokers=digests.live_brokers,
        )
