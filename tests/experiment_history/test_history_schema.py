"""The history writer/reader and the canonical route encoding."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from experiment_history.runs import (
    HistoryWriter,
    RunMeta,
    find_runs,
    iter_rows,
    read_meta,
    read_table,
    table_path,
)
from experiment_history.schema import RouteItem, canonical_route, parse_route, route_brokers


def test_a_route_value_is_sorted_and_parses_back_with_colons_in_addresses():
    items = [RouteItem("b", "10.0.0.2:10911", 4, 4, 6), RouteItem("a", "-", 8, 8, 4)]
    value = canonical_route(items)
    assert value == "a:-:8:8:4,b:10.0.0.2:10911:4:4:6"
    assert parse_route(value) == sorted(items, key=lambda i: i.broker)
    assert route_brokers(value) == {"a", "b"}
    assert parse_route("") == []
    assert not parse_route(value)[0].writable


def test_the_writer_streams_row_groups_and_writes_run_metadata(tmp_path):
    meta = RunMeta(run_id="r", scenario="s", mode="raft", seed=3, nodes=["n0"])
    with HistoryWriter(tmp_path / "r", meta, chunk_rows=2) as out:
        for i in range(5):
            out.operation(
                {
                    "op_id": i,
                    "process": "p",
                    "kind": "route_read",
                    "node": "n0",
                    "topic": "T",
                    "invoke_ms": i,
                    "complete_ms": i + 1,
                    "outcome": "ok",
                    "value": "",
                    "version": -1,
                    "broker": "",
                    "extra": "{}",
                    "invoke_us": i * 1_000,
                    "complete_us": (i + 1) * 1_000,
                }
            )
    assert pq.ParquetFile(table_path(tmp_path / "r", "operations")).num_row_groups == 3
    assert read_table(tmp_path / "r", "operations").num_rows == 5
    assert read_table(tmp_path / "r", "faults").num_rows == 0
    assert [row["op_id"] for row in iter_rows(tmp_path / "r", "operations")] == list(range(5))
    assert read_meta(tmp_path / "r").timings["rows"]["operations"] == 5
    assert find_runs(tmp_path) == [tmp_path / "r"]


def test_the_writer_refuses_rows_of_the_wrong_shape(tmp_path):
    meta = RunMeta(run_id="r", scenario="s", mode="raft", seed=3, nodes=["n0"])
    with HistoryWriter(tmp_path / "r", meta) as out, pytest.raises(ValueError):
        out.fault((1, 2, "kill_broker"))
