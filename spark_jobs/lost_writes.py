"""Lost acknowledged writes: acknowledged route writes that no read ever saw, although a
read made while they should have been the latest route shows the register without them.

Each topic's route is a register, as for :mod:`spark_jobs.anomalies` (which rows count, and
how: ``checker.register_role``; times in microseconds, ``schema.interval_us``; intervals that
touch are concurrent; an ``error``/``timeout`` write is *pending*: it may take effect any
time after its call, or never; the topic starts absent). The rule, for one topic:

An acknowledged write ``w`` (outcome ``ok``, value ``v``, interval [``i_w``, ``c_w``], made by
a client or the harness: the raft cluster's own writes, process ``raft``, are never
candidates) is **lost** when both hold:

1. *No read saw it*: ``w`` is a possible source (``experiment_history.superseding``) of no
   read of ``v``: no read of ``v`` was invoked by the time ``w`` became definitely superseded
   and completed at or after ``i_w``. Route reads in ``operations`` count, and so do the
   node samples (``node_states``, whose answer time is unknown: each counts as a read from
   its round's start to forever, so it can only make a write seen, never lost). A read of
   ``v`` that ``w`` could have produced counts even when another write of ``v`` could have
   produced it too (the churn repeats values: conservative).
2. *The register moved on without it*: some route read ``r`` of ``operations`` was invoked
   after ``c_w`` and completed before ``H``, the first invocation of another write after
   ``c_w`` (while ``w`` should be the latest route), and returned a value ``u`` that no write
   concurrent with or after ``w`` could have produced: no write of ``u`` (acknowledged or
   pending) other than ``w`` completed at or after ``i_w`` and was invoked by ``r``'s
   completion. A pending write ends never, so any pending write of ``u`` invoked by then
   explains ``r``.

A linearizable register never has such a pair: ``r`` follows ``w`` in real time, so it must
return ``w``'s value or that of a write ordered after ``w``, and every such write was ruled
out. ``r`` is a stale read of :mod:`spark_jobs.anomalies` too; what this adds is that the
acknowledged route was never seen at all. The evidence read is kept with each example.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from experiment_history.schema import (
    KIND_ROUTE_READ,
    OUTCOME_OK,
    PROCESS_RAFT,
)
from experiment_history.superseding import TIME_MAX_US, TimedWrite, TopicWrites
from spark_jobs.anomalies import ROW_COLUMNS
from spark_jobs.checker import register_rows, topic_groups

SAMPLE_OP_ID = -1
"""The op id of a node sample read into the per-topic rows (never an example)."""
SAMPLE_PROCESS = "node-sample"
EXAMPLES_PER_RUN = 3
"""Lost writes kept per run as examples (the run's first op ids)."""


@dataclass(frozen=True, slots=True)
class OpWrite:
    """A write of one topic with its op id; ``complete_us`` :data:`TIME_MAX_US`: pending.
    ``candidate``: an acknowledged write a client or the harness made (may be lost)."""

    op_id: int
    value: str
    invoke_us: int
    complete_us: int
    candidate: bool = True

    @property
    def acknowledged(self) -> bool:
        return self.complete_us < TIME_MAX_US


@dataclass(frozen=True, slots=True)
class ObservedRead:
    """A read that answered ``value``; ``evidence``: it may prove a write lost (a route
    read with a known completion, not a node sample)."""

    op_id: int
    value: str
    invoke_us: int
    complete_us: int
    evidence: bool = True


@dataclass(frozen=True, slots=True)
class LostWrite:
    """A lost acknowledged write and the read that shows the register without it."""

    write_op_id: int
    read_op_id: int


class _Prefix:
    """Items sorted by a start time with the running maximum of an end time: "is there
    one starting by ``t`` that ends at or after ``e``"."""

    def __init__(self, spans: Iterable[tuple[int, int]]) -> None:
        ordered = sorted(spans)
        self.starts = [start for start, _ in ordered]
        self.latest_end = list(accumulate((end for _, end in ordered), max))

    def any_by(self, start_by: int, end_from: int) -> bool:
        found = bisect_right(self.starts, start_by)
        return found > 0 and self.latest_end[found - 1] >= end_from


def lost_writes(reads: Sequence[ObservedRead], writes: Sequence[OpWrite]) -> list[LostWrite]:
    """The lost acknowledged writes of one topic (module docstring), by write op id."""
    index = TopicWrites(TimedWrite(w.value, w.invoke_us, w.complete_us) for w in writes)
    write_invokes = sorted(w.invoke_us for w in writes)
    # The implicit initial write of the absent route ends before everything.
    by_value: dict[str, list[tuple[int, int]]] = {"": [(-(2**62), -(2**62))]}
    for w in writes:
        by_value.setdefault(w.value, []).append((w.invoke_us, w.complete_us))
    write_spans = {value: _Prefix(spans) for value, spans in by_value.items()}
    read_spans: dict[str, list[tuple[int, int]]] = {}
    for r in reads:
        read_spans.setdefault(r.value, []).append((r.invoke_us, r.complete_us))
    seen = {value: _Prefix(spans) for value, spans in read_spans.items()}
    evidence = sorted((r for r in reads if r.evidence), key=lambda r: (r.invoke_us, r.op_id))
    evidence_invokes = [r.invoke_us for r in evidence]

    found: list[LostWrite] = []
    for w in sorted(writes, key=lambda w: (w.invoke_us, w.op_id)):
        if not (w.acknowledged and w.candidate):
            continue
        superseded = index.superseded_at(TimedWrite(w.value, w.invoke_us, w.complete_us))
        of_value = seen.get(w.value)
        if of_value is not None and of_value.any_by(superseded, w.invoke_us):
            continue  # some read could have returned it
        after = bisect_right(write_invokes, w.complete_us)
        horizon = write_invokes[after] if after < len(write_invokes) else TIME_MAX_US
        start = bisect_right(evidence_invokes, w.complete_us)
        stop = bisect_left(evidence_invokes, horizon)
        for r in evidence[start:stop]:
            if r.complete_us >= horizon or r.value == w.value:
                continue
            explained = write_spans.get(r.value)
            if explained is None or not explained.any_by(r.complete_us, w.invoke_us):
                found.append(LostWrite(w.op_id, r.op_id))
                break
    return found


def split_rows(rows: Iterable[Mapping[str, Any]]) -> tuple[list[ObservedRead], list[OpWrite]]:
    """One topic's rows (``operations``, and node samples with op id
    :data:`SAMPLE_OP_ID`) as reads and writes, as ``checker.register_role`` counts them."""
    reads: list[ObservedRead] = []
    writes: list[OpWrite] = []
    for row, is_write, value, complete, invoke, end in register_rows(rows):
        op_id = int(row["op_id"])
        if is_write:
            candidate = (row.get("process") or "") != PROCESS_RAFT
            writes.append(
                OpWrite(op_id, value, invoke, end if complete else TIME_MAX_US, candidate)
            )
        elif op_id == SAMPLE_OP_ID:
            reads.append(ObservedRead(op_id, value, invoke, TIME_MAX_US, evidence=False))
        else:
            reads.append(ObservedRead(op_id, value, invoke, end))
    return reads, writes


# ------------------------------------------------------------------------------- Spark

TOPIC_DDL = (
    "run_id string, mode string, scenario string, topic string, acked_writes long, "
    "lost_writes long, lost array<struct<write_op_id:long,read_op_id:long>>"
)


def _topic_row(item: tuple[tuple[str, str], Iterable[tuple[Any, ...]]]) -> tuple[Any, ...]:
    """Spark task body: one (run, topic) group's acknowledged and lost writes."""
    (run_id, topic), rows = item
    dict_rows = [dict(zip(ROW_COLUMNS, row, strict=True)) for row in rows]
    mode, scenario = dict_rows[0]["mode"], dict_rows[0]["scenario"]
    reads, writes = split_rows(dict_rows)
    lost = lost_writes(reads, writes)
    acked = sum(1 for w in writes if w.acknowledged and w.candidate)
    pairs = sorted((x.write_op_id, x.read_op_id) for x in lost)
    return (run_id, mode, scenario, topic, acked, len(lost), pairs)


def _samples_as_reads(node_states: Any) -> Any:
    """Node samples as ``operations`` rows of route reads that never complete (so they can
    make a write seen, never prove one lost)."""
    from pyspark.sql import functions as F

    return node_states.select(
        "run_id",
        "topic",
        "mode",
        "scenario",
        F.lit(SAMPLE_OP_ID).cast("long").alias("op_id"),
        F.lit(SAMPLE_PROCESS).alias("process"),
        "node",
        F.lit(KIND_ROUTE_READ).alias("kind"),
        F.lit(OUTCOME_OK).alias("outcome"),
        F.coalesce(F.col("value"), F.lit("")).alias("value"),
        "version",
        F.col("ts_ms").alias("invoke_ms"),
        F.col("ts_ms").alias("complete_ms"),
        (F.col("ts_ms") * 1000).alias("invoke_us"),
        F.lit(TIME_MAX_US).cast("long").alias("complete_us"),
    )


def lost_writes_by_topic(history: Any) -> Any:
    """Per (run, topic): acknowledged candidate writes, lost ones and (write, read) op id
    pairs, from a :class:`spark_jobs.dataset.History` (``TOPIC_DDL``)."""
    from pyspark.sql import functions as F

    operations = history.operations
    for name in ("invoke_us", "complete_us"):
        if name not in operations.columns:
            operations = operations.withColumn(name, F.lit(None).cast("long"))
    ops = operations.select("run_id", "topic", *ROW_COLUMNS)
    union = ops.unionByName(_samples_as_reads(history.node_states))
    # A union of two scans holds no whole groups per task: always exchanged.
    rows = topic_groups(union, ROW_COLUMNS, clustered=False).map(_topic_row)
    return operations.sparkSession.createDataFrame(rows, TOPIC_DDL)


def lost_writes_summary(per_topic: Any) -> Any:
    """The ``lost_writes`` table: per run, acknowledged writes, lost ones, their share, and
    up to :data:`EXAMPLES_PER_RUN` examples as ``"<run_id>/<write op> (read <op>)"``."""
    from pyspark.sql import functions as F

    group = ("run_id", "mode", "scenario")
    pairs = per_topic.select(*group, F.explode("lost").alias("x"))
    examples = pairs.groupBy(*group).agg(
        F.slice(
            F.sort_array(F.collect_list(F.struct("x.write_op_id", "x.read_op_id"))), 1, 3
        ).alias("picked")
    )
    shown = F.transform(
        "picked",
        lambda p: F.format_string(
            "%s/%d (read %d)", F.col("run_id"), p["write_op_id"], p["read_op_id"]
        ),
    )
    counts = per_topic.groupBy(*group).agg(
        F.sum("acked_writes").alias("acked_writes"), F.sum("lost_writes").alias("lost_writes")
    )
    return (
        counts.join(examples.select(*group, shown.alias("examples")), list(group), "left")
        .withColumn("examples", F.coalesce("examples", F.array().cast("array<string>")))
        .withColumn(
            "lost_share",
            F.when(F.col("acked_writes") > 0, F.col("lost_writes") / F.col("acked_writes")),
        )
        .select(*group, "acked_writes", "lost_writes", "lost_share", "examples")
        .orderBy("run_id")
    )


__all__ = [
    "LostWrite",
    "ObservedRead",
    "OpWrite",
    "lost_writes",
    "lost_writes_by_topic",
    "lost_writes_summary",
    "split_rows",
]
