"""Each run's measures from one Spark pass over several seeds of a mode, and their interval.

Two hand-built broker-kill runs of one mode, seeds 1 and 2, that differ in their sends to
the dead broker and in how long a node kept it; every expected number is worked out by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import HistoryWriter, RunMeta
from spark_jobs.dataset import load_history
from spark_jobs.metrics import dead_sends_summary, stale_route_windows
from spark_jobs.per_run import seed_intervals
from tests.spark_jobs.conftest import ROUTE_A, ROUTE_B, op

pytestmark = pytest.mark.slow

KILL_MS = 10_000


def _kill_run(root: Path, seed: int, dead_sends: int, diverged_until_ms: int) -> Path:
    """A broker kill of ``b`` at 10 s: ``dead_sends`` sends still go to it, and node n1
    keeps answering with it until ``diverged_until_ms``."""
    run_id = f"kill-eventual-s{seed}"
    meta = RunMeta(run_id=run_id, scenario="kill", mode="eventual", seed=seed, nodes=["n0", "n1"])
    ops = [
        op(1, "p1", "route_read", "T", 9_000, 9_002, value=ROUTE_B),
        op(2, "p1", "route_read", "T", KILL_MS + 50, KILL_MS + 52, value=ROUTE_B),
        op(3, "p1", "route_read", "T", 16_000, 16_002, value=ROUTE_A),
        op(4, "p1", "send", "T", 17_000, 17_002, broker="a"),
    ]
    ops += [
        op(10 + i, "p1", "send", "T", 11_000 + i, 11_002 + i, "timeout", broker="b")
        for i in range(dead_sends)
    ]
    rounds = {KILL_MS: (ROUTE_B, ROUTE_B), 15_000: (ROUTE_A, ROUTE_B)}
    rounds |= {diverged_until_ms: (ROUTE_A, ROUTE_A), diverged_until_ms + 5_000: (ROUTE_A, ROUTE_A)}
    with HistoryWriter(root / run_id, meta) as out:
        for row in ops:
            out.operation(row)
        out.write((0, "T", "", "register", ROUTE_B, -1))
        out.write((KILL_MS, "T", "b", "broker_down", ROUTE_A, -1))
        out.fault((KILL_MS, -1, "kill_broker", "b", "{}"))
        for ts, values in rounds.items():
            for n, value in enumerate(values):
                out.node_state((ts, f"n{n}", "T", value, -1))
    return root / run_id


@pytest.fixture(scope="module")
def seeds_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("seeds")
    _kill_run(root, 1, dead_sends=2, diverged_until_ms=20_000)
    _kill_run(root, 2, dead_sends=4, diverged_until_ms=25_000)
    return root


def _rows(frame: Any) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in frame.collect()]


@pytest.fixture(scope="module")
def intervals(spark: Any, seeds_root: Path) -> dict[str, dict[str, Any]]:
    """The seed_intervals rows of the two runs, by measure key (one Spark pass)."""
    report = {"stale_route": _rows(stale_route_windows(load_history(spark, seeds_root)))}
    return {r["key"]: r for r in seed_intervals(spark, seeds_root, report)}


def test_each_seed_gets_its_own_runs_numbers(intervals: dict[str, dict[str, Any]]) -> None:
    dead = intervals["dead_sends"]
    assert (dead["seeds"], dead["seed_values"], dead["values"]) == (2, [1, 2], [2.0, 4.0])
    assert intervals["diverged_longest_s"]["values"] == [5.0, 10.0]
    assert intervals["nodes_dead_route_s"]["values"] == [10.0, 15.0]
    # Each run: of its three reads, only the one 50 ms after the kill is stale.
    assert intervals["fresh_0ms"]["values"] == [0.0, 0.0]
    assert intervals["stale_read_pct"]["values"] == pytest.approx([100 / 3, 100 / 3])


def test_the_interval_of_two_seeds_is_their_mean_and_t_interval(
    intervals: dict[str, dict[str, Any]],
) -> None:
    dead = intervals["dead_sends"]
    # mean 3, s = 1.4142, se = 1, t(0.975, 1) = 12.7062: [0 (clipped), 15.706].
    assert dead["mean"] == 3.0 and dead["lo"] == 0.0
    assert dead["hi"] == pytest.approx(15.7062, abs=1e-4)
    stale = intervals["stale_read_pct"]
    assert stale["lo"] == pytest.approx(100 / 3) and stale["hi"] == pytest.approx(100 / 3)


def test_one_run_per_mode_reuses_the_reports_tables_and_has_no_interval(
    spark: Any, tmp_path: Path
) -> None:
    run_dir = _kill_run(tmp_path, 7, dead_sends=3, diverged_until_ms=20_000)
    report = {"dead_sends": _rows(dead_sends_summary(load_history(spark, run_dir)))}
    [row] = seed_intervals(spark, tmp_path, report)
    assert (row["key"], row["seeds"], row["mean"], row["lo"]) == ("dead_sends", 1, 3.0, None)
