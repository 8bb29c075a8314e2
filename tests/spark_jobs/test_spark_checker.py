"""The linearizability checker run per topic inside Spark (run r5) and the CLI end to end."""

from __future__ import annotations

import json

import pytest

from spark_jobs import cli
from spark_jobs.analysis import JOBS_TOTAL
from spark_jobs.metrics import linearizability

pytestmark = pytest.mark.slow


def test_it_gives_a_verdict_and_counterexample_per_topic(history):
    rows = {r["topic"]: r for r in linearizability(history).filter("run_id = 'r5'").collect()}
    assert rows["X"]["verdict"] == "linearizable"
    assert rows["Y"]["verdict"] == "not_linearizable"
    assert rows["Y"]["counterexample"] == [3, 4, 5]


def test_the_cli_writes_tables_plots_and_an_overall_verdict(spark, history_root, tmp_path, capsys):
    run_dir = history_root / "r5"
    assert cli.main(["analyze", "--history", str(run_dir), "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    printed = json.loads(captured.out.strip().splitlines()[-1])
    assert printed["overall"] == {"eventual": "not_linearizable"}
    assert f"Spark job 1 of {JOBS_TOTAL}: t_visibility ..." in captured.err
    assert f"Spark job {JOBS_TOTAL} of {JOBS_TOTAL}: counterexamples done in" in captured.err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {
        "t_visibility",
        "k_staleness",
        "divergence",
        "ownership",
        "latency",
        "route_changes",
        "anomalies",
        "counterexample_operations",
        "seed_intervals",
    } <= set(summary)
    latency = {row["kind"]: row for row in summary["latency"]}
    assert {"p50_us", "p95_us", "p99_us"} <= set(latency["route_read"])
    assert summary["linearizability"][0]["not_linearizable"] == 1
    assert (tmp_path / "k_staleness.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "k_staleness.svg").read_text().lstrip().startswith("<?xml")
    text = (tmp_path / "summary.md").read_text()
    assert text.startswith("# ") and "## Verdicts" in text and "Spark job seconds" in text
    assert "![k_staleness](k_staleness.png)" in text
