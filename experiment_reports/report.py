"""The analysis report: its sections, the modes side by side, the verdicts, and the files
that carry them (JSON and CSV tables, ``summary.md``), written and read back.

The Spark analysis writes a report with these functions and the console's experiment page
renders the same sections from them, so this module imports neither Spark nor matplotlib;
:mod:`spark_jobs.report_folder` adds the plots and the counterexamples' operations.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiment_reports.mode_notes import (
    BROKER_KILL_TABLES,
    NO_KILL,
    WHY_PREFIX,
    any_fault,
    broker_killed,
    label_simulated,
    section_reason,
    verdict_reason,
)
from experiment_reports.seeds import (
    SEED_INTERVALS,
    SEEDS_ABOUT,
    SEEDS_EMPTY,
    SEEDS_TITLE,
    interval_table,
    several_seeds,
)
from experiment_reports.t_buckets import t_bucket_label
from experiment_reports.text import SESSION_TABLE, client_markdown, shares_as_percent

Row = Mapping[str, Any]


MODES_KEY = "modes"
"""The key of ``summary.json`` beside the tables: :func:`mode_summary` (an object, so
:func:`read_tables` never takes it for a table)."""
ANOMALY_KEYS = frozenset({"mode", "scenario", "reads", "examples"})
"""Columns of the ``anomalies`` table that are no anomaly class."""


def mode_summary(tables: Mapping[str, Sequence[Row]]) -> dict[str, dict[str, Any]]:
    """Per mode, from the analysis' tables: ``inferred_writes`` (writes whose origin is
    ``inferred``, every run and topic; table ``route_changes``), ``unique_write_values``
    (true when no two writes of any topic of any run share a value, so each read names
    the one write it returned; null when the tables predate the column),
    ``unknown_topics`` (topics whose linearizability verdict is unknown; table
    ``linearizability``), ``anomalies`` (each read anomaly class and its count of
    reads, every scenario together; table ``anomalies``), ``power`` (each mutation kind:
    ``injected``, ``caught`` and ``unknown``, both regions and every run together; table
    ``checker_power``) and ``schedule`` (every fault of every run, as the runs recorded
    them: ``run_id, scenario, kind, target, start_ms, end_ms``, in ms after the run's
    first fault; table ``fault_windows``; a nemesis run's steps, one row each),
    ``monotonic_reads`` and ``read_your_writes`` (:func:`session_guarantee`: ``satisfied``,
    ``violations``, ``checked``, every run together; table ``session_guarantees``) and
    ``two_masters`` (``count``: reads naming a deposed master of a broker name after
    another read saw the new one, or two masters at once; ``groups_checked``: broker
    names a read named a master of, summed over runs; table ``two_masters``) and
    ``checker`` (:func:`_depth`; table ``checker_depth``)."""
    changes = tables.get("route_changes", [])
    linear = tables.get("linearizability", [])
    anomaly_rows = tables.get("anomalies", [])
    power_rows = tables.get("checker_power", [])
    fault_rows = tables.get("fault_windows", [])
    summary: dict[str, dict[str, Any]] = {}
    for mode in modes_in(tables):
        mine = [r for r in changes if r.get("mode") == mode]
        repeated = [r.get("repeated_values") for r in mine]
        anomalies: dict[str, int] = {}
        for row in (r for r in anomaly_rows if r.get("mode") == mode):
            for name, count in row.items():
                if name not in ANOMALY_KEYS and isinstance(count, int):
                    anomalies[name] = anomalies.get(name, 0) + count
        summary[mode] = {
            "inferred_writes": _count(mine, mode, "inferred_writes"),
            "unique_write_values": (
                None if any(r is None for r in repeated) else not any(repeated)
            ),
            "unknown_topics": _count(linear, mode, "unknown"),
            "anomalies": dict(sorted(anomalies.items())),
            "power": _power(r for r in power_rows if r.get("mode") == mode),
            "schedule": [
                {key: row.get(key) for key in SCHEDULE_KEYS}
                for row in fault_rows
                if row.get("mode") == mode
            ],
            **{
                rule: session_guarantee(tables.get(SESSION_TABLE, []), mode, rule)
                for rule in SESSION_RULES
            },
            "checker": _depth(r for r in tables.get("checker_depth", []) if r.get("mode") == mode),
            "two_masters": {
                "count": _count(tables.get("two_masters", []), mode, "two_masters"),
                "groups_checked": _count(tables.get("two_masters", []), mode, "groups_checked"),
            },
        }
    return summary


ANY_FAULT = "any"
"""The ``availability`` rows over every fault window at once (``fault_kind``)."""
SESSION_RULES = ("monotonic_reads", "read_your_writes")
"""The session guarantees (``spark_jobs.sessions``), as their columns' prefix."""


def session_guarantee(rows: Sequence[Row], mode: str, rule: str) -> dict[str, Any]:
    """One mode's ``rule`` over every run: ``violations`` (reads that broke it),
    ``checked`` (reads it applied to) and ``satisfied`` (no violation; null when no read
    was checked, so nothing was measured)."""
    violations = _count(rows, mode, f"{rule}_violations")
    checked = _count(rows, mode, f"{rule}_checked")
    return {
        "satisfied": None if checked == 0 else violations == 0,
        "violations": violations,
        "checked": checked,
    }


def _depth(rows: Iterable[Row]) -> dict[str, Any]:
    """Every run of a mode together: ``topics`` checked, ``ops`` (register operations),
    ``ops_per_topic_max`` and ``check_ms_max`` (the largest topic), ``check_ms_total``
    (ms, summed over topics)."""
    found = list(rows)
    return {
        "topics": sum(int(r.get("topics") or 0) for r in found),
        "ops": sum(int(r.get("ops") or 0) for r in found),
        "ops_per_topic_max": max((int(r.get("ops_per_topic_max") or 0) for r in found), default=0),
        "check_ms_max": max((float(r.get("check_ms_max") or 0.0) for r in found), default=0.0),
        "check_ms_total": round(sum(float(r.get("check_ms_total") or 0.0) for r in found), 1),
    }


SCHEDULE_KEYS = ("run_id", "scenario", "kind", "target", "start_ms", "end_ms")
POWER_COUNTS = ("injected", "caught", "unknown")


def _power(rows: Iterable[Row]) -> dict[str, dict[str, int]]:
    """Mutation kind -> injected, caught and unknown, summed over the rows."""
    power: dict[str, dict[str, int]] = {}
    for row in rows:
        counts = power.setdefault(str(row.get("kind")), dict.fromkeys(POWER_COUNTS, 0))
        for name in POWER_COUNTS:
            value = row.get(name)
            counts[name] += value if isinstance(value, int) else 0
    return dict(sorted(power.items()))


def write_tables(out_dir: Path | str, tables: Mapping[str, Sequence[Row]]) -> None:
    """Every table as ``<name>.csv`` plus all of them in ``summary.json``, with each
    mode's headline counts under ``modes`` (:func:`mode_summary`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in tables.items():
        columns = list(rows[0].keys()) if rows else []
        with (out / f"{name}.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
    document: dict[str, Any] = {**tables, MODES_KEY: mode_summary(tables)}
    (out / "summary.json").write_text(json.dumps(document, indent=2, sort_keys=True, default=str))


def read_tables(out_dir: Path | str) -> dict[str, list[dict[str, Any]]]:
    """The tables :func:`write_tables` wrote into ``out_dir`` (its ``summary.json``); empty
    when the file is missing or unreadable, and only rows that are objects."""
    try:
        data = json.loads((Path(out_dir) / "summary.json").read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        k: [r for r in v if isinstance(r, dict)] for k, v in data.items() if isinstance(v, list)
    }


@dataclass(frozen=True, slots=True)
class Section:
    """One table of the report: what it measures and what an empty table means."""

    name: str
    title: str
    about: str
    empty: str
    keys: tuple[str, ...] = ()
    """Columns that name a row inside a mode (the rest are measures, shown per mode)."""
    per_event: bool = False
    """Rows are events (a kill, a counterexample), listed as they are, not per mode."""


SECTIONS = (
    Section(
        "linearizability",
        "Linearizability of each topic's route",
        "Topics whose reads and writes, checked as one register per topic, fit some "
        "order of the operations that respects real time. A topic with fewer than two "
        "writes is not exercised: any reads of one value fit.",
        "No topic had operations to check.",
    ),
    Section(
        "checker_depth",
        "How much the checker decided, and its time",
        "Per run: topics checked, register operations per topic (median and largest; a "
        "route read or write of the topic is one operation), and the checker's wall time "
        "per topic in ms (largest, and the sum over the run's topics; each topic is one "
        "Spark task, so topics are checked in parallel). No topic has an operation cap.",
        "No topic had operations to check.",
    ),
    Section(
        "checker_power",
        "Checker power: faults injected / caught, by kind",
        "Faults injected into each run's own history, one at a time on a copy of a topic, "
        "and the share the checker found not linearizable. Kinds: stale_read_1ms, "
        "stale_read_100ms, stale_read_1s: a read added 1 ms, 100 ms or 1 s after an "
        "acknowledged write's ack, returning the route that write replaced; lost_write: "
        "an acknowledged write no read sees (its reads return the route it replaced); "
        "reordered_writes: two acknowledged writes, one after the other, whose reads see "
        "them in the other order; never_written: a read returns a route no write made. "
        "A fault counts as injected only when the acknowledged writes rule it out (one a "
        "write that timed out could explain is no fault and is not counted). Region: "
        "whole, a topic whose own history is linearizable; passing_prefix, a failing "
        "topic's longest time prefix that still passes; topics of unknown verdict get "
        "none. topics: topics mutated; unknown: the search budget ran out.",
        "No run had a topic with two writes and a read to inject at.",
        keys=("kind", "region"),
    ),
    Section(
        "route_changes",
        "Route changes per topic",
        "Acknowledged route writes of each topic, in all and inside the fault window, "
        "the writes the harness inferred (inferred_writes: changes no recorded write "
        "explains), the writes that repeat a value an earlier write of the topic had "
        "(repeated_values: 0 when every write is traceable by its value), and the "
        "topic's verdict (not_exercised: fewer than two writes).",
        "No route write was recorded.",
        keys=("topic",),
    ),
    Section(
        "divergence",
        "Nodes answering differently",
        "Share of sampling rounds in which the nodes answered a topic's route "
        "differently, the share of topics that ever diverged, and the longest window.",
        "No node states were sampled, so divergence was not measured.",
    ),
    Section(
        "availability",
        "Availability inside the fault window",
        "Share of route reads and of route writes (registrations, unregistrations, "
        "expiries, topic changes) invoked inside a fault window answered ok (or, for reads, "
        "answered at all: ok or TOPIC_NOT_EXIST), per fault kind (every kind a scenario or "
        "the nemesis records: partitions of broker or Raft links both ways and one way, "
        "leader isolation, a paused, killed or clock-skewed NameServer, a killed broker), "
        "and for any fault (an operation inside several windows counted once).",
        "This scenario has no fault window, so availability inside one is not measured.",
        keys=("fault_kind", "op_class"),
    ),
    Section(
        "anomalies",
        "Read anomalies (reads)",
        "Every route read that answered, checked against the acknowledged writes of its "
        "topic and given at most one class (counts are reads; examples as run/op id). "
        "never_written: the client got a route no write produced (or only a later one), so "
        "it may send to brokers that never served the topic. not_exist_live: it was told "
        "TOPIC_NOT_EXIST while every write that could be in effect kept the topic, so its "
        "send or subscription failed for a live topic. stale_read: it got a route some "
        "acknowledged write had already replaced before it asked. non_monotonic_read: it "
        "got a route older than one it had already seen, so it went back in time. "
        "version_backwards counts reads whose node version fell below one the same client "
        "saw before (raft: any node; eventual: the same node), whatever the class. "
        "never_written_composed counts the never_written reads whose every broker share "
        "some write had: a route put together from written shares (a registration whose "
        "outcome the harness never learnt landing after later writes were valued, or a "
        "node applying partial updates in another order), not a share nobody wrote.",
        "No route read was recorded.",
    ),
    Section(
        "not_exist_live",
        "TOPIC_NOT_EXIST for live topics",
        "Reads answered TOPIC_NOT_EXIST while every write that could be in effect kept "
        "the topic present (the not_exist_live class of the read anomalies).",
        "No route read was recorded.",
    ),
    Section(
        "lost_writes",
        "Lost acknowledged writes",
        "Per run: route writes acknowledged to a client or the harness (acked_writes) and "
        "those lost (lost_writes, and their share): no read and no node sample returned "
        "the written route while it could have been in effect, and a read started after "
        "the acknowledgement, and finished "
        "before any other write of the topic started, returned a route that neither this "
        "write nor any write concurrent with it could have left. A linearizable route "
        "never loses a write that way. A write that was simply replaced by a later one, "
        "or whose read could come from a write that timed out, is not counted. Examples "
        "as run/write op id with the read that shows it missing.",
        "No route write was acknowledged.",
    ),
    Section(
        "convergence",
        "Time to converge after each heal",
        "Per fault that healed (partition, kill ended), when it began and healed in "
        "seconds from the recording's start (s from start), and converge_ms, the time in "
        "milliseconds from the heal to the first sampling round in which every node "
        "answered every sampled topic that had an acknowledged write with the same route, "
        "the latest acknowledged one (or one whose write was still in flight). Its "
        "resolution is the sampling interval. not converged: no such round came before "
        "the run ended (converge_ms is then empty, not a number); not measured: no sampled "
        "topic had an acknowledged write. Then each such topic on its own: how many had a "
        "round after the heal in which every node answered it with one such route (topics "
        "converged), and the median and largest time from the heal to that round, in "
        "milliseconds (while brokers keep writing, a round with every topic agreed at once "
        "may come only after the writes stop).",
        "No fault healed in this scenario, so convergence after a heal was not measured.",
        per_event=True,
    ),
    Section(
        "two_masters",
        "Two masters of one broker name at once",
        "Per run: broker names some route read named a master address of "
        "(groups_checked), and reads that named two masters of one broker name at once "
        "(two_masters): a read invoked after another read had completed naming a new "
        "master, that names the master the broker had before it, while no write could "
        "have made that master again by then (a client sent back to a deposed master; "
        "raft failover), or one answer naming two masters for one name (split_answers). "
        "Examples as run/read op id after the read that saw the new master (broker).",
        "No route read named a broker's master.",
    ),
    Section(
        SESSION_TABLE,
        "Session guarantees: monotonic reads and read-your-writes",
        "Per run, a session being one client process (a client, the admin, a follow-up "
        "reader of one node), counts in reads. Monotonic reads: a session's read of a topic "
        "invoked after its earlier read of that topic completed must not return a route "
        "whose write precedes (completed before the other was invoked) the write of the "
        "route the earlier read returned. Read-your-writes: a session's read of a topic "
        "invoked after its own write of that topic was acknowledged must return that "
        "route or one whose write does not precede that write. *_checked: reads the rule "
        "applied to; *_violations: reads that broke it; *_sessions: sessions with a "
        "checked read. A read of a route no write made is left out (never_written). "
        "Examples as rule run/read op id (against the earlier read or own write).",
        "No session read a topic twice, or after its own write, so no session guarantee "
        "was checked.",
    ),
    Section(
        "t_visibility",
        "Freshness by time since the write",
        "Share of route reads that returned the latest committed route, by the time from "
        "that route's write to the read's start; a bucket such as 100-500 ms holds the "
        "reads that started at least 100 and less than 500 ms after the write (the plot "
        "uses the same buckets).",
        "No route read followed a write, so freshness was not measured.",
        keys=("t_bucket_ms",),
    ),
    Section(
        "k_staleness",
        "Staleness in versions",
        "Share of route reads at most k route versions behind the latest write.",
        "No route read followed a write, so staleness was not measured.",
        keys=("k",),
    ),
    Section(
        "stale_route",
        "Stale routes after a broker kill",
        "Per killed broker: ms until no node routed to it, ms until every client that "
        "knew it had a route without it, and sends routed to it while it was dead.",
        "No broker was killed in this scenario, so no node or client could route to a dead broker.",
        per_event=True,
    ),
    Section(
        "dead_sends",
        "Sends to dead brokers",
        "All sends, and those routed to a broker while it was dead.",
        "No send was recorded.",
    ),
    Section(
        "ownership",
        "Queue ownership of consumer groups",
        "Share of rebalance checkpoints where a queue had no consumer of a group "
        "(orphan) or two (double), and the most queues affected at once.",
        "No consumer rebalance was recorded.",
    ),
    Section(
        "latency",
        "Operation latency",
        "p50/p95/p99 of completion minus invocation, per operation kind, in µs. Kinds "
        "marked simulated are the harness's model, not a measurement.",
        "No operation completed.",
        keys=("kind",),
    ),
)
SECTION_BY_NAME = {section.name: section for section in SECTIONS}
COUNTEREXAMPLE_OPS = "counterexample_operations"
PLOT_NAMES = (
    "t_visibility",
    "k_staleness",
    "divergence_timeline",
    "read_latency_cdf",
    "stale_route_window",
)
"""The figures the analysis may draw (``<name>.png`` and ``.svg``, :mod:`spark_jobs.plots`),
in report order."""
MODE_ORDER = ("eventual", "raft")
MISSING = "—"
BYLINE_KEYS = ("mode", "scenario", "run_id")
KEY_TEXT: dict[str, tuple[str, Callable[[Any], str]]] = {
    "t_bucket_ms": ("after the write", t_bucket_label),
}
"""Key columns shown under another name, their values as text (sorted by the raw value)."""


def modes_in(tables: Mapping[str, Sequence[Row]]) -> list[str]:
    """The modes of the analysed runs, eventual first."""
    found = {str(row["mode"]) for rows in tables.values() for row in rows if row.get("mode")}
    return sorted(found, key=lambda m: (MODE_ORDER.index(m) if m in MODE_ORDER else 9, m))


def cell(value: Any) -> str:
    """One table cell as text: floats to 4 significant digits, lists joined, ``—`` for
    a missing value."""
    if value is None:
        return MISSING
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def side_by_side(
    rows: Sequence[Row], modes: Sequence[str], keys: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Every mode in every table: without ``keys``, one row per measure and a column per
    mode; with ``keys``, one row per key value and a ``<measure> <mode>`` column each.
    ``None`` (shown as ``—``) where a mode has no row. Several scenarios keep their own
    rows; several runs of one mode are listed as they are."""
    if not rows:
        return []
    if len({r.get("scenario") for r in rows}) > 1:
        keys = ("scenario", *keys)
    if len({(r.get("mode"), *(r.get(k) for k in keys)) for r in rows}) < len(rows):
        return [dict(r) for r in rows]
    skip = {*BYLINE_KEYS, *keys}
    measures = [c for c in dict.fromkeys(c for r in rows for c in r) if c not in skip]
    by_group: dict[tuple[Any, ...], dict[str, Row]] = {}
    for row in rows:
        by_group.setdefault(tuple(row.get(k) for k in keys), {})[str(row.get("mode"))] = row
    groups = sorted(by_group, key=lambda g: tuple((v is None, v) for v in g))

    def value(group: tuple[Any, ...], mode: str, measure: str) -> Any:
        found = by_group[group].get(mode)
        return None if found is None else found.get(measure)

    if not keys:
        return [{"measure": m, **{mode: value((), mode, m) for mode in modes}} for m in measures]
    return [
        {
            **_key_cells(keys, group),
            **{f"{m} {mode}": value(group, mode, m) for m in measures for mode in modes},
        }
        for group in groups
    ]


def _key_cells(keys: Sequence[str], group: Sequence[Any]) -> dict[str, Any]:
    """The key columns of one side-by-side row, renamed and as text per :data:`KEY_TEXT`."""
    cells: dict[str, Any] = {}
    for key, value in zip(keys, group, strict=True):
        name, text = KEY_TEXT.get(key, (key, None))
        cells[name] = text(value) if text is not None and value is not None else value
    return cells


def _count(rows: Sequence[Row], mode: str, column: str) -> int:
    return sum(int(r.get(column) or 0) for r in rows if r.get("mode") == mode)


def linearizability_verdict(rows: Sequence[Row], mode: str) -> tuple[str, str]:
    """(verdict, sentence) of one mode from the per-run linearizability rows."""
    checked = {
        c: _count(rows, mode, c)
        for c in ("linearizable", "not_linearizable", "unknown", "not_exercised")
    }
    total = sum(checked.values())
    if not any(r.get("mode") == mode for r in rows) or total == 0:
        return "no data", "no topic was checked"
    exercised = total - checked["not_exercised"]
    tail = (
        f"; {checked['not_exercised']} of {total} not exercised (fewer than two writes)"
        if checked["not_exercised"]
        else ""
    )
    if checked["not_linearizable"]:
        return (
            "not linearizable",
            f"{checked['not_linearizable']} of {exercised} exercised topics not linearizable{tail}",
        )
    if checked["unknown"]:
        return "unknown", f"{checked['unknown']} of {exercised} topics undecided in budget{tail}"
    if exercised == 0:
        return "not exercised", f"no topic had two writes to tell orders apart{tail}"
    return "linearizable", f"{exercised} of {exercised} exercised topics linearizable{tail}"


def _first(rows: Sequence[Row], mode: str, **match: Any) -> Row | None:
    for row in rows:
        if row.get("mode") == mode and all(row.get(k) == v for k, v in match.items()):
            return row
    return None


def verdicts(tables: Mapping[str, Sequence[Row]], modes: Sequence[str]) -> list[dict[str, Any]]:
    """The headline of the report: one row per question, one column per mode."""

    def per_mode(label: str, answer: Any) -> dict[str, Any]:
        return {"": label, **{mode: answer(mode) for mode in modes}}

    def linear(mode: str) -> str:
        verdict, sentence = linearizability_verdict(tables.get("linearizability", []), mode)
        return f"{verdict} ({sentence})"

    def diverged(mode: str) -> str:
        row = _first(tables.get("divergence", []), mode)
        if row is None:
            return "not measured"
        if not row.get("topics_diverged_share"):
            return "never"
        return (
            f"{100 * float(row['topics_diverged_share']):.0f} % of topics, longest "
            f"{int(row.get('longest_ms') or 0) / 1000:.1f} s"
        )

    def available(op_class: str, column: str) -> Callable[[str], str]:
        def answer(mode: str) -> str:
            rows = tables.get("availability", [])
            # Any fault's row; a report from before the per-kind rows has only that one.
            row = _first(rows, mode, op_class=op_class, fault_kind=ANY_FAULT) or _first(
                rows, mode, op_class=op_class, fault_kind=None
            )
            if row is None:
                return f"no {op_class} in a fault window"
            return f"{100 * float(row[column]):.1f} % of {row['ops']}"

        return answer

    def session(rule: str) -> Callable[[str], str]:
        def answer(mode: str) -> str:
            rows = tables.get(SESSION_TABLE, [])
            if not any(r.get("mode") == mode for r in rows):
                return "not measured"
            found = session_guarantee(rows, mode, rule)
            sessions = _count(rows, mode, f"{rule}_sessions")
            if found["satisfied"] is None:
                return "not measured (no read it applies to)"
            return (
                f"{'yes' if found['satisfied'] else 'no'} ({found['violations']} violations "
                f"of {found['checked']} reads checked, {sessions} sessions)"
            )

        return answer

    def not_exist(mode: str) -> str:
        row = _first(tables.get("not_exist_live", []), mode)
        return "not measured" if row is None else f"{row['not_exist_live']} of {row['reads']}"

    def dead(mode: str) -> str:
        row = _first(tables.get("dead_sends", []), mode)
        return "not measured" if row is None else f"{row['sends_to_dead']} of {row['sends']}"

    faulted, killed = any_fault(tables), broker_killed(tables)
    # A row the scenario cannot produce (no fault window, no broker killed) is left out
    # rather than shown as a zero that reads like a result.
    rows = [
        per_mode("route history", linear),
        per_mode("nodes diverged", diverged),
        *(
            [
                per_mode("reads answered in the fault window", available("read", "answered_share")),
                per_mode("writes acknowledged in the fault window", available("write", "ok_share")),
            ]
            if faulted
            else []
        ),
        per_mode("TOPIC_NOT_EXIST for live topics", not_exist),
        *([per_mode("sends to a dead broker", dead)] if killed else []),
        per_mode("satisfies monotonic reads (per session)", session("monotonic_reads")),
        per_mode("satisfies read-your-writes (per session)", session("read_your_writes")),
    ]
    return rows


WHY = "why the modes differ"
"""The verdicts' column of :func:`mode_notes.verdict_reason`."""


def verdicts_with_reasons(
    tables: Mapping[str, Sequence[Row]], modes: Sequence[str]
) -> list[dict[str, Any]]:
    """:func:`verdicts` with a :data:`WHY` cell each: the line on why the modes answer
    differently (empty where they agree)."""
    return [{**row, WHY: verdict_reason(row, modes)} for row in verdicts(tables, modes)]


@dataclass(frozen=True, slots=True)
class ShownSection:
    """What the report shows of one section: its rows (side by side unless per event, a
    simulated kind labelled), the sentence shown instead when the scenario cannot produce
    them, and the line on why the modes' figures differ."""

    rows: list[dict[str, Any]]
    instead: str
    reason: str


def shown_section(
    section: Section, tables: Mapping[str, Sequence[Row]], modes: Sequence[str]
) -> ShownSection:
    """One section as ``summary.md`` and the console show it."""
    rows: Sequence[Row] = tables.get(section.name, [])
    if section.name in BROKER_KILL_TABLES and not broker_killed(tables):
        return ShownSection([], NO_KILL, "")
    if section.name == "latency":
        rows = label_simulated(rows)
    shown = (
        [dict(r) for r in rows] if section.per_event else side_by_side(rows, modes, section.keys)
    )
    return ShownSection(shown, "", section_reason(section.name, shown, modes))


def markdown_table(rows: Sequence[Row], columns: Sequence[str] | None = None) -> str:
    """A GitHub-style Markdown table (every row's columns unless ``columns``)."""
    columns = list(columns or dict.fromkeys(c for r in rows for c in r))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def section_markdown(
    section: Section,
    rows: Sequence[Row],
    modes: Sequence[str],
    tables: Mapping[str, Sequence[Row]] | None = None,
) -> str:
    """One table of ``summary.md``: its title, what it measures, the rows or what their
    absence means (or that the scenario cannot produce them, judged from ``tables``),
    the line on why the modes differ, and a sentence for each mode that has none."""
    parts = [f"\n## {section.title}\n\n{section.about}\n\n"]
    shown = shown_section(section, {**(tables or {}), section.name: rows}, modes)
    if shown.instead:
        return "".join(parts) + f"_{shown.instead}_\n"
    if not rows:
        return "".join(parts) + f"_{section.empty}_\n"
    parts.append(markdown_table(shares_as_percent(shown.rows)))
    if shown.reason:
        parts.append(f"\n{shown.reason}\n")
    absent = [m for m in modes if not any(r.get("mode") == m for r in rows)]
    parts += [f"\n_{mode}: {section.empty[0].lower()}{section.empty[1:]}_\n" for mode in absent]
    return "".join(parts)


def seeds_markdown(rows: Sequence[Row], modes: Sequence[str]) -> str:
    """The ``Across seeds`` section of ``summary.md``: each measure per mode as
    ``mean [lo, hi] unit, n=seeds``; nothing with one seed per mode (no interval to
    give, and the numbers are the tables' own)."""
    if rows and not several_seeds(rows):
        return ""
    head = f"\n## {SEEDS_TITLE}\n\n{SEEDS_ABOUT}\n\n"
    if not rows:
        return head + f"_{SEEDS_EMPTY}_\n"
    return head + markdown_table(interval_table(rows, modes))


def markdown_verdicts(tables: Mapping[str, Sequence[Row]]) -> str:
    """The verdicts of every mode side by side, as a Markdown table."""
    modes = modes_in(tables)
    return markdown_table(verdicts(tables, modes), ["", *modes])


def verdict_reasons_markdown(tables: Mapping[str, Sequence[Row]]) -> str:
    """Under the verdicts of ``summary.md``: for each row whose modes answer differently,
    one line on why (nothing when they agree)."""
    rows = verdicts_with_reasons(tables, modes_in(tables))
    lines = [f"- {row['']}: {row[WHY]}" for row in rows if row[WHY]]
    return "\n" + "\n".join([f"{WHY_PREFIX.strip()}", *lines]) + "\n" if lines else ""


def write_markdown(
    out_dir: Path | str,
    tables: Mapping[str, Sequence[Row]],
    seconds: Mapping[str, float],
    plots: Sequence[Path] = (),
    title: str = "Consistency analysis",
) -> Path:
    """``summary.md``: the verdicts side by side, every table with both modes, the
    counterexamples as operations, the plots, and the seconds of each Spark job."""
    modes = modes_in(tables)
    parts = [f"# {title}\n\n## Verdicts\n\n", markdown_verdicts(tables)]
    parts.append(verdict_reasons_markdown(tables))
    parts.append(client_markdown(tables, modes))
    if SEED_INTERVALS in tables:
        parts.append(seeds_markdown(tables[SEED_INTERVALS], modes))
    for section in SECTIONS:
        parts.append(section_markdown(section, tables.get(section.name, []), modes, tables))
    parts.append(
        "\n## Counterexamples\n\nThe operations of each minimal history that no "
        "order explains (times in µs since the fault started; a route as its "
        "brokers).\n\n"
    )
    examples = tables.get(COUNTEREXAMPLE_OPS, [])
    parts.append(
        markdown_table(examples)
        if examples
        else "_Every exercised topic is linearizable, so there is no counterexample._\n"
    )
    if plots:
        parts.append("\n## Plots\n\n")
        parts += [f"![{p.stem}]({p.name})\n\n" for p in plots]
    parts.append("\n## Spark job seconds\n\n")
    parts.append(markdown_table([{"job": k, "seconds": v} for k, v in seconds.items()]))
    for facts in tables.get("spark", []):
        parts.append(
            f"\nRan on `{facts['master']}`: {facts['executors']} executors "
            f"(0: the tasks ran in the driver), {facts['cores']} cores, "
            f"{facts['shuffle_partitions']} shuffle partitions.\n"
        )
    path = Path(out_dir) / "summary.md"
    path.write_text("".join(parts))
    return path
