"""The writes of each topic as ``route_changes`` counts them: how many were inferred (the
``origin`` column) and how many repeat a value (traceable writes), old runs included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import HistoryWriter, RunMeta
from spark_jobs.dataset import load_history
from spark_jobs.metrics import route_changes
from tests.spark_jobs.conftest import ROUTE_A, ROUTE_B, ROUTE_C, op

pytestmark = pytest.mark.slow


def _run(root: Path, run_id: str, rows: list[tuple[Any, ...]]) -> None:
    meta = RunMeta(run_id=run_id, scenario="origins", mode="raft", seed=1, nodes=["n0"])
    with HistoryWriter(root / run_id, meta) as out:
        for row in rows:
            out.operation(row)


def test_route_changes_count_inferred_writes_and_repeated_values(
    spark: Any, tmp_path: Path
) -> None:
    _run(
        tmp_path,
        "new",
        [
            # T: four distinct values, one inferred, one timed out (counted for values).
            (*op(1, "warmup", "register", "T", 0, 1, value=ROUTE_A), "harness"),
            (*op(2, "broker-b", "register", "T", 10, 12, value=ROUTE_B), "client"),
            (*op(3, "raft", "expire", "T", 20, 25, value=ROUTE_C), "inferred"),
            (*op(4, "admin", "delete_topic", "T", 30, 40, "timeout", value=""), "harness"),
            (*op(5, "p", "route_read", "T", 50, 51, value=ROUTE_C), None),
            # U: the churn's A, B, A: one repeated value; the expiry reported by a node.
            (*op(6, "warmup", "register", "U", 0, 1, value=ROUTE_A), "harness"),
            (*op(7, "broker-churn", "register", "U", 10, 12, value=ROUTE_B), "harness"),
            (*op(8, "raft", "expire", "U", 20, 25, value=ROUTE_A), "node"),
        ],
    )
    # A run of schema version 2: no origin column at all (rows of the older shape).
    _run(
        tmp_path,
        "old",
        [
            op(1, "warmup", "register", "T", 0, 1, value=ROUTE_A),
            op(2, "ns-n0", "expire", "T", 10, 12, value=ROUTE_C, extra='{"inferred": true}'),
        ],
    )
    rows = route_changes(load_history(spark, tmp_path)).collect()
    got = {
        (r["run_id"], r["topic"]): (r["writes"], r["inferred_writes"], r["repeated_values"])
        for r in rows
    }
    assert got == {
        ("new", "T"): (3, 1, 0),
        ("new", "U"): (3, 0, 1),
        ("old", "T"): (2, 0, 0),
    }
