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
    registration and one unregistration that timed out; topic F is P with a read of a
    route never written at 16.1 s, so it fails; topic S has one write only."""
    root = tmp_path_factory.mktemp("power")
    ops = _flipping_topic("P", 1, 6) + _flipping_topic("Q", 1_000, 6)
    ops += [
        op(2_000, "broker", "register", "Q", 1, 1_001, outcome="timeout", value=ROUTES[1]),
        op(2_001, "broker", "unregister", "Q", 2, 1_002, outcome="timeout", value=ROUTES[0]),
    ]
    ops += _flipping_topic("F", 4_000, 6)
    ops.append(op(5_000, "c1", "route_read", "F", 16_100, 16_102, value="never-written"))
    ops += _flipping_topic("S", 3_000, 1)
    meta = RunMeta(run_id="p1", scenario="power", mode="raft", seed=0, nodes=["n0"])
    with HistoryWriter(root / "p1", meta, chunk_rows=50) as out:
        for row in ops:
            out.operation(row)
    return root


def test_it_counts_the_faults_caught_per_run_kind_and_region(spark: Any, power_root: Path) -> None:
    """Six draws of each kind over three topics, two each. In P every fault is injected
    and caught; in Q the timed-out writes explain all but the value never written; F
    fails, so its faults go into its passing prefix (the first 16.1 s)."""
    from spark_jobs.dataset import load_history
    from spark_jobs.metrics import GROUP
    from spark_jobs.mutations import KINDS
    from spark_jobs.power import checker_power

    history = load_history(spark, power_root)
    runs = history.operations.select("run_id", *GROUP).distinct()
    rows = [r.asDict() for r in checker_power(history.operations, runs, 6).collect()]
    found = {(r["kind"], r["region"]): r for r in rows}
    assert set(found) == {(k, r) for k in KINDS for r in ("whole", "passing_prefix")}
    for kind in KINDS:
        whole = 4 if kind == "never_written" else 2
        assert found[kind, "whole"] == {
            "run_id": "p1",
            "mode": "raft",
            "scenario": "power",
            "kind": kind,
            "region": "whole",
            "topics": 2,
            "injected": whole,
            "caught": whole,
            "unknown": 0,
            "caught_share": 1.0,
        }
        prefix = found[kind, "passing_prefix"]
        assert (prefix["topics"], prefix["injected"], prefix["caught"]) == (1, 2, 2)
    section = section_markdown(SECTION_BY_NAME["checker_power"], rows, ["eventual", "raft"])
    assert "faults injected / caught, by kind" in section
    assert "| lost_write | passing_prefix | — | 1 | — | 2 | — | 2 | — | 0 | — | 100 % |" in section
