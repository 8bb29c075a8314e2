"""Loading run histories: one scan per table, shuffle partitions from the data, and the
dataset partitioned by run with whole topics per file."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from spark_jobs.checker import topic_groups
from spark_jobs.dataset import (
    PARTITION_INPUT_BYTES,
    PARTITIONS_PER_CORE_MAX,
    TABLES,
    load_history,
    shuffle_partitions_for,
)

pytestmark = pytest.mark.slow


def test_partitions_follow_the_input_size_in_multiples_of_the_cores() -> None:
    assert shuffle_partitions_for(1_000, cores=2) == 2
    assert shuffle_partitions_for(5 * PARTITION_INPUT_BYTES, cores=2) == 6
    assert shuffle_partitions_for(5 * PARTITION_INPUT_BYTES, cores=4) == 8
    huge = 10_000 * PARTITION_INPUT_BYTES
    assert shuffle_partitions_for(huge, cores=3) == 3 * PARTITIONS_PER_CORE_MAX
    assert shuffle_partitions_for(0, cores=0) == 1


def _sorted_rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(row) for row in frame.collect()), key=lambda r: tuple(str(v) for v in r))


def test_the_dataset_holds_every_row_tagged_by_run_and_each_topic_in_one_file(
    spark: Any, history_root: Path, tmp_path: Path
) -> None:
    scanned = load_history(spark, history_root)
    assert int(spark.conf.get("spark.sql.shuffle.partitions")) == shuffle_partitions_for(
        sum(p.stat().st_size for p in history_root.rglob("*.parquet")),
        spark.sparkContext.defaultParallelism,
    )
    dataset = load_history(spark, history_root, tmp_path / "dataset")
    for table in TABLES:
        left, right = getattr(scanned, table), getattr(dataset, table)
        assert left.columns[:3] == ["run_id", "mode", "scenario"] == right.columns[:3]
        assert left.columns == right.columns
        assert _sorted_rows(left) == _sorted_rows(right)
    runs = {row.run_id for row in scanned.operations.select("run_id").distinct().collect()}
    assert len(runs) == 5
    assert {p.name for p in (tmp_path / "dataset" / "operations").glob("run_id=*")} == {
        f"run_id={run}" for run in runs
    }
    files_of: defaultdict[tuple[str, str], set[Path]] = defaultdict(set)
    for part in (tmp_path / "dataset" / "operations").glob("run_id=*/*.parquet"):
        topics = pq.read_table(part, columns=["topic"]).column("topic").to_pylist()
        assert topics == sorted(topics)
        for topic in topics:
            files_of[(part.parent.name, topic)].add(part)
    assert files_of and all(len(files) == 1 for files in files_of.values())


def test_several_roots_load_as_one_history(spark: Any, history_root: Path) -> None:
    run_dirs = sorted(p.parent for p in history_root.glob("*/run.json"))
    together = load_history(spark, run_dirs[:2])
    runs = {row.run_id for row in together.writes.select("run_id").distinct().collect()}
    assert len(runs) == 2
    with pytest.raises(FileNotFoundError, match=r"no run\.json"):
        load_history(spark, [history_root / "nowhere"])


def _groups(rdd: Any) -> list[tuple[tuple[str, str], list[tuple[Any, ...]]]]:
    return sorted((key, sorted(rows, key=str)) for key, rows in rdd.collect())


def test_the_per_topic_jobs_group_the_dataset_where_it_lies(
    spark: Any, history_root: Path, tmp_path: Path
) -> None:
    """Each scan task of the dataset reads whole topics, so ``topic_groups`` groups them
    inside the scan: the same groups as through an exchange, none of them cut in two, and
    no shuffle in the lineage. Files bigger than a scan would split raise the split size,
    as a very skewed topic would need (forced here by a 1 KiB split size)."""
    conf = spark._jsparkSession.sessionState().conf()
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1024")
    try:
        dataset = load_history(spark, history_root, tmp_path / "dataset")
        largest = max(p.stat().st_size for p in (tmp_path / "dataset").rglob("*.parquet"))
        assert conf.filesMaxPartitionBytes() >= largest
        assert conf.filesOpenCostInBytes() >= largest
        assert dataset.topics_clustered
        assert not load_history(spark, history_root).topics_clustered
        columns = ("op_id", "kind", "value")
        in_place = topic_groups(dataset.operations, columns, clustered=True)
        exchanged = topic_groups(dataset.operations, columns)
        assert "ShuffledRowRDD" not in in_place.toDebugString().decode()
        assert "ShuffledRowRDD" in exchanged.toDebugString().decode()
        groups = _groups(in_place)
        keys = [key for key, _ in groups]
        assert len(keys) == len(set(keys)) > 5
        assert groups == _groups(exchanged)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
        spark.conf.unset("spark.sql.files.openCostInBytes")
