"""What a reader needs beside the report's numbers: why a figure differs between the modes,
which measures the harness simulates rather than times, and which rows a scenario can
produce at all.

Every reason here is the design's (docs/RAFT.md, docs/EXPERIMENTS.md), not a reading of one
run's numbers: the report shows it only where the modes' figures differ. Where the design
does not explain a difference (route-read latency), the line says what is measured and
that the report does not split the time further. No Spark and no matplotlib here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Row = Mapping[str, Any]

FAULT_WINDOWS = "fault_windows"
"""The report table of every run's faults (``spark_jobs.plot_series.fault_windows``)."""
KILL_BROKER = "kill_broker"
"""``experiment_history.schema.FAULT_KILL_BROKER`` (this package imports no other)."""
BROKER_KILL_TABLES = frozenset({"stale_route", "dead_sends"})
"""Sections about a killed broker: shown as not applicable where no broker was killed."""
NO_KILL = (
    "No broker was killed in this scenario, so no node, client or send could meet a dead "
    "broker; the row is left out."
)

SIMULATED_KINDS = {
    "send": "send (simulated: no message is sent; the harness's broker model answers at "
    "once, 0 µs, or after the send timeout for a dead broker)",
    "consume_alloc": "consume_alloc (computed in the client, not timed: 0 µs)",
}
"""Operation kinds whose latency is the harness's model, not a measurement, as the
latency table labels them (``experiments.traffic``: ``Producer.send`` stamps a send to a
live broker complete at its invocation and one to a dead broker ``send_timeout_ms``
later; a consumer's rebalance is recorded with one stamp)."""

SECTION_REASONS = {
    "linearizability": (
        "Why the modes differ: an eventual node applies each broker's registrations "
        "itself, in the order it got them, with no agreement between nodes; raft commits "
        "every write in one log order, and its default local reads answer from a node's "
        "applied state, which may trail the leader's commit during a fault."
    ),
    "divergence": (
        "Why the modes differ: eventual nodes each take broker registrations and expire "
        "brokers by their own scan, so they answer differently until later rounds reach "
        "them all; raft nodes apply one committed log and differ only while a node trails "
        "the commit."
    ),
    "availability": (
        "Why the modes differ: a raft node without contact with a quorum refuses every "
        "registration and proposal (reads still answer from its applied state), while an "
        "eventual node acknowledges registrations on its own; reads fail in either mode "
        "where the node asked is killed, paused or cut off."
    ),
    "latency": (
        "Why the modes differ: register is a broker's REGISTER_BROKER round, which raft "
        "answers once a majority has committed it and eventual after its own apply. "
        "route_read is the client's wall time from asking one node to its answer; in both "
        "modes that node answers from its own state (raft reads are local unless "
        "linearizable reads are asked), so no replication step is in it, and this report "
        "does not split where the rest of the difference goes (node and host load)."
    ),
}
"""One line per section whose figures the modes' designs make differ."""

SESSION_REASON = (
    "Why the modes differ: a client polls a random node each time; eventual nodes hold "
    "different routes, so a later read at another node can be older, while raft nodes "
    "differ only while one trails the commit."
)
VERDICT_REASONS = {
    "route history": SECTION_REASONS["linearizability"],
    "nodes diverged": SECTION_REASONS["divergence"],
    "reads answered in the fault window": SECTION_REASONS["availability"],
    "writes acknowledged in the fault window": SECTION_REASONS["availability"],
    "TOPIC_NOT_EXIST for live topics": (
        "Why the modes differ: an eventual node answers from its own table, which its own "
        "scan expires and another node's write may not have reached; a raft node's table "
        "changes only by the committed log, so it lacks a topic only while it trails."
    ),
    "sends to a dead broker": (
        "Why the modes differ: a client sends to a dead broker while the route it polled "
        "still names it; an eventual node drops the broker by its own scan, a raft node "
        "when the leader's committed expiry reaches it."
    ),
    "satisfies monotonic reads (per session)": SESSION_REASON,
    "satisfies read-your-writes (per session)": SESSION_REASON,
}
"""The reason shown beside a verdict row whose modes answer differently."""


def schedule_known(tables: Mapping[str, Sequence[Row]]) -> bool:
    """Whether the report carries the runs' fault schedule (reports from before the
    ``fault_windows`` table do not, and then nothing is left out)."""
    return FAULT_WINDOWS in tables


def broker_killed(tables: Mapping[str, Sequence[Row]]) -> bool:
    """Whether any run of the report killed a broker (its schedule, or a stale-route row,
    which only a kill makes); true when the schedule is unknown."""
    if not schedule_known(tables) or tables.get("stale_route"):
        return True
    return any(r.get("kind") == KILL_BROKER for r in tables.get(FAULT_WINDOWS, ()))


def any_fault(tables: Mapping[str, Sequence[Row]]) -> bool:
    """Whether any run of the report had a fault window; true when the schedule is
    unknown or the availability table has rows."""
    return (
        not schedule_known(tables)
        or bool(tables.get(FAULT_WINDOWS))
        or bool(tables.get("availability"))
    )


def label_simulated(rows: Sequence[Row], column: str = "kind") -> list[dict[str, Any]]:
    """The latency rows with each simulated kind named as such (:data:`SIMULATED_KINDS`)."""
    return [
        {**row, column: SIMULATED_KINDS.get(str(row.get(column)), row.get(column))} for row in rows
    ]


def modes_differ(rows: Sequence[Row], modes: Sequence[str]) -> bool:
    """Whether a side-by-side table shows different values for two modes: in a row with
    a column per mode, or in a ``<measure> <mode>`` column pair."""
    if len(modes) < 2:
        return False
    for row in rows:
        if len({repr(row.get(m)) for m in modes if m in row}) > 1:
            return True
        measures = {c.rsplit(" ", 1)[0] for c in row if c.rsplit(" ", 1)[-1] in modes}
        for measure in measures:
            if len({repr(row.get(f"{measure} {m}")) for m in modes}) > 1:
                return True
    return False


def section_reason(name: str, shown: Sequence[Row], modes: Sequence[str]) -> str:
    """The line under a section on why its figures differ between the modes (empty when
    they do not, or when the designs give no reason for that table)."""
    reason = SECTION_REASONS.get(name, "")
    return reason if reason and modes_differ(shown, modes) else ""


WHY_PREFIX = "Why the modes differ: "
"""How a reason starts where it stands alone (under a table); a verdict's column is
headed so, and its cells leave the words out."""


def verdict_reason(row: Row, modes: Sequence[str]) -> str:
    """The reason beside one verdict row when its modes answer differently (the column
    says "why the modes differ": the cell starts with the reason itself)."""
    if len(modes) < 2 or len({str(row.get(m)) for m in modes}) < 2:
        return ""
    reason = VERDICT_REASONS.get(str(row.get("")), "").removeprefix(WHY_PREFIX)
    return reason[:1].upper() + reason[1:]
