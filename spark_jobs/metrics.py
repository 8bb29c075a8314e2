"""PySpark jobs over run histories: one function per metric of docs/EXPERIMENTS.md.

Every job takes a :class:`History` of DataFrames (all runs under a root, each row tagged
with ``run_id``, ``mode`` and ``scenario``) and returns a small DataFrame grouped by mode and
scenario (or per topic / per fault). :func:`spark_jobs.analysis.analyze` runs them all,
with the plot series of :mod:`spark_jobs.plot_series`, and collects plain rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window, functions as F

from experiment_history.schema import (
    FAULT_KILL_BROKER,
    KIND_CONSUME_ALLOC,
    KIND_ROUTE_READ,
    KIND_SEND,
    ORIGIN_INFERRED,
    OUTCOME_NOT_FOUND,
    OUTCOME_OK,
    OUTCOME_TIMEOUT,
    US_PER_MS,
    WRITE_KINDS,
)
from experiment_reports.report import ANY_FAULT
from experiment_reports.t_buckets import T_BUCKET_EDGES_MS
from spark_jobs.checker import (
    LINEARIZABLE,
    NOT_EXERCISED,
    NOT_LINEARIZABLE,
    UNKNOWN,
    CheckBudget,
    check_topics,
)
from spark_jobs.dataset import History
from spark_jobs.joins import asof_join, window_join

GROUP = ("mode", "scenario")
K_VALUES = (0, 1, 2, 3, 5, 10)
LATENCY_QUANTILES = (0.5, 0.95, 0.99)
PERCENTILE_ACCURACY = 10_000
OPEN_END_MS = 2**62


def brokers_of(value: Column) -> Column:
    """Broker names in a canonical route value (the first field of each item)."""
    items = F.filter(F.split(F.coalesce(value, F.lit("")), ","), lambda x: x != "")
    return F.transform(items, lambda x: F.split(x, ":").getItem(0))


def faults_of_kinds(faults: DataFrame, kinds: Sequence[str]) -> DataFrame:
    """Faults of the given kinds with an open end (end_ms < start_ms) made explicit."""
    return faults.filter(F.col("kind").isin(list(kinds))).select(
        "run_id",
        "mode",
        "scenario",
        F.col("kind").alias("fault_kind"),
        "target",
        "start_ms",
        F.when(F.col("end_ms") >= F.col("start_ms"), F.col("end_ms"))
        .otherwise(F.lit(OPEN_END_MS))
        .alias("end_ms"),
    )


# ------------------------------------------------------------------ freshness of reads


def read_freshness(history: History) -> DataFrame:
    """Per route read: time since the latest ground-truth write, staleness in versions.

    Versions are the per-topic order of rows in ``writes`` (1, 2, ...; the implicit
    initial state "absent" is version 0). A read matches the latest write with its value
    written before the read completed; ``staleness = max(0, latest - matched)`` or null when
    the value matches no write (a route that never was the truth).
    """
    writes = history.writes.withColumn(
        "seq", F.row_number().over(Window.partitionBy("run_id", "topic").orderBy("ts_ms", "value"))
    ).select(
        "run_id",
        "topic",
        F.col("ts_ms").alias("w_ts"),
        F.col("seq"),
        F.coalesce(F.col("value"), F.lit("")).alias("w_value"),
    )
    reads = history.operations.filter(
        (F.col("kind") == KIND_ROUTE_READ) & F.col("outcome").isin(OUTCOME_OK, OUTCOME_NOT_FOUND)
    ).select(
        "run_id",
        "mode",
        "scenario",
        "op_id",
        "topic",
        "invoke_ms",
        "complete_ms",
        "outcome",
        F.when(F.col("outcome") == OUTCOME_NOT_FOUND, F.lit(""))
        .otherwise(F.coalesce(F.col("value"), F.lit("")))
        .alias("r_value"),
    )
    # Reads that completed before their topic's first write are left out, as the reads x
    # writes join this replaces left them out (a topic never written keeps its reads).
    first = writes.groupBy("run_id", "topic").agg(F.min("w_ts").alias("first_ts"))
    reads = reads.join(first, ["run_id", "topic"], "left").filter(
        F.col("first_ts").isNull() | (F.col("first_ts") <= F.col("complete_ms"))
    )
    # Writes count up to the read's start (and never after its completion).
    reads = reads.withColumn("seen_ms", F.least("invoke_ms", "complete_ms"))
    latest_of_topic = writes.select(
        "run_id",
        "topic",
        "w_ts",
        F.col("seq").alias("latest_seq"),
        F.col("w_ts").alias("latest_ts"),
    )
    with_latest = asof_join(
        reads,
        latest_of_topic,
        keys=["run_id", "topic"],
        probe_ms="seen_ms",
        fact_ms="w_ts",
        carry=["latest_seq", "latest_ts"],
        tie_order=["latest_seq"],
    )
    same_value = writes.select(
        "run_id",
        "topic",
        F.col("w_value").alias("r_value"),
        "w_ts",
        F.col("seq").alias("matched_seq"),
    )
    per_read = asof_join(
        with_latest,
        same_value,
        keys=["run_id", "topic", "r_value"],
        probe_ms="complete_ms",
        fact_ms="w_ts",
        carry=["matched_seq"],
        tie_order=["matched_seq"],
    )
    latest = F.coalesce(F.col("latest_seq"), F.lit(0))
    matched = F.coalesce(F.col("matched_seq"), F.when(F.col("r_value") == "", F.lit(0)))
    return per_read.select(
        "run_id",
        "mode",
        "scenario",
        "op_id",
        "topic",
        "outcome",
        (F.col("invoke_ms") - F.col("latest_ts")).alias("t_ms"),
        F.when(matched.isNull(), F.lit(None).cast("long"))
        .otherwise(F.greatest(latest - matched, F.lit(0)))
        .alias("staleness"),
    )


def t_visibility(freshness: DataFrame, edges_ms: Sequence[int] = T_BUCKET_EDGES_MS) -> DataFrame:
    """P(read returns the latest write or newer) per bucket of t = read start - write time.

    A bucket is labelled by its lower edge; reads before the first write are left out."""
    bucket = F.lit(edges_ms[0])
    for edge in edges_ms[1:]:
        bucket = F.when(F.col("t_ms") >= edge, F.lit(edge)).otherwise(bucket)
    return (
        freshness.filter(F.col("t_ms").isNotNull())
        .withColumn("t_bucket_ms", bucket)
        .groupBy(*GROUP, "t_bucket_ms")
        .agg(
            F.count("*").alias("reads"),
            F.avg(F.coalesce((F.col("staleness") == 0).cast("double"), F.lit(0.0))).alias(
                "p_fresh"
            ),
        )
        .na.fill({"p_fresh": 0.0})
        .orderBy(*GROUP, "t_bucket_ms")
    )


def k_staleness(freshness: DataFrame, ks: Sequence[int] = K_VALUES) -> DataFrame:
    """P(read within k versions of the latest), one row per k."""
    aggs = [
        F.avg(F.coalesce((F.col("staleness") <= k).cast("double"), F.lit(0.0))).alias(f"k{k}")
        for k in ks
    ]
    wide = freshness.groupBy(*GROUP).agg(F.count("*").alias("reads"), *aggs)
    stack = ", ".join(f"{k}, k{k}" for k in ks)
    return wide.selectExpr(
        *GROUP, "reads", f"stack({len(ks)}, {stack}) as (k, p_within_k)"
    ).orderBy(*GROUP, "k")


# ---------------------------------------------------------------------------- divergence


def divergence_by_topic(history: History) -> DataFrame:
    """Per topic: share of sampling rounds in which nodes answered differently, and the
    longest diverged window (first diverged round to the next agreeing round)."""
    rounds = history.node_states.groupBy("run_id", "mode", "scenario", "topic", "ts_ms").agg(
        (F.countDistinct(F.coalesce(F.col("value"), F.lit(""))) > 1).alias("diverged")
    )
    order = Window.partitionBy("run_id", "topic").orderBy("ts_ms")
    marked = (
        rounds.withColumn("next_ts", F.lead("ts_ms").over(order))
        .withColumn("change", (F.col("diverged") != F.lag("diverged").over(order)).cast("int"))
        .withColumn("streak", F.sum(F.coalesce(F.col("change"), F.lit(0))).over(order))
    )
    streaks = (
        marked.filter("diverged")
        .groupBy("run_id", "topic", "streak")
        .agg((F.coalesce(F.max("next_ts"), F.max("ts_ms")) - F.min("ts_ms")).alias("window_ms"))
    )
    longest = streaks.groupBy("run_id", "topic").agg(F.max("window_ms").alias("longest_ms"))
    share = rounds.groupBy("run_id", "mode", "scenario", "topic").agg(
        F.count("*").alias("rounds"),
        F.avg(F.col("diverged").cast("double")).alias("diverged_fraction"),
    )
    return share.join(longest, ["run_id", "topic"], "left").na.fill({"longest_ms": 0})


def divergence_summary(by_topic: DataFrame) -> DataFrame:
    """Per mode and scenario: mean diverged fraction, share of topics that ever diverged,
    the longest window of any topic."""
    return (
        by_topic.groupBy(*GROUP)
        .agg(
            F.count("*").alias("topics"),
            F.avg("diverged_fraction").alias("mean_diverged_fraction"),
            F.avg((F.col("diverged_fraction") > 0).cast("double")).alias("topics_diverged_share"),
            F.max("longest_ms").alias("longest_ms"),
        )
        .orderBy(*GROUP)
    )


# ------------------------------------------------------------------------ broker kills


def stale_route_windows(history: History) -> DataFrame:
    """Per hard broker kill: ms until no node routes to it, ms until every client that
    knew it has a route without it, and sends routed to it while dead."""
    kills = faults_of_kinds(history.faults, [FAULT_KILL_BROKER])
    nodes = _node_drop(history.node_states, kills)
    clients = _client_drop(history.operations, kills)
    sends = _dead_sends(history.operations, kills)
    keys = ["run_id", "target", "start_ms"]
    kills = kills.withColumn("end_ms", F.when(F.col("end_ms") < OPEN_END_MS, F.col("end_ms")))
    return (
        kills.join(nodes, keys, "left")
        .join(clients, keys, "left")
        .join(sends, keys, "left")
        .na.fill({"sends_to_dead": 0, "sends_in_window": 0})
        .orderBy("run_id", "start_ms")
    )


def _windows_of(kills: DataFrame) -> DataFrame:
    return kills.select("run_id", "target", "start_ms", "end_ms")


def _node_drop(node_states: DataFrame, kills: DataFrame) -> DataFrame:
    keys = ["run_id", "target", "start_ms"]
    rounds = node_states.select("run_id", "ts_ms").distinct()
    window = window_join(rounds, _windows_of(kills), keys=["run_id"], event_ms="ts_ms")
    # Rounds that route to the killed broker, found by equi-joining on it (not every
    # round's whole broker list against every kill).
    routing = node_states.select(
        "run_id", "ts_ms", F.explode(F.array_distinct(brokers_of(F.col("value")))).alias("target")
    ).distinct()
    last = (
        window_join(routing, _windows_of(kills), keys=["run_id", "target"], event_ms="ts_ms")
        .groupBy(*keys)
        .agg(F.max("ts_ms").alias("last_routed_ms"))
    )
    dropped = (
        window.join(last, keys, "left")
        .filter(F.col("ts_ms") > F.coalesce(F.col("last_routed_ms"), F.col("start_ms") - 1))
        .groupBy(*keys)
        .agg(F.min("ts_ms").alias("drop_ms"))
    )
    return dropped.select(
        *keys,
        (F.col("drop_ms") - F.col("start_ms")).alias("nodes_window_ms"),
    )


def _client_drop(operations: DataFrame, kills: DataFrame) -> DataFrame:
    reads = operations.filter(
        (F.col("kind") == KIND_ROUTE_READ) & F.col("outcome").isin(OUTCOME_OK, OUTCOME_NOT_FOUND)
    ).select(
        "run_id",
        "process",
        "topic",
        "invoke_ms",
        "complete_ms",
        brokers_of(F.col("value")).alias("brokers"),
    )
    keys = ["run_id", "target", "start_ms", "process", "topic"]
    # A (process, topic) pair knew the broker when one of its reads before the kill healed
    # routed to it: equi-join the reads' brokers on the killed one.
    routing = reads.select(
        "run_id",
        "process",
        "topic",
        "invoke_ms",
        F.explode(F.array_distinct("brokers")).alias("target"),
    )
    pairs = (
        routing.join(_windows_of(kills), ["run_id", "target"])
        .filter(F.col("invoke_ms") < F.col("end_ms"))
        .groupBy(*keys)
        .agg(F.max("invoke_ms").alias("last_routed_ms"), F.first("end_ms").alias("end_ms"))
    )
    # The pair's later reads without the broker, joined on the pair, not on the run.
    routed = F.array_contains(F.col("brokers"), F.col("target"))
    after = (
        reads.join(pairs, ["run_id", "process", "topic"])
        .filter(
            (F.col("invoke_ms") < F.col("end_ms"))
            & (F.col("invoke_ms") >= F.col("start_ms"))
            & ~routed
            & (F.col("invoke_ms") > F.col("last_routed_ms"))
        )
        .groupBy(*keys)
        .agg(F.min("complete_ms").alias("drop_ms"))
    )
    per_pair = pairs.join(after, keys, "left")
    return per_pair.groupBy("run_id", "target", "start_ms").agg(
        F.count("*").alias("client_topics"),
        F.sum(F.col("drop_ms").isNull().cast("long")).alias("client_topics_never_dropped"),
        (F.max("drop_ms") - F.first("start_ms")).alias("clients_window_ms"),
    )


def _dead_sends(operations: DataFrame, kills: DataFrame) -> DataFrame:
    sends = operations.filter(F.col("kind") == KIND_SEND).select("run_id", "invoke_ms", "broker")
    joined = window_join(sends, _windows_of(kills), keys=["run_id"], event_ms="invoke_ms")
    return joined.groupBy("run_id", "target", "start_ms").agg(
        F.count("*").alias("sends_in_window"),
        F.sum((F.col("broker") == F.col("target")).cast("long")).alias("sends_to_dead"),
    )


def dead_sends_summary(history: History) -> DataFrame:
    """Per mode and scenario: all sends, and those routed to a broker while it was dead."""
    kills = faults_of_kinds(history.faults, [FAULT_KILL_BROKER])
    sends = (
        history.operations.filter(F.col("kind") == KIND_SEND)
        .select(*GROUP, "run_id", "op_id", "invoke_ms", F.col("broker").alias("target"))
        .dropDuplicates(["run_id", "op_id"])
    )
    dead = (
        window_join(
            sends.select("run_id", "op_id", "invoke_ms", "target"),
            _windows_of(kills),
            keys=["run_id", "target"],
            event_ms="invoke_ms",
        )
        .select("run_id", "op_id", F.lit(True).alias("to_dead"))
        .distinct()
    )
    return (
        sends.join(dead, ["run_id", "op_id"], "left")
        .groupBy(*GROUP)
        .agg(
            F.count("*").alias("sends"),
            F.sum(F.coalesce(F.col("to_dead"), F.lit(False)).cast("long")).alias("sends_to_dead"),
        )
        .orderBy(*GROUP)
    )


# ------------------------------------------------------------------- consumer ownership


def queue_ownership(history: History) -> DataFrame:
    """At each allocation change of a consumer group: queues owned by no consumer, and by
    two or more, against the ground-truth readable queues of the topic."""
    allocs = history.operations.filter(
        (F.col("kind") == KIND_CONSUME_ALLOC) & (F.col("outcome") == OUTCOME_OK)
    ).select(
        "run_id",
        "mode",
        "scenario",
        "process",
        "topic",
        "complete_ms",
        F.coalesce(F.get_json_object("extra", "$.group"), F.lit("")).alias("grp"),
        F.coalesce(F.col("value"), F.lit("")).alias("queues"),
    )
    gkeys = ["run_id", "mode", "scenario", "grp", "topic"]
    ready = (
        allocs.groupBy(*gkeys, "process")
        .agg(F.min("complete_ms").alias("first_ms"))
        .groupBy(*gkeys)
        .agg(F.max("first_ms").alias("ready_ms"))
    )
    checkpoints = (
        allocs.select(*gkeys, F.col("complete_ms").alias("at_ms"))
        .distinct()
        .join(ready, gkeys)
        .filter(F.col("at_ms") >= F.col("ready_ms"))
        .drop("ready_ms")
    )
    # Every process of the group has allocated by each checkpoint (at_ms >= ready_ms):
    # probe each (checkpoint, process) for that process's latest allocation.
    processes = allocs.select(*gkeys, "process").distinct()
    latest = asof_join(
        checkpoints.join(processes, gkeys),
        allocs.select(*gkeys, "process", "complete_ms", "queues"),
        keys=[*gkeys, "process"],
        probe_ms="at_ms",
        fact_ms="complete_ms",
        carry=["queues"],
    )
    owned = (
        latest.select(*gkeys, "at_ms", F.explode(F.split("queues", ",")).alias("queue"))
        .filter(F.col("queue") != "")
        .groupBy(*gkeys, "at_ms", "queue")
        .agg(F.count("*").alias("owners"))
    )
    truth = _truth_queues(history.writes, checkpoints)
    counted = truth.join(owned, [*gkeys, "at_ms", "queue"], "full_outer")
    per_checkpoint = counted.groupBy(*gkeys, "at_ms").agg(
        F.sum(F.col("owners").isNull().cast("long")).alias("orphan_queues"),
        F.sum((F.col("owners") >= 2).cast("long")).alias("double_queues"),
    )
    return checkpoints.join(per_checkpoint, [*gkeys, "at_ms"], "left").na.fill(
        {"orphan_queues": 0, "double_queues": 0}
    )


def _truth_queues(writes: DataFrame, checkpoints: DataFrame) -> DataFrame:
    """Readable ``broker:queueId`` of the latest ground-truth route at each checkpoint."""
    latest = asof_join(
        checkpoints,
        writes.select("run_id", "topic", "ts_ms", "value"),
        keys=["run_id", "topic"],
        probe_ms="at_ms",
        fact_ms="ts_ms",
        carry=["value"],
        tie_order=["value"],
    )
    gkeys = ["run_id", "mode", "scenario", "grp", "topic", "at_ms"]
    items = latest.select(
        *gkeys, F.explode(F.split(F.coalesce("value", F.lit("")), ",")).alias("item")
    ).filter(F.col("item") != "")
    fields = F.split("item", ":")
    readable = items.select(
        *gkeys,
        fields.getItem(0).alias("broker"),
        F.element_at(fields, -2).cast("int").alias("rq"),
        F.element_at(fields, -1).cast("int").alias("perm"),
    ).filter((F.col("perm").bitwiseAND(4) != 0) & (F.col("rq") > 0))
    return readable.select(
        *gkeys, F.explode(F.sequence(F.lit(0), F.col("rq") - 1)).alias("qid"), "broker"
    ).select(*gkeys, F.concat_ws(":", "broker", F.col("qid").cast("string")).alias("queue"))


def ownership_summary(per_checkpoint: DataFrame) -> DataFrame:
    """Per mode and scenario: share of checkpoints with orphaned / doubly owned queues, and
    ``double_ms``: ms from each checkpoint with a doubly owned queue to its group's next
    checkpoint, summed over groups and topics (the last checkpoint adds 0: not seen after)."""
    group_topic = Window.partitionBy("run_id", "grp", "topic").orderBy("at_ms")
    held = F.coalesce(F.lead("at_ms").over(group_topic) - F.col("at_ms"), F.lit(0))
    return (
        per_checkpoint.withColumn("held_ms", held)
        .groupBy(*GROUP)
        .agg(
            F.count("*").alias("checkpoints"),
            F.avg((F.col("orphan_queues") > 0).cast("double")).alias("orphan_share"),
            F.avg((F.col("double_queues") > 0).cast("double")).alias("double_share"),
            F.max("orphan_queues").alias("max_orphan_queues"),
            F.max("double_queues").alias("max_double_queues"),
            F.sum(F.when(F.col("double_queues") > 0, F.col("held_ms")).otherwise(0)).alias(
                "double_ms"
            ),
        )
        .orderBy(*GROUP)
    )


# ------------------------------------------------------------- availability and latency


def availability(history: History) -> DataFrame:
    """Inside fault windows: share of reads and of writes answered ``ok`` (and, for reads,
    answered at all), per ``fault_kind`` (every kind of the ``faults`` table: a
    scenario's partitions, kills and skews and each kind of nemesis step; an open fault
    lasts to the run's end) and for :data:`ANY_FAULT`, every window at once. An operation
    inside several windows of one kind, or of several kinds for ``any``, counts once."""
    fault_rows = history.faults.select(
        "run_id",
        F.col("kind").alias("fault_kind"),
        "start_ms",
        F.when(F.col("end_ms") >= F.col("start_ms"), F.col("end_ms"))
        .otherwise(F.lit(OPEN_END_MS))
        .alias("end_ms"),
    )
    windows = fault_rows.unionByName(
        fault_rows.withColumn("fault_kind", F.lit(ANY_FAULT))
    ).distinct()
    ops = history.operations.withColumn(
        "op_class",
        F.when(F.col("kind") == KIND_ROUTE_READ, F.lit("read")).when(
            F.col("kind").isin(sorted(WRITE_KINDS)), F.lit("write")
        ),
    ).filter(F.col("op_class").isNotNull())
    inside = window_join(ops, windows, keys=["run_id"], event_ms="invoke_ms").dropDuplicates(
        ["run_id", "fault_kind", "op_id"]
    )
    return (
        inside.groupBy(*GROUP, "fault_kind", "op_class")
        .agg(
            F.count("*").alias("ops"),
            F.avg((F.col("outcome") == OUTCOME_OK).cast("double")).alias("ok_share"),
            F.avg(F.col("outcome").isin(OUTCOME_OK, OUTCOME_NOT_FOUND).cast("double")).alias(
                "answered_share"
            ),
        )
        .orderBy(*GROUP, "fault_kind", "op_class")
    )


MICRO_STAMPS = frozenset({"invoke_us", "complete_us"})


def latency_us(operations: DataFrame) -> Column:
    """Completion minus invocation of each operation, in microseconds: from the monotonic
    ``invoke_us``/``complete_us``, or the milliseconds x 1,000 where a row (or the whole
    frame, a history without them) lacks them (``experiment_history.schema.interval_us``'s
    reading)."""
    latency = (F.col("complete_ms") - F.col("invoke_ms")) * F.lit(US_PER_MS)
    if set(operations.columns) >= MICRO_STAMPS:
        latency = F.coalesce(F.col("complete_us") - F.col("invoke_us"), latency)
    return latency


def micro_stamped(operations: DataFrame) -> Column:
    """Whether a row has both monotonic microsecond stamps (false for every row of a
    frame without those columns)."""
    if set(operations.columns) >= MICRO_STAMPS:
        return F.col("invoke_us").isNotNull() & F.col("complete_us").isNotNull()
    return F.lit(False)


def latency_percentiles(history: History) -> DataFrame:
    """p50/p95/p99 of ``complete - invoke`` per kind, in microseconds, over operations
    that completed: from the monotonic microsecond stamps, or the milliseconds x 1,000
    for a history without them (``experiment_history.schema.interval_us``'s reading)."""
    done = history.operations.filter(F.col("outcome") != OUTCOME_TIMEOUT)
    done = done.withColumn("latency_us", latency_us(done)).filter(F.col("latency_us") >= 0)
    quantiles = F.percentile_approx("latency_us", list(LATENCY_QUANTILES), PERCENTILE_ACCURACY)
    return (
        done.groupBy(*GROUP, "kind")
        .agg(F.count("*").alias("ops"), quantiles.alias("q"))
        .select(
            *GROUP,
            "kind",
            "ops",
            F.col("q")[0].alias("p50_us"),
            F.col("q")[1].alias("p95_us"),
            F.col("q")[2].alias("p99_us"),
        )
        .orderBy(*GROUP, "kind")
    )


# ----------------------------------------------------------------------- linearizability


def linearizability(history: History, budget: CheckBudget | None = None) -> DataFrame:
    """Per (run, topic) verdicts of the register checker (see ``spark_jobs.checker``)."""
    verdicts: DataFrame = check_topics(
        history.operations, budget, clustered=history.topics_clustered
    )
    return verdicts


EXERCISED_MIN_WRITES = 2
"""A register with one write (the warm-up registration) and reads of it is linearizable
whatever the system does: such a topic is reported as not exercised."""
SHOWN_VERDICTS = (LINEARIZABLE, NOT_LINEARIZABLE, UNKNOWN, NOT_EXERCISED)


def route_changes(history: History) -> DataFrame:
    """Per run and topic: acknowledged route writes (``writes``), those completed
    inside the fault window (``writes_in_fault``: from the first fault's start to the last
    one's end, or to the end of the run when a fault does not heal), the writes whose
    origin is ``inferred`` (``inferred_writes``, any outcome) and how many writes, any
    outcome, repeat a value an earlier one of the topic wrote (``repeated_values``: 0
    when every write of the topic is traceable by its value)."""
    writes = history.operations.filter(
        F.col("kind").isin(sorted(WRITE_KINDS)) & (F.col("topic") != "")
    )
    ok = F.col("outcome") == OUTCOME_OK
    window = history.faults.groupBy("run_id").agg(
        F.min("start_ms").alias("w_start"),
        F.max(
            F.when(F.col("end_ms") >= F.col("start_ms"), F.col("end_ms")).otherwise(
                F.lit(OPEN_END_MS)
            )
        ).alias("w_end"),
    )
    inside = (F.col("complete_ms") >= F.col("w_start")) & (F.col("complete_ms") <= F.col("w_end"))
    return (
        writes.join(window, "run_id", "left")
        .groupBy("run_id", *GROUP, "topic")
        .agg(
            F.sum(ok.cast("long")).alias("writes"),
            F.sum((ok & F.coalesce(inside, F.lit(False))).cast("long")).alias("writes_in_fault"),
            F.sum(F.coalesce(F.col("origin") == ORIGIN_INFERRED, F.lit(False)).cast("long")).alias(
                "inferred_writes"
            ),
            (F.count("*") - F.countDistinct("value")).alias("repeated_values"),
        )
    )


def topic_verdicts(verdicts: DataFrame, changes: DataFrame, runs: DataFrame) -> DataFrame:
    """Per run and topic: the checker's verdict, shown as ``not_exercised`` when the topic
    had fewer than two writes and nothing contradicted the one it had."""
    joined = (
        verdicts.join(changes.drop(*GROUP), ["run_id", "topic"], "left")
        .na.fill({"writes": 0, "writes_in_fault": 0, "inferred_writes": 0, "repeated_values": 0})
        .join(runs, "run_id")
    )
    shown = F.when(
        (F.col("verdict") == LINEARIZABLE) & (F.col("writes") < EXERCISED_MIN_WRITES),
        F.lit(NOT_EXERCISED),
    ).otherwise(F.col("verdict"))
    return joined.select(
        "run_id",
        *GROUP,
        "topic",
        "writes",
        "writes_in_fault",
        "inferred_writes",
        "repeated_values",
        shown.alias("verdict"),
    ).orderBy("run_id", "topic")


def checker_depth(verdicts: DataFrame, runs: DataFrame) -> DataFrame:
    """Per run: how much history the checker decided and what it cost: topics checked,
    register operations per topic (median and largest) and the checker's wall time per
    topic (largest, and summed over the run's topics), ms."""
    per_run = verdicts.groupBy("run_id").agg(
        F.count("*").alias("topics"),
        F.sum("ops").alias("ops"),
        F.percentile_approx("ops", 0.5).alias("ops_per_topic_median"),
        F.max("ops").alias("ops_per_topic_max"),
        F.round(F.max("check_ms"), 3).alias("check_ms_max"),
        F.round(F.sum("check_ms"), 3).alias("check_ms_total"),
    )
    return runs.join(per_run, "run_id").orderBy("run_id")


def linearizability_summary(verdicts: DataFrame, runs: DataFrame) -> DataFrame:
    """Per run: topics per verdict (``topic_verdicts``' shown verdicts); ``runs`` maps
    run_id to mode and scenario."""
    counts = verdicts.groupBy("run_id").pivot("verdict", list(SHOWN_VERDICTS)).count().na.fill(0)
    return runs.join(counts, "run_id", "left").na.fill(0).orderBy("run_id")
