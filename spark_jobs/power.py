"""The checker's power on a recorded history: how many injected stale reads it catches.

An injected stale read takes the place of one of a topic's reads: it returns the value the
register held before an acknowledged write, and it is called ``STALE_READ_GAP_US`` after
that write answered, the moment a lagging replica would still serve the old route. Each
injection is checked on its own copy of the topic's history, so one catch never hides
another. A topic whose own history already fails is left out (a catch there says nothing).

What is measured is the history's resolution as much as the checker: when the next write
of the old value may have happened right after the ack (a write that timed out, or one the
prober inferred between two samples with no read in between to pin it), the stale read
fits and is not caught.
docs/EXPERIMENTS.md, "How the checker is validated, and its power", says how to read
the numbers.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from experiment_history.schema import OUTCOME_OK, READ_KINDS, WRITE_KINDS
from spark_jobs.checker import (
    ABSENT_VALUE,
    CHECK_COLUMNS,
    LINEARIZABLE,
    NOT_LINEARIZABLE,
    UNKNOWN,
    CheckBudget,
    RegisterOp,
    check_register,
    register_ops_from_rows,
    topic_groups,
)

STALE_READS_PER_RUN = 20
"""Stale reads injected into each run, spread over its exercised topics."""
STALE_READ_GAP_US = 1_000
"""The injected read is called this long after the write's ack (1 ms): strictly after it,
since operations that touch count as concurrent, and well inside the time a lagging
replica keeps serving the old route."""
POWER_BUDGET = CheckBudget(max_seconds=5.0)
"""Each injected history gets a smaller budget than a verdict: it is one of many."""
POWER_DDL = "run_id string, topic string, injected long, caught long, unknown long"


@dataclass(frozen=True, slots=True)
class PowerResult:
    """Stale reads injected into one history and how the checker answered them."""

    injected: int = 0
    caught: int = 0
    unknown: int = 0
    """The search budget ran out: neither caught nor missed."""
    skipped: str = ""
    """Why nothing was injected (the history already fails, or has nothing to inject at)."""


@dataclass(frozen=True, slots=True)
class StaleRead:
    """One injection: the write it follows, the read it replaces, the history with it."""

    after_write: int
    replaced_read: int
    value: str
    history: tuple[RegisterOp, ...]


def stale_read_targets(ops: Sequence[RegisterOp]) -> list[tuple[RegisterOp, str]]:
    """Every acknowledged write after the first, with the value it replaced: that of the
    write acknowledged just before it, when it differs from its own."""
    done = sorted(
        (op for op in ops if op.is_write and op.complete_us is not None),
        key=lambda op: (op.complete_us or 0, op.op_id),
    )
    return [
        (write, older.value)
        for older, write in itertools.pairwise(done)
        if older.value != write.value
    ]


def inject_stale_reads(
    ops: Sequence[RegisterOp], count: int, rng: random.Random
) -> list[StaleRead]:
    """``count`` histories, each ``ops`` with one read replaced by a stale one (fewer
    when the history has no read or no write with an older value). Distinct writes are
    used first; the replaced read keeps its duration."""
    reads = [op for op in ops if not op.is_write]
    targets = stale_read_targets(ops)
    if not reads or not targets:
        return []
    order = rng.sample(targets, len(targets))
    injections = []
    for i in range(count):
        write, older = order[i % len(order)]
        replaced = rng.choice(reads)
        assert write.complete_us is not None
        invoke = write.complete_us + STALE_READ_GAP_US
        duration = max(0, (replaced.complete_us or replaced.invoke_us) - replaced.invoke_us)
        stale = RegisterOp(replaced.op_id, False, older, invoke, invoke + duration)
        history = tuple(stale if op is replaced else op for op in ops)
        injections.append(StaleRead(write.op_id, replaced.op_id, older, history))
    return injections


def measure_power(
    ops: Sequence[RegisterOp],
    count: int,
    rng: random.Random,
    initial: str = ABSENT_VALUE,
    budget: CheckBudget = POWER_BUDGET,
) -> PowerResult:
    """Inject ``count`` stale reads into one topic's history, one at a time, and count
    those the checker finds not linearizable."""
    if count <= 0:
        return PowerResult(skipped="nothing asked")
    own = check_register(ops, initial, budget).verdict
    if own != LINEARIZABLE:
        return PowerResult(skipped=f"the history itself is {own}")
    injections = inject_stale_reads(ops, count, rng)
    if not injections:
        return PowerResult(skipped="no read, or no write that replaced another value")
    verdicts = [check_register(i.history, initial, budget).verdict for i in injections]
    return PowerResult(
        injected=len(verdicts),
        caught=verdicts.count(NOT_LINEARIZABLE),
        unknown=verdicts.count(UNKNOWN),
    )


def topic_seed(run_id: str, topic: str) -> random.Random:
    """A generator that depends only on the run and topic, so reruns inject the same."""
    return random.Random(f"{run_id}/{topic}")


def _power_group(item: tuple[tuple[str, str], Sequence[tuple[Any, ...]]]) -> tuple[Any, ...]:
    """Spark task body: the power row of one (run, topic) group, each row the injection
    count then the :data:`CHECK_COLUMNS`."""
    (run_id, topic), rows = item
    count = int(rows[0][0])
    ops = register_ops_from_rows(dict(zip(CHECK_COLUMNS, row[1:], strict=True)) for row in rows)
    result = measure_power(ops, count, topic_seed(run_id, topic))
    return (run_id, topic, result.injected, result.caught, result.unknown)


def stale_read_power(
    operations: Any, runs: Any, per_run: int = STALE_READS_PER_RUN, *, clustered: bool = False
) -> Any:
    """Per run (with ``runs``' mode and scenario): stale reads injected, caught, and
    unknown, and the share caught (None when nothing could be injected).

    ``per_run`` injections are spread evenly over at most ``per_run`` of the run's topics
    with two or more acknowledged writes and a read, picked by a hash of the topic name
    (so the same topics every time, and a cost that does not grow with the topics).
    ``clustered`` as in ``checker.topic_groups``: the chosen topics (at most ``per_run``
    per run) are broadcast, so the join keeps the operations where they are."""
    from pyspark.sql import Window, functions as F

    kinds = sorted(READ_KINDS | WRITE_KINDS)
    register = operations.filter(F.col("kind").isin(kinds) & (F.col("topic") != ""))
    ok_write = F.col("kind").isin(sorted(WRITE_KINDS)) & (F.col("outcome") == OUTCOME_OK)
    topics = (
        register.groupBy("run_id", "topic")
        .agg(
            F.sum(ok_write.cast("long")).alias("writes"),
            F.sum(F.col("kind").isin(sorted(READ_KINDS)).cast("long")).alias("reads"),
        )
        .filter((F.col("writes") >= 2) & (F.col("reads") >= 1))
    )
    rank = F.row_number().over(
        Window.partitionBy("run_id").orderBy(F.xxhash64("topic"), "topic")
    ) - F.lit(1)
    used = F.least(F.count(F.lit(1)).over(Window.partitionBy("run_id")), F.lit(per_run))
    chosen = (
        topics.select("run_id", "topic", rank.alias("rank"), used.alias("used"))
        .filter(F.col("rank") < F.col("used"))
        .select(
            "run_id",
            "topic",
            (
                F.floor(F.lit(per_run) / F.col("used"))
                + (F.col("rank") < F.lit(per_run) % F.col("used")).cast("long")
            ).alias("count"),
        )
    )
    groups = topic_groups(
        register.join(F.broadcast(chosen), ["run_id", "topic"]),
        ("count", *CHECK_COLUMNS),
        clustered=clustered,
    )
    per_topic = operations.sparkSession.createDataFrame(groups.map(_power_group), POWER_DDL)
    totals = per_topic.groupBy("run_id").agg(
        F.sum("injected").alias("stale_reads_injected"),
        F.sum("caught").alias("stale_reads_caught"),
        F.sum("unknown").alias("stale_reads_unknown"),
        F.count(F.lit(1)).alias("topics_injected"),
    )
    counts = ["stale_reads_injected", "stale_reads_caught", "stale_reads_unknown"]
    return (
        runs.join(totals, "run_id", "left")
        .na.fill(0, [*counts, "topics_injected"])
        .withColumn(
            "caught_share",
            F.when(
                F.col("stale_reads_injected") > 0,
                F.col("stale_reads_caught") / F.col("stale_reads_injected"),
            ),
        )
        .orderBy("run_id")
    )
