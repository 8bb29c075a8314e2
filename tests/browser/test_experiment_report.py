"""The console's experiment report in Chromium: verdicts of both modes side by side, every
table with both modes or a sentence for its emptiness, counterexamples, and the PNG plots.

The report is written by ``spark_jobs.report_folder.write_report`` (real files, real matplotlib
plots) from two small recorded histories and hand-made analysis tables, so no Spark runs
here; the runs are indexed in the console node's own shared database.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import HistoryWriter, RunMeta
from spark_jobs.report_folder import write_report

from .conftest import REPO_ROOT, ConsoleNode, screenshot, settle

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SCENARIO = "s1-asymmetric-partition"
SEED = 7
RUN_IDS = {"eventual": f"{SCENARIO}-eventual-s{SEED}-1", "raft": f"{SCENARIO}-raft-s{SEED}-1"}
ROUTE_A = "broker-a:h1:10911:4:4:6"
ROUTE_AB = "broker-a:h1:10911:4:4:6,broker-b:h2:10911:4:4:6"


ASKED_DURATION_S = 10.0
WALL_TIME_S = 35.4
TIMINGS = {"warmup_ms": 4_100, "recorded_ms": 10_200}


def _history(run_dir: Path, mode: str) -> None:
    meta = RunMeta(
        run_id=run_dir.name,
        scenario=SCENARIO,
        mode=mode,
        seed=SEED,
        nodes=["n1", "n2", "n3"],
        params={"duration_s": ASKED_DURATION_S},
    )
    with HistoryWriter(run_dir, meta) as out:
        out.fault((1_000, 5_000, "asymmetric_partition", "n1", "{}"))
        out.operation(
            (
                1,
                "warmup",
                "register",
                "",
                "topic-000",
                0,
                10,
                "ok",
                ROUTE_A,
                -1,
                "",
                "{}",
                0 * 1_000,
                10 * 1_000,
            )
        )
        out.operation(
            (
                2,
                "ns-n2",
                "register",
                "n2",
                "topic-000",
                10,
                1_500,
                "ok",
                ROUTE_AB,
                -1,
                "",
                "{}",
                10 * 1_000,
                1_500 * 1_000,
            )
        )
        out.operation(
            (
                3,
                "producer-0",
                "route_read",
                "n1",
                "topic-000",
                1_600,
                1_610,
                "ok",
                ROUTE_A,
                -1,
                "",
                "{}",
                1_600 * 1_000,
                1_610 * 1_000,
            )
        )


def _tables() -> dict[str, list[dict[str, Any]]]:
    modes = list(RUN_IDS)
    return {
        "linearizability": [
            {
                "run_id": RUN_IDS["eventual"],
                "mode": "eventual",
                "scenario": SCENARIO,
                "linearizable": 6,
                "not_linearizable": 2,
                "unknown": 0,
                "not_exercised": 0,
            },
            {
                "run_id": RUN_IDS["raft"],
                "mode": "raft",
                "scenario": SCENARIO,
                "linearizable": 8,
                "not_linearizable": 0,
                "unknown": 0,
                "not_exercised": 0,
            },
        ],
        "divergence": [
            {
                "mode": m,
                "scenario": SCENARIO,
                "topics": 8,
                "mean_diverged_fraction": f,
                "topics_diverged_share": s,
                "longest_ms": ms,
            }
            for m, f, s, ms in (("eventual", 0.07, 0.25, 8951), ("raft", 0.0, 0.0, 0))
        ],
        "availability": [
            {
                "mode": m,
                "scenario": SCENARIO,
                "op_class": "read",
                "ops": 360,
                "ok_share": 1.0,
                "answered_share": 1.0,
            }
            for m in modes
        ],
        "t_visibility": [
            {"mode": m, "scenario": SCENARIO, "t_bucket_ms": t, "reads": 100, "p_fresh": p}
            for m, points in (
                ("eventual", ((0, 0.48), (500, 0.82), (1_000, 0.92), (5_000, 1.0))),
                ("raft", ((0, 0.57), (500, 0.96), (1_000, 1.0), (5_000, 1.0))),
            )
            for t, p in points
        ],
        "divergence_timeline": [
            {
                "run_id": RUN_IDS[m],
                "mode": m,
                "scenario": SCENARIO,
                "node": node,
                "t_ms": t,
                "topics": 8,
                "diverged_share": 0.25
                if m == "eventual" and node == "n1" and 0 < t < 4_000
                else 0.0,
            }
            for m in modes
            for node in ("n1", "n2", "n3")
            for t in range(-2_000, 8_000, 500)
        ],
        "fault_windows": [
            {
                "run_id": RUN_IDS[m],
                "mode": m,
                "scenario": SCENARIO,
                "kind": "asymmetric_partition",
                "target": "n1",
                "start_ms": 0,
                "end_ms": 4_000,
                "open_end": False,
            }
            for m in modes
        ],
        "stale_route": [],
        "counterexamples": [
            {
                "run_id": RUN_IDS["eventual"],
                "topic": "topic-000",
                "verdict": "not_linearizable",
                "ops": 3,
                "steps": 5,
                "counterexample": [1, 2, 3],
                "reason": "minimal counterexample",
            }
        ],
    }


def _index_runs(node: ConsoleNode, batch: Path, report: Path) -> None:
    """ExperimentRun rows in the console node's shared database (as run_experiment does):
    a 10 s recording that took 35.4 s of wall time, and its stored headline analysis."""
    rows = [
        {
            "run_id": run_id,
            "mode": mode,
            "out_dir": str(batch / "runs" / run_id),
            "divergence": [r for r in _tables()["divergence"] if r["mode"] == mode],
        }
        for mode, run_id in RUN_IDS.items()
    ]
    code = (
        "import json, sys, django\n"
        "django.setup()\n"
        "import datetime as dt\n"
        "from django.utils import timezone\n"
        "from namesrv_app.models import ExperimentRun\n"
        "now = timezone.now()\n"
        "for r in json.loads(sys.argv[1]):\n"
        "    ExperimentRun.objects.update_or_create(run_id=r['run_id'], defaults=dict(\n"
        f"        scenario={SCENARIO!r}, mode=r['mode'], seed={SEED}, out_dir=r['out_dir'],\n"
        f"        started=now, finished=now + dt.timedelta(seconds={WALL_TIME_S}),\n"
        "        status='finished',\n"
        f"        summary={{'report_dir': {str(report)!r}, 'timings': {TIMINGS!r},\n"
        "                 'analysis': {'divergence': r['divergence']}}))\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, json.dumps(rows)],
        cwd=REPO_ROOT,
        env=node.env,
        check=True,
        capture_output=True,
    )


def test_the_report_page_shows_both_modes_the_counterexample_and_the_plots(
    page: Any,
    console_node: ConsoleNode,
    tmp_path: Path,
) -> None:
    batch = tmp_path / f"{SCENARIO}-s{SEED}-20261125-120000"
    for mode, run_id in RUN_IDS.items():
        _history(batch / "runs" / run_id, mode)
    report = batch / "report"
    write_report(report, _tables(), {"linearizability": 0.8}, batch / "runs")
    _index_runs(console_node, batch, report)

    page.goto(f"{console_node.url}/experiments/{RUN_IDS['raft']}/")
    verdicts = page.locator("#table-verdicts")
    heads = verdicts.locator("thead th").all_inner_texts()
    assert heads == ["", "eventual", "raft", "why the modes differ"]
    text = verdicts.inner_text()
    assert "An eventual node applies each broker's registrations" in text
    assert "not linearizable (2 of 8 exercised topics not linearizable)" in text
    assert "linearizable (8 of 8 exercised topics linearizable)" in text
    assert "25 % of topics, longest 9.0 s" in text
    divergence = page.locator("#table-divergence").inner_text()
    assert "25 %" in divergence and "7 %" in divergence and "0.25" not in divergence
    runs = page.locator("#report-runs").inner_text()
    assert "asked duration" in runs and "actual wall time" in runs
    assert runs.count("10 s") == 2 and runs.count("35.4 s") == 2
    assert (
        "No broker was killed in this scenario" in page.locator("#empty-stale_route").inner_text()
    )
    counterexample = page.locator("#table-counterexamples").inner_text()
    assert "producer-0" in counterexample and "broker-a, broker-b" in counterexample

    plots = page.locator("img.plot")
    assert plots.count() == 2  # t-visibility and the divergence timeline
    for index in range(plots.count()):
        plots.nth(index).scroll_into_view_if_needed()
        page.wait_for_function(
            "img => img.complete && img.naturalWidth > 400", arg=plots.nth(index).element_handle()
        )
    # Hand-made tables: the committed docs/screenshots/experiment-*.png show the real run
    # that docs/EXPERIMENTS.md names, so these stay in tmp_path.
    page.locator("#verdicts").scroll_into_view_if_needed()
    settle()
    page.screenshot(path=str(tmp_path / "experiment-report.png"))
    page.locator("#report-plots").scroll_into_view_if_needed()
    settle()
    page.screenshot(path=str(tmp_path / "experiment-plots.png"))


def test_the_experiments_page_shows_shares_and_both_durations_with_units(
    page: Any,
    console_node: ConsoleNode,
    tmp_path: Path,
) -> None:
    # The list reads the rows and each run's run.json; no report folder is needed.
    batch = tmp_path / f"{SCENARIO}-s{SEED}-20261125-130000"
    for mode, run_id in RUN_IDS.items():
        _history(batch / "runs" / run_id, mode)
    _index_runs(console_node, batch, batch / "report")

    page.goto(f"{console_node.url}/experiments/")
    heads = page.locator("#experiment-runs thead th").all_inner_texts()
    assert "asked duration" in heads and "actual wall time" in heads
    assert "started (UTC)" in heads
    run_link = page.locator("#experiment-runs a", has_text=RUN_IDS["eventual"])
    box = run_link.bounding_box()
    font_px = run_link.evaluate("a => parseFloat(getComputedStyle(a.firstChild).fontSize)")
    assert box is not None and box["height"] < 2 * font_px  # the run id is one line
    row = page.locator("#experiment-runs tr", has_text=RUN_IDS["eventual"])
    assert row.locator("td.asked-duration").inner_text() == "10 s"
    wall = row.locator("td.wall-time").inner_text()
    assert wall.startswith("35.4 s") and "cluster boot and teardown 21.1 s" in wall
    assert "25 % of topics diverged" in row.inner_text()
    assert "longest divergence" in row.inner_text() and "9.0 s" in row.inner_text()
    assert "0.25" not in page.inner_text("#experiment-runs")
    settle()
    screenshot(page, "experiments.png")


TIMELINE_OPS = 3_000
TIMELINE_OP_MS = 10
EPOCH_MS = 1_796_526_475_076


def _long_history(run_dir: Path) -> None:
    """A 30 s recording on the epoch's clock: 3,000 route reads (more than the timeline
    draws), and a partition from 9.5 s that heals at 19.5 s."""
    meta = RunMeta(
        run_id=run_dir.name, scenario=SCENARIO, mode="raft", seed=SEED, nodes=["n1", "n2", "n3"]
    )
    with HistoryWriter(run_dir, meta) as out:
        out.fault((EPOCH_MS + 9_500, EPOCH_MS + 19_500, "asymmetric_partition", "n1", "{}"))
        for i in range(TIMELINE_OPS):
            start = EPOCH_MS + i * TIMELINE_OP_MS
            out.operation(
                (
                    i,
                    f"producer-{i % 4}",
                    "route_read",
                    f"n{i % 3 + 1}",
                    "topic-000",
                    start,
                    start + 5,
                    "error" if 950 <= i < 1_950 and i % 3 == 0 else "ok",
                    ROUTE_A,
                    -1,
                    "",
                    "{}",
                    start * 1_000,
                    (start + 5) * 1_000,
                )
            )


def test_the_timeline_draws_the_whole_recording_and_its_heal(
    page: Any,
    console_node: ConsoleNode,
    tmp_path: Path,
) -> None:
    batch = tmp_path / f"{SCENARIO}-s{SEED}-20261125-140000"
    _history(batch / "runs" / RUN_IDS["eventual"], "eventual")
    _long_history(batch / "runs" / RUN_IDS["raft"])
    _index_runs(console_node, batch, batch / "report")

    page.goto(f"{console_node.url}/experiments/{RUN_IDS['raft']}/timeline/")
    bound = page.locator("#timeline-bound").inner_text()
    assert "of 3000 operations, taken evenly over the whole recording" in bound
    assert "30.0 s" in bound
    assert page.locator("#timeline text").last.text_content() == "30.0 s"
    faults = page.locator("#timeline-faults").inner_text()
    assert "9.5 s" in faults and "19.5 s" in faults and str(EPOCH_MS)[:6] not in faults
    settle()
    # Hand-made history: kept in tmp_path like the report's screenshots above.
    page.screenshot(path=str(tmp_path / "experiment-timeline.png"))
