"""Command line: ``analyze`` run histories with Spark, ``simulate`` both designs.

    python -m spark_jobs.cli analyze --history DIR --out DIR [--spark-master URL]
    python -m spark_jobs.cli simulate --brokers N --topics N --reads N \
        --mode eventual|raft|both --seed S --out DIR [--scenario NAME]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from spark_jobs.checker import CheckBudget
from spark_jobs.simulate import (
    MODE_EVENTUAL,
    MODE_RAFT,
    SCENARIO_ASYMMETRIC,
    SCENARIOS,
    SimConfig,
    simulate,
)

MODES_BOTH = "both"
DEFAULTS = SimConfig()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spark_jobs.cli", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    analyze = commands.add_parser("analyze", help="run every Spark job over histories")
    analyze.add_argument("--history", required=True, type=Path,
                         help="a run directory, or a directory of run directories")
    analyze.add_argument("--out", required=True, type=Path)
    analyze.add_argument("--spark-master", default=None, help="an existing Spark master URL")
    analyze.add_argument("--checker-max-ops", type=int, default=CheckBudget().max_ops)
    analyze.add_argument("--checker-max-seconds", type=float, default=CheckBudget().max_seconds)
    sim = commands.add_parser("simulate", help="write simulated histories")
    sim.add_argument("--brokers", type=int, default=DEFAULTS.brokers)
    sim.add_argument("--topics", type=int, default=DEFAULTS.topics)
    sim.add_argument("--reads", type=int, default=DEFAULTS.reads)
    sim.add_argument("--mode", choices=(MODE_EVENTUAL, MODE_RAFT, MODES_BOTH), default=MODES_BOTH)
    sim.add_argument("--scenario", choices=SCENARIOS, default=SCENARIO_ASYMMETRIC)
    sim.add_argument("--seed", type=int, default=DEFAULTS.seed)
    sim.add_argument("--sample-topics", type=int, default=DEFAULTS.sample_topics)
    sim.add_argument("--out", required=True, type=Path)
    return parser


def run_analyze(args: argparse.Namespace) -> int:
    """Analyze, write tables/plots/summary, print the overall verdict as JSON."""
    from spark_jobs.metrics import analyze
    from spark_jobs.report import write_markdown, write_plots, write_tables
    from spark_jobs.session import get_spark

    began = time.monotonic()
    spark = get_spark(args.spark_master)
    budget = CheckBudget(max_ops=args.checker_max_ops, max_seconds=args.checker_max_seconds)
    tables, seconds = analyze(spark, args.history, budget)
    write_tables(args.out, tables)
    write_plots(args.out, tables)
    seconds["total_with_startup"] = round(time.monotonic() - began, 3)
    write_markdown(args.out, tables, seconds)
    print(json.dumps({"overall": tables["overall"][0]["verdict"], "seconds": seconds}))
    return 0


def run_simulate(args: argparse.Namespace) -> int:
    """Simulate one or both modes; print each run's metadata summary as JSON lines."""
    modes = (MODE_EVENTUAL, MODE_RAFT) if args.mode == MODES_BOTH else (args.mode,)
    base = SimConfig(brokers=args.brokers, topics=args.topics, reads=args.reads,
                     seed=args.seed, scenario=args.scenario, sample_topics=args.sample_topics)
    for mode in modes:
        meta = simulate(replace(base, mode=mode), args.out)
        print(json.dumps({"run_id": meta.run_id, "timings": meta.timings}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    args = _parser().parse_args(argv)
    if args.command == "analyze":
        return run_analyze(args)
    return run_simulate(args)


if __name__ == "__main__":
    sys.exit(main())
