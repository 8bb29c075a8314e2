"""What a scenario sees while it runs: :class:`ExperimentContext`.

Below both the scenarios and the runner: the runner builds the context, a scenario's fault
acts through it, and neither module needs the other for its types.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from experiment_history.schema import (
    KIND_REGISTER,
    ORIGIN_HARNESS,
    OUTCOME_NOT_FOUND,
    OUTCOME_OK,
    OUTCOME_TIMEOUT,
    PROCESS_ADMIN,
)
from experiments.config import ExperimentConfig
from experiments.faults import ClusterHandle, ProxyMesh, RaftMesh
from experiments.follow_up import FollowUpReader
from experiments.journals import NodeJournals
from experiments.node_changes import HeldEntry, NodeChanges
from experiments.progress import Progress, silent
from experiments.registers import RegisterLog, with_broker
from experiments.workload import (
    Ack,
    BrokerFleet,
    Recorder,
    log_index,
    log_position,
    now_ms,
    now_us,
    read_route,
)
from experiments.write_order import TopicGate
from remoting.client import RemotingClient
from remoting.consistency import CONSISTENCY_LINEARIZABLE, CONSISTENCY_LOCAL


@dataclass(slots=True)
class ExperimentContext(NodeChanges):
    """What scenarios see: the cluster, the proxies, the fleet and the truth model."""

    config: ExperimentConfig
    cluster: ClusterHandle
    mesh: ProxyMesh
    fleet: BrokerFleet
    recorder: Recorder
    rng: random.Random
    topics: list[str]
    admin: RemotingClient
    raft_mesh: RaftMesh | None = None
    follow_up: FollowUpReader | None = None
    progress: Progress = field(default_factory=silent)
    lane_brokers: dict[str, list[str]] = field(default_factory=dict)
    truth_overrides: dict[str, str] = field(default_factory=dict)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    registers: RegisterLog = field(default_factory=RegisterLog)
    journals: NodeJournals = field(init=False)
    """The nodes' own journals: each new entry is recorded by :meth:`_record_expiry`,
    after the readers added to them (the nemesis' failover group records its elections:
    experiments.failover)."""
    _truth: dict[str, str] = field(default_factory=dict)
    _truth_pending: set[str] = field(default_factory=set)
    _topic_gate: TopicGate = field(default_factory=TopicGate)
    _in_flight: dict[str, list[int]] = field(default_factory=dict)
    _held: list[HeldEntry] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.journals = NodeJournals(
            self.cluster,
            self.raft,
            lambda: self.recorder.started_ms * 1_000,
            self._node_started,
            self._journal_entry,
        )

    @property
    def raft(self) -> bool:
        """True in raft mode."""
        return self.config.mode == "raft"

    @property
    def nodes(self) -> dict[str, str]:
        """Node id to remoting address."""
        return self.cluster.remoting_addrs()

    @property
    def timeout_s(self) -> float:
        """The request timeout of admin calls."""
        return self.config.request_timeout_s

    @property
    def focus_topic(self) -> str:
        """The topic the faults aim at (the first consumer group reads it too)."""
        return self.topics[0]

    def brokers_of(self, topic: str) -> list[str]:
        """The brokers that hold ``topic``, by name."""
        return sorted(n for n, b in self.fleet.brokers.items() if topic in b.topics)

    def truth_of(self, topic: str) -> str:
        """The route ``topic`` should have now."""
        if topic in self.truth_overrides:
            return self.truth_overrides[topic]
        return self.fleet.truth(topic)

    def record_truth(self, broker: str, kind: str, stamp_ms: int | None = None) -> list[str]:
        """Append a ground-truth write, at ``stamp_ms`` (default now), for every topic whose
        true route changed; returns those topics."""
        stamp = now_ms() if stamp_ms is None else stamp_ms
        changed = []
        for topic in self.topics:
            if topic in self._truth_pending:
                continue  # an admin's write on its way: true from its ack (admin_write)
            value = self.truth_of(topic)
            if self._truth.get(topic) != value:
                self._truth[topic] = value
                self.recorder.truth(stamp, topic, broker, kind, value)
                changed.append(topic)
        return changed

    def truth_changed(self, broker: str, kind: str) -> None:
        """The fleet model changed (a broker died or left): update the ground truth."""
        self.record_truth(broker, kind)

    async def broker_write(
        self,
        broker: str,
        kind: str,
        call: Callable[[], Awaitable[list[Ack]]],
        *,
        origin: str = ORIGIN_HARNESS,
        first: bool = False,
    ) -> list[Ack]:
        """Send a registration or unregistration of ``broker`` (``call`` returns the
        (node, ack µs) of every node that acknowledged it) and record it, with
        ``origin``: ``harness`` (the churn, a scenario's stop or start) unless the
        broker's own heartbeat round sent it (``client``, ``BrokerFleet.record_round``).

        Every watched topic of the broker whose register value it changes gets one write
        (:meth:`sent`), valued as the register's latest value with the broker's share
        added or removed (:mod:`experiments.registers`). The ground truth changes at the
        first ack (no ack: now, a broker that stopped is gone either way), and the
        follow-up reader (when there is one) reads the changed topics from the other
        nodes.

        While the fleet announces a fresh share every round (``BrokerFleet.
        fresh_shares``, the nemesis) every round is a write, so two brokers of a topic
        write it often, and a value built on the register's latest value is only right
        when it is built on everything before it. So the writes of a topic go one at a
        time, held until every node answered the round, and writes of disjoint topics
        together (:class:`~experiments.write_order.TopicGate`; ``first``: ahead of the
        writes still waiting, for a restart a fault schedule waits on), and each first
        collects the nodes' journals (:meth:`NodeJournals.collect`): a scan's expiry
        committed since the last probe round is recorded before the write that comes
        after it is valued.
        """
        if not self.fleet.fresh_shares:
            return await self._broker_write(broker, kind, call, origin)
        # Every round is a write: one at a time per topic, each valued on what the
        # nodes have reported so far (see the docstring).
        topics = sorted(t for t in self.topics if t in self.fleet.brokers[broker].topics)
        async with self._topic_gate.hold(topics, first=first):
            await self.journals.collect()
            acks = await self._broker_write(broker, kind, call, origin)
            if not acks:
                await self._resolve_unacknowledged(topics)
            return acks

    async def _resolve_unacknowledged(self, topics: Sequence[str]) -> None:
        """A round no node acknowledged may still take effect (raft: its entry commits
        after the broker gave up). The next write of these topics is valued on the
        register's latest value, so, still holding their locks, ask every node for them
        (raft: linearizable reads) and let what comes back settle that value
        (``RegisterLog.latest`` takes a read sent after every write as the value the
        system settled on, when it is one still possible). Without this a later write
        is valued without the late share, and every read of the real route looks like a
        value nobody wrote. What it cannot see: the round landing after these reads."""
        consistency = CONSISTENCY_LINEARIZABLE if self.raft else CONSISTENCY_LOCAL
        keys = [(node, topic) for node in sorted(self.nodes) for topic in topics]
        results = await asyncio.gather(
            *(
                read_route(self.admin, self.nodes[node], topic, self.timeout_s, consistency)
                for node, topic in keys
            )
        )
        for (_, topic), result in zip(keys, results, strict=True):
            if result.outcome in (OUTCOME_OK, OUTCOME_NOT_FOUND):
                self.registers.note_read(topic, result.value, result.invoke_us)
        self.notes["resolving_reads"] = self.notes.get("resolving_reads", 0) + len(keys)

    async def _broker_write(
        self,
        broker: str,
        kind: str,
        call: Callable[[], Awaitable[list[Ack]]],
        origin: str,
    ) -> list[Ack]:
        """:meth:`broker_write` itself."""
        added = kind == KIND_REGISTER
        changes = [(t, v) for t, v, _ in self._share_changes([broker], added=added)]
        sim = self.fleet.brokers[broker]
        shares = {t: sim.route_item(t) if added else None for t, _ in changes}
        invoke_us = now_us()
        acks = await self.sent(
            broker,
            kind,
            changes,
            call,
            broker=broker,
            origin=origin,
            rebase=lambda topic, base: with_broker(base, broker, shares[topic]),
        )
        if not acks:
            self.record_truth(broker, kind)
            return acks
        first = min(acks, key=lambda ack: ack.at_us)
        node, ack_us = first.node, first.at_us
        if kind == KIND_REGISTER:
            self._note_quiet(broker, {t for t, _ in changes}, invoke_us, first, acks)
        ack_ms = ack_us // 1_000
        changed = self.record_truth(broker, kind, ack_ms)
        if self.follow_up is not None and changed:
            self.follow_up.after_ack(node, ack_ms, changed)
        if self.follow_up is not None and self.fleet.fresh_shares and changes:
            # Every round is a write of its own: the broker reads one back as itself,
            # so read-your-writes has sessions that write in the nemesis too.
            self.follow_up.read_back_one(broker, ack_ms, changes)
        return acks

    def _share_changes(
        self, brokers: Sequence[str], *, added: bool, before: int = 0
    ) -> list[tuple[str, str, list[str]]]:
        """(topic, value, brokers) for every watched topic whose register value changes
        when the shares of ``brokers`` that hold it are all added (their route items) or
        all removed, together: the brokers of that topic. ``before``: valued on the
        register just before that place in the raft log (``RegisterLog.latest``)."""
        changes = []
        for topic in self.topics:
            if topic in self.truth_overrides:
                continue
            holders = [b for b in brokers if topic in self.fleet.brokers[b].topics]
            latest = value = self.registers.latest(topic, before=before)
            for broker in holders:
                item = self.fleet.brokers[broker].route_item(topic) if added else None
                value = with_broker(value, broker, item)
            # Equal when nothing changes, e.g. a raft expiry the prober already inferred.
            if value != latest:
                changes.append((topic, value, holders))
        return changes

    async def sent(
        self,
        process: str,
        kind: str,
        changes: list[tuple[str, str]],
        call: Callable[[], Awaitable[list[Ack]]],
        *,
        broker: str = "",
        origin: str = ORIGIN_HARNESS,
        rebase: Callable[[str, str], str] | None = None,
    ) -> list[Ack]:
        """Await ``call``, a write that sets each (topic, value) of ``changes``, and record
        one write per topic at its RPC: invoked when sent, complete at the first ack, in
        microseconds (no ack: pending, ``timeout``, it may have happened or not), with
        ``origin`` (``experiment_history.schema`` ``ORIGIN_*``).

        The register knows the write from the moment it is sent, so the prober, which may
        see its effect before the ack comes back, never mistakes it for one of the
        system's own. ``rebase`` (topic, value before the write) gives the value the
        write leaves on another value before it: see :meth:`_sent_in_log_order`."""
        invoke_us = now_us()
        handles = [(t, v, self.registers.record(t, invoke_us, None, v)) for t, v in changes]
        for topic, _, _ in handles:
            self._in_flight.setdefault(topic, []).append(invoke_us)
        try:
            acks = await call()
        except BaseException:
            # Cancelled mid-call (a kill_broker step stops the broker's round while a
            # node it cannot reach keeps it waiting) or failed: the request went out and
            # a node may have applied it, so the write stays in the history, pending.
            self._landed(handles, invoke_us)
            self._record_sent(handles, process, kind, [], broker, origin, invoke_us)
            self._release_held()
            raise
        position = log_position(acks) if self.raft else 0
        try:
            if position:
                await self.journals.collect()
        finally:
            self._landed(handles, invoke_us)
            handles = self._sent_in_log_order(handles, position, rebase)
            self._record_sent(handles, process, kind, acks, broker, origin, invoke_us)
            self._release_held()
        return acks

    def journals_read_since(self, node: str, topic: str, since_us: int) -> bool:
        """True when every change of ``topic`` that ``node`` made before ``since_us``
        (harness clock) is recorded: its journal was read since
        (``NodeJournals.read_since``) and no entry of the topic is still held for a
        write on its way (:meth:`_journal_entry`)."""
        return topic not in self._held_topics() and self.journals.read_since(node, since_us)

    def _landed(self, handles: list[tuple[str, str, int]], invoke_us: int) -> None:
        """The write sent at ``invoke_us`` is no longer on its way."""
        for topic, _, _ in handles:
            self._in_flight[topic].remove(invoke_us)

    def _sent_in_log_order(
        self,
        handles: list[tuple[str, str, int]],
        position: int,
        rebase: Callable[[str, str], str] | None,
    ) -> list[tuple[str, str, int]]:
        """Raft mode: the journal entries the log put before an acknowledged write
        (``position``, its place in the log's order) recorded first, then each of the
        write's ``handles`` (topic, value, register handle) revalued (``rebase``) on what
        the register held just before it.

        A write is valued when it is sent, on what the journals had reported; an expiry
        the leader committed just before the write's entry but journaled after the write
        went out is missing from that value, and the nodes, which applied both in log
        order, answer the expiry's result with the write's change on it. So once the
        write's entry is known the journals are read again (the leader journals an
        expiry as it applies it, before it applies a later entry), the entries before it
        are recorded (those held while it was on its way: :meth:`_journal_entry`), and
        the write is valued on the register before its entry (``RegisterLog.latest``
        with ``before``); the held entries after it are valued on it."""
        if not position:
            return handles
        self._release_held(below=position, topics={topic for topic, _, _ in handles})
        if rebase is None:
            return handles
        revalued = []
        for topic, value, handle in handles:
            # Valued as if it had not been sent yet: a read that settled what an
            # unacknowledged round left (_resolve_unacknowledged) still counts.
            value = rebase(topic, self.registers.latest(topic, before=position, excluding=handle))
            self.registers.revalue(topic, handle, value)
            revalued.append((topic, value, handle))
        return revalued

    def _record_sent(
        self,
        handles: list[tuple[str, str, int]],
        process: str,
        kind: str,
        acks: list[Ack],
        broker: str,
        origin: str,
        invoke_us: int,
    ) -> None:
        """One operation per (topic, value, register handle) of a write :meth:`sent`:
        complete at the first of ``acks``, or pending (``timeout``) without one."""
        first = min(acks, key=lambda ack: ack.at_us) if acks else None
        complete_us = now_us() if first is None else first.at_us
        position = log_position(acks)
        extra: dict[str, object] = {"acked_by": sorted(ack.node for ack in acks)}
        if position:
            extra |= {"raft_index": log_index(acks), "applied_version": position}
        for topic, value, handle in handles:
            if first is not None:
                self.registers.complete(topic, handle, complete_us, position)
            self.recorder.operation(
                process=process,
                kind=kind,
                node="" if first is None else first.node,
                topic=topic,
                outcome=OUTCOME_OK if first is not None else OUTCOME_TIMEOUT,
                value=value,
                broker=broker,
                extra=extra,
                origin=origin,
                invoke_us=invoke_us,
                complete_us=complete_us,
                force=self.recorder.sent_while_recording(invoke_us),
            )

    def gateway_restarting(self, node: str) -> None:
        """The harness is about to start ``node``'s gateway again (a kill's heal, a clock
        skew's restart). Until the node is back where the others are, it may answer any
        earlier state: eventual mode's table starts empty, and a raft node answers local
        reads from the state it reloaded (its snapshot and log) while it catches up. Its
        reads of such states are reads for the checker (``RegisterLog.note_restart``),
        not writes to infer; noted here, before the node answers anything, rather than
        when its journal is next read, which a slow start can delay."""
        self.registers.note_restart(node)
        self.notes["gateway_restarts"] = self.notes.get("gateway_restarts", 0) + 1

    async def admin_write(
        self,
        kind: str,
        topic: str,
        value: str,
        call: Callable[[], Awaitable[list[Ack]]],
    ) -> list[Ack]:
        """An admin's write that makes ``topic``'s route ``value`` (a delete: ``""``), sent
        by ``call`` ((node, ack µs) of every node that acknowledged it), recorded at its
        RPC like a broker's (:meth:`sent`, process ``admin``); the ground truth changes at
        the first ack, as :meth:`broker_write`'s does (no ack: when the harness gave up).

        The model takes the topic over when the write is sent (the churn and the brokers'
        shares leave it alone from then on), but until the ack no ground-truth write is
        recorded for it, whoever else records one meanwhile."""
        self.truth_overrides[topic] = value
        self._truth_pending.add(topic)
        try:
            acks = await self.sent(PROCESS_ADMIN, kind, [(topic, value)], call)
        finally:
            self._truth_pending.discard(topic)
        first = min(acks, key=lambda ack: ack.at_us, default=None)
        self.record_truth("", kind, None if first is None else first.at_us // 1_000)
        if self.follow_up is not None and first is not None:
            # The other nodes' follow-up reads, and the admin reading its own write back
            # (read-your-writes needs a session that writes and reads).
            self.follow_up.after_ack(first.node, first.at_us // 1_000, [topic])
            self.follow_up.read_back_after(PROCESS_ADMIN, first.at_us // 1_000, topic, value)
        return acks
