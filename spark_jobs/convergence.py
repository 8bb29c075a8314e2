"""Time to converge after each heal: from a fault's end until every node answers every
exercised topic with the latest acknowledged route.

Per run and per healed fault (a ``faults`` row with ``end_ms >= start_ms``; an open fault
never heals and has no row), over the node samples (``node_states``: every node asked for
the same topics in each sampling round, all answers of a round stamped with its start):

- The run's *nodes* are the nodes that answered any of its samples; its *exercised topics*
  are the sampled topics with at least one acknowledged (``ok``) write in ``operations``.
- A sampling round at ``ts_ms`` is *converged* when, for every exercised topic, every node
  answered, all answers are equal, and that answer is a route that could be in effect at
  ``ts_ms`` (``experiment_history.superseding``'s possible sources over the topic's writes
  in ``operations``, as the anomaly classes read them: ``ok`` writes end at their ack,
  ``error``/``timeout`` ones are pending and may take effect any time after their call).
  With no write in flight that is exactly the latest acknowledged route; while one is in
  flight (or pending), its route counts too.
- ``converge_ms`` = the first converged round at or after the heal, minus the heal time
  (milliseconds, at the sampling interval's resolution). With no such round before the run
  ends the fault is ``not converged`` and ``converge_ms`` is null, never a number; a run
  with no exercised topic sampled is ``not measured``.
- Per topic as well: a topic's first round at or after the heal in which it alone is
  converged (every node answered it, one route, one that could be in effect).
  ``topics converged`` says how many exercised topics had one ("7 of 8"), and the
  median and largest time from the heal to it are in milliseconds. While brokers keep
  writing, a round in which *every* topic is converged at once can come only after the
  writes stop (at 200 topics each route changes every second); the per-topic figures
  say how soon each route agreed again.

When the fault began and healed are shown in seconds from the recording's start
(:data:`START_COLUMN`, :data:`HEAL_COLUMN`), not as wall-clock epoch milliseconds: the
recording starts where the run's first operation completes (the warm-up's agreed routes
are recorded as writes completing at that moment; no row is recorded before it), or, for
a run without operations, at its first node sample or fault.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

from experiment_history.schema import US_PER_MS, WRITE_KINDS, interval_us
from experiment_history.superseding import TIME_MAX_US, TimedWrite, TopicWrites
from spark_jobs.anomalies import ROW_COLUMNS
from spark_jobs.checker import register_role, topic_groups

CONVERGED = "converged"
NOT_CONVERGED = "not converged"
NOT_MEASURED = "not measured"


def round_converged(
    writes: TopicWrites, ts_ms: int, answers: Collection[str], answered: int, nodes: int
) -> bool:
    """Whether one topic is converged in the round at ``ts_ms``: ``answered`` of the run's
    ``nodes`` answered, the distinct ``answers`` are one route, and it could be in effect."""
    if answered < nodes or len(set(answers)) != 1:
        return False
    at_us = ts_ms * US_PER_MS
    return writes.sources(next(iter(answers)), at_us, at_us) is not None


def first_converged(heal_ms: int, converged_rounds: Sequence[int]) -> int | None:
    """ms from ``heal_ms`` to the first converged round at or after it, None: never."""
    after = [ts for ts in converged_rounds if ts >= heal_ms]
    return min(after) - heal_ms if after else None


# ------------------------------------------------------------------------------- Spark

WRITES_DDL = (
    "run_id string, topic string, writes array<struct<value:string,invoke_us:long,"
    "complete_us:long>>"
)
ROUNDS_DDL = "run_id string, ts_ms long, topic string, ok boolean"
START_COLUMN = "start (s from start)"
HEAL_COLUMN = "heal (s from start)"
"""When the fault began and healed, in seconds from the recording's start (module doc);
the unit is in the name, so every place that shows the table shows it."""
TOPICS_COLUMN = "topics converged"
TOPIC_MEDIAN_COLUMN = "per topic, median (ms)"
TOPIC_MAX_COLUMN = "per topic, max (ms)"
"""Each exercised topic on its own (module doc): how many converged after the heal, of
how many, and the median and largest time from the heal to a topic's first converged
round; at scale every topic converges long before all of them agree in one round."""
TABLE_COLUMNS = (
    "run_id",
    "mode",
    "scenario",
    "fault_kind",
    "target",
    START_COLUMN,
    HEAL_COLUMN,
    "status",
    "converge_ms",
    TOPICS_COLUMN,
    TOPIC_MEDIAN_COLUMN,
    TOPIC_MAX_COLUMN,
)
MS_PER_S = 1000.0


def _topic_writes(item: tuple[tuple[str, str], Iterable[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
    """Spark task body: one (run, topic) group's writes, when one was acknowledged."""
    (run_id, topic), rows = item
    writes: list[tuple[str, int, int]] = []
    acked = False
    for row in rows:
        as_dict = dict(zip(ROW_COLUMNS, row, strict=True))
        role = register_role(as_dict)
        if role is None or not role[0]:
            continue
        _, value, complete = role
        invoke, end = interval_us(as_dict)
        writes.append((value, invoke, end if complete else TIME_MAX_US))
        acked = acked or complete
    return [(run_id, topic, writes)] if acked else []


def _round_flags(row: Any) -> list[tuple[str, int, str, bool]]:
    """Spark task body: each sampled round of one exercised (run, topic), converged or not."""
    index = TopicWrites(
        TimedWrite(w["value"], w["invoke_us"], w["complete_us"]) for w in row["writes"]
    )
    return [
        (
            row["run_id"],
            r["ts_ms"],
            row["topic"],
            round_converged(index, r["ts_ms"], r["answers"], r["answered"], row["nodes"]),
        )
        for r in row["rounds"]
    ]


def recording_starts(history: Any) -> Any:
    """Per run: ``recording_start_ms``, when its recording started (module doc)."""
    from pyspark.sql import functions as F

    ops = history.operations.groupBy("run_id").agg(F.min("complete_ms").alias("ops_ms"))
    others = (
        history.node_states.select("run_id", F.col("ts_ms").alias("ms"))
        .unionByName(history.faults.select("run_id", F.col("start_ms").alias("ms")))
        .groupBy("run_id")
        .agg(F.min("ms").alias("other_ms"))
    )
    return others.join(ops, "run_id", "full_outer").select(
        "run_id", F.coalesce("ops_ms", "other_ms").alias("recording_start_ms")
    )


def convergence_after_heals(history: Any) -> Any:
    """The ``convergence`` table: one row per healed fault (``TABLE_COLUMNS``), ordered by
    run and heal time; ``converge_ms`` null unless ``status`` is ``converged``."""
    from pyspark.sql import functions as F

    spark = history.operations.sparkSession
    heals = history.faults.filter(F.col("end_ms") >= F.col("start_ms")).select(
        "run_id",
        "mode",
        "scenario",
        F.col("kind").alias("fault_kind"),
        "target",
        "start_ms",
        F.col("end_ms").alias("heal_ms"),
    )
    first_heal = heals.groupBy("run_id").agg(F.min("heal_ms").alias("first_heal_ms"))
    operations = history.operations
    for name in ("invoke_us", "complete_us"):
        if name not in operations.columns:
            operations = operations.withColumn(name, F.lit(None).cast("long"))
    write_ops = operations.filter(F.col("kind").isin(sorted(WRITE_KINDS)))
    written = spark.createDataFrame(
        topic_groups(write_ops, ROW_COLUMNS).flatMap(_topic_writes), WRITES_DDL
    )
    samples = history.node_states.select(
        "run_id", "topic", "ts_ms", "node", F.coalesce(F.col("value"), F.lit("")).alias("value")
    )
    nodes = samples.groupBy("run_id").agg(F.countDistinct("node").alias("nodes"))
    exercised = samples.select("run_id", "topic").distinct().join(written, ["run_id", "topic"])
    topics = exercised.groupBy("run_id").agg(F.count("*").alias("topics"))
    rounds = (
        samples.join(F.broadcast(first_heal), "run_id")
        .filter(F.col("ts_ms") >= F.col("first_heal_ms"))
        .groupBy("run_id", "topic", "ts_ms")
        .agg(
            F.countDistinct("node").alias("answered"),
            F.collect_set("value").alias("answers"),
        )
        .groupBy("run_id", "topic")
        .agg(F.collect_list(F.struct("ts_ms", "answered", "answers")).alias("rounds"))
        .join(exercised, ["run_id", "topic"])
        .join(nodes, "run_id")
    )
    flags = spark.createDataFrame(rounds.rdd.flatMap(_round_flags), ROUNDS_DDL)
    converged_rounds = (
        flags.groupBy("run_id", "ts_ms")
        .agg(F.sum(F.col("ok").cast("long")).alias("ok_topics"))
        .join(topics, "run_id")
        .filter(F.col("ok_topics") == F.col("topics"))
        .select("run_id", "ts_ms")
    )
    first = (
        heals.join(converged_rounds, "run_id")
        .filter(F.col("ts_ms") >= F.col("heal_ms"))
        .groupBy("run_id", "fault_kind", "target", "start_ms", "heal_ms")
        .agg(F.min("ts_ms").alias("converged_ms"))
    )
    keys = ["run_id", "fault_kind", "target", "start_ms", "heal_ms"]
    per_topic = (
        heals.select(*keys)
        .join(flags.filter(F.col("ok")), "run_id")
        .filter(F.col("ts_ms") >= F.col("heal_ms"))
        .groupBy(*keys, "topic")
        .agg((F.min("ts_ms") - F.col("heal_ms")).alias("topic_ms"))
        .groupBy(*keys)
        .agg(
            F.count("*").alias("topics_converged"),
            # An element of the set (not an interpolation), exact at these sizes.
            F.percentile_approx("topic_ms", 0.5, 1_000_000).alias(TOPIC_MEDIAN_COLUMN),
            F.max("topic_ms").alias(TOPIC_MAX_COLUMN),
        )
    )
    topics_converged = F.when(
        F.col("topics").isNotNull(),
        F.concat_ws(
            " of ",
            F.coalesce(F.col("topics_converged"), F.lit(0)).cast("string"),
            F.col("topics").cast("string"),
        ),
    )
    status = (
        F.when(F.col("topics").isNull(), F.lit(NOT_MEASURED))
        .when(F.col("converged_ms").isNull(), F.lit(NOT_CONVERGED))
        .otherwise(F.lit(CONVERGED))
    )
    since_start = F.col("recording_start_ms")
    return (
        heals.join(first, keys, "left")
        .join(per_topic, keys, "left")
        .join(topics, "run_id", "left")
        .withColumn(TOPICS_COLUMN, topics_converged)
        .join(F.broadcast(recording_starts(history)), "run_id", "left")
        .withColumn("status", status)
        .withColumn(
            "converge_ms",
            F.when(F.col("status") == CONVERGED, F.col("converged_ms") - F.col("heal_ms")),
        )
        .withColumn(START_COLUMN, (F.col("start_ms") - since_start) / MS_PER_S)
        .withColumn(HEAL_COLUMN, (F.col("heal_ms") - since_start) / MS_PER_S)
        .orderBy("run_id", "heal_ms", "start_ms", "fault_kind", "target")
        .select(*TABLE_COLUMNS)
    )
