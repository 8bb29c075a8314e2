"""Two masters of one broker name at once: a client sent back to a deposed master after
another client was already told the new one (raft mode's broker failover,
``raftstore/failover.py``).

Every canonical route item names its broker's master address (``RouteItem.master_addr``;
``-`` when the group has none, which names no master and is left out). Per run and per
broker name ``b``, over the route reads of ``operations`` that answered ``ok`` and the
writes of every topic (``checker.register_role``: ``ok`` writes end at their ack,
``error``/``timeout`` ones are pending and end never; times in microseconds,
``schema.interval_us``):

- *b's master terms*: the writes whose value names a master of ``b``, ordered by (invoke,
  op id), cut into maximal runs naming the same master; a term starts at the invocation
  of its first write.
- *installed(m, r)*: for a read ``r`` naming master ``m``, the start of the term of the
  last write naming ``m`` invoked at or before ``r`` completed (none: ``r`` names a master
  no write had named yet, which is :mod:`spark_jobs.anomalies`' ``never_written``, not
  this class).
- A read ``r2`` naming master ``m2`` is a **two-masters read** when some read ``r1`` naming
  another master ``m1`` completed before ``r2`` was invoked, and every write naming ``m2``
  invoked by ``r2``'s completion (there is at least one) had completed before
  ``installed(m1, r1)``: ``m2`` was ``b``'s master before ``r1``'s master took over, and no
  write could have made it master again by the time ``r2`` answered. A linearizable route
  never answers so: ``r2`` follows ``r1`` in real time, so it must see ``m1``'s term or a
  later one.
- Separately, a **split answer** is one read whose value names two different masters for
  ``b`` (the canonical format can carry two items of one broker name; a node's route
  cannot, it has one BrokerData per name, so this counts corrupted answers).

Node samples (``node_states``) are not reads here: their completion is unknown, so none
can come before another read. The table has one row per run: ``groups_checked`` (broker
names some read named a master of), ``two_masters`` (two-masters reads plus split
answers, each read counted once), ``split_answers``, and up to :data:`EXAMPLES_PER_RUN`
examples as ``"<run_id>/<read> after <read> (<broker>)"``.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from experiment_history.schema import (
    NO_MASTER_ADDR,
    READ_KINDS,
    WRITE_KINDS,
    interval_us,
    parse_route,
)
from experiment_history.superseding import TIME_MAX_US
from spark_jobs.anomalies import ROW_COLUMNS
from spark_jobs.checker import register_role

EXAMPLES_PER_RUN = 3
"""Two-masters reads kept per run as examples (the lowest read op ids)."""


@dataclass(frozen=True, slots=True)
class MasterWrite:
    """A write naming ``master`` for the broker; ``complete_us`` :data:`TIME_MAX_US`:
    pending (it may take effect any time after its call, or never)."""

    op_id: int
    master: str
    invoke_us: int
    complete_us: int


@dataclass(frozen=True, slots=True)
class MasterRead:
    """A read naming ``master`` for the broker (``split``: it also named another one)."""

    op_id: int
    master: str
    invoke_us: int
    complete_us: int
    split: bool = False


@dataclass(frozen=True, slots=True)
class Flagged:
    """A two-masters read (``after``: the read that had already seen the newer master;
    -1 for a split answer)."""

    read_op_id: int
    after_op_id: int


def _term_starts(writes: Sequence[MasterWrite]) -> list[tuple[int, str, int, int]]:
    """(invoke, master, its term's start, complete) of every write, by (invoke, op id)."""
    ordered = sorted(writes, key=lambda w: (w.invoke_us, w.op_id))
    out: list[tuple[int, str, int, int]] = []
    start = 0
    for i, write in enumerate(ordered):
        if i == 0 or ordered[i - 1].master != write.master:
            start = write.invoke_us
        out.append((write.invoke_us, write.master, start, write.complete_us))
    return out


def two_masters(reads: Sequence[MasterRead], writes: Sequence[MasterWrite]) -> list[Flagged]:
    """The two-masters reads and split answers of one broker name (see the module doc),
    ordered by read op id."""
    # Per master: its writes' invocations, in order, each write's term start, and the
    # running latest completion.
    invokes: dict[str, list[int]] = {}
    starts: dict[str, list[int]] = {}
    completes: dict[str, list[int]] = {}
    for invoke, master, start, complete in _term_starts(writes):
        invokes.setdefault(master, []).append(invoke)
        starts.setdefault(master, []).append(start)
        completes.setdefault(master, []).append(complete)
    latest_done = {m: list(accumulate(c, max)) for m, c in completes.items()}
    # Per master: the reads naming it by completion, with installed() of each.
    installed: dict[str, list[tuple[int, int, int]]] = {}
    for read in reads:
        count = bisect_right(invokes.get(read.master, []), read.complete_us)
        if count:
            installed.setdefault(read.master, []).append(
                (read.complete_us, starts[read.master][count - 1], read.op_id)
            )
    # Per master: prefix maxima of installed() over its reads by completion.
    prefix: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}
    for master, rows in installed.items():
        rows.sort()
        best = list(accumulate(((s, -op) for _, s, op in rows), max))
        prefix[master] = ([c for c, _, _ in rows], best)
    flagged: list[Flagged] = []
    for read in reads:
        if read.split:
            flagged.append(Flagged(read.op_id, -1))
            continue
        count = bisect_right(invokes.get(read.master, []), read.complete_us)
        if count == 0:
            continue  # no write had named this master yet: never_written, not this class
        last_done = latest_done[read.master][count - 1]
        if last_done >= TIME_MAX_US:
            continue
        evidence: tuple[int, int] | None = None
        for master, (done_at, best) in prefix.items():
            if master == read.master:
                continue
            earlier = bisect_left(done_at, read.invoke_us)
            if earlier and best[earlier - 1][0] > last_done:
                candidate = best[earlier - 1]
                if evidence is None or candidate > evidence:
                    evidence = candidate
        if evidence is not None:
            flagged.append(Flagged(read.op_id, -evidence[1]))
    return sorted(flagged, key=lambda f: f.read_op_id)


# ------------------------------------------------------------------------------- Spark

ITEMS_DDL = (
    "run_id string, mode string, scenario string, broker string, is_write boolean, "
    "op_id long, master string, invoke_us long, complete_us long, split boolean"
)
TABLE_DDL = (
    "run_id string, mode string, scenario string, groups_checked long, two_masters long, "
    "split_answers long, examples array<string>"
)


def named_masters(value: str | None) -> dict[str, set[str]]:
    """Broker name -> the master addresses a route value names for it (``-`` left out).
    A value that is no route (a hand-written history's opaque token) names none: the
    register classes treat values as opaque, and this one must not fail on them."""
    masters: dict[str, set[str]] = {}
    try:
        items = parse_route(value)
    except ValueError:
        return masters
    for item in items:
        if item.master_addr != NO_MASTER_ADDR:
            masters.setdefault(item.broker, set()).add(item.master_addr)
    return masters


def _items(row: Any) -> list[tuple[Any, ...]]:
    """Spark task body: one ``operations`` row as (run, broker, master) items: a read
    that answered ok, or a write (acknowledged or pending), once per broker it names."""
    as_dict = row.asDict()
    role = register_role(as_dict)
    if role is None:
        return []
    is_write, value, complete = role
    invoke, end = interval_us(as_dict)
    end = end if complete else TIME_MAX_US
    head = (as_dict["run_id"], as_dict["mode"], as_dict["scenario"])
    out = []
    for broker, masters in sorted(named_masters(value).items()):
        split = not is_write and len(masters) > 1
        for master in sorted(masters)[: 1 if split else None]:
            out.append((*head, broker, is_write, int(as_dict["op_id"]), master, invoke, end, split))
    return out


def _group_flags(row: Any) -> list[tuple[str, str, str, str, int, int, bool]]:
    """Spark task body: one (run, broker) group's flagged reads."""
    reads = [
        MasterRead(i["op_id"], i["master"], i["invoke_us"], i["complete_us"], i["split"])
        for i in row["items"]
        if not i["is_write"]
    ]
    writes = [
        MasterWrite(i["op_id"], i["master"], i["invoke_us"], i["complete_us"])
        for i in row["items"]
        if i["is_write"]
    ]
    head = (row["run_id"], row["mode"], row["scenario"], row["broker"])
    return [
        (*head, f.read_op_id, f.after_op_id, f.after_op_id < 0) for f in two_masters(reads, writes)
    ]


FLAGS_DDL = (
    "run_id string, mode string, scenario string, broker string, read_op_id long, "
    "after_op_id long, split boolean"
)


def two_masters_by_run(history: Any) -> Any:
    """The ``two_masters`` table from a :class:`spark_jobs.dataset.History`: one row per
    run (see the module doc), ordered by run."""
    from pyspark.sql import functions as F

    operations = history.operations
    for name in ("invoke_us", "complete_us"):
        if name not in operations.columns:
            operations = operations.withColumn(name, F.lit(None).cast("long"))
    spark = operations.sparkSession
    kinds = sorted(READ_KINDS | WRITE_KINDS)
    ops = operations.filter(F.col("kind").isin(kinds)).select("run_id", *ROW_COLUMNS)
    items = spark.createDataFrame(ops.rdd.flatMap(_items), ITEMS_DDL)
    group = ["run_id", "mode", "scenario"]
    checked = (
        items.filter(~F.col("is_write"))
        .groupBy(*group)
        .agg(F.countDistinct("broker").alias("groups_checked"))
    )
    grouped = items.groupBy(*group, "broker").agg(
        F.collect_list(
            F.struct("is_write", "op_id", "master", "invoke_us", "complete_us", "split")
        ).alias("items")
    )
    flags = spark.createDataFrame(grouped.rdd.flatMap(_group_flags), FLAGS_DDL)
    per_read = flags.groupBy(*group, "read_op_id").agg(
        F.max(F.col("split").cast("int")).alias("split"),
        F.min(F.struct("after_op_id", "broker")).alias("first"),
    )
    counts = per_read.groupBy(*group).agg(
        F.count("*").alias("two_masters"),
        F.sum("split").cast("long").alias("split_answers"),
        F.slice(
            F.sort_array(
                F.collect_list(
                    F.struct("read_op_id", F.col("first.after_op_id"), F.col("first.broker"))
                )
            ),
            1,
            EXAMPLES_PER_RUN,
        ).alias("picked"),
    )
    shown = F.transform(
        "picked",
        lambda p: F.when(
            p["after_op_id"] < 0,
            F.format_string("%s/%d (split, %s)", F.col("run_id"), p["read_op_id"], p["broker"]),
        ).otherwise(
            F.format_string(
                "%s/%d after %d (%s)",
                F.col("run_id"),
                p["read_op_id"],
                p["after_op_id"],
                p["broker"],
            )
        ),
    )
    runs = operations.select(*group).distinct()
    return (
        runs.join(checked, group, "left")
        .join(
            counts.select(*group, "two_masters", "split_answers", shown.alias("examples")),
            group,
            "left",
        )
        .select(
            *group,
            F.coalesce("groups_checked", F.lit(0)).cast("long").alias("groups_checked"),
            F.coalesce("two_masters", F.lit(0)).cast("long").alias("two_masters"),
            F.coalesce("split_answers", F.lit(0)).cast("long").alias("split_answers"),
            F.coalesce("examples", F.array().cast("array<string>")).alias("examples"),
        )
        .orderBy("run_id")
    )


def flags_of(rows: Iterable[tuple[bool, int, str, int, int | None]]) -> list[Flagged]:
    """:func:`two_masters` of hand-written (is_write, op id, master, invoke, complete)
    items of one broker name (complete None: pending), for tests and the docs."""
    reads, writes = [], []
    for is_write, op_id, master, invoke, complete in rows:
        end = TIME_MAX_US if complete is None else complete
        if is_write:
            writes.append(MasterWrite(op_id, master, invoke, end))
        else:
            reads.append(MasterRead(op_id, master, invoke, end))
    return two_masters(reads, writes)
