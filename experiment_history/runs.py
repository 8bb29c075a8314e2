"""Write and read run histories (Parquet via pyarrow; Spark is not needed to write).

A run directory holds ``run.json`` and one ``<table>.parquet`` file per table. The writer
buffers at most ``chunk_rows`` rows per table and then appends a row group, so a long
simulation streams to disk with bounded memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from experiment_history.schema import (
    FAULTS,
    NODE_STATES,
    OPERATIONS,
    OPTIONAL_TRAILING,
    RUN_META_FILE,
    SCHEMA_VERSION,
    SCHEMAS,
    TABLE_NAMES,
    WRITES,
)

DEFAULT_CHUNK_ROWS = 50_000


@dataclass(slots=True)
class RunMeta:
    """The ``run.json`` of one run: what was run, where and when."""

    run_id: str
    scenario: str
    mode: str
    seed: int
    nodes: list[str]
    started_ms: int = 0
    timings: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> str:
        """The JSON text stored in ``run.json``."""
        return json.dumps(asdict(self), sort_keys=True, indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunMeta:
        """Build from parsed ``run.json``, ignoring keys a newer writer may add."""
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


def table_path(run_dir: Path | str, table: str) -> Path:
    """Where one table of a run lives."""
    return Path(run_dir) / f"{table}.parquet"


class HistoryWriter:
    """Streams the rows of one run to Parquet, one row group per ``chunk_rows`` rows.

    Rows are positional tuples in schema column order (fast for the simulator) or dicts
    (readable for the experiment runner). Use as a context manager or call :meth:`close`.
    """

    def __init__(
        self, run_dir: Path | str, meta: RunMeta, chunk_rows: int = DEFAULT_CHUNK_ROWS
    ) -> None:
        if chunk_rows <= 0:
            raise ValueError("chunk_rows must be positive")
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.meta = meta
        self.chunk_rows = chunk_rows
        self._buffers: dict[str, list[tuple[Any, ...]]] = {name: [] for name in TABLE_NAMES}
        self._writers: dict[str, pq.ParquetWriter] = {}
        self.row_counts: dict[str, int] = {name: 0 for name in TABLE_NAMES}
        self._closed = False

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def append(self, table: str, row: tuple[Any, ...] | dict[str, Any]) -> None:
        """Add one row; flushes a row group when the buffer is full."""
        schema = SCHEMAS[table]
        optional = OPTIONAL_TRAILING.get(table, ())
        if isinstance(row, dict):
            row = tuple(row.get(n) if n in optional else row[n] for n in schema.names)
        missing = len(schema.names) - len(row)
        if 0 < missing <= len(optional):
            row = (*row, *([None] * missing))
        if len(row) != len(schema.names):
            raise ValueError(f"{table} row needs {len(schema.names)} fields, got {len(row)}")
        buffer = self._buffers[table]
        buffer.append(row)
        if len(buffer) >= self.chunk_rows:
            self._flush(table)

    def operation(self, row: tuple[Any, ...] | dict[str, Any]) -> None:
        """Append to ``operations``."""
        self.append(OPERATIONS, row)

    def write(self, row: tuple[Any, ...] | dict[str, Any]) -> None:
        """Append to ``writes``."""
        self.append(WRITES, row)

    def fault(self, row: tuple[Any, ...] | dict[str, Any]) -> None:
        """Append to ``faults``."""
        self.append(FAULTS, row)

    def node_state(self, row: tuple[Any, ...] | dict[str, Any]) -> None:
        """Append to ``node_states``."""
        self.append(NODE_STATES, row)

    def _flush(self, table: str) -> None:
        buffer = self._buffers[table]
        schema = SCHEMAS[table]
        columns = list(zip(*buffer, strict=True)) if buffer else [()] * len(schema.names)
        batch = pa.table(
            {
                name: pa.array(col, type=schema.field(name).type)
                for name, col in zip(schema.names, columns, strict=True)
            },
            schema=schema,
        )
        writer = self._writers.get(table)
        if writer is None:
            writer = pq.ParquetWriter(table_path(self.run_dir, table), schema)
            self._writers[table] = writer
        writer.write_table(batch)
        self.row_counts[table] += len(buffer)
        buffer.clear()

    def close(self) -> None:
        """Flush every table (empty tables still get a file) and write ``run.json``."""
        if self._closed:
            return
        for table in TABLE_NAMES:
            if self._buffers[table] or table not in self._writers:
                self._flush(table)
            self._writers[table].close()
        self.meta.timings.setdefault("rows", dict(self.row_counts))
        (self.run_dir / RUN_META_FILE).write_text(self.meta.to_json())
        self._closed = True


def read_meta(run_dir: Path | str) -> RunMeta:
    """Parse a run's ``run.json``."""
    return RunMeta.from_dict(json.loads((Path(run_dir) / RUN_META_FILE).read_text()))


def read_table(run_dir: Path | str, table: str) -> pa.Table:
    """Read one table of a run with pyarrow (no Spark)."""
    return pq.read_table(table_path(run_dir, table), schema=SCHEMAS[table])


def find_runs(root: Path | str) -> list[Path]:
    """Run directories under ``root``: itself if it holds ``run.json``, else its children."""
    root = Path(root)
    if (root / RUN_META_FILE).is_file():
        return [root]
    return sorted(p.parent for p in root.glob(f"*/{RUN_META_FILE}"))


def iter_rows(run_dir: Path | str, table: str) -> Iterator[dict[str, Any]]:
    """Rows of one table as dicts, row group by row group (bounded memory)."""
    parquet = pq.ParquetFile(table_path(run_dir, table))
    for index in range(parquet.num_row_groups):
        yield from parquet.read_row_group(index).to_pylist()


__all__ = [
    "FAULTS",
    "NODE_STATES",
    "OPERATIONS",
    "WRITES",
    "HistoryWriter",
    "RunMeta",
    "find_runs",
    "iter_rows",
    "read_meta",
    "read_table",
    "table_path",
]
