"""Measures across seeds: the t interval arithmetic, the per-run measures, and how the report
shows them (``mean [lo, hi] unit``, prose for a client, and no interval for one seed).

Plain rows, no Spark: every expected number is worked out by hand in the test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiment_reports.report import write_markdown
from experiment_reports.seeds import SEED_INTERVALS, interval_text
from spark_jobs.across_seeds import (
    SeededRun,
    interval_rows,
    mean_interval,
    run_measures,
    t_quantile_975,
)


def test_the_interval_of_one_to_five_is_the_hand_computed_student_t_interval() -> None:
    # mean 3, s = sqrt(2.5), se = s / sqrt(5) = 0.70711, t(0.975, 4) = 2.7764.
    found = mean_interval([1, 2, 3, 4, 5])
    assert found.mean == 3 and found.n == 5
    assert found.lo == pytest.approx(3 - 1.96321, abs=1e-4)
    assert found.hi == pytest.approx(3 + 1.96321, abs=1e-4)


def test_two_values_use_twelve_point_seven_and_stay_inside_the_floor() -> None:
    # mean 15, s = 7.0711, se = 5, t(0.975, 1) = 12.7062: 15 -+ 63.531, clipped at 0.
    found = mean_interval([10, 20], floor=0.0)
    assert found.lo == 0.0
    assert found.hi == pytest.approx(78.531, abs=1e-3)
    assert mean_interval([99, 100], floor=0.0, ceiling=100.0).hi == 100.0


def test_one_value_has_a_mean_and_no_interval() -> None:
    found = mean_interval([4.2])
    assert (found.mean, found.n, found.lo, found.hi) == (4.2, 1, None, None)
    row = {"mean": 4.2, "unit": "s", "lo": None, "hi": None}
    assert interval_text(row) == "4.2 s (one seed, no interval)"


@pytest.mark.parametrize(
    "df, quantile", [(1, 12.7062), (4, 2.7764), (30, 2.0423), (31, 2.0395), (60, 2.0003)]
)
def test_the_t_quantile_matches_the_published_table(df: int, quantile: float) -> None:
    assert t_quantile_975(df) == pytest.approx(quantile, abs=2e-4)


def test_the_t_quantile_falls_to_the_normal_one_with_many_degrees_of_freedom() -> None:
    assert t_quantile_975(120) == pytest.approx(1.9799, abs=2e-4)
    assert t_quantile_975(10_000) == pytest.approx(1.96, abs=1e-3)
    with pytest.raises(ValueError, match="degree of freedom"):
        t_quantile_975(0)


RUNS = [SeededRun(f"e{s}", "eventual", "broker-kill", s) for s in (1, 2, 3)] + [
    SeededRun("r1", "raft", "broker-kill", 1)
]


def _per_run() -> dict[str, list[dict[str, Any]]]:
    """Per-run report rows of three eventual seeds and one raft seed."""
    kills = {"e1": 2_000, "e2": 3_000, "e3": 4_000, "r1": 5_000}
    return {
        "stale_route": [
            {"run_id": run, "clients_window_ms": ms, "nodes_window_ms": ms - 500}
            for run, ms in kills.items()
        ],
        "dead_sends": [
            {"run_id": run, "sends": 100, "sends_to_dead": dead}
            for run, dead in {"e1": 3, "e2": 5, "e3": 7, "r1": 4}.items()
        ],
        "ownership": [
            {"run_id": run, "double_ms": ms, "double_share": 0.1}
            for run, ms in {"e1": 1_000, "e2": 1_000, "e3": 4_000}.items()
        ],
        "t_visibility": [
            {"run_id": "e1", "t_bucket_ms": 0, "reads": 10, "p_fresh": 0.5},
            {"run_id": "e1", "t_bucket_ms": 100, "reads": 30, "p_fresh": 1.0},
            {"run_id": "e2", "t_bucket_ms": 0, "reads": 4, "p_fresh": 0.25},
        ],
        "latency": [
            {
                "run_id": "e1",
                "kind": "route_read",
                "p50_us": 1_000,
                "p95_us": 4_000,
                "p99_us": 9_000,
            },
            {
                "run_id": "e1",
                "kind": "send",
                "p50_us": 100_000,
                "p95_us": 400_000,
                "p99_us": 900_000,
            },
        ],
    }


def _rows() -> list[dict[str, Any]]:
    return interval_rows(run_measures(_per_run()), RUNS)


def _row(mode: str, key: str) -> dict[str, Any]:
    [found] = [r for r in _rows() if r["mode"] == mode and r["key"] == key]
    return found


def test_each_runs_measures_become_one_row_per_mode_with_the_seeds_that_had_a_value() -> None:
    clients = _row("eventual", "clients_dead_route_s")
    assert clients["values"] == [2.0, 3.0, 4.0] and clients["seed_values"] == [1, 2, 3]
    # mean 3 s, s = 1, se = 0.57735, t(0.975, 2) = 4.3027: 3 -+ 2.4842.
    assert clients["mean"] == 3.0
    assert clients["lo"] == pytest.approx(0.5158, abs=1e-4)
    assert clients["hi"] == pytest.approx(5.4842, abs=1e-4)
    assert _row("eventual", "dead_sends")["mean"] == 5.0
    assert _row("raft", "dead_sends")["seeds"] == 1 and _row("raft", "dead_sends")["lo"] is None


def test_stale_reads_weigh_every_bucket_by_its_reads_and_only_seeds_with_reads_count() -> None:
    stale = _row("eventual", "stale_read_pct")
    # e1: 5 stale of 40 reads = 12.5 %; e2: 3 of 4 = 75 %; e3 read nothing after a write.
    assert stale["values"] == [12.5, 75.0] and stale["seed_values"] == [1, 2]
    assert _row("eventual", "fresh_0ms")["values"] == [50.0, 25.0]
    assert _row("eventual", "read_p95_ms")["values"] == [4.0]


def test_summary_md_shows_each_measure_as_mean_and_interval_with_its_unit(tmp_path: Path) -> None:
    tables = {
        "dead_sends": [{"mode": m, "sends": 300, "sends_to_dead": 15} for m in ("eventual",)],
        SEED_INTERVALS: _rows(),
    }
    text = write_markdown(tmp_path, tables, {}).read_text()
    section = text.split("## Across seeds: mean and 95 % interval", 1)[1]
    assert "| clients routed to a dead broker for (s) | 3 s [0.516, 5.48], n=3 |" in section
    assert (
        "| sends to a dead broker (sends) | 5 sends [0.0317, 9.97], n=3 | 4 sends (one seed"
        in section
    )
    client = text.split("## What this means for a client", 1)[1].split("\n## ", 1)[0]
    assert (
        "Across 3 seeds (1, 2, 3) in eventual mode: after a broker died, clients kept routing "
        "to it for 3 s on average (95 % interval [0.516, 5.48] s over 3 seeds), and per run "
        "5 sends on average (95 % interval [0.0317, 9.97] sends over 3 seeds) went to it"
    ) in client
    assert "Per run, two consumers of a group owned the same queue for 2 s on average" in client
    assert "One seed (1) in raft mode, so no interval" in client


def test_a_report_without_seed_rows_says_there_is_nothing_to_compare(tmp_path: Path) -> None:
    text = write_markdown(tmp_path, {SEED_INTERVALS: []}, {}).read_text()
    assert "_No run had a measure to compare across seeds._" in text
    assert "## Across seeds" not in write_markdown(tmp_path, {}, {}).read_text()
