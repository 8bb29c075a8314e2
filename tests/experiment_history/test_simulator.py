"""The discrete-event model: determinism and the asymmetric-partition contrast."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace

from experiment_history.runs import HistoryWriter, RunMeta, iter_rows, read_table
from experiment_history.schema import ORIGIN_HARNESS, ORIGIN_NODE, WRITE_KINDS
from experiment_history.simulate import SimConfig
from experiment_history.simulate_rows import HistoryRows
from experiment_history.simulate_run import simulate
from experiment_history.simulate_tables import RaftTables
from experiment_history.simulate_world import SimWorld

SMALL = SimConfig(
    brokers=20, topics=40, reads=800, seed=11, fault_share=0.1, consumer_groups=2, sample_topics=40
)


def diverged_rounds(run_dir) -> int:
    answers: dict[tuple[int, str], set[str]] = defaultdict(set)
    for row in read_table(run_dir, "node_states").to_pylist():
        answers[(row["ts_ms"], row["topic"])].add(row["value"])
    return sum(1 for values in answers.values() if len(values) > 1)


def test_the_same_seed_gives_the_same_history(tmp_path):
    first = simulate(SMALL, tmp_path / "a")
    second = simulate(SMALL, tmp_path / "b")
    tables = ("operations", "writes", "faults", "node_states")
    for table in tables:
        assert read_table(tmp_path / "a" / first.run_id, table).equals(
            read_table(tmp_path / "b" / second.run_id, table)
        ), f"seed {SMALL.seed}: {table}"


def test_eventual_diverges_under_an_asymmetric_partition_and_raft_does_not(tmp_path):
    eventual = simulate(SMALL, tmp_path)
    raft = simulate(replace(SMALL, mode="raft"), tmp_path)
    assert diverged_rounds(tmp_path / eventual.run_id) > 0, f"seed {SMALL.seed}"
    assert diverged_rounds(tmp_path / raft.run_id) == 0, f"seed {SMALL.seed}"


def test_a_killed_broker_is_dropped_by_every_node_after_the_timeout(tmp_path):
    config = replace(SMALL, scenario="broker_kill", mode="raft", fault_share=0.05)
    meta = simulate(config, tmp_path)
    [fault] = read_table(tmp_path / meta.run_id, "faults").to_pylist()
    late = [
        r
        for r in read_table(tmp_path / meta.run_id, "node_states").to_pylist()
        if r["ts_ms"]
        > config.fault_start_ms + config.broker_timeout_ms + 2 * config.scan_interval_ms
    ]
    assert late and all(fault["target"] not in r["value"] for r in late)
    early = [
        r
        for r in read_table(tmp_path / meta.run_id, "node_states").to_pylist()
        if config.fault_start_ms < r["ts_ms"] < config.fault_start_ms + 60_000
    ]
    assert any(fault["target"] in r["value"] for r in early)


def test_every_simulated_write_says_where_it_came_from_and_nothing_else_does(tmp_path):
    """``operations.origin``: the writes at time 0 are the harness's (every broker
    registered), every later one a node's own change (eventual: that node's; raft: the
    leader's commit); reads, sends and allocations have none."""
    for mode in ("eventual", "raft"):
        config = replace(SMALL, scenario="broker_kill", mode=mode, fault_share=0.05)
        meta = simulate(config, tmp_path)
        rows = read_table(tmp_path / meta.run_id, "operations").to_pylist()
        writes = [r for r in rows if r["kind"] in WRITE_KINDS]
        assert {r["origin"] for r in writes if r["invoke_ms"] == 0} == {ORIGIN_HARNESS}, mode
        later = {r["origin"] for r in writes if r["invoke_ms"] > 0}
        assert later == {ORIGIN_NODE}, f"{mode}: {later}"
        assert {r["origin"] for r in rows if r["kind"] not in WRITE_KINDS} == {None}, mode


def test_a_history_of_the_older_shape_reads_its_origin_as_null(tmp_path):
    """Rows without ``origin`` (a writer of schema version 2) still fit, and read back
    with origin null: older runs stay readable."""
    meta = RunMeta(run_id="r", scenario="s", mode="raft", seed=1, nodes=["n1"])
    with HistoryWriter(tmp_path / "r", meta) as out:
        out.operation((1, "p", "register", "n1", "T", 0, 1, "ok", "v", -1, "", "{}", 0, 1_000))
        out.operation(
            {
                "op_id": 2,
                "process": "p",
                "kind": "route_read",
                "node": "n1",
                "topic": "T",
                "invoke_ms": 1,
                "complete_ms": 2,
                "outcome": "ok",
                "value": "v",
                "version": -1,
                "broker": "",
                "extra": "{}",
                "invoke_us": 1_000,
                "complete_us": 2_000,
            }
        )
    assert [r["origin"] for r in iter_rows(tmp_path / "r", "operations")] == [None, None]


class _Draws:
    """Commit latencies in a given order (the model's Latencies draws them at random)."""

    def __init__(self, *draws_ms: int) -> None:
        self._draws = iter(draws_ms)

    def commit(self) -> int:
        return next(self._draws)


def test_raft_entries_commit_in_log_order_whatever_each_commit_draws(tmp_path):
    """One scan expires two brokers; the second entry draws a shorter commit than the
    first. It still commits after it (the log is applied in order), so the version a
    read reports counts exactly the entries committed by then."""
    config = replace(SMALL, mode="raft", brokers=2)
    tables = RaftTables(config, SimWorld(config, random.Random(1)), _Draws(500, 1))
    writer = HistoryWriter(tmp_path / "run", RunMeta("r", config.scenario, "raft", 1, ["ns0"]))
    scan_ms = config.broker_timeout_ms + 1
    tables.scan(tables.leader, scan_ms, HistoryRows(writer))
    assert tables.commit_times == [scan_ms + 500, scan_ms + 500]
    assert tables.version(tables.leader, scan_ms + 10) == 0, "neither entry committed yet"
    assert tables.version(tables.leader, scan_ms + 500) == 2
    assert not tables.sees(tables.leader, 1, scan_ms + 500)
