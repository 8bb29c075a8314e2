"""One report folder: the tables, the plots and ``summary.md`` of an analysis.

The report's format is :mod:`experiment_reports.report`'s (the console reads it back);
this module adds what only the analysis has: the plots (matplotlib) and what it reads
from the runs' own files (each counterexample's operations, the report's title).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from experiment_history.runs import find_runs, iter_rows, read_meta
from experiment_history.schema import FAULTS, OPERATIONS, US_PER_MS, interval_us
from experiment_reports.report import (
    COUNTEREXAMPLE_OPS,
    Row,
    modes_in,
    write_markdown,
    write_tables,
)
from spark_jobs.plots import write_plots


def write_report(
    out_dir: Path | str,
    tables: dict[str, list[dict[str, Any]]],
    seconds: Mapping[str, float],
    history_root: Path | str,
) -> Path:
    """Everything of one report folder: tables (CSV, ``summary.json``), plots (PNG, SVG)
    and ``summary.md``; returns the Markdown file."""
    tables[COUNTEREXAMPLE_OPS] = counterexample_operations(
        history_root, tables.get("counterexamples", [])
    )
    write_tables(out_dir, tables)
    plots = write_plots(out_dir, tables)
    return write_markdown(out_dir, tables, seconds, plots, report_title(history_root))


def _route_brokers(value: str | None) -> str:
    """A recorded route (``broker:host:port:r:w:perm,...``) as its broker names."""
    if not value:
        return "(no route)"
    return ", ".join(item.split(":", 1)[0] for item in value.split(",") if item)


def counterexample_operations(
    history_root: Path | str, counterexamples: Sequence[Row]
) -> list[dict[str, Any]]:
    """The operations of every counterexample, times in µs since the run's first fault
    (negative: before it; the stamps the checker orders by), read from the runs' own
    files."""
    wanted: dict[str, dict[int, str]] = {}
    for row in counterexamples:
        for op_id in row.get("counterexample") or ():
            wanted.setdefault(str(row["run_id"]), {})[int(op_id)] = str(row["topic"])
    out = []
    for run_dir in find_runs(history_root):
        meta = read_meta(run_dir)
        ops = wanted.get(meta.run_id)
        if not ops:
            continue
        starts = [int(f["start_ms"]) for f in iter_rows(run_dir, FAULTS)]
        picked = [r for r in iter_rows(run_dir, OPERATIONS) if int(r["op_id"]) in ops]
        zero = min(starts) if starts else min((int(r["invoke_ms"]) for r in picked), default=0)
        for r in sorted(picked, key=lambda r: (ops[int(r["op_id"])], interval_us(r), r["op_id"])):
            invoke, complete = interval_us(r)
            out.append(
                {
                    "mode": meta.mode,
                    "run_id": meta.run_id,
                    "topic": ops[int(r["op_id"])],
                    "op_id": int(r["op_id"]),
                    "node": r["node"],
                    "client": r["process"],
                    "operation": r["kind"],
                    "outcome": r["outcome"],
                    "value": _route_brokers(r["value"]),
                    "invoke_us": invoke - zero * US_PER_MS,
                    "complete_us": (
                        complete - zero * US_PER_MS if int(r["complete_ms"]) >= 0 else None
                    ),
                }
            )
    return out


def report_title(history_root: Path | str) -> str:
    """``<scenario>: eventual vs raft (seed S)`` from the runs' ``run.json``."""
    metas = [read_meta(d) for d in find_runs(history_root)]
    if not metas:
        return "Consistency analysis"
    scenarios = sorted({m.scenario for m in metas})
    modes = modes_in({"runs": [{"mode": m.mode} for m in metas]})
    seeds = sorted({m.seed for m in metas})
    word = "seed" if len(seeds) == 1 else "seeds"
    return f"{', '.join(scenarios)}: {' vs '.join(modes)} ({word} {', '.join(map(str, seeds))})"
