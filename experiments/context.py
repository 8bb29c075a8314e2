"""What a scenario sees while it runs: :class:`ExperimentContext`.

Below both the scenarios and the runner: the runner builds the context, a scenario's fault
acts through it, and neither module needs the other for its types.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from experiment_history.schema import (
    KIND_EXPIRE,
    KIND_REGISTER,
    ORIGIN_HARNESS,
    ORIGIN_INFERRED,
    ORIGIN_NODE,
    OUTCOME_OK,
    OUTCOME_TIMEOUT,
    PROCESS_ADMIN,
    PROCESS_RAFT,
)
from experiments.config import ExperimentConfig
from experiments.faults import ClusterHandle, ProxyMesh, RaftMesh
from experiments.follow_up import FollowUpReader
from experiments.progress import Progress, silent
from experiments.registers import QuietShare, RegisterLog, with_broker
from experiments.workload import BrokerFleet, Recorder, now_ms, now_us
from remoting.client import RemotingClient


def wall_us() -> int:
    """This host's wall clock in µs: the clock the gateways stamp the scans they report in
    NODE_STATUS with (``gateway.expiry_reports``)."""
    return time.time_ns() // 1_000


def wall_offset_us() -> int:
    """This host's wall clock minus the harness's clock (:func:`now_us`), in µs, now.

    :func:`now_us` is the monotonic clock anchored to the wall clock when the harness
    started, so the offset is 0 at the start and then follows whatever the wall clock
    does that the monotonic clock does not (NTP slewing, a step). The harness clock is
    read on both sides of the wall clock and the midpoint taken, so reading the two
    clocks one after the other adds at most half that gap (a few µs)."""
    before = now_us()
    wall = wall_us()
    after = now_us()
    return wall - (before + after) // 2


@dataclass(slots=True)
class ExperimentContext:
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
    _truth: dict[str, str] = field(default_factory=dict)
    _truth_pending: set[str] = field(default_factory=set)
    _expiries_seen: set[tuple[str, int, int]] = field(default_factory=set)

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
        call: Callable[[], Awaitable[list[tuple[str, int]]]],
        *,
        origin: str = ORIGIN_HARNESS,
    ) -> list[tuple[str, int]]:
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
        """
        changes = [(t, v) for t, v, _ in self._share_changes([broker], added=kind == KIND_REGISTER)]
        invoke_us = now_us()
        acks = await self.sent(broker, kind, changes, call, broker=broker, origin=origin)
        if not acks:
            self.record_truth(broker, kind)
            return acks
        node, ack_us = min(acks, key=lambda ack: ack[1])
        if kind == KIND_REGISTER:
            self._note_quiet(broker, {t for t, _ in changes}, invoke_us, (node, ack_us), acks)
        ack_ms = ack_us // 1_000
        changed = self.record_truth(broker, kind, ack_ms)
        if self.follow_up is not None and changed:
            self.follow_up.after_ack(node, ack_ms, changed)
        return acks

    def _note_quiet(
        self,
        broker: str,
        changed: set[str],
        invoke_us: int,
        first: tuple[str, int],
        acks: list[tuple[str, int]],
    ) -> None:
        """Keep the share of each watched topic an acknowledged registration of ``broker``
        carried without changing its register (see :meth:`_restore_quiet`)."""
        sim = self.fleet.brokers[broker]
        items = tuple(
            (topic, sim.route_item(topic))
            for topic in self.topics
            if topic in sim.topics and topic not in changed and topic not in self.truth_overrides
        )
        if items:
            self.registers.note_quiet(
                QuietShare(
                    broker, invoke_us, first[1], first[0], tuple(sorted(n for n, _ in acks)), items
                )
            )

    def _share_changes(
        self, brokers: Sequence[str], *, added: bool
    ) -> list[tuple[str, str, list[str]]]:
        """(topic, value, brokers) for every watched topic whose register value changes
        when the shares of ``brokers`` that hold it are all added (their route items) or
        all removed, together: the brokers of that topic."""
        changes = []
        for topic in self.topics:
            if topic in self.truth_overrides:
                continue
            holders = [b for b in brokers if topic in self.fleet.brokers[b].topics]
            latest = value = self.registers.latest(topic)
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
        call: Callable[[], Awaitable[list[tuple[str, int]]]],
        *,
        broker: str = "",
        origin: str = ORIGIN_HARNESS,
    ) -> list[tuple[str, int]]:
        """Await ``call``, a write that sets each (topic, value) of ``changes``, and record
        one write per topic at its RPC: invoked when sent, complete at the first ack, in
        microseconds (no ack: pending, ``timeout``, it may have happened or not), with
        ``origin`` (``experiment_history.schema`` ``ORIGIN_*``).

        The register knows the write from the moment it is sent, so the prober, which may
        see its effect before the ack comes back, never mistakes it for one of the
        system's own."""
        invoke_us = now_us()
        handles = [(t, v, self.registers.record(t, invoke_us, None, v)) for t, v in changes]
        acks = await call()
        first = min(acks, key=lambda ack: ack[1]) if acks else None
        complete_us = now_us() if first is None else first[1]
        for topic, value, handle in handles:
            if first is not None:
                self.registers.complete(topic, handle, complete_us)
            self.recorder.operation(
                process=process,
                kind=kind,
                node="" if first is None else first[0],
                topic=topic,
                outcome=OUTCOME_OK if first is not None else OUTCOME_TIMEOUT,
                value=value,
                broker=broker,
                extra={"acked_by": sorted(node for node, _ in acks)},
                origin=origin,
                invoke_us=invoke_us,
                complete_us=complete_us,
            )
        return acks

    async def collect_expiries(self) -> None:
        """Record the raft expiries the nodes report (NODE_STATUS ``expiries``) that are
        new since the last call: each is one committed ExpireBrokers of the leader's scan,
        with the scan's start and the moment its outcome came back as the window.

        The node stamps those on its wall clock (µs; NODE_STATUS carries nothing else),
        and every other row of the history is on the harness's clock (:func:`now_us`),
        so each stamp is moved onto it by the wall clock's offset from the harness clock
        (:func:`wall_offset_us`), read as the statuses come back. That is exact while the
        wall clock does not move against the monotonic one between the node's stamp and
        this read; what it leaves: any slewing or step of the wall clock in between
        (a report is first read at the first status round after its commit, one probe
        round, about 250 ms, plus the status call, unless the node did not answer: at
        NTP's 500 ppm slewing limit, at most about 0.15 ms per 300 ms; a step, all of
        it), and half the gap between the two clock reads of the offset (µs). It relies
        on the gateways running on this host (the local cluster): another host's wall
        clock would add its own offset, unmeasured."""
        statuses = await asyncio.gather(*(self.cluster.status(node) for node in self.nodes))
        offset_us = wall_offset_us()
        since_us = self.recorder.started_ms * 1_000
        for node, status in zip(self.nodes, statuses, strict=True):
            for report in (status or {}).get("expiries", []):
                # Keyed by the node's own stamp, which is the same in every status.
                key = (node, int(report["seq"]), int(report["started_us"]))
                if key in self._expiries_seen or key[2] - offset_us < since_us:
                    continue
                self._expiries_seen.add(key)
                self._record_expiry(node, report, offset_us)

    def _record_expiry(self, node: str, report: dict[str, Any], wall_offset: int) -> None:
        """One write per watched topic a reported scan changed: every broker that scan
        expired leaves the register together, as they left the table in one committed
        ExpireBrokers (removing them one at a time from the latest value would record
        states that never existed, each with only one of them gone). The report's wall
        clock stamps less ``wall_offset`` (:func:`wall_offset_us`) are its window on the
        harness clock."""
        by_addr = {sim.addr: name for name, sim in self.fleet.brokers.items()}
        expired = sorted({by_addr[e["addr"]] for e in report["expired"] if e["addr"] in by_addr})
        invoke_us = int(report["started_us"]) - wall_offset
        complete_us = int(report["committed_us"]) - wall_offset
        after: dict[str, str] = {}
        for topic, value, gone in self._share_changes(expired, added=False):
            after[topic] = value
            self.registers.record(topic, invoke_us, complete_us, value)
            self.recorder.operation(
                process=PROCESS_RAFT,
                kind=KIND_EXPIRE,
                node=node,
                topic=topic,
                outcome=OUTCOME_OK,
                value=value,
                broker=",".join(gone),
                extra={"reported_by": node, "scan_seq": int(report["seq"]), "expired": gone},
                origin=ORIGIN_NODE,
                invoke_us=invoke_us,
                complete_us=complete_us,
            )
        self._restore_quiet(expired, invoke_us, after, int(report["seq"]))

    def _restore_quiet(
        self, expired: Sequence[str], since_us: int, after: dict[str, str], scan_seq: int
    ) -> None:
        """The quiet registrations of ``expired`` brokers acknowledged at or after the
        reported scan began (``since_us``) may have come after the expiry: each put its
        broker's share back. Recorded as the registrations they were (their own window
        and acks), in the order of their acks, each valued as the expiry's result
        (``after``: topic to value) with the shares restored so far; a registration the
        checker orders before the expiry is overwritten by it either way.

        Without this, a live broker that a skewed scan expired and whose next, unchanged
        registration (sent before the harness learnt of the expiry) brought it back
        leaves reads of its route that no recorded write explains. Their origin is
        ``inferred``: the registrations were acknowledged, but that each was a write, and
        its value, the harness inferred from the late report."""
        for share in self.registers.quiet_since(expired, since_us):
            for topic, item in share.items:
                if topic not in after:
                    continue
                value = with_broker(after[topic], share.broker, item)
                if value == after[topic]:
                    continue
                after[topic] = value
                self.registers.record(topic, share.invoke_us, share.complete_us, value)
                self.recorder.operation(
                    process=share.broker,
                    kind=KIND_REGISTER,
                    node=share.node,
                    topic=topic,
                    outcome=OUTCOME_OK,
                    value=value,
                    broker=share.broker,
                    extra={"acked_by": list(share.acked_by), "after_expiry_scan": scan_seq},
                    origin=ORIGIN_INFERRED,
                    invoke_us=share.invoke_us,
                    complete_us=share.complete_us,
                )

    async def admin_write(
        self,
        kind: str,
        topic: str,
        value: str,
        call: Callable[[], Awaitable[list[tuple[str, int]]]],
    ) -> list[tuple[str, int]]:
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
        first_ack_us = min((ack for _, ack in acks), default=None)
        self.record_truth("", kind, None if first_ack_us is None else first_ack_us // 1_000)
        return acks
