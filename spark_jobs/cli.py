"""Command line: ``analyze`` run histories with Spark, ``simulate`` both designs (the model
of :mod:`experiment_history.simulate`), ``calibrate`` the simulator's timings from real runs.

    python -m spark_jobs.cli analyze --history DIR --out DIR [--spark-master URL]
        [--spark-verbose]
    python -m spark_jobs.cli simulate --brokers N --topics N --reads N \
        --mode eventual|raft|both --seed S --out DIR [--scenario NAME] \
        [--calibrate-from RUNS_DIR|calibration.json [--calibrate-timings]]
    python -m spark_jobs.cli calibrate --history RUNS_DIR --out calibration.json

``--spark-master spark://host:7077`` runs the Spark jobs on an existing standalone cluster
(the project's code is shipped to its executors, see ``spark_jobs.session``);
``--spark-verbose`` shows Spark's own WARN/INFO logging, which is off by default.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from experiment_history.simulate import (
    MODE_EVENTUAL,
    MODE_RAFT,
    SCENARIO_ASYMMETRIC,
    SCENARIOS,
    SimConfig,
)
from experiment_history.simulate_run import simulate
from spark_jobs.checker import CheckBudget
from tools.cli import ExactArgumentParser

MODES_BOTH = "both"
DEFAULTS = SimConfig()


def _spark_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spark-master",
        default=None,
        help="an existing Spark master URL, e.g. spark://host:7077 "
        "(default: a local two-core session)",
    )
    parser.add_argument(
        "--spark-verbose",
        action="store_true",
        help="let Spark log its warnings and info to stderr (quiet otherwise)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = ExactArgumentParser(prog="spark_jobs.cli", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    analyze = commands.add_parser("analyze", help="run every Spark job over histories")
    analyze.add_argument(
        "--history",
        required=True,
        type=Path,
        help="a run directory, or a directory of run directories",
    )
    analyze.add_argument(
        "--out", required=True, type=Path, help="the report folder to write (tables, plots)"
    )
    _spark_arguments(analyze)
    analyze.add_argument(
        "--checker-max-ops",
        type=int,
        default=CheckBudget().max_ops,
        help="the linearizability search gives up on a topic past this many operations "
        "(topics whose write values repeat; unique values are decided without a cap)",
    )
    analyze.add_argument(
        "--checker-max-seconds",
        type=float,
        default=CheckBudget().max_seconds,
        help="... or past this many seconds on one topic (its verdict: unknown)",
    )
    sim = commands.add_parser("simulate", help="write simulated histories")
    sim.add_argument("--brokers", type=int, default=DEFAULTS.brokers, help="simulated brokers")
    sim.add_argument("--topics", type=int, default=DEFAULTS.topics, help="simulated topics")
    sim.add_argument(
        "--reads",
        type=int,
        default=DEFAULTS.reads,
        help="route reads of all simulated clients over the run",
    )
    sim.add_argument(
        "--mode",
        choices=(MODE_EVENTUAL, MODE_RAFT, MODES_BOTH),
        default=MODES_BOTH,
        help="which design to simulate, or both",
    )
    sim.add_argument(
        "--scenario", choices=SCENARIOS, default=SCENARIO_ASYMMETRIC, help="the fault to simulate"
    )
    sim.add_argument("--seed", type=int, default=DEFAULTS.seed, help="seeds the whole run")
    sim.add_argument(
        "--sample-topics",
        type=int,
        default=DEFAULTS.sample_topics,
        help="topics whose state on every node is sampled through the run",
    )
    sim.add_argument(
        "--out", required=True, type=Path, help="the folder the run's history is written to"
    )
    sim.add_argument(
        "--calibrate-from",
        type=Path,
        default=None,
        help="real run(s) to measure the timing parameters from (Spark), or a "
        "calibration.json written by `calibrate`",
    )
    sim.add_argument(
        "--calibrate-timings",
        action="store_true",
        help="also take the poll/heartbeat/timeout/scan periods from the runs "
        "(the compressed real setup) instead of RocketMQ's defaults",
    )
    _spark_arguments(sim)
    cal = commands.add_parser("calibrate", help="measure the simulator's timings from runs")
    cal.add_argument(
        "--history",
        required=True,
        type=Path,
        help="a real run directory, or a directory of run directories",
    )
    cal.add_argument("--out", required=True, type=Path, help="the calibration JSON to write")
    _spark_arguments(cal)
    return parser


def run_analyze(args: argparse.Namespace) -> int:
    """Analyze, write the report (tables, plots, ``summary.md``); print a line per Spark
    job on stderr and, last on stdout, each mode's verdict as JSON."""
    from spark_jobs.analysis import analyze
    from spark_jobs.dataset import DATASET_DIR_NAME
    from spark_jobs.report_folder import write_report
    from spark_jobs.session import get_spark

    began = time.monotonic()

    def say(text: str, _finished: bool = False) -> None:
        print(f"[{time.monotonic() - began:7.1f} s] {text}", file=sys.stderr, flush=True)

    say("Spark session ...")
    spark = get_spark(args.spark_master, verbose=args.spark_verbose)
    budget = CheckBudget(max_ops=args.checker_max_ops, max_seconds=args.checker_max_seconds)
    tables, seconds = analyze(
        spark, args.history, budget, on_job=say, dataset_dir=Path(args.out) / DATASET_DIR_NAME
    )
    seconds["total_with_startup"] = round(time.monotonic() - began, 3)
    summary = write_report(args.out, tables, seconds, args.history)
    say(f"report: {summary}")
    overall = {row["mode"]: row["verdict"] for row in tables["overall"]}
    print(json.dumps({"overall": overall, "seconds": seconds}))
    return 0


def run_simulate(args: argparse.Namespace) -> int:
    """Simulate one or both modes; print each run's metadata summary as JSON lines."""
    modes = (MODE_EVENTUAL, MODE_RAFT) if args.mode == MODES_BOTH else (args.mode,)
    base = SimConfig(
        brokers=args.brokers,
        topics=args.topics,
        reads=args.reads,
        seed=args.seed,
        scenario=args.scenario,
        sample_topics=args.sample_topics,
    )
    calibration = None
    if args.calibrate_from is not None:
        from spark_jobs.calibrate import load_calibration

        spark = None
        if not args.calibrate_from.is_file():
            from spark_jobs.session import get_spark

            spark = get_spark(args.spark_master, verbose=args.spark_verbose)
        calibration = load_calibration(args.calibrate_from, spark)
        base = replace(base, calibration_source=str(args.calibrate_from))
    for mode in modes:
        config = replace(base, mode=mode)
        if calibration is not None:
            try:
                config = calibration.apply(config, timings=args.calibrate_timings)
            except ValueError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
        meta = simulate(config, args.out)
        print(json.dumps({"run_id": meta.run_id, "timings": meta.timings}))
    return 0


def run_calibrate(args: argparse.Namespace) -> int:
    """Measure the timing parameters, write them as JSON, print them."""
    from spark_jobs.calibrate import calibrate
    from spark_jobs.session import get_spark

    calibration = calibrate(get_spark(args.spark_master, verbose=args.spark_verbose), args.history)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(calibration.to_json() + "\n")
    print(calibration.to_json())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    args = _parser().parse_args(argv)
    if args.command == "analyze":
        return run_analyze(args)
    if args.command == "calibrate":
        return run_calibrate(args)
    return run_simulate(args)


if __name__ == "__main__":
    sys.exit(main())
