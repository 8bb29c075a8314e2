"""One report folder: the tables, the plots and ``summary.md`` of an analysis.

Above both :mod:`spark_jobs.report` and :mod:`spark_jobs.plots`, so the plots can take their
names from the report and the report never imports matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spark_jobs.plots import write_plots
from spark_jobs.report import (
    COUNTEREXAMPLE_OPS,
    counterexample_operations,
    report_title,
    write_markdown,
    write_tables,
)


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
