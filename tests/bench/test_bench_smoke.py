"""The benchmarks still run: each one at a tiny size, producing real numbers.

Benchmarks are not tests, but a script nobody runs rots. These run both at
their ``small`` scale (seconds) so an API change in the cores or the gateway
breaks here, not on the day someone wants figures.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from pathlib import Path

import pytest

from bench import (
    answer_encode,
    consume,
    cores,
    first_failover,
    register_latency,
    register_offload,
    route_query,
    split_registration,
    storm,
)

TINY_QUERY_SCALE = dataclasses.replace(
    route_query.SCALES["small"], warmup_s=0.1, measure_s=0.3, paced_s=0.2, idle_sample_s=0.1
)


def test_cores_bench_reports_a_positive_time_and_ratio_for_every_operation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = cores.run(cores.SCALES["small"])

    assert len(report.rows) >= 10
    for row in report.rows:
        assert row.us_per_op > 0 and math.isfinite(row.us_per_op), row
        assert row.baseline_us > 0 and row.ratio > 0, row
    assert all(mib > 0 for mib in report.memory_mib.values())
    cores.print_report(report)
    assert "route pickup + body encode" in capsys.readouterr().out


@pytest.mark.integration
def test_route_query_bench_measures_the_gateway_against_the_bare_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = asyncio.run(route_query.run(TINY_QUERY_SCALE, 2, [1, 2], tmp_path))

    assert {(r.server, r.depth) for r in report.loads} == {
        ("gateway", 1),
        ("gateway", 2),
        ("bare asyncio", 1),
        ("bare asyncio", 2),
        ("gateway, heartbeat table, quiet", 1),
        ("gateway during heartbeats", 1),
    }
    for load in report.loads:
        assert load.qps > 0 and load.errors == 0, load
        assert 0 < load.p50_ms <= load.p99_ms, load
    assert [c.registrations for c in report.cpu[:2]] == [TINY_QUERY_SCALE.brokers] * 2
    assert all(c.cpu_s >= 0 and c.wall_s > 0 for c in report.cpu)
    route_query.print_report(report)
    out = capsys.readouterr().out
    assert "gateway QPS / bare asyncio QPS" in out
    assert "route queries during real-rate heartbeats" in out


@pytest.mark.slow
@pytest.mark.integration
def test_storm_bench_reads_and_registers_in_both_modes(capsys: pytest.CaptureFixture[str]) -> None:
    """bench.storm at a tiny size: reads answered in every phase, registrations
    acknowledged through three real gateways per mode, the ratio printed."""
    storm.main(
        [
            "--seconds",
            "0.5",
            "--rate",
            "20",
            "--brokers",
            "5",
            "--topics-per-broker",
            "10",
            "--large-brokers",
            "2",
            "--large-topics",
            "50",
            "--read-front",
            "on",
        ]
    )
    out = capsys.readouterr().out
    summary = json.loads(out.strip().splitlines()[-1])
    for mode in ("eventual", "raft"):
        result = summary["results"][f"{mode}/on"]
        assert result["front"] is True
        for phase in ("quiet", "storm_reads", "flat_reads"):
            reads = result[phase]
            assert reads["reads_per_s"] > 0 and reads["errors"] == 0, (mode, phase, reads)
            assert 0 < reads["p50_ms"] <= reads["p99_ms"], (mode, phase, reads)
        assert result["storm"]["acknowledged"] > 0 and result["flat"]["acknowledged"] > 0
        alone = result["alone"]
        assert alone["acknowledged"] > 0 and alone["failed"] == 0, alone
        # The registrar's phase has the CPU of every server process and its own.
        assert {"n1 gateway", "n2 gateway", "n3 gateway", "registrar"} <= set(
            alone["cpu_by_process"]
        )
        assert result["large"]["registrar"]["acknowledged"] == 2
    assert summary["raft_over_eventual_storm_reads_front_on"] > 0
    assert "raft / eventual reads during the storm" in out


@pytest.mark.slow
@pytest.mark.integration
def test_register_latency_bench_times_each_kind_of_node_and_counts_copies(
    capsys: pytest.CaptureFixture[str],
) -> None:
    register_latency.main(["--count", "5", "--topics", "4", "--overload-s", "1"])
    out = capsys.readouterr().out
    for row in (
        "eventual: registration (n1)",
        "raft: light commit (leader)",
        "raft: registration (leader)",
        "raft: registration (follower, no leader copy)",
        "raft: registration (all three nodes)",
        "raft: overload, 256 in flight to all three",
    ):
        assert f"| {row} |" in out, out
    assert "leader registration / light commit, p50:" in out
    assert "registrations/s acknowledged" in out


@pytest.mark.integration
def test_consume_bench_moves_messages_through_a_master_and_slave_and_the_echo(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """bench.consume at a tiny size: every message sent, pulled and committed
    through a real master + slave, the echo baseline measured, the ratios printed."""
    consume.main(["--messages", "300", "--body-bytes", "64", "--queues", "2", "--producers", "2"])
    out = capsys.readouterr().out
    summary = json.loads(out.strip().splitlines()[-1])
    for target in ("broker", "echo"):
        figures = summary[target]
        assert figures["messages"] == 300 and figures["committed"] == 300, (target, figures)
        assert figures["messages_per_s"] > 0, (target, figures)
        assert 0 < figures["send_p50_ms"] <= figures["send_p99_ms"], (target, figures)
        assert 0 < figures["receive_p50_ms"] <= figures["receive_p99_ms"], (target, figures)
    assert summary["broker"]["pulls_with_messages"] > 0
    assert set(summary["broker"]["cpu_cores"]) >= {"master", "slave", "bench client"}
    assert summary["slave_lag_bytes"] == 0
    assert summary["ratio_messages_per_s"] > 0 and summary["ratio_receive_p50"] > 0
    assert "| messages/s end to end |" in out
    assert "| send-to-receive p99 (ms) |" in out
    assert "ratio broker / echo" in out


def test_storm_registrations_spliced_from_a_template_equal_encoded_ones() -> None:
    """The registrar splices the DataVersion counter into each broker's encoded request;
    the result is the request encoded from the table (body, header fields and CRC)."""
    for index, counter, shared in ((0, 5, False), (7, 123_456, False), (2, 3, True)):
        spliced = storm.registration(index, 20, counter, shared)
        encoded = storm.encoded_registration(index, 20, counter, shared)
        assert spliced.body == encoded.body
        assert spliced.ext_fields == encoded.ext_fields
        assert (spliced.code, spliced.version) == (encoded.code, encoded.version)


@pytest.mark.integration
def test_split_registration_bench_times_a_split_table_against_a_whole_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = split_registration.run_mode("eventual", 1_700, 100, 1)

    assert [row[:2] for row in rows] == [["eventual", "changed"], ["eventual", "same"]]
    for row in rows:
        base_ms, base_cpu, large_ms, large_cpu, ratio, topics, terms = (
            float(str(c)) for c in row[2:]
        )
        assert min(base_ms, large_ms, ratio) > 0 and min(base_cpu, large_cpu) >= 0, row
        assert topics == 17 and terms == 0
    assert (
        split_registration.main(
            ["--modes", "eventual", "--topics", "900", "--baseline-topics", "100", "--rounds", "1"]
        )
        == 0
    )
    assert "900 topics in parts of 800 against 100 whole" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.integration
def test_first_failover_bench_times_a_leader_kill_on_a_launched_cluster(tmp_path: Path) -> None:
    (result,) = first_failover.run_launched(tmp_path, settle_s=1.0)

    assert result["failover_s"] is not None and 0 < result["failover_s"] < 10, result
    assert result["term"] is not None and result["term"] >= 2, result
    assert len(result["leader_seen_s"]) == 2, result


def test_answer_encode_bench_prints_the_version_s_cost_against_the_bare_answer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert answer_encode.main() == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    figures = {row.split(" | ")[0][2:]: row.split(" | ")[1:] for row in rows[1:]}
    assert set(figures) == {
        "no ext fields (baseline)",
        "routesVersion, header cached",
        "routesVersion, new each answer",
    }
    assert all(float(us) > 0 for us, _ratio in figures.values())


def test_register_offload_bench_times_both_arms_of_every_costly_shape(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = register_offload.run(256 * 1024)

    arms = {row.arm for row in rows}
    assert arms == {"on the loop", "worker"}
    assert len(rows) == 2 * len({row.shape for row in rows}) >= 4
    for row in rows:
        assert row.decode_ms > 0 and row.sender_ms > 0 and row.probes >= 0, row
    register_offload.print_rows(rows)
    assert "on the loop / worker" in capsys.readouterr().out


def test_route_reads_bench_times_a_held_read_against_django_s_answer() -> None:
    """In a process of its own: the bench sets Django up over its own folder."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "bench.route_reads", "--requests", "200", "--repeats", "1"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(done.stdout[done.stdout.index("{") :])
    assert report["route_read_beside_django_us"]["best"] > 0
    assert report["django_over_beside_ratio"] > 1
