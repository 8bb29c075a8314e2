"""Every route read classified against the acknowledged writes of its topic.

Each topic's route is a register (as in :mod:`spark_jobs.checker`); where the checker gives
one verdict per topic, this module names what is wrong with each read. Over the write
intervals [invoke, complete] (microseconds; a write that failed or timed out is pending: it
may take effect any time after its call, or never), a read is at most one of, in this order
of precedence:

1. ``never_written``: it returned a route no write of the topic had, or only a write invoked
   after the read completed (a value from the future).
2. ``not_exist_live``: it returned the absent route (TOPIC_NOT_EXIST, or an empty route)
   while every write that could be in effect left the topic present.
3. ``stale_read``: it returned a route some write produced, but every write of that route
   was definitely superseded before the read was invoked.
4. ``non_monotonic_read``: the same client, on the same topic, had completed a read before
   this one was invoked whose every possible source write comes after every possible
   source write of this one.

Which writes are *definitely superseded* before a read and which are its *possible sources*
is :mod:`experiment_history.superseding`'s rule, the one the prober uses too. The topic
starts absent: an implicit write of ``""`` before everything. Intervals that touch count
as concurrent, as in the checker.

A ``never_written`` read is also counted in ``never_written_composed`` when every broker
share of its route (each item of the canonical value) is one some write of the topic
invoked before the read completed had: the route puts written shares together in a way
no single write did. Two causes: a registration whose outcome the harness never learnt
(no node acknowledged it) that took effect after the writes that came after it had been
valued without its share, and a node that applied partial updates in an order no
register went through (an eventual node that missed one broker's round and got
another's). A ``never_written`` read that is not composed carries a share no write had.

Versions: when two reads of one client carry versions >= 0 and a later one is lower, the
read counts in ``version_backwards`` too, but classes go by values only. In ``raft`` mode a
version is the routes version every node reaches by applying the one Raft log, so it
compares across nodes; in eventual mode each node numbers its own changes, so only
versions of the same node are compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from experiment_history.schema import ROUTE_ITEM_SEP
from experiment_history.superseding import (
    TIME_MAX_US,
    TIME_MIN_US,
    Sources,
    TimedWrite,
    TopicWrites,
)
from spark_jobs.checker import ABSENT_VALUE, register_rows, topic_groups

OK = "ok"
NEVER_WRITTEN = "never_written"
NOT_EXIST_LIVE = "not_exist_live"
STALE_READ = "stale_read"
NON_MONOTONIC_READ = "non_monotonic_read"
CLASSES = (NEVER_WRITTEN, NOT_EXIST_LIVE, STALE_READ, NON_MONOTONIC_READ)
"""The anomaly classes in order of precedence (a read gets the first that applies)."""
VERSION_BACKWARDS = "version_backwards"
NEVER_WRITTEN_COMPOSED = "never_written_composed"
"""``never_written`` reads whose every share some write had (module docstring)."""
RAFT_MODE = "raft"
"""The mode whose routes versions (one Raft log applied everywhere) compare across nodes."""
EXAMPLES_PER_CLASS = 3
"""Op ids kept per class, per topic and again per report group."""


@dataclass(frozen=True, slots=True)
class TimedRead:
    """A route read that answered: ``value`` ``""`` is the absent route."""

    op_id: int
    process: str
    node: str
    value: str
    invoke_us: int
    complete_us: int
    version: int = -1


@dataclass(frozen=True, slots=True)
class ReadVerdict:
    """One read's class (:data:`OK` or one of :data:`CLASSES`) and whether its version
    went backwards for its client."""

    op_id: int
    process: str
    anomaly: str
    version_backwards: bool = False
    composed: bool = False
    """A ``never_written`` read whose every share some write had (module docstring)."""


def _alone(writes: TopicWrites, read: TimedRead) -> tuple[str, Sources | None]:
    """The read's class against the writes alone (every class but non-monotonic)."""
    sources = writes.sources(read.value, read.invoke_us, read.complete_us)
    if sources is not None:
        return OK, sources
    if read.value != ABSENT_VALUE and not writes.written_by(read.value, read.complete_us):
        return NEVER_WRITTEN, None
    return (NOT_EXIST_LIVE if read.value == ABSENT_VALUE else STALE_READ), None


def _earlier_sweep(reads: Sequence[TimedRead]) -> Iterable[tuple[TimedRead, list[TimedRead]]]:
    """Each read of one client (by invocation) with the reads newly completed before its
    invocation (each earlier read is handed out once, to the first read it precedes)."""
    by_complete = sorted(reads, key=lambda r: (r.complete_us, r.op_id))
    done = 0
    for read in sorted(reads, key=lambda r: (r.invoke_us, r.op_id)):
        start = done
        while done < len(by_complete) and by_complete[done].complete_us < read.invoke_us:
            done += 1
        yield read, by_complete[start:done]


def _non_monotonic(reads: Sequence[TimedRead], sources: Mapping[int, Sources]) -> set[int]:
    """Op ids of one client's reads older than a read it completed before invoking them."""
    found: set[int] = set()
    newest_floor = TIME_MIN_US
    for read, earlier in _earlier_sweep(reads):
        for prior in earlier:
            if prior.op_id in sources:
                newest_floor = max(newest_floor, sources[prior.op_id].oldest_invoke_us)
        own = sources.get(read.op_id)
        if own is not None and own.newest_complete_us < newest_floor:
            found.add(read.op_id)
    return found


def _versions_backwards(reads: Sequence[TimedRead], across_nodes: bool) -> set[int]:
    """Op ids of one client's reads whose version is below that of a read it completed
    before (same node only unless ``across_nodes``); reads without a version are skipped."""
    found: set[int] = set()
    highest: dict[str, int] = {}
    for read, earlier in _earlier_sweep(reads):
        for prior in earlier:
            if prior.version >= 0:
                key = "" if across_nodes else prior.node
                highest[key] = max(highest.get(key, prior.version), prior.version)
        key = "" if across_nodes else read.node
        if read.version >= 0 and read.version < highest.get(key, -1):
            found.add(read.op_id)
    return found


def classify_reads(
    reads: Sequence[TimedRead], writes: Iterable[TimedWrite], versions_across_nodes: bool = False
) -> list[ReadVerdict]:
    """The verdict of every read of one topic (in the order given)."""
    writes = list(writes)
    index = TopicWrites(writes)
    # Each share (route item) a write had, and the earliest call of a write that had it.
    share_since: dict[str, int] = {}
    for write in writes:
        for item in write.value.split(ROUTE_ITEM_SEP) if write.value else ():
            share_since[item] = min(share_since.get(item, write.invoke_us), write.invoke_us)
    alone = {read.op_id: _alone(index, read) for read in reads}
    sources = {op_id: found for op_id, (_, found) in alone.items() if found is not None}
    by_client: dict[str, list[TimedRead]] = {}
    for read in reads:
        by_client.setdefault(read.process, []).append(read)
    older: set[int] = set()
    backwards: set[int] = set()
    for own in by_client.values():
        older |= _non_monotonic(own, sources)
        backwards |= _versions_backwards(own, versions_across_nodes)
    verdicts = []
    for read in reads:
        anomaly = alone[read.op_id][0]
        if anomaly == OK and read.op_id in older:
            anomaly = NON_MONOTONIC_READ
        composed = anomaly == NEVER_WRITTEN and all(
            share_since.get(item, TIME_MAX_US) <= read.complete_us
            for item in read.value.split(ROUTE_ITEM_SEP)
        )
        verdicts.append(
            ReadVerdict(read.op_id, read.process, anomaly, read.op_id in backwards, composed)
        )
    return verdicts


def split_rows(rows: Iterable[Mapping[str, Any]]) -> tuple[list[TimedRead], list[TimedWrite]]:
    """One topic's ``operations`` rows as reads and writes (which rows count, and how, as
    for the checker: :func:`spark_jobs.checker.register_role`)."""
    reads: list[TimedRead] = []
    writes: list[TimedWrite] = []
    for row, is_write, value, complete, invoke, end in register_rows(rows):
        if is_write:
            writes.append(TimedWrite(value, invoke, end if complete else TIME_MAX_US))
        else:
            version = row.get("version")
            reads.append(
                TimedRead(
                    int(row["op_id"]),
                    str(row.get("process") or ""),
                    str(row.get("node") or ""),
                    value,
                    invoke,
                    end,
                    -1 if version is None else int(version),
                )
            )
    return reads, writes


def classify_rows(
    rows: Iterable[Mapping[str, Any]], versions_across_nodes: bool = False
) -> list[ReadVerdict]:
    """:func:`classify_reads` over raw ``operations`` rows of one topic."""
    reads, writes = split_rows(rows)
    return classify_reads(reads, writes, versions_across_nodes)


# ------------------------------------------------------------------------------- Spark

ROW_COLUMNS = (
    "mode",
    "scenario",
    "op_id",
    "process",
    "node",
    "kind",
    "outcome",
    "value",
    "version",
    "invoke_ms",
    "complete_ms",
    "invoke_us",
    "complete_us",
)
COUNT_COLUMNS = (*CLASSES, VERSION_BACKWARDS, NEVER_WRITTEN_COMPOSED)
TOPIC_DDL = (
    "run_id string, mode string, scenario string, topic string, reads long, "
    + ", ".join(f"{name} long" for name in COUNT_COLUMNS)
    + ", examples array<struct<anomaly:string,op_id:long>>"
)


def _topic_row(item: tuple[tuple[str, str], Iterable[tuple[Any, ...]]]) -> tuple[Any, ...]:
    """Spark task body: one (run, topic) group's read count, class counts and examples."""
    (run_id, topic), rows = item
    # Sorted so the examples kept are the topic's first op ids, whatever the shuffle order.
    dict_rows = sorted(
        (dict(zip(ROW_COLUMNS, row, strict=True)) for row in rows), key=lambda r: r["op_id"]
    )
    mode, scenario = dict_rows[0]["mode"], dict_rows[0]["scenario"]
    verdicts = classify_rows(dict_rows, versions_across_nodes=mode == RAFT_MODE)
    counts = {name: 0 for name in COUNT_COLUMNS}
    examples: list[tuple[str, int]] = []
    for verdict in verdicts:
        flagged = [verdict.anomaly] if verdict.anomaly != OK else []
        flagged += [VERSION_BACKWARDS] if verdict.version_backwards else []
        flagged += [NEVER_WRITTEN_COMPOSED] if verdict.composed else []
        for name in flagged:
            counts[name] += 1
            if counts[name] <= EXAMPLES_PER_CLASS:
                examples.append((name, verdict.op_id))
    return (run_id, mode, scenario, topic, len(verdicts), *counts.values(), examples)


def classify_topics(operations: Any, *, clustered: bool = False) -> Any:
    """Per (run, topic): reads that answered and each class's count and first op ids, from
    a Spark ``operations`` DataFrame with ``run_id``, ``mode`` and ``scenario`` (columns of
    ``TOPIC_DDL``). Grouped as the checker groups (``checker.topic_groups``, which also
    reads the microsecond columns as null when older histories lack them; ``clustered``
    as there)."""
    rows = topic_groups(operations, ROW_COLUMNS, clustered=clustered).map(_topic_row)
    return operations.sparkSession.createDataFrame(rows, TOPIC_DDL)


def anomaly_summary(per_topic: Any) -> Any:
    """The ``anomalies`` table: per mode and scenario, the reads examined, each class's
    count (reads) and up to :data:`EXAMPLES_PER_CLASS` examples per class as
    ``"<class> <run_id>/<op_id>"``."""
    from pyspark.sql import Window, functions as F

    group = ("mode", "scenario")
    counts = per_topic.groupBy(*group).agg(
        F.sum("reads").alias("reads"), *(F.sum(name).alias(name) for name in COUNT_COLUMNS)
    )
    example = per_topic.select(*group, "run_id", F.explode("examples").alias("e")).select(
        *group, "run_id", "e.anomaly", "e.op_id"
    )
    rank = F.row_number().over(Window.partitionBy(*group, "anomaly").orderBy("run_id", "op_id"))
    picked = (
        example.withColumn("rank", rank)
        .filter(F.col("rank") <= EXAMPLES_PER_CLASS)
        .groupBy(*group)
        .agg(
            F.sort_array(
                F.collect_list(F.format_string("%s %s/%d", "anomaly", "run_id", "op_id"))
            ).alias("examples")
        )
    )
    return (
        counts.join(picked, list(group), "left")
        .withColumn("examples", F.coalesce("examples", F.array().cast("array<string>")))
        .orderBy(*group)
    )


def not_exist_live_summary(per_topic: Any) -> Any:
    """The ``not_exist_live`` table: per mode and scenario, reads, the reads classed
    ``not_exist_live`` and their share (``rate``; null for a run without reads)."""
    from pyspark.sql import functions as F

    return (
        per_topic.groupBy("mode", "scenario")
        .agg(F.sum("reads").alias("reads"), F.sum(NOT_EXIST_LIVE).alias(NOT_EXIST_LIVE))
        .withColumn("rate", F.when(F.col("reads") > 0, F.col(NOT_EXIST_LIVE) / F.col("reads")))
        .orderBy("mode", "scenario")
    )
