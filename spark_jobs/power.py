"""The checker's power on recorded histories: how many injected faults, of several kinds,
it catches.

The faults are the mutations of ``spark_jobs.mutations`` (stale reads 1 ms, 100 ms and
1 s after an ack, a lost write, two reordered writes, a read of a value never written),
each checked on its own copy of a topic's history, so one catch never hides another. A
mutation counts as injected only when the history's writes contradict it (the rule of
``spark_jobs.mutations``: a fault a timed-out write could explain is no fault, and is
counted nowhere); it is caught when the checker finds the mutated history not
linearizable, and unknown when the checker's budget ran out.

Where a mutation goes depends on the topic's own verdict:

- ``linearizable``: into the whole history (region ``whole``).
- ``not_linearizable``: into its longest passing time prefix (region ``passing_prefix``).
  Linearizability is prefix-closed, so a binary search over the distinct event times
  finds the latest cut whose prefix still passes; operations open at the cut are treated
  as the checker's minimizer treats them (writes kept as pending, reads dropped, since an
  unanswered read tells nothing), and a mutation must lie inside the prefix (reads that
  answered by the cut). A prefix whose check is unknown counts as failing, so the prefix
  used passes for certain.
- ``unknown``: nothing is injected.

docs/EXPERIMENTS.md, "How the checker is validated, and its power", says how to read the
numbers.
"""

from __future__ import annotations

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
    time_prefix,
    topic_groups,
)
from spark_jobs.mutations import FOREVER, KINDS, mutate

MUTATIONS_PER_RUN = 10
"""Mutations of each kind drawn in each run, spread over its exercised topics."""
POWER_BUDGET = CheckBudget(max_seconds=5.0)
"""Each mutated history gets a smaller budget than a verdict: it is one of many."""
WHOLE = "whole"
PASSING_PREFIX = "passing_prefix"
POWER_DDL = (
    "run_id string, topic string, kind string, region string, "
    "injected long, caught long, unknown long"
)


@dataclass(frozen=True, slots=True)
class PowerResult:
    """Mutations of one kind injected into one history and how the checker answered."""

    kind: str
    region: str
    """Where they went: the whole history, or the passing prefix of a failing one."""
    drawn: int = 0
    """Mutations drawn; those the writes do not contradict are not injected."""
    injected: int = 0
    caught: int = 0
    unknown: int = 0
    """The search budget ran out: neither caught nor missed."""


def checker_verdict(
    ops: Sequence[RegisterOp], initial: str = ABSENT_VALUE, budget: CheckBudget = POWER_BUDGET
) -> str:
    """The verdict :func:`spark_jobs.checker.check_register` gives, without minimizing a
    counterexample: nearly every mutation fails, and minimizing a failure of a topic of
    thousands of operations takes the whole budget (5 s); the verdict is all the power
    counts."""
    return check_register(ops, initial, budget, minimize=False).verdict


def longest_passing_prefix(
    ops: Sequence[RegisterOp], initial: str = ABSENT_VALUE, budget: CheckBudget = POWER_BUDGET
) -> tuple[list[RegisterOp], int] | None:
    """(prefix, cut) of the latest event time whose :func:`time_prefix` is linearizable
    (an ``unknown`` check counts as failing), or None when no prefix passes. Prefixes
    are monotone in the cut (linearizability is prefix-closed), hence the binary search."""
    cuts = sorted(
        {op.invoke_us for op in ops} | {op.complete_us for op in ops if op.complete_us is not None}
    )
    low, high = 0, len(cuts) - 1
    best: tuple[list[RegisterOp], int] | None = None
    while low <= high:
        middle = (low + high) // 2
        prefix = time_prefix(ops, cuts[middle])
        if checker_verdict(prefix, initial, budget) == LINEARIZABLE:
            best, low = (prefix, cuts[middle]), middle + 1
        else:
            high = middle - 1
    return best


def measure_power(
    ops: Sequence[RegisterOp],
    count: int,
    seed: str,
    initial: str = ABSENT_VALUE,
    budget: CheckBudget = POWER_BUDGET,
    kinds: Sequence[str] = KINDS,
) -> list[PowerResult]:
    """Draw up to ``count`` mutations of each of ``kinds`` into one topic's history (the
    whole one when it passes, its longest passing prefix when it fails, none when its
    verdict is unknown), and count those injected, caught and left unknown. ``seed``
    fixes the draws (each kind its own generator, so adding a kind changes no other)."""
    if count <= 0:
        return []
    own = checker_verdict(ops, initial, budget)
    if own == LINEARIZABLE:
        region, base, end_us = WHOLE, list(ops), FOREVER
    elif own == NOT_LINEARIZABLE:
        found = longest_passing_prefix(ops, initial, budget)
        if found is None:
            return []
        region, (base, cut) = PASSING_PREFIX, found
        end_us = float(cut)
    else:
        return []
    results = []
    for kind in kinds:
        drawn = mutate(base, kind, count, random.Random(f"{seed}/{kind}"), initial, end_us)
        verdicts = [checker_verdict(m.history, initial, budget) for m in drawn if m.injected]
        results.append(
            PowerResult(
                kind,
                region,
                drawn=len(drawn),
                injected=len(verdicts),
                caught=verdicts.count(NOT_LINEARIZABLE),
                unknown=verdicts.count(UNKNOWN),
            )
        )
    return results


def topic_seed(run_id: str, topic: str) -> str:
    """The seed of a topic's draws: the run and topic only, so reruns inject the same."""
    return f"{run_id}/{topic}"


def _power_group(item: tuple[tuple[str, str], Sequence[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
    """Spark task body: the power rows (one per kind) of one (run, topic) group, each
    input row the draw count then the :data:`CHECK_COLUMNS`."""
    (run_id, topic), rows = item
    count = int(rows[0][0])
    ops = register_ops_from_rows(dict(zip(CHECK_COLUMNS, row[1:], strict=True)) for row in rows)
    return [
        (run_id, topic, r.kind, r.region, r.injected, r.caught, r.unknown)
        for r in measure_power(ops, count, topic_seed(run_id, topic))
    ]


def checker_power(
    operations: Any, runs: Any, per_run: int = MUTATIONS_PER_RUN, *, clustered: bool = False
) -> Any:
    """Per run (with ``runs``' mode and scenario), mutation kind and region: the topics
    mutated, the mutations injected, caught and unknown, and the share caught (None when
    nothing was injected). A run with no topic to mutate has no row.

    ``per_run`` draws of each kind are spread evenly over at most ``per_run`` of the run's
    topics with two or more acknowledged writes and a read, picked by a hash of the topic
    name (so the same topics every time, and a cost that does not grow with the topics).
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
    per_topic = operations.sparkSession.createDataFrame(groups.flatMap(_power_group), POWER_DDL)
    totals = per_topic.groupBy("run_id", "kind", "region").agg(
        F.count(F.lit(1)).alias("topics"),
        F.sum("injected").alias("injected"),
        F.sum("caught").alias("caught"),
        F.sum("unknown").alias("unknown"),
    )
    return (
        runs.join(totals, "run_id")
        .withColumn(
            "caught_share",
            F.when(F.col("injected") > 0, F.col("caught") / F.col("injected")),
        )
        .orderBy("run_id", "kind", "region")
    )
