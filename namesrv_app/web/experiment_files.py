"""What the experiment pages read from a run's folder: its ``run.json`` and its Parquet
operations and faults, with pyarrow (no Spark in the web process). Kept apart so that
the web process imports pyarrow only when a page first reads a run's files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from experiment_history.runs import read_meta, read_table, table_path
from experiment_history.schema import FAULTS, OPERATIONS

__all__ = ["read_faults", "read_meta", "read_ops"]
TIMELINE_COLUMNS = (
    "op_id",
    "process",
    "kind",
    "node",
    "topic",
    "invoke_ms",
    "complete_ms",
    "outcome",
    "broker",
)


def read_ops(run_dir: Path, limit: int) -> tuple[list[dict[str, Any]], int, tuple[int, int] | None]:
    """At most ``limit`` operations taken evenly over the whole recording (in
    invocation order, the first and the last always among them), the total count, and
    the recording's span in ms (first invocation, last completion) over every operation,
    so the axis covers the whole run even where the drawing is a sample."""
    path = table_path(run_dir, OPERATIONS)
    if not path.is_file():
        return [], 0, None
    table = pq.read_table(path, columns=list(TIMELINE_COLUMNS))
    total = table.num_rows
    if total == 0:
        return [], 0, None
    table = table.sort_by([("invoke_ms", "ascending"), ("op_id", "ascending")])
    span = (
        int(pc.min(table["invoke_ms"]).as_py()),
        int(max(pc.max(table["complete_ms"]).as_py(), pc.max(table["invoke_ms"]).as_py())),
    )
    if total > limit:
        step = (total - 1) / (limit - 1)
        table = table.take(pa.array(sorted({round(i * step) for i in range(limit)})))
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows, total, span


def read_faults(run_dir: Path) -> list[dict[str, Any]]:
    if not table_path(run_dir, FAULTS).is_file():
        return []
    rows: list[dict[str, Any]] = read_table(run_dir, FAULTS).to_pylist()
    return rows
