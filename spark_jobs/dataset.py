"""Run histories as Spark DataFrames: every run under a root read in one scan per table.

A run directory holds one Parquet file per table (``experiment_history.runs``). Loading
reads each table of all runs with a single ``spark.read.parquet(*files)`` and tags every
row with its run's ``run_id``, ``mode`` and ``scenario`` through the file it came from
(a broadcast join on ``input_file_name()``), so a root of many runs is one scan, not a
chain of unions.

Given a ``dataset_dir`` (``analyze`` passes ``<out>/dataset``), the tables are then written
once as one Parquet dataset partitioned by run (``run_id=<id>/`` directories) with each
file holding whole topics, sorted by topic, and every job reads that dataset. No file of
it is split between scan tasks (:func:`_keep_files_whole`), so every task of a scan holds
whole (run, topic) groups, one after another: the per-topic jobs
(``checker.topic_groups``) then group inside the scan,
where the data is, with no exchange (:attr:`History.topics_clustered`).

The number of shuffle partitions follows the input size and the cluster
(:func:`shuffle_partitions_for`): the session starts with Spark's defaults and loading sets
``spark.sql.shuffle.partitions``; adaptive query execution merges partitions that turn out
small.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, functions as F

from experiment_history.runs import find_runs, read_meta, table_path
from experiment_history.schema import FAULTS, NODE_STATES, OPERATIONS, SCHEMAS, WRITES

TABLES = (OPERATIONS, WRITES, FAULTS, NODE_STATES)
TAGS = ("run_id", "mode", "scenario")
DATASET_DIR_NAME = "dataset"
"""Where a report folder keeps the history as one dataset (``analyze --out``)."""
PARTITION_INPUT_BYTES = 8 * 1024 * 1024
"""Parquet bytes per shuffle partition: compressed columns grow several times once decoded,
and a partition of 8 MiB of input keeps a task's memory to tens of MB."""
PARTITIONS_PER_CORE_MAX = 8
"""Never more partitions than this per core of the cluster: past it, task scheduling costs
more than the smaller tasks save."""


@dataclass(frozen=True, slots=True)
class History:
    """The four tables of every run under one root, tagged with run_id/mode/scenario.

    ``topics_clustered``: the frames scan the dataset, so each scan task reads whole
    (run, topic) groups, each group's rows consecutive (what ``checker.topic_groups``
    needs to group without an exchange)."""

    operations: DataFrame
    writes: DataFrame
    faults: DataFrame
    node_states: DataFrame
    topics_clustered: bool = False


def _ddl(table: str) -> str:
    types = {"int64": "long", "string": "string"}
    return ", ".join(f"{f.name} {types[str(f.type)]}" for f in SCHEMAS[table])


def shuffle_partitions_for(input_bytes: int, cores: int) -> int:
    """Shuffle partitions for ``input_bytes`` of Parquet on ``cores`` executor cores: one
    per ``PARTITION_INPUT_BYTES``, at least one per core, at most
    ``PARTITIONS_PER_CORE_MAX`` per core, and a multiple of the cores so the last wave of
    tasks keeps every core busy."""
    cores = max(1, cores)
    wanted = max(cores, math.ceil(input_bytes / PARTITION_INPUT_BYTES))
    wanted = min(wanted, cores * PARTITIONS_PER_CORE_MAX)
    return math.ceil(wanted / cores) * cores


def _run_dirs(roots: Path | str | Sequence[Path | str]) -> list[Path]:
    listed = [roots] if isinstance(roots, str | Path) else list(roots)
    runs = [run for root in listed for run in find_runs(root)]
    if not runs:
        raise FileNotFoundError(f"no run.json under {', '.join(map(str, listed))}")
    return runs


def load_history(
    spark: SparkSession,
    roots: Path | str | Sequence[Path | str],
    dataset_dir: Path | str | None = None,
) -> History:
    """Read every run under ``roots`` (a root, a run directory, or several of them).

    Sets the session's shuffle partitions from the input size and the cluster's cores. With
    ``dataset_dir`` the history is first written there as one dataset partitioned by run
    and clustered by topic (replacing what was there), and the returned frames read it."""
    runs = _run_dirs(roots)
    metas = [read_meta(run) for run in runs]
    files = {table: [table_path(run, table).resolve() for run in runs] for table in TABLES}
    input_bytes = sum(path.stat().st_size for paths in files.values() for path in paths)
    partitions = shuffle_partitions_for(input_bytes, spark.sparkContext.defaultParallelism)
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    frames = {}
    for table, paths in files.items():
        tags = spark.createDataFrame(
            [
                (path.as_uri(), meta.run_id, meta.mode, meta.scenario)
                for path, meta in zip(paths, metas, strict=True)
            ],
            "source string, run_id string, mode string, scenario string",
        )
        rows = spark.read.schema(_ddl(table)).parquet(*map(str, paths))
        tagged = rows.withColumn("source", F.input_file_name()).join(F.broadcast(tags), "source")
        frames[table] = tagged.select(*TAGS, *SCHEMAS[table].names)
    if dataset_dir is not None:
        frames = _materialize(spark, frames, Path(dataset_dir), partitions)
    return History(
        operations=frames[OPERATIONS],
        writes=frames[WRITES],
        faults=frames[FAULTS],
        node_states=frames[NODE_STATES],
        topics_clustered=dataset_dir is not None,
    )


def _materialize(
    spark: SparkSession, frames: dict[str, DataFrame], target: Path, partitions: int
) -> dict[str, DataFrame]:
    """Write each table under ``target/<table>/run_id=<id>/`` and read it back.

    Rows are hash-partitioned by (run, topic) before the write, so each file holds whole
    topics, sorted by topic and time within the file; :func:`_keep_files_whole` keeps
    the scans from splitting a file."""
    for table, frame in frames.items():
        names = SCHEMAS[table].names
        keys = ["run_id", "topic"] if "topic" in names else ["run_id"]
        order = [*keys, *(c for c in ("invoke_us", "ts_ms", "start_ms") if c in names)]
        path = str(target / table)
        (
            frame.repartition(partitions, *keys)
            .sortWithinPartitions(*order)
            .write.mode("overwrite")
            .partitionBy("run_id")
            .parquet(path)
        )
    _keep_files_whole(spark, target)
    loaded = {}
    for table in frames:
        names = SCHEMAS[table].names
        path = str(target / table)
        schema = f"run_id string, mode string, scenario string, {_ddl(table)}"
        loaded[table] = spark.read.schema(schema).parquet(path).select(*TAGS, *names)
    return loaded


def _keep_files_whole(spark: SparkSession, target: Path) -> None:
    """Spark splits a scanned file larger than ``min(maxPartitionBytes, max(openCostInBytes,
    scan bytes / min partitions))`` between tasks, which would cut a topic in two. The
    files are about equal (one per write task and run), so that takes a very skewed
    topic; when a table has such a file, both settings are raised to its size (a task
    then reads it whole, and files are no longer packed together)."""
    conf = spark._jsparkSession.sessionState().conf()
    min_partitions = max(
        spark.sparkContext.defaultParallelism,
        int(spark.conf.get("spark.sql.files.minPartitionNum", None) or 1),
    )
    largest_cut = 0
    for table in TABLES:
        sizes = [part.stat().st_size for part in (target / table).rglob("*.parquet")]
        if not sizes:
            continue
        split_at = min(
            conf.filesMaxPartitionBytes(),
            max(conf.filesOpenCostInBytes(), sum(sizes) // min_partitions),
        )
        if max(sizes) > split_at:
            largest_cut = max(largest_cut, max(sizes))
    if largest_cut:
        spark.conf.set("spark.sql.files.maxPartitionBytes", str(largest_cut))
        spark.conf.set("spark.sql.files.openCostInBytes", str(largest_cut))


def executor_facts(spark: SparkSession) -> dict[str, object]:
    """What the jobs ran on: the master, executors (the driver not counted; a local
    master runs its tasks in the driver and shows 0), cores and shuffle partitions."""
    context = spark.sparkContext
    executors = context._jsc.sc().getExecutorIds().size()
    return {
        "master": context.master,
        "executors": executors,
        "cores": context.defaultParallelism,
        "shuffle_partitions": int(spark.conf.get("spark.sql.shuffle.partitions") or 0),
    }


__all__ = [
    "DATASET_DIR_NAME",
    "History",
    "executor_facts",
    "load_history",
    "shuffle_partitions_for",
]
