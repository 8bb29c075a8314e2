"""The benchmarks still run: each one at a tiny size, producing real numbers.

Benchmarks are not tests, but a script nobody runs rots. These run both at
their ``small`` scale (seconds) so an API change in the cores or the gateway
breaks here, not on the day someone wants figures.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from pathlib import Path

import pytest

from bench import cores, route_query

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
