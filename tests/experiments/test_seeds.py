"""``run_experiment --seeds N`` on real clusters: N recorded runs per mode, each with its own
seed, and a report that gives each measure as a mean with a 95 % interval across them.

Two short broker-kill runs in eventual mode (the size of the s6 test: about 30 s each with
boot and tear-down), then the per-run Spark pass over both and the report's section.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command

from experiment_history.runs import find_runs, read_meta
from experiment_reports.report import write_markdown
from experiment_reports.seeds import SEED_INTERVALS
from experiments.runner import seed_series
from namesrv_app.models import ExperimentRun
from spark_jobs.per_run import seed_intervals
from spark_jobs.report_folder import report_title
from spark_jobs.session import get_spark

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db]

BASE_SEED = 3
SMALL = ("--brokers", "4", "--topics", "2", "--duration-s", "8")


def test_the_seeds_of_a_batch_follow_from_the_base_seed() -> None:
    assert seed_series(BASE_SEED, 3) == [3, 4, 5]
    assert seed_series(BASE_SEED, 1) == [BASE_SEED]
    with pytest.raises(ValueError, match="at least 1"):
        seed_series(BASE_SEED, 0)


def test_two_seeds_are_two_recorded_runs_and_their_measures_get_intervals(
    tmp_path: Path,
) -> None:
    call_command(
        "run_experiment",
        "broker-kill",
        *("--mode", "eventual", "--seed", str(BASE_SEED), "--seeds", "2"),
        *SMALL,
        *("--out", str(tmp_path / "out")),
        stdout=io.StringIO(),
    )
    [batch] = list((tmp_path / "out").iterdir())
    assert batch.name.startswith(f"broker-kill-s{BASE_SEED}x2-")
    runs = batch / "runs"
    metas = sorted((read_meta(d) for d in find_runs(runs)), key=lambda m: m.seed)
    assert [(m.mode, m.seed) for m in metas] == [("eventual", 3), ("eventual", 4)]
    rows = ExperimentRun.objects.order_by("seed")
    assert [(r.run_id, r.seed, r.status) for r in rows] == [
        (m.run_id, m.seed, ExperimentRun.Status.FINISHED) for m in metas
    ]

    intervals = seed_intervals(get_spark(), runs, {})
    dead = next(r for r in intervals if r["key"] == "dead_sends")
    assert dead["seeds"] == 2 and dead["seed_values"] == [3, 4]
    assert dead["lo"] <= dead["mean"] <= dead["hi"]
    summary = write_markdown(
        tmp_path, {SEED_INTERVALS: intervals}, {}, title=report_title(runs)
    ).read_text()
    assert summary.startswith("# broker-kill: eventual (seeds 3, 4)")
    assert "| sends to a dead broker (sends) | " in summary and ", n=2 |" in summary
    assert "Across 2 seeds (3, 4) in eventual mode:" in summary
