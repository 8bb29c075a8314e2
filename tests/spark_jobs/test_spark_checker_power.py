"""The checker's power as a Spark job over a recorded run, and its section in the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import HistoryWriter, RunMeta
from experiment_reports.report import SECTION_BY_NAME, section_markdown

from .conftest import op

pytestmark = pytest.mark.slow

ROUTES = ("a:h1:10911:4:4:6", "a:h1:10911:4:4:6,churn:h2:10911:4:4:6")


def _flipping_topic(topic: str, first_id: int, writes: int) -> list[tuple[Any, ...]]:
    """A route that flips every 3 s, each write acknowledged within 5 ms, read every
    500 ms by a client."""
    rows = []
    op_id = first_id
    for i in range(writes):
        start = i * 3_000
        rows.append(op(op_id, "broker", "register", topic, start, start + 5, value=ROUTES[i % 2]))
        op_id += 1
        for t in range(start + 10, start + 2_990, 500):
            rows.append(op(op_id, "c1", "route_read", topic, t, t + 2, value=ROUTES[i % 2]))
            op_id += 1
    return rows


@pytest.fixture(scope="module")
def power_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run: topic P's writes are acknowledged; topic Q has the same writes plus one
    registration and one unregistration that timed out; topic S has one write only."""
    root = tmp_path_factory.mktemp("power")
    ops = _flipping_topic("P", 1, 6) + _flipping_topic("Q", 1_000, 6)
    ops += [
        op(2_000, "broker", "register", "Q", 1, 1_001, outcome="timeout", value=ROUTES[1]),
        op(2_001, "broker", "unregister", "Q", 2, 1_002, outcome="timeout", value=ROUTES[0]),
    ]
    ops += _flipping_topic("S", 3_000, 1)
    meta = RunMeta(run_id="p1", scenario="power", mode="raft", seed=0, nodes=["n0"])
    with HistoryWriter(root / "p1", meta, chunk_rows=50) as out:
        for row in ops:
            out.operation(row)
    return root


def test_it_counts_the_stale_reads_caught_per_run(spark: Any, power_root: Path) -> None:
    from spark_jobs.dataset import load_history
    from spark_jobs.metrics import GROUP
    from spark_jobs.power import stale_read_power

    history = load_history(spark, power_root)
    runs = history.operations.select("run_id", *GROUP).distinct()
    [row] = [r.asDict() for r in stale_read_power(history.operations, runs, 10).collect()]
    assert row == {
        "run_id": "p1",
        "mode": "raft",
        "scenario": "power",
        "stale_reads_injected": 10,
        "stale_reads_caught": 5,
        "stale_reads_unknown": 0,
        "topics_injected": 2,
        "caught_share": 0.5,
    }
    section = section_markdown(SECTION_BY_NAME["checker_power"], [row], ["eventual", "raft"])
    assert "stale reads injected / caught" in section
    assert "| stale_reads_caught | — | 5 |" in section
    assert "| caught_share | — | 50 % |" in section
