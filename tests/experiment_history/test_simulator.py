"""The discrete-event model: determinism and the asymmetric-partition contrast."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from experiment_history.runs import read_table
from experiment_history.simulate import SimConfig, simulate

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
