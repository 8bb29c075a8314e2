"""``manage.py run_experiment SCENARIO``: one consistency experiment per mode on a real cluster.

A thin shell over :func:`experiments.runner.run_experiment`; it adds the
``ExperimentRun`` rows (the index of runs) and, with ``--analyze``, the Spark analysis and
its summary table (eventual and raft side by side for ``--mode both``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import router
from django.utils import timezone

from broker_app.management.command import ProjectCommand
from experiments.config import REPORT_DIR_NAME, RUNS_DIR_NAME, ExperimentConfig
from experiments.nemesis import Schedule, load_schedule
from experiments.progress import Progress
from experiments.runner import (
    MODES,
    RunOutcome,
    analyze_runs,
    batch_configs,
    batch_dir,
    run_experiment,
    seed_series,
    summary_text,
)
from experiments.scenarios import SCENARIOS, Nemesis
from namesrv_app import schema
from namesrv_app.management.run_dir import (
    add_run_dir_argument,
    apply_run_dir,
    chosen_run_dir,
    holds_table,
)
from namesrv_app.models import ASKED_DURATION_KEY, ExperimentRun
from remoting.consistency import CONSISTENCY_LEVELS

MODE_BOTH = "both"
DEFAULTS = ExperimentConfig(scenario="broker-kill", mode="eventual", out_dir=Path("."))
DEFAULT_OUT = Path("run/experiments")


def _migrated_for_runs() -> None:
    """This shell's own database (no cluster to record in) holds the runs' table: a
    fresh checkout's has no tables yet, and is migrated first. Looked at before
    migrating anything: a database that has the table (a cluster's, a test's inside its
    transaction) is left alone."""
    alias = router.db_for_write(ExperimentRun)
    if not holds_table(ExperimentRun._meta.db_table, alias):
        schema.migrate((alias,))


class Command(ProjectCommand):
    """Boot a cluster per mode, run the workload and the fault, record the history."""

    help = "Run a consistency experiment (eventual vs raft) and record its history."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        """The command line (times are compressed; see docs/EXPERIMENTS.md)."""
        parser.add_argument(
            "scenario", choices=sorted(SCENARIOS), help="the fault to run (docs/EXPERIMENTS.md)"
        )
        parser.add_argument(
            "--mode",
            choices=(*MODES, MODE_BOTH),
            default=MODE_BOTH,
            help="which design to run, or both one after the other (default both)",
        )
        parser.add_argument(
            "--seed",
            type=int,
            default=DEFAULTS.seed,
            help=f"seeds the workload and the fault's timing (default {DEFAULTS.seed})",
        )
        parser.add_argument(
            "--seeds",
            type=int,
            default=1,
            help="runs per mode, with seeds --seed, --seed+1, ...; the report then gives "
            "each measure as its mean with a 95 %% interval across them (default 1)",
        )
        parser.add_argument(
            "--out",
            type=Path,
            default=DEFAULT_OUT,
            help="parent folder: each invocation writes <scenario>-s<seed>-<time>/ in it, "
            f"with runs/<run_id> per mode and report/ (default {DEFAULT_OUT})",
        )
        numbers = (
            ("--nodes", int, DEFAULTS.nodes, "NameServer nodes, 3 or 5"),
            ("--duration-s", float, DEFAULTS.duration_s, "how long the workload runs, seconds"),
            ("--brokers", int, DEFAULTS.brokers, "simulated brokers"),
            ("--topics", int, DEFAULTS.topics, "topics spread over the brokers"),
            ("--heartbeat-ms", int, DEFAULTS.heartbeat_ms, "brokers' registration period, ms"),
            ("--poll-ms", int, DEFAULTS.poll_ms, "clients' route refresh period, ms"),
            ("--expiry-ms", int, DEFAULTS.expiry_ms, "a silent broker's expiry, ms"),
        )
        for flag, kind, default, what in numbers:
            parser.add_argument(
                flag,
                type=kind,
                default=default,
                choices=(3, 5) if flag == "--nodes" else None,
                help=f"{what} (default {default})",
            )
        parser.add_argument(
            "--clock-skew-ms",
            type=int,
            default=DEFAULTS.clock_skew_ms,
            help="how far the clock-skew scenarios set one node's clock ahead, ms (default 0: "
            "clock-skew goes past raft's allowance by one --expiry-ms, "
            "clock-skew-within-allowance stays 1000 under it)",
        )
        parser.add_argument(
            "--skew-allowance-ms",
            type=int,
            default=None,
            help="raft mode's expiry allowance for clock skew (default: 0, the same rule as "
            "eventual mode; clock-skew keeps the gateway's 5000)",
        )
        parser.add_argument(
            "--schedule",
            type=Path,
            default=None,
            help="nemesis only: play this stored schedule (a run's schedule.json) instead of "
            "drawing one from --seed; the run lasts the schedule's duration",
        )
        parser.add_argument(
            "--read-consistency",
            choices=CONSISTENCY_LEVELS,
            default=DEFAULTS.read_consistency,
            help=f"how the clients' route reads are asked (default {DEFAULTS.read_consistency})",
        )
        parser.add_argument(
            "--analyze",
            action="store_true",
            help="run the Spark analysis and print the summary table",
        )
        parser.add_argument(
            "--spark-master",
            default=None,
            help="with --analyze: a Spark master URL (default: a local session)",
        )
        parser.add_argument(
            "--spark-verbose",
            action="store_true",
            help="show Spark's own logging (quiet by default)",
        )
        add_run_dir_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        """Run each requested mode in turn, then analyze when asked."""
        run_dir = chosen_run_dir(options["run_dir"], self.stdout.write, "the run")
        apply_run_dir(run_dir)
        if run_dir is None:
            _migrated_for_runs()
        modes = MODES if options["mode"] == MODE_BOTH else (options["mode"],)
        batch = batch_dir(
            options["out"],
            options["scenario"],
            options["seed"],
            timezone.now().strftime("%Y%m%d-%H%M%S"),
            options["seeds"],
        )
        schedule = self._schedule(options)
        base = ExperimentConfig(
            scenario=options["scenario"],
            mode=modes[0],
            out_dir=batch / RUNS_DIR_NAME,
            seed=options["seed"],
            nodes=options["nodes"],
            duration_s=options["duration_s"] if schedule is None else schedule.duration_s,
            brokers=options["brokers"],
            topics=options["topics"],
            heartbeat_ms=options["heartbeat_ms"],
            poll_ms=options["poll_ms"],
            expiry_ms=options["expiry_ms"],
            clock_skew_ms=options["clock_skew_ms"],
            skew_allowance_ms=options["skew_allowance_ms"],
            read_consistency=options["read_consistency"],
            schedule_file="" if schedule is None else str(Path(options["schedule"]).resolve()),
        )
        try:
            base.validate()
            seeds = seed_series(options["seed"], options["seeds"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        # Plain lines into the command's stdout (a file, a pipe, a test); on a terminal the
        # default reporter also draws a live bar for the recording phase.
        progress = Progress() if self.stdout.isatty() else Progress(self._say, live=False)
        self.stdout.write(f"writing into {batch}")
        outcomes = [self._run_one(c, progress) for c in batch_configs(base, modes, seeds)]
        if options["analyze"]:
            self._analyze(
                batch, outcomes, options["spark_master"], progress, options["spark_verbose"]
            )

    def _schedule(self, options: dict[str, Any]) -> Schedule | None:
        """The stored schedule ``--schedule`` names (nemesis only), checked; None without."""
        if options["schedule"] is None:
            return None
        if options["scenario"] != Nemesis.name:
            raise CommandError(f"--schedule is for the {Nemesis.name} scenario only")
        try:
            schedule = load_schedule(options["schedule"])
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"--schedule {options['schedule']}: {exc}") from exc
        self.stdout.write(
            f"replaying {options['schedule']}: {len(schedule.steps)} steps over "
            f"{schedule.duration_s:g} s (drawn from seed {schedule.seed})"
        )
        return schedule

    def _say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def _run_one(self, config: ExperimentConfig, progress: Progress) -> RunOutcome:
        run_id = config.effective_run_id()
        config = replace(config, run_id=run_id)
        row = ExperimentRun.objects.create(
            run_id=run_id,
            scenario=config.scenario,
            mode=config.mode,
            seed=config.seed,
            started=timezone.now(),
            out_dir=str(Path(config.out_dir).resolve() / run_id),
            # Known from the start, so the console shows it while the run is going.
            summary={ASKED_DURATION_KEY: config.duration_s},
        )
        progress.line(f"{run_id}: {config.scenario} in {config.mode} mode")
        try:
            outcome = run_experiment(config, progress)
        except Exception as exc:
            row.status = ExperimentRun.Status.FAILED
            row.finished = timezone.now()
            row.summary = {**row.summary, "error": str(exc)[:2000]}
            row.save()
            raise CommandError(f"{run_id} failed: {exc}") from exc
        row.status = ExperimentRun.Status.FINISHED
        row.finished = timezone.now()
        row.summary = {**row.summary, **outcome.summary, "timings": outcome.meta.timings}
        row.save()
        progress.line(
            f"{run_id}: recorded in {outcome.run_dir} "
            f"({json.dumps(outcome.meta.timings, default=str)})"
        )
        return outcome

    def _analyze(
        self,
        batch: Path,
        outcomes: list[RunOutcome],
        spark_master: str | None,
        progress: Progress,
        spark_verbose: bool,
    ) -> None:
        report = batch / REPORT_DIR_NAME
        tables = analyze_runs(
            batch / RUNS_DIR_NAME, report, spark_master, progress, spark_verbose=spark_verbose
        )
        for outcome in outcomes:
            row = ExperimentRun.objects.get(run_id=outcome.run_id)
            row.summary = {
                **row.summary,
                "report_dir": str(report),
                "analysis": {
                    name: [
                        r
                        for r in tables.get(name, [])
                        if r.get("mode") in (None, row.mode)
                        and r.get("run_id") in (None, row.run_id)
                    ]
                    for name in ("divergence", "linearizability", "not_exist_live")
                },
            }
            row.save()
        self.stdout.write("\n" + summary_text(tables))
        self.stdout.write(f"report: {report / 'summary.md'}")
