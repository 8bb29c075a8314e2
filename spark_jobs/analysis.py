"""The analysis driver: every Spark job over the runs under a root, as plain rows.

``analyze`` loads the :class:`~spark_jobs.dataset.History` once, runs the metric jobs of
:mod:`spark_jobs.metrics` and the plot series of :mod:`spark_jobs.plot_series`, and hands
the tables to the report (:mod:`spark_jobs.report_folder`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession, functions as F

from experiment_reports.seeds import SEED_INTERVALS
from spark_jobs.anomalies import anomaly_summary, classify_topics, not_exist_live_summary
from spark_jobs.checker import CheckBudget, overall_verdict
from spark_jobs.convergence import convergence_after_heals
from spark_jobs.dataset import executor_facts, load_history
from spark_jobs.lost_writes import lost_writes_by_topic, lost_writes_summary
from spark_jobs.metrics import (
    GROUP,
    availability,
    checker_depth,
    dead_sends_summary,
    divergence_by_topic,
    divergence_summary,
    k_staleness,
    latency_percentiles,
    linearizability,
    linearizability_summary,
    ownership_summary,
    queue_ownership,
    read_freshness,
    route_changes,
    stale_route_windows,
    t_visibility,
    topic_verdicts,
)
from spark_jobs.per_run import seed_intervals
from spark_jobs.plot_series import (
    divergence_timeline,
    fault_windows,
    read_latency_cdf,
    stale_route_by_node,
)
from spark_jobs.power import checker_power
from spark_jobs.sessions import session_summary, sessions_by_topic
from spark_jobs.two_masters import two_masters_by_run


def _rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in frame.collect()]


JOBS_TOTAL = 23
"""The Spark jobs ``analyze`` runs (for its "job k of n" lines)."""


def analyze(
    spark: SparkSession,
    root: Path | str,
    budget: CheckBudget | None = None,
    on_job: Callable[[str, bool], None] | None = None,
    dataset_dir: Path | str | None = None,
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, float]]:
    """Run every job over the runs under ``root``; return (tables of plain rows, seconds
    per job). ``on_job(text, finished)`` hears "Spark job k of n: name" before each job
    (``finished`` False) and its time after it (True). With ``dataset_dir`` the history
    is first written there as one dataset partitioned by run and topic
    (``spark_jobs.dataset``); table ``spark`` says what the jobs ran on, and
    ``seed_intervals`` gives each measure across seeds (``spark_jobs.per_run``)."""
    began = time.monotonic()
    history = load_history(spark, root, dataset_dir)
    tables: dict[str, list[dict[str, Any]]] = {}
    seconds: dict[str, float] = {"load_history": round(time.monotonic() - began, 3)}
    if on_job is not None:
        partitions = spark.conf.get("spark.sql.shuffle.partitions")
        on_job(
            f"history loaded in {seconds['load_history']:.1f} s ({partitions} shuffle partitions)",
            False,
        )

    def timed(name: str, job: Callable[[], DataFrame]) -> None:
        number = len(seconds)
        if on_job is not None:
            on_job(f"Spark job {number} of {JOBS_TOTAL}: {name} ...", False)
        began = time.monotonic()
        tables[name] = _rows(job())
        seconds[name] = round(time.monotonic() - began, 3)
        if on_job is not None:
            on_job(
                f"Spark job {number} of {JOBS_TOTAL}: {name} done in {seconds[name]:.1f} s", True
            )

    freshness = read_freshness(history).cache()
    timed("t_visibility", lambda: t_visibility(freshness))
    timed("k_staleness", lambda: k_staleness(freshness))
    freshness.unpersist()
    classified = classify_topics(history.operations, clustered=history.topics_clustered).cache()
    timed("anomalies", lambda: anomaly_summary(classified))
    timed("not_exist_live", lambda: not_exist_live_summary(classified))
    classified.unpersist()
    timed("lost_writes", lambda: lost_writes_summary(lost_writes_by_topic(history)))
    timed("convergence", lambda: convergence_after_heals(history))
    timed("session_guarantees", lambda: session_summary(sessions_by_topic(history)))
    timed("two_masters", lambda: two_masters_by_run(history))
    timed("divergence", lambda: divergence_summary(divergence_by_topic(history)))
    timed("stale_route", lambda: stale_route_windows(history))
    timed("dead_sends", lambda: dead_sends_summary(history))
    timed("ownership", lambda: ownership_summary(queue_ownership(history)))
    timed("availability", lambda: availability(history))
    timed("latency", lambda: latency_percentiles(history))
    timed("divergence_timeline", lambda: divergence_timeline(history))
    timed("fault_windows", lambda: fault_windows(history))
    timed("read_latency_cdf", lambda: read_latency_cdf(history))
    timed("stale_route_by_node", lambda: stale_route_by_node(history))
    verdicts = linearizability(history, budget).cache()
    runs = history.operations.select("run_id", *GROUP).distinct()
    shown = topic_verdicts(verdicts, route_changes(history), runs).cache()
    timed("route_changes", lambda: shown)
    timed("linearizability", lambda: linearizability_summary(shown, runs))
    timed("checker_depth", lambda: checker_depth(verdicts, runs))
    timed(
        "checker_power",
        lambda: checker_power(history.operations, runs, clustered=history.topics_clustered),
    )
    timed(
        "counterexamples",
        lambda: (
            verdicts.filter(F.col("verdict") == "not_linearizable")
            .orderBy("run_id", "topic")
            .limit(20)
        ),
    )
    by_mode: dict[str, list[str]] = {}
    for row in tables["route_changes"]:
        by_mode.setdefault(row["mode"], []).append(row["verdict"])
    # One verdict per mode: the modes answer different questions and are never mixed.
    tables["overall"] = [
        {"mode": mode, "verdict": overall_verdict(found)} for mode, found in sorted(by_mode.items())
    ]
    verdicts.unpersist()
    shown.unpersist()
    tables["spark"] = [executor_facts(spark)]
    # Not a job of its own: it reuses the per-run tables above (one more pass only when a
    # mode ran several seeds).
    if on_job is not None:
        on_job("per-seed measures and their intervals ...", False)
    began = time.monotonic()
    tables[SEED_INTERVALS] = seed_intervals(spark, root, tables)
    seconds[SEED_INTERVALS] = round(time.monotonic() - began, 3)
    return tables, seconds
