"""Session guarantees per client process: monotonic reads and read-your-writes.

A *session* is one process of the history (the ``operations.process`` column): a client,
a follow-up reader of one node, the admin. Each topic's route is a register, as for
:mod:`spark_jobs.anomalies` (which rows count, and how: ``checker.register_role``; times in
microseconds, ``schema.interval_us``; an ``error``/``timeout`` write is pending: it may take
effect any time after its call, or never; the topic starts absent, an implicit write of
``""`` before everything).

*Precedes*: write ``a`` precedes write ``b`` when ``a`` completed before ``b`` was invoked
(touching intervals are concurrent; a pending write precedes nothing; the implicit initial
write precedes every write). It is the order between two writes that the checker's value
blocks respect (``spark_jobs.register_precedence``), and it is the only write order the
history knows for certain in both modes.

A read's *candidates* are the writes of its value invoked by its completion (the initial
write for ``""``). A read with no candidate (a value never written, or only later) is no
evidence either way here: it is the ``never_written`` class of :mod:`spark_jobs.anomalies`,
and is neither checked nor used as an earlier read. When values repeat a read has several
candidates and a violation needs all of them to agree (conservative).

- **Monotonic reads.** A read ``r2`` of a topic by a session, invoked after an earlier read
  ``r1`` of the same topic by the same session completed, must not return a value whose
  every candidate precedes every candidate of ``r1``'s value. ``r2`` is *checked* when such
  an ``r1`` exists and *violates* when the rule fails for some ``r1``.
- **Read-your-writes.** After a session's own acknowledged write ``w`` of a topic, a read
  of that topic by the same session invoked after ``w``'s ack must return ``w``'s value or
  a value some candidate of which does not precede ``w``. Own writes: outcome ``ok``, made
  by the session itself; the raft cluster's writes (process ``raft``) and writes the
  harness inferred (origin ``inferred``) are no session's. A read is *checked* when such a
  ``w`` exists, and *violates* when it fails for some ``w``.

Counts are reads (a read violates at most once per rule); a session is counted per rule
when at least one of its reads was checked. A linearizable register satisfies both (every
read follows the reads and writes that completed before it), so these matter in eventual
mode, where they say which weaker guarantee still holds.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from experiment_history.schema import ORIGIN_INFERRED, PROCESS_RAFT
from experiment_history.superseding import ABSENT, TIME_MAX_US, TIME_MIN_US
from spark_jobs.anomalies import ROW_COLUMNS
from spark_jobs.checker import register_rows, topic_groups

MONOTONIC_READS = "monotonic_reads"
READ_YOUR_WRITES = "read_your_writes"
RULES = (MONOTONIC_READS, READ_YOUR_WRITES)
EXAMPLES_PER_RULE = 3
"""Violations kept per rule, per topic and again per run, as examples (first op ids)."""
SESSION_COLUMNS = (*ROW_COLUMNS, "origin")


@dataclass(frozen=True, slots=True)
class SessionRead:
    """A read that answered ``value`` (``""``: the absent route)."""

    op_id: int
    process: str
    value: str
    invoke_us: int
    complete_us: int


@dataclass(frozen=True, slots=True)
class SessionWrite:
    """A write of one topic; ``complete_us`` :data:`TIME_MAX_US`: pending. ``own``: an
    acknowledged write that counts as its session's (read-your-writes)."""

    op_id: int
    process: str
    value: str
    invoke_us: int
    complete_us: int
    own: bool = True


@dataclass(slots=True)
class RuleCount:
    """One rule over one topic: sessions with a checked read, reads checked, violating
    reads and (violating read op id, the op id it is checked against) examples."""

    sessions: set[str] = field(default_factory=set)
    checked: int = 0
    violations: int = 0
    examples: list[tuple[int, int]] = field(default_factory=list)

    def check(self, read: SessionRead, violated_by: int | None) -> None:
        """Count ``read`` as checked; ``violated_by``: the op id it fails against."""
        self.sessions.add(read.process)
        self.checked += 1
        if violated_by is not None:
            self.violations += 1
            if len(self.examples) < EXAMPLES_PER_RULE:
                self.examples.append((read.op_id, violated_by))


class _Candidates:
    """The writes of each value, to answer "the oldest invocation and newest completion
    among the writes of ``value`` invoked by ``t``"."""

    def __init__(self, writes: Iterable[SessionWrite]) -> None:
        spans: dict[str, list[tuple[int, int]]] = {ABSENT: [(TIME_MIN_US, TIME_MIN_US)]}
        for w in writes:
            spans.setdefault(w.value, []).append((w.invoke_us, w.complete_us))
        self._invokes: dict[str, list[int]] = {}
        self._newest: dict[str, list[int]] = {}
        for value, found in spans.items():
            found.sort()
            self._invokes[value] = [start for start, _ in found]
            self._newest[value] = list(accumulate((end for _, end in found), max))

    def of(self, read: SessionRead) -> tuple[int, int] | None:
        """(oldest invoke, newest complete) of ``read``'s candidates; None: it has none."""
        invokes = self._invokes.get(read.value)
        if invokes is None:
            return None
        count = bisect_right(invokes, read.complete_us)
        if count == 0:
            return None
        return invokes[0], self._newest[read.value][count - 1]


def _by_session(reads: Iterable[SessionRead]) -> dict[str, list[SessionRead]]:
    sessions: dict[str, list[SessionRead]] = {}
    for read in sorted(reads, key=lambda r: (r.invoke_us, r.op_id)):
        sessions.setdefault(read.process, []).append(read)
    return sessions


def monotonic_reads(reads: Sequence[SessionRead], writes: Sequence[SessionWrite]) -> RuleCount:
    """Monotonic reads over one topic's reads and writes (module docstring)."""
    candidates = _Candidates(writes)
    count = RuleCount()
    for own in _by_session(reads).values():
        explained = [(r, c) for r in own if (c := candidates.of(r)) is not None]
        by_complete = sorted(explained, key=lambda rc: (rc[0].complete_us, rc[0].op_id))
        done = 0
        floor, floor_op = TIME_MIN_US, -1
        seen_earlier = False
        for read, (_, newest) in explained:
            while done < len(by_complete) and by_complete[done][0].complete_us < read.invoke_us:
                prior, (oldest, _) = by_complete[done]
                seen_earlier = True
                if floor_op < 0 or oldest > floor:
                    floor, floor_op = oldest, prior.op_id
                done += 1
            if seen_earlier:
                count.check(read, floor_op if newest < floor else None)
    return count


def read_your_writes(reads: Sequence[SessionRead], writes: Sequence[SessionWrite]) -> RuleCount:
    """Read-your-writes over one topic's reads and writes (module docstring)."""
    candidates = _Candidates(writes)
    own_writes: dict[str, list[SessionWrite]] = {}
    for w in writes:
        if w.own and w.complete_us < TIME_MAX_US:
            own_writes.setdefault(w.process, []).append(w)
    count = RuleCount()
    for process, session_reads in _by_session(reads).items():
        mine = sorted(own_writes.get(process, ()), key=lambda w: (w.complete_us, w.op_id))
        if not mine:
            continue
        done = 0
        floor, floor_op = TIME_MIN_US, -1
        for read in session_reads:
            while done < len(mine) and mine[done].complete_us < read.invoke_us:
                if floor_op < 0 or mine[done].invoke_us > floor:
                    floor, floor_op = mine[done].invoke_us, mine[done].op_id
                done += 1
            found = candidates.of(read)
            if floor_op < 0 or found is None:
                continue
            count.check(read, floor_op if found[1] < floor else None)
    return count


def split_rows(
    rows: Iterable[Mapping[str, Any]],
) -> tuple[list[SessionRead], list[SessionWrite]]:
    """One topic's ``operations`` rows as reads and writes, as ``checker.register_role``
    counts them; a write is ``own`` unless the raft cluster made it or it was inferred."""
    reads: list[SessionRead] = []
    writes: list[SessionWrite] = []
    for row, is_write, value, complete, invoke, end in register_rows(rows):
        process = str(row.get("process") or "")
        op_id = int(row["op_id"])
        if is_write:
            own = complete and process != PROCESS_RAFT and row.get("origin") != ORIGIN_INFERRED
            writes.append(
                SessionWrite(op_id, process, value, invoke, end if complete else TIME_MAX_US, own)
            )
        else:
            reads.append(SessionRead(op_id, process, value, invoke, end))
    return reads, writes


# ------------------------------------------------------------------------------- Spark

_RULE_DDL = (
    "{p}_sessions array<string>, {p}_checked long, {p}_violations long, "
    "{p}_examples array<struct<read_op_id:long,against_op_id:long>>"
)
TOPIC_DDL = "run_id string, mode string, scenario string, topic string, " + ", ".join(
    _RULE_DDL.format(p=rule) for rule in RULES
)
TABLE_COLUMNS = (
    "run_id",
    "mode",
    "scenario",
    *(f"{rule}_{part}" for rule in RULES for part in ("sessions", "checked", "violations")),
    "examples",
)
"""The ``session_guarantees`` table, one row per run."""


def _topic_row(item: tuple[tuple[str, str], Iterable[tuple[Any, ...]]]) -> tuple[Any, ...]:
    """Spark task body: one (run, topic) group's counts under both rules."""
    (run_id, topic), rows = item
    dict_rows = sorted(
        (dict(zip(SESSION_COLUMNS, row, strict=True)) for row in rows), key=lambda r: r["op_id"]
    )
    mode, scenario = dict_rows[0]["mode"], dict_rows[0]["scenario"]
    reads, writes = split_rows(dict_rows)
    out: list[Any] = [run_id, mode, scenario, topic]
    for count in (monotonic_reads(reads, writes), read_your_writes(reads, writes)):
        out += [sorted(count.sessions), count.checked, count.violations, count.examples]
    return tuple(out)


def sessions_by_topic(history: Any) -> Any:
    """Per (run, topic): each rule's checked sessions, checked and violating reads and
    examples (``TOPIC_DDL``), from a :class:`spark_jobs.dataset.History`; grouped per topic
    as the other classes are (``checker.topic_groups``)."""
    from pyspark.sql import functions as F

    operations = history.operations
    if "origin" not in operations.columns:
        operations = operations.withColumn("origin", F.lit(None).cast("string"))
    rows = topic_groups(operations, SESSION_COLUMNS, clustered=history.topics_clustered).map(
        _topic_row
    )
    return operations.sparkSession.createDataFrame(rows, TOPIC_DDL)


def _example_text(rule: str) -> Any:
    """The text of one example of ``rule`` (one argument: ``F.transform`` passes the
    element's index too to a function that takes two)."""
    from pyspark.sql import functions as F

    def text(pair: Any) -> Any:
        return F.format_string(
            f"{rule} %s/%d (against %d)", F.col("run_id"), pair["read_op_id"], pair["against_op_id"]
        )

    return text


def session_summary(per_topic: Any) -> Any:
    """The ``session_guarantees`` table (``TABLE_COLUMNS``): per run, each rule's
    distinct sessions checked, reads checked, violating reads, and up to
    :data:`EXAMPLES_PER_RULE` examples per rule as ``"<rule> <run_id>/<read op> (against
    <op>)"`` (the earlier read, or the own write, it goes back from)."""
    from pyspark.sql import functions as F

    group = ("run_id", "mode", "scenario")
    aggs = []
    for rule in RULES:
        aggs += [
            F.size(F.array_distinct(F.flatten(F.collect_list(f"{rule}_sessions")))).alias(
                f"{rule}_sessions"
            ),
            F.sum(f"{rule}_checked").alias(f"{rule}_checked"),
            F.sum(f"{rule}_violations").alias(f"{rule}_violations"),
            F.slice(
                F.sort_array(F.flatten(F.collect_list(f"{rule}_examples"))), 1, EXAMPLES_PER_RULE
            ).alias(f"{rule}_picked"),
        ]
    shown = [F.transform(f"{rule}_picked", _example_text(rule)) for rule in RULES]
    return (
        per_topic.groupBy(*group)
        .agg(*aggs)
        .withColumn("examples", F.concat(*shown))
        .select(*TABLE_COLUMNS)
        .orderBy("run_id")
    )


__all__ = [
    "MONOTONIC_READS",
    "READ_YOUR_WRITES",
    "RuleCount",
    "SessionRead",
    "SessionWrite",
    "monotonic_reads",
    "read_your_writes",
    "session_summary",
    "sessions_by_topic",
    "split_rows",
]
