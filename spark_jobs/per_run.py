"""Each run's measures and the ``seed_intervals`` table (mean and 95 % interval per mode).

The report's jobs group by mode and scenario, so several seeds of one mode fold into one
row. For intervals across seeds, the same jobs run over a history whose ``scenario`` column
holds the run id: each (mode, scenario) group is then one run, and no metric is written
twice. With one run per mode and scenario the report's own tables already are per run, and
no extra Spark job runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession, functions as F

from experiment_history.runs import find_runs, read_meta
from spark_jobs.across_seeds import SeededRun, interval_rows, run_measures
from spark_jobs.anomalies import anomaly_summary, classify_topics, not_exist_live_summary
from spark_jobs.dataset import History, load_history
from spark_jobs.metrics import (
    dead_sends_summary,
    divergence_by_topic,
    divergence_summary,
    latency_percentiles,
    ownership_summary,
    queue_ownership,
    read_freshness,
    t_visibility,
)

Rows = list[dict[str, Any]]
PER_RUN_ALREADY = ("stale_route", "linearizability")
"""Report tables whose rows are already one per run (or per event of a run)."""


def seeded_runs(history_root: Path | str) -> list[SeededRun]:
    """Every run under the root with its mode, scenario and seed (from ``run.json``)."""
    runs = []
    for run_dir in find_runs(history_root):
        meta = read_meta(run_dir)
        runs.append(SeededRun(meta.run_id, meta.mode, meta.scenario, meta.seed))
    return runs


def _per_run_history(history: History) -> History:
    """The history with ``scenario`` replaced by ``run_id``, so (mode, scenario) groups
    are runs."""

    def retag(frame: DataFrame) -> DataFrame:
        # Cached: the jobs of per_run_tables read each table again.
        return frame.withColumn("scenario", F.col("run_id")).cache()

    return History(
        retag(history.operations),
        retag(history.writes),
        retag(history.faults),
        retag(history.node_states),
    )


def per_run_tables(spark: SparkSession, history_root: Path | str) -> dict[str, Rows]:
    """The report's per-mode tables computed per run; each row's ``run_id`` names it."""
    runs = _per_run_history(load_history(spark, history_root))
    freshness = read_freshness(runs).cache()
    classified = classify_topics(runs.operations).cache()
    jobs: dict[str, Callable[[], DataFrame]] = {
        "t_visibility": lambda: t_visibility(freshness),
        "not_exist_live": lambda: not_exist_live_summary(classified),
        "anomalies": lambda: anomaly_summary(classified),
        "divergence": lambda: divergence_summary(divergence_by_topic(runs)),
        "dead_sends": lambda: dead_sends_summary(runs),
        "ownership": lambda: ownership_summary(queue_ownership(runs)),
        "latency": lambda: latency_percentiles(runs),
    }
    tables: dict[str, Rows] = {}
    for name, job in jobs.items():
        rows = [row.asDict(recursive=True) for row in job().collect()]
        tables[name] = [{**row, "run_id": row["scenario"]} for row in rows]
    freshness.unpersist()
    classified.unpersist()
    for frame in (runs.operations, runs.writes, runs.faults, runs.node_states):
        frame.unpersist()
    return tables


def _one_run_each(runs: Sequence[SeededRun]) -> dict[tuple[str, str], str] | None:
    """(mode, scenario) -> run id when every group is one run; None otherwise."""
    groups: dict[tuple[str, str], str] = {}
    for run in runs:
        if (run.mode, run.scenario) in groups:
            return None
        groups[(run.mode, run.scenario)] = run.run_id
    return groups


def _run_of(row: Mapping[str, Any], single: Mapping[tuple[str, str], str]) -> str | None:
    """A report row's run: its own ``run_id``, else the one run of its mode and scenario."""
    if row.get("run_id"):
        return str(row["run_id"])
    return single.get((str(row.get("mode")), str(row.get("scenario"))))


def seed_intervals(
    spark: SparkSession, history_root: Path | str, tables: Mapping[str, Sequence[Mapping[str, Any]]]
) -> Rows:
    """The ``seed_intervals`` table of the runs under ``history_root``; ``tables`` are the
    report's (their per-run tables are reused, and with one run per mode all of them)."""
    runs = seeded_runs(history_root)
    single = _one_run_each(runs)
    if single is not None:
        per_run: dict[str, Rows] = {
            name: [{**row, "run_id": _run_of(row, single)} for row in rows]
            for name, rows in tables.items()
        }
    else:
        per_run = per_run_tables(spark, history_root)
        per_run.update({name: [dict(r) for r in tables.get(name, ())] for name in PER_RUN_ALREADY})
    return interval_rows(run_measures(per_run), runs)
