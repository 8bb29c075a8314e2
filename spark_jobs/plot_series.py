"""The series behind the report's plots: per-node divergence over time, the fault windows,
the read latency CDF and each node's stale-route window after a broker kill.

Spark jobs like those of :mod:`spark_jobs.metrics`, over the same :class:`History`; only
their rows are shaped for :mod:`spark_jobs.plots` rather than for a table.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window, functions as F

from experiment_history.schema import FAULT_KILL_BROKER, KIND_ROUTE_READ, OUTCOME_TIMEOUT
from spark_jobs.dataset import History
from spark_jobs.joins import window_join
from spark_jobs.metrics import (
    GROUP,
    PERCENTILE_ACCURACY,
    brokers_of,
    faults_of_kinds,
    latency_us,
    micro_stamped,
)

CDF_QUANTILE_STEPS = 100  # read_latency_cdf: quantiles 0.01, 0.02, ..., 1.0


def _run_last_ms(history: History) -> DataFrame:
    """Per run: its latest timestamp in any table (where an open fault window ends)."""
    stamps = [
        history.operations.select("run_id", F.greatest("invoke_ms", "complete_ms").alias("ts")),
        history.writes.select("run_id", F.col("ts_ms").alias("ts")),
        history.node_states.select("run_id", F.col("ts_ms").alias("ts")),
        history.faults.select("run_id", F.greatest("start_ms", "end_ms").alias("ts")),
    ]
    union = stamps[0]
    for part in stamps[1:]:
        union = union.unionByName(part)
    return union.groupBy("run_id").agg(F.max("ts").alias("last_ms"))


def _fault_origin(faults: DataFrame) -> DataFrame:
    """Per run with faults: the start of its first fault (time 0 of the plots)."""
    return faults.groupBy("run_id").agg(F.min("start_ms").alias("origin_ms"))


def divergence_timeline(history: History) -> DataFrame:
    """One row per node and sampling round of ``node_states``: how far the node strayed.

    Columns: ``run_id, mode, scenario, node``; ``t_ms``, the round's ``ts_ms`` minus the
    start of the run's first fault (minus 0, the run start, when the run has no fault);
    ``topics``, the sampled topics the node answered in that round; ``diverged_share``, the
    share of them on which the node's value differed from the round's majority. A node is
    diverged on a topic when its value is not the single most common value among the nodes
    that answered; when two or more values tie for most common there is no majority and
    every node is diverged (it differs from some other node: with two nodes, a 1:1 split
    marks both).
    """
    states = history.node_states.select(
        "run_id",
        "mode",
        "scenario",
        "ts_ms",
        "node",
        "topic",
        F.coalesce(F.col("value"), F.lit("")).alias("value"),
    )
    keys = ["run_id", "ts_ms", "topic"]
    per_topic = Window.partitionBy(*keys)
    votes = (
        states.groupBy(*keys, "value")
        .agg(F.count("*").alias("votes"))
        .withColumn("top", F.max("votes").over(per_topic))
    )
    votes = votes.withColumn(
        "tied_top", F.sum((F.col("votes") == F.col("top")).cast("int")).over(per_topic)
    )
    marked = states.join(votes, [*keys, "value"]).withColumn(
        "diverged", ((F.col("votes") < F.col("top")) | (F.col("tied_top") > 1)).cast("double")
    )
    per_round = marked.groupBy("run_id", "mode", "scenario", "node", "ts_ms").agg(
        F.count("*").alias("topics"), F.avg("diverged").alias("diverged_share")
    )
    return (
        per_round.join(_fault_origin(history.faults), "run_id", "left")
        .select(
            "run_id",
            "mode",
            "scenario",
            "node",
            (F.col("ts_ms") - F.coalesce(F.col("origin_ms"), F.lit(0))).alias("t_ms"),
            "topics",
            "diverged_share",
        )
        .orderBy("run_id", "node", "t_ms")
    )


def fault_windows(history: History) -> DataFrame:
    """One row per fault of a run, on the plots' clock.

    Columns: ``run_id, mode, scenario, kind, target``; ``start_ms`` and ``end_ms`` relative
    to the start of the run's first fault (so the first fault starts at 0); ``open_end``,
    true when the fault lasted until the end of the run (``end_ms < start_ms`` in the
    history), whose ``end_ms`` is then the run's latest timestamp in any table.
    """
    faults = history.faults
    is_open = F.col("end_ms") < F.col("start_ms")
    end = F.when(is_open, F.greatest(F.col("last_ms"), F.col("start_ms"))).otherwise(
        F.col("end_ms")
    )
    return (
        faults.join(_fault_origin(faults), "run_id")
        .join(_run_last_ms(history), "run_id", "left")
        .select(
            "run_id",
            "mode",
            "scenario",
            "kind",
            "target",
            (F.col("start_ms") - F.col("origin_ms")).alias("start_ms"),
            (end - F.col("origin_ms")).alias("end_ms"),
            is_open.alias("open_end"),
        )
        .orderBy("run_id", "start_ms", "kind", "target")
    )


def read_latency_cdf(history: History, steps: int = CDF_QUANTILE_STEPS) -> DataFrame:
    """One row per mode, scenario and quantile q = 1/steps, 2/steps, ..., 1.0.

    Columns: ``mode, scenario``; ``reads``, the route reads that completed (any outcome but
    ``timeout``, as in ``latency_percentiles``); ``quantile``, q; ``latency_us``, the
    (approximate) q-quantile of their latency in microseconds (``metrics.latency_us``:
    the monotonic stamps, or whole wall-clock ms x 1,000 in a history without them), so a
    share q of the reads took at most ``latency_us``; ``monotonic``, whether every one of
    those reads had monotonic stamps (the plot draws whole milliseconds otherwise). The
    rows of one mode are the points of its latency CDF.
    """
    reads = history.operations.filter(
        (F.col("kind") == KIND_ROUTE_READ) & (F.col("outcome") != OUTCOME_TIMEOUT)
    )
    reads = reads.withColumn("latency_us", latency_us(reads)).filter(F.col("latency_us") >= 0)
    levels = [round(i / steps, 6) for i in range(1, steps + 1)]
    wide = reads.groupBy(*GROUP).agg(
        F.count("*").alias("reads"),
        F.min(micro_stamped(reads).cast("int")).cast("boolean").alias("monotonic"),
        F.percentile_approx("latency_us", levels, PERCENTILE_ACCURACY).alias("q"),
    )
    quantile = F.round((F.col("i") + 1) / steps, 6).alias("quantile")
    return (
        wide.select(*GROUP, "reads", "monotonic", F.posexplode("q").alias("i", "latency_us"))
        .select(*GROUP, "reads", "monotonic", quantile, "latency_us")
        .orderBy(*GROUP, "quantile")
    )


def stale_route_by_node(history: History) -> DataFrame:
    """One row per hard broker kill and node: how long that node kept routing to it.

    Columns: ``run_id, mode, scenario, target`` (the killed broker), ``start_ms`` (the kill,
    run clock), ``node``; ``window_ms``, ms from the kill to the node's first sampling round
    after which none of its sampled answers includes the broker (all topics of a round
    together, as ``stale_route_windows`` does over all nodes), null when its last round
    inside the kill window still included it; ``observed_ms``, ms from the kill to the node's
    last round inside the window (how long it was watched: a null ``window_ms`` means "at
    least this long").
    """
    kills = faults_of_kinds(history.faults, [FAULT_KILL_BROKER]).select(
        "run_id", "mode", "scenario", "target", "start_ms", "end_ms"
    )
    rounds = history.node_states.select("run_id", "node", "ts_ms").distinct()
    window = window_join(rounds, kills, keys=["run_id"], event_ms="ts_ms")
    keys = ["run_id", "mode", "scenario", "target", "start_ms", "node"]
    # The node's rounds that route to the killed broker, equi-joined on it.
    routing = history.node_states.select(
        "run_id",
        "node",
        "ts_ms",
        F.explode(F.array_distinct(brokers_of(F.col("value")))).alias("target"),
    ).distinct()
    last_routed = (
        window_join(
            routing,
            kills.select("run_id", "target", "start_ms", "end_ms"),
            keys=["run_id", "target"],
            event_ms="ts_ms",
        )
        .groupBy("run_id", "target", "start_ms", "node")
        .agg(F.max("ts_ms").alias("last_routed_ms"))
    )
    per_node = (
        window.groupBy(*keys)
        .agg(F.max("ts_ms").alias("last_round_ms"))
        .join(last_routed, ["run_id", "target", "start_ms", "node"], "left")
    )
    dropped = (
        window.join(per_node, keys)
        .filter(F.col("ts_ms") > F.coalesce(F.col("last_routed_ms"), F.col("start_ms") - 1))
        .groupBy(*keys)
        .agg(F.min("ts_ms").alias("drop_ms"))
    )
    return (
        per_node.join(dropped, keys, "left")
        .select(
            *keys,
            (F.col("drop_ms") - F.col("start_ms")).alias("window_ms"),
            (F.col("last_round_ms") - F.col("start_ms")).alias("observed_ms"),
        )
        .orderBy("run_id", "start_ms", "target", "node")
    )
