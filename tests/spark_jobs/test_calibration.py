"""Calibrating the simulator from histories: a hand-built pair of "real" runs with known
timings goes through the Spark job, and the simulator then runs with what it measured.

Known parameters of the synthetic runs (worked out by hand below):

- eventual: route reads take 0, 10, ..., 200 ms (one per second per client/topic);
  registrations take 2 ms every second; a killed broker leaves every node's routes
  4500 ms after the kill with a 4000 ms timeout, 1 s heartbeats and 1 s scans
  -> detection beyond the timeout 500 ms.
- raft: reads take 5 ms; 10 registrations take 2 ms (no commit) and 10 take 2 + 10k ms
  (k = 1..10) -> commit latency 10..100 ms; the kill is detected after 5000 ms -> 1000 ms;
  a leader kill at 30 s refuses calls to a survivor until one called at 31.7 s -> 1700 ms.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import HistoryWriter, RunMeta, read_table
from experiment_history.schema import PROCESS_FOLLOW_UP, follow_up_process
from experiment_history.simulate import SimConfig
from experiment_history.simulate_run import simulate
from spark_jobs.calibrate import Calibration, calibrate, client_polls, load_calibration

pytestmark = pytest.mark.slow

PARAMS = {"expiry_ms": 4000, "heartbeat_ms": 1000, "scan_interval_s": 1}
ROUTE_AB = "a:h1:10911:4:4:6,b:h2:10911:4:4:6"
ROUTE_A = "a:h1:10911:4:4:6"


def _op(
    op_id: int,
    process: str,
    kind: str,
    node: str,
    topic: str,
    invoke: int,
    latency: int,
    outcome: str = "ok",
    value: str = "",
    broker: str = "",
) -> tuple[Any, ...]:
    return (
        op_id,
        process,
        kind,
        node,
        topic,
        invoke,
        invoke + latency,
        outcome,
        value,
        -1,
        broker,
        "{}",
        invoke * 1_000,
        (invoke + latency) * 1_000,
    )


def _write_run(
    root: Path,
    mode: str,
    read_latency: list[int],
    beat_latency: list[int],
    dropped_at: int,
    leader_kill: bool,
) -> None:
    meta = RunMeta(
        run_id=f"real-{mode}",
        scenario="calibration",
        mode=mode,
        seed=0,
        nodes=["n0", "n1"],
        params=dict(PARAMS),
    )
    with HistoryWriter(root / meta.run_id, meta) as out:
        op_id = 0
        for k, latency in enumerate(read_latency):
            op_id += 1
            out.operation(
                _op(op_id, "p1", "route_read", "n0", "T", 1000 * k, latency, value=ROUTE_AB)
            )
        for k, latency in enumerate(beat_latency):
            op_id += 1
            out.operation(
                _op(op_id, "b", "heartbeat", "n0", "", 1000 * k + 500, latency, broker="b")
            )
        out.fault((10_000, -1, "kill_broker", "b", "{}"))
        for ts in range(10_000, 20_000, 250):
            value = ROUTE_AB if ts < dropped_at else ROUTE_A
            for node in ("n0", "n1"):
                out.node_state((ts, node, "T", value, -1))
        if leader_kill:
            out.fault((30_000, 40_000, "leader_kill", "n1", "{}"))
            for invoke, node, outcome in (
                (30_100, "n0", "error"),
                (31_700, "n0", "timeout"),
                (33_000, "n1", "timeout"),
                (45_000, "n0", "error"),
            ):
                op_id += 1
                out.operation(
                    _op(op_id, "b", "heartbeat", node, "", invoke, 900, outcome, broker="b")
                )


@pytest.fixture(scope="module")
def real_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("real-runs")
    _write_run(root, "eventual", [10 * k for k in range(21)], [2] * 21, 14_500, False)
    _write_run(root, "raft", [5] * 21, [2] * 10 + [2 + 10 * k for k in range(1, 11)], 15_000, True)
    # A simulated run in the same root is not a measurement and must be left out.
    simulate(
        SimConfig(
            brokers=4,
            topics=4,
            reads=40,
            duration_ms=60_000,
            fault_start_ms=0,
            fault_end_ms=0,
            sample_topics=4,
            consumer_groups=1,
        ),
        root,
    )
    return root


@pytest.fixture(scope="module")
def calibration(spark: Any, real_root: Path) -> Iterator[Calibration]:
    yield calibrate(spark, real_root)


def test_only_the_real_runs_are_measured(calibration: Calibration) -> None:
    assert calibration.runs == ["real-eventual", "real-raft"]
    assert sorted(calibration.modes) == ["eventual", "raft"]


def test_latency_distributions_are_the_known_ones(calibration: Calibration) -> None:
    eventual, raft = calibration.modes["eventual"], calibration.modes["raft"]
    reads = eventual.rpc_latency_quantiles_ms
    assert len(reads) == 21 and reads[0] == 0 and reads[-1] == 200
    assert all(abs(q - 10 * k) <= 10 for k, q in enumerate(reads))
    assert set(raft.rpc_latency_quantiles_ms) == {5.0}
    assert set(eventual.register_latency_quantiles_ms) == {2.0}
    commits = raft.commit_latency_quantiles_ms
    assert commits[0] == 10 and commits[-1] == 100 and raft.samples["commits"] == 10
    assert all(abs(q - 10 - 90 * k / 20) <= 10 for k, q in enumerate(commits))
    assert eventual.commit_latency_quantiles_ms == []


def test_periods_detection_and_election_are_the_known_ones(calibration: Calibration) -> None:
    eventual, raft = calibration.modes["eventual"], calibration.modes["raft"]
    for mode in (eventual, raft):
        assert (mode.poll_interval_ms, mode.broker_timeout_ms, mode.scan_interval_ms) == (
            1000,
            4000,
            1000,
        )
    assert (eventual.heartbeat_interval_ms, eventual.sample_interval_ms) == (1000, 250)
    assert (eventual.expiry_extra_ms, raft.expiry_extra_ms) == (500, 1000)
    assert (raft.election_ms, raft.samples["leader_kills"]) == (1700, 1)
    assert eventual.election_ms is None


def test_the_calibration_survives_json_and_refuses_a_foreign_file(
    calibration: Calibration,
    tmp_path: Path,
) -> None:
    path = tmp_path / "calibration.json"
    path.write_text(calibration.to_json())
    assert load_calibration(path).to_json() == calibration.to_json()
    path.write_text('{"modes": {}}')
    with pytest.raises(ValueError, match="not a calibration file"):
        load_calibration(path)


def test_apply_sets_latencies_always_and_periods_on_request(calibration: Calibration) -> None:
    raft = calibration.apply(SimConfig(mode="raft"))
    assert raft.rpc_latency_quantiles_ms == (5.0,) * 21 and raft.rpc_latency_ms == 5
    assert (raft.expiry_extra_ms, raft.election_ms) == (1000, 1700)
    assert raft.commit_latency_quantiles_ms[0] == 10
    assert (raft.poll_interval_ms, raft.broker_timeout_ms) == (30_000, 120_000)
    timed = calibration.apply(SimConfig(mode="raft"), timings=True)
    assert (
        timed.poll_interval_ms,
        timed.heartbeat_interval_ms,
        timed.broker_timeout_ms,
        timed.scan_interval_ms,
        timed.sample_interval_ms,
    ) == (1000, 1000, 4000, 1000, 250)
    only_raft = Calibration({"raft": calibration.modes["raft"]}, ["real-raft"])
    with pytest.raises(ValueError, match="no eventual run"):
        only_raft.apply(SimConfig(mode="eventual"))


def test_the_calibrated_simulation_shows_the_measured_timings(
    calibration: Calibration,
    tmp_path: Path,
) -> None:
    base = SimConfig(
        brokers=10,
        topics=20,
        reads=4000,
        seed=5,
        scenario="broker_kill",
        fault_share=0.1,
        duration_ms=60_000,
        fault_start_ms=20_000,
        fault_end_ms=60_000,
        sample_topics=20,
    )
    eventual = calibration.apply(replace(base, mode="eventual"), timings=True)
    meta = simulate(eventual, tmp_path)
    ops = read_table(tmp_path / meta.run_id, "operations").to_pylist()
    latencies = [r["complete_ms"] - r["invoke_ms"] for r in ops if r["kind"] == "route_read"]
    assert min(latencies) >= 0 and max(latencies) <= 200
    assert 80 <= sum(latencies) / len(latencies) <= 120, "the measured mean is 100 ms"

    raft = calibration.apply(replace(base, mode="raft"), timings=True)
    meta = simulate(raft, tmp_path)
    run_dir = tmp_path / meta.run_id
    ops = read_table(run_dir, "operations").to_pylist()
    assert {r["complete_ms"] - r["invoke_ms"] for r in ops if r["kind"] == "route_read"} == {5}
    commits = [r["complete_ms"] - r["invoke_ms"] for r in ops if r["kind"] == "expire"]
    assert commits and all(10 <= c <= 100 for c in commits)
    [fault] = read_table(run_dir, "faults").to_pylist()
    states = read_table(run_dir, "node_states").to_pylist()
    routed = [r["ts_ms"] for r in states if fault["target"] in r["value"]]
    gone = [r["ts_ms"] for r in states if r["ts_ms"] > max(routed)]
    # Last heard at most one heartbeat before the kill; dropped after timeout + extra,
    # at the next scan, once committed.
    assert max(routed) - fault["start_ms"] >= 4000 + 1000 - 1000
    assert min(gone) - fault["start_ms"] <= 4000 + 1000 + 1000 + 100 + 250


def test_the_follow_up_reader_s_reads_are_no_client_s_polls(spark: Any) -> None:
    processes = ["p1", PROCESS_FOLLOW_UP, follow_up_process("n2"), PROCESS_FOLLOW_UP + "x"]
    reads = spark.createDataFrame([(p,) for p in processes], ["process"])
    kept = {row.process for row in client_polls(reads).collect()}
    assert kept == {"p1", PROCESS_FOLLOW_UP + "x"}
