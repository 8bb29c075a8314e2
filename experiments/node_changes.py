"""What the nodes changed by themselves, recorded as writes of the history: the part of
:class:`experiments.context.ExperimentContext` that turns each node's journal entries
(a scan's expiries, eventual mode's unregistration of a closed connection, a node's start)
into writes, and the quiet registrations a late expiry report shows were writes too.

A mixin, so every method stays callable on the context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from experiment_history.schema import (
    KIND_EXPIRE,
    KIND_REGISTER,
    KIND_UNREGISTER,
    ORIGIN_INFERRED,
    ORIGIN_NODE,
    OUTCOME_OK,
    PROCESS_RAFT,
    canonical_route,
    parse_route,
)
from experiments.registers import QuietShare, RegisterLog, with_broker
from experiments.workload import Ack, BrokerFleet, Recorder, log_position
from gateway.expiry_reports import KIND_EXPIRE as JOURNAL_EXPIRE

JOURNAL_RAFT_KEYS = ("raft_index", "raft_term", "applied_version")
"""Where a raft journal entry's command sits in the log, copied into each write's
``extra``."""


@dataclass(slots=True)
class HeldEntry:
    """A raft journal entry (``node``'s, its stamps moved by ``wall_offset``) whose
    writes of ``topics`` are not recorded yet."""

    node: str
    report: dict[str, Any]
    wall_offset: int
    topics: set[str]

    @property
    def version(self) -> int:
        """Its place in the log: the table version its command left."""
        return int(self.report.get("applied_version", 0))


class NodeChanges:
    """Journal entries and quiet registrations to writes (see the module docstring)."""

    fleet: BrokerFleet
    recorder: Recorder
    registers: RegisterLog
    topics: list[str]
    truth_overrides: dict[str, str]
    notes: dict[str, Any]
    _in_flight: dict[str, list[int]]
    """Per topic: when each write of it that is sent and not yet recorded was sent (µs)."""
    _held: list[HeldEntry]
    """Raft journal entries not recorded yet for some of their topics: see
    :meth:`_journal_entry`."""

    if TYPE_CHECKING:

        @property
        def raft(self) -> bool: ...

        def _share_changes(
            self, brokers: Sequence[str], *, added: bool, before: int = 0
        ) -> list[tuple[str, str, list[str]]]: ...

    def _note_quiet(
        self,
        broker: str,
        changed: set[str],
        invoke_us: int,
        first: Ack,
        acks: list[Ack],
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
                    broker,
                    invoke_us,
                    first.at_us,
                    first.node,
                    tuple(sorted(a.node for a in acks)),
                    items,
                    log_position(acks),
                )
            )

    def _journal_entry(self, node: str, report: dict[str, Any], wall_offset: int) -> None:
        """A new entry of ``node``'s journal (``NodeJournals.on_entry``), recorded at once
        for each topic it changes, except in raft mode for a topic a write of which is
        on its way and was sent before the entry committed. Such a write may sit before
        the entry in the log or after it, and the two are valued in log order once the
        write's answer names its place (:meth:`_sent_in_log_order`); until then the
        entry's write of that topic waits, and so does every later entry's write of it,
        so each topic's writes keep the log's order."""
        if not self.raft:
            self._record_expiry(node, report, wall_offset)
            return
        topics = self._entry_topics(report)
        held = self._held_topics()
        waiting = {t for t in topics if t in held or self._blocked(t, report, wall_offset)}
        if waiting:
            self._held.append(HeldEntry(node, report, wall_offset, waiting))
            self.notes["held_journal_entries"] = self.notes.get("held_journal_entries", 0) + 1
        self._record_expiry(node, report, wall_offset, topics - waiting)

    def _entry_topics(self, report: dict[str, Any]) -> set[str]:
        """The watched topics whose brokers ``report`` expired."""
        return {
            topic
            for name in self._expired_brokers(report)
            for topic in self.fleet.brokers[name].topics
        } & set(self.topics)

    def _held_topics(self) -> set[str]:
        """The topics some held entry has not recorded yet."""
        return {topic for held in self._held for topic in held.topics}

    def _blocked(self, topic: str, report: dict[str, Any], wall_offset: int) -> bool:
        """True when a write of ``topic`` is on its way that was sent before ``report``'s
        expiry committed (a write sent after it is after it in the log)."""
        committed_us = int(report["committed_us"]) - wall_offset
        return any(sent_us <= committed_us for sent_us in self._in_flight.get(topic, ()))

    def _expired_brokers(self, report: dict[str, Any]) -> list[str]:
        """The simulated brokers ``report`` expired, by name."""
        by_addr = {sim.addr: name for name, sim in self.fleet.brokers.items()}
        return sorted({by_addr[e["addr"]] for e in report["expired"] if e["addr"] in by_addr})

    def _release_held(
        self, below: int = 0, topics: set[str] | None = None, *, force: bool = False
    ) -> None:
        """Record the held entries' writes that may go now, in log order: a topic's once
        no write of it on its way blocks it and no earlier held entry still waits with
        it; with ``below``, a write of ``topics`` only when the log put the entry before
        that place; ``force``: every one (the recording ends)."""
        self._held.sort(key=lambda held: held.version)
        kept: list[HeldEntry] = []
        waiting: set[str] = set()
        for held in self._held:
            late = below and held.version >= below
            stay = (
                set()
                if force
                else {
                    t
                    for t in held.topics
                    if t in waiting
                    or (late and topics is not None and t in topics)
                    or self._blocked(t, held.report, held.wall_offset)
                }
            )
            if held.topics - stay:
                self._record_expiry(held.node, held.report, held.wall_offset, held.topics - stay)
            if stay:
                held.topics = stay
                kept.append(held)
                waiting |= stay
        self._held = kept

    def flush_held(self) -> None:
        """The recording ends: record every held journal entry."""
        self._release_held(force=True)

    def _node_started(self, node: str) -> None:
        """An eventual node started during the recording (its journal began then): it
        holds only what the brokers sent it since. No write of its own (its value,
        nothing, would repeat at every restart), but any broker may be missing from its
        answers from now on (``RegisterLog.note_restart``): reads of a partial route,
        for the checker. ``notes.node_starts`` counts them."""
        self.registers.note_restart(node)
        self.fleet.views.restarted(node)
        self.notes["node_starts"] = self.notes.get("node_starts", 0) + 1

    def _record_expiry(
        self,
        node: str,
        report: dict[str, Any],
        wall_offset: int,
        topics: set[str] | None = None,
    ) -> None:
        """One write per watched topic a node's journal entry changed: every broker it
        removed leaves the register together, as they left the table in one command
        (removing them one at a time from the latest value would record states that
        never existed, each with only one of them gone). The entry's wall clock stamps
        less ``wall_offset`` (``experiments.journals.wall_offset_us``) are its window on the
        harness clock. ``extra`` says where the write came from: ``reported_by`` (the node),
        ``scan_seq`` (the entry's number there), ``journal_kind`` and, in raft mode,
        ``raft_index``, ``raft_term`` and ``applied_version``. ``topics``: only the
        writes of these (raft mode: the others wait, :meth:`_journal_entry`); a raft
        entry's writes are valued on the register just before its place in the log."""
        expired = self._expired_brokers(report)
        invoke_us = int(report["started_us"]) - wall_offset
        complete_us = int(report["committed_us"]) - wall_offset
        journal_kind = str(report.get("kind", JOURNAL_EXPIRE))
        source = {
            "reported_by": node,
            "scan_seq": int(report["seq"]),
            "journal_kind": journal_kind,
        } | {key: report[key] for key in JOURNAL_RAFT_KEYS if key in report}
        after: dict[str, str] = {}
        changes = (
            self._share_changes(expired, added=False, before=int(report.get("applied_version", 0)))
            if self.raft
            else self._own_changes(node, expired, complete_us)
        )
        for topic, value, gone in changes:
            if topics is not None and topic not in topics:
                continue
            after[topic] = value
            if not self.raft and self.registers.written(topic, value):
                # Eventual: this node reached a state an earlier write had (another
                # node's same expiry, recorded first, or an older one): a second write
                # would repeat its value, and the node's reads of it are that write's.
                self.notes["journal_repeats"] = self.notes.get("journal_repeats", 0) + 1
                self.registers.note_reached(node, topic, value)
                continue
            self.registers.record(
                topic, invoke_us, complete_us, value, int(report.get("applied_version", 0))
            )
            self.recorder.operation(
                process=PROCESS_RAFT if self.raft else f"ns-{node}",
                kind=KIND_EXPIRE if journal_kind == JOURNAL_EXPIRE else KIND_UNREGISTER,
                node=node,
                topic=topic,
                outcome=OUTCOME_OK,
                value=value,
                broker=",".join(gone),
                extra=source | {"expired": gone},
                origin=ORIGIN_NODE,
                invoke_us=invoke_us,
                complete_us=complete_us,
            )
        self._restore_quiet(expired, invoke_us, after, int(report["seq"]))

    def _own_changes(
        self, node: str, expired: Sequence[str], done_us: int
    ) -> list[tuple[str, str, list[str]]]:
        """Eventual mode: (topic, value, brokers) for every watched topic whose route on
        ``node`` its own removal of ``expired`` (done at ``done_us``) changed, valued on
        that node's table (``experiments.node_views``): a registration only other nodes
        acknowledged is not in it."""
        views = self.fleet.views
        changes = []
        for topic in self.topics:
            if topic in self.truth_overrides:
                continue
            held = parse_route(views.value(node, topic))
            holders = [i.broker for i in held if i.broker in expired]
            if holders:
                value = canonical_route(i for i in held if i.broker not in expired)
                changes.append((topic, value, holders))
        views.removed(node, expired, done_us)
        return changes

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
                self.registers.record(
                    topic, share.invoke_us, share.complete_us, value, share.position
                )
                self.recorder.operation(
                    process=share.broker,
                    kind=KIND_REGISTER,
                    node=share.node,
                    topic=topic,
                    outcome=OUTCOME_OK,
                    value=value,
                    broker=share.broker,
                    extra={"acked_by": list(share.acked_by), "after_expiry_scan": scan_seq}
                    | ({"applied_version": share.position} if share.position else {}),
                    origin=ORIGIN_INFERRED,
                    invoke_us=share.invoke_us,
                    complete_us=share.complete_us,
                )
