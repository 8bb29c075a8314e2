"""The analysis must flag a deliberately broken NameServer in every seed (issue 46, power).

The broken cluster (:mod:`tests.experiments.broken_namesrv`): raft followers answer
linearizable route reads from a copy up to 3 s old. Two seeds of it and one honest seed run
with the config the S1 test shows linearizable in raft mode (``s1-asymmetric-partition``,
linearizable reads, the route churn inside the fault window), shortened to 12 s; one Spark
analysis covers all three (about 30 s a run with boot and tear-down, and 90 s of analysis,
which computes per-seed tables for seed_intervals: about 3 minutes in all).
Each broken seed must come out not linearizable, with stale reads, and with the reads of
its counterexamples answered by followers (by their gateways' own journals); the honest
seed must pass.

The fast tests at the end show that nothing shipped can turn the broken mode on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import iter_rows
from experiments.config import ExperimentConfig
from experiments.runner import RunOutcome, analyze_runs, run_experiment
from localcluster.argv import GatewayArgs
from remoting.consistency import CONSISTENCY_LINEARIZABLE
from spark_jobs.checker import LINEARIZABLE, NOT_LINEARIZABLE
from tests.experiments.broken_namesrv import (
    JOURNAL_ENV,
    REFRESH_ENV,
    REPO_ROOT,
    SITE_DIR,
    install,
    is_gateway,
    launch_env,
    node_of,
)

BROKEN_SEEDS = (11, 12)
HONEST_SEED = 13
STALE_COPY_S = 3.0
SCENARIO = "s1-asymmetric-partition"
SHIPPED = (
    "remoting",
    "raftstore",
    "gateway",
    "node",
    "localcluster",
    "experiments",
    "spark_jobs",
    "experiment_history",
    "experiment_reports",
    "namesrv_app",
    "namesrv_site",
    "broker_app",
    "tools",
)
"""The packages the wheel ships (pyproject.toml, [tool.setuptools.packages.find])."""


def _config(
    out: Path, seed: int, run_id: str, extra_env: tuple[tuple[str, str], ...]
) -> ExperimentConfig:
    return ExperimentConfig(
        scenario=SCENARIO,
        mode="raft",
        out_dir=out,
        seed=seed,
        duration_s=12.0,
        brokers=8,
        topics=4,
        producers=2,
        read_consistency=CONSISTENCY_LINEARIZABLE,
        run_id=run_id,
        extra_env=extra_env,
    )


@dataclass
class Analysed:
    """The three runs, the gateways' journals of the broken ones, and the analysis."""

    broken: dict[int, RunOutcome]
    honest: RunOutcome
    journals: dict[int, Path]
    tables: dict[str, list[dict[str, Any]]]
    summary: dict[str, Any]


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Analysed]:
    out = tmp_path_factory.mktemp("broken-namesrv")
    history = out / "history"
    journals = {seed: out / f"journal-s{seed}" for seed in BROKEN_SEEDS}
    broken = {
        seed: run_experiment(
            _config(
                history,
                seed,
                f"broken-s{seed}",
                launch_env(journals[seed], refresh_s=STALE_COPY_S),
            )
        )
        for seed in BROKEN_SEEDS
    }
    honest = run_experiment(_config(history, HONEST_SEED, f"honest-s{HONEST_SEED}", ()))
    report = out / "report"
    tables = analyze_runs(history, report)
    summary = json.loads((report / "summary.json").read_text())
    yield Analysed(broken, honest, journals, tables, summary)


def _journal(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.open()]


def _leaders(rows: list[dict[str, Any]]) -> set[str]:
    return {row["node"] for row in rows if row["leader"]}


def _per_seed(analysed: Analysed, key: str) -> dict[int, float]:
    [row] = [r for r in analysed.tables["seed_intervals"] if r["key"] == key]
    return dict(zip(row["seed_values"], row["values"], strict=True))


@pytest.mark.integration
@pytest.mark.slow
def test_the_switch_was_on_in_the_broken_runs_only(analysed: Analysed) -> None:
    """Each broken run's followers served copies older than a second (their journals),
    one node led throughout and never did; the honest run was launched without it."""
    for seed, outcome in analysed.broken.items():
        rows = _journal(analysed.journals[seed])
        leaders = _leaders(rows)
        assert len(leaders) == 1, (seed, leaders)
        stale = [r for r in rows if not r["leader"]]
        assert {r["node"] for r in stale} == set(outcome.meta.nodes) - leaders
        assert max(r["age_ms"] for r in stale) >= 1_000, seed
        env = dict(map(tuple, outcome.meta.params["extra_env"]))
        assert env[REFRESH_ENV] == f"{STALE_COPY_S:g}"
    assert not analysed.honest.meta.params["extra_env"]


@pytest.mark.integration
@pytest.mark.slow
def test_every_broken_seed_is_not_linearizable_and_the_honest_one_is(
    analysed: Analysed,
) -> None:
    by_run = {row["run_id"]: row for row in analysed.tables["linearizability"]}
    for outcome in analysed.broken.values():
        row = by_run[outcome.run_id]
        assert row[NOT_LINEARIZABLE] >= 1, row
    honest = by_run[analysed.honest.run_id]
    assert honest[NOT_LINEARIZABLE] == 0 and honest[LINEARIZABLE] >= 1, honest
    not_linearizable = _per_seed(analysed, "not_linearizable_topics")
    assert not_linearizable[HONEST_SEED] == 0
    assert all(not_linearizable[seed] >= 1 for seed in BROKEN_SEEDS), not_linearizable


@pytest.mark.integration
@pytest.mark.slow
def test_every_broken_seed_has_stale_reads_and_the_honest_one_none(analysed: Analysed) -> None:
    stale = _per_seed(analysed, "stale_read")
    assert stale[HONEST_SEED] == 0
    assert all(stale[seed] >= 1 for seed in BROKEN_SEEDS), stale
    assert analysed.summary["modes"]["raft"]["anomalies"]["stale_read"] == sum(stale.values())


@pytest.mark.integration
@pytest.mark.slow
def test_the_counterexamples_blame_reads_the_followers_answered(analysed: Analysed) -> None:
    """The analysis' counterexample of every failing topic of a broken seed holds a route
    read answered by a node that was a follower (its gateway's journal); none is the
    honest run's. (A counterexample may also hold a leader's read, the one that showed
    the new route had taken effect.)"""
    operations = analysed.summary["counterexample_operations"]
    assert {op["run_id"] for op in operations} == {o.run_id for o in analysed.broken.values()}
    for seed, outcome in analysed.broken.items():
        leaders = _leaders(_journal(analysed.journals[seed]))
        failing = {
            row["topic"]
            for row in analysed.tables["route_changes"]
            if row["run_id"] == outcome.run_id and row["verdict"] == NOT_LINEARIZABLE
        }
        followers = [
            op
            for op in operations
            if op["run_id"] == outcome.run_id
            and op["operation"] == "route_read"
            and op["node"] not in ("", *leaders)
        ]
        assert failing and {op["topic"] for op in followers} == failing, (seed, operations)


@pytest.mark.integration
@pytest.mark.slow
def test_the_stale_read_examples_were_answered_by_followers(analysed: Analysed) -> None:
    [anomalies] = analysed.tables["anomalies"]
    examples = [e.split(" ", 1)[1] for e in anomalies["examples"] if e.startswith("stale_read ")]
    assert examples
    outcomes = {o.run_id: (seed, o) for seed, o in analysed.broken.items()}
    for example in examples:
        run_id, op_id = example.split("/")
        seed, outcome = outcomes[run_id]
        [row] = [r for r in iter_rows(outcome.run_dir, "operations") if r["op_id"] == int(op_id)]
        assert row["node"] not in _leaders(_journal(analysed.journals[seed])), row


# ------------------------------------------------------ nothing shipped can switch it on


def test_the_patch_is_not_importable_outside_the_test_tree(tmp_path: Path) -> None:
    """The installed project (the venv's editable install of the shipped packages) run
    from elsewhere cannot import the patch, and no shipped module imports the test tree
    or names the patch's variables or a sitecustomize."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run(
        [sys.executable, "-c", "import tests.experiments.broken_namesrv"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert found.returncode != 0 and "ModuleNotFoundError" in found.stderr, found.stderr
    # Nor does the interpreter have a sitecustomize of its own, which the patch's would hide.
    own = subprocess.run(
        [sys.executable, "-c", "import importlib.util as u; print(u.find_spec('sitecustomize'))"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert own.stdout.strip() == "None", own.stdout
    # (experiments/config.py names the folder in a docstring: imports are what count.)
    words = ("from tests", "import tests", REFRESH_ENV, JOURNAL_ENV, "sitecustomize")
    for package in SHIPPED:
        for path in (REPO_ROOT / package).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            assert not [w for w in words if w in text], path
    assert SITE_DIR.is_relative_to(REPO_ROOT / "tests")


def test_the_experiment_command_has_no_option_for_it() -> None:
    from namesrv_app.management.commands.run_experiment import Command

    parser = Command().create_parser("manage.py", "run_experiment")
    options = {s for action in parser._actions for s in action.option_strings}
    dests = {action.dest for action in parser._actions}
    assert "extra_env" not in dests
    assert not [o for o in options if any(w in o for w in ("env", "broken", "stale", "patch"))]
    assert "extra_env" not in parser.format_help()


def test_the_patch_stays_out_of_every_process_but_a_switched_on_gateway() -> None:
    gateway = GatewayArgs(node="n2").argv()
    front = [sys.executable, "-m", "gateway.front", "--node", "n2"]
    assert is_gateway(gateway) and not is_gateway(front)
    assert node_of(gateway) == "n2"
    before = list(sys.meta_path)
    assert install(front, {REFRESH_ENV: "3"}) is False
    assert install(gateway, {}) is False
    assert sys.meta_path == before
