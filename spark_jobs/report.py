"""Write analysis results: JSON and CSV tables, a Markdown summary, and SVG line plots.

matplotlib is not installed in the project's environment, so the plots are hand-written
SVG (a few polylines with axes and a legend), which any browser shows.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

Row = Mapping[str, Any]
PLOT_WIDTH_PX = 640
PLOT_HEIGHT_PX = 400
PLOT_MARGIN_PX = 60
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf")
AXIS_TICKS = 5


def write_tables(out_dir: Path | str, tables: Mapping[str, Sequence[Row]]) -> None:
    """Every table as ``<name>.csv`` plus all of them in ``summary.json``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in tables.items():
        columns = list(rows[0].keys()) if rows else []
        with (out / f"{name}.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
    (out / "summary.json").write_text(json.dumps(tables, indent=2, sort_keys=True, default=str))


def markdown_table(rows: Sequence[Row]) -> str:
    """A GitHub-style Markdown table of plain rows (floats to 4 significant digits)."""
    if not rows:
        return "_no rows_\n"
    columns = list(rows[0].keys())

    def cell(value: Any) -> str:
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_markdown(out_dir: Path | str, tables: Mapping[str, Sequence[Row]],
                   seconds: Mapping[str, float]) -> Path:
    """``summary.md``: one section per table and the run time of each Spark job."""
    parts = ["# Consistency analysis\n"]
    for name, rows in tables.items():
        parts.append(f"\n## {name}\n\n{markdown_table(rows)}")
    parts.append("\n## Spark job seconds\n\n")
    parts.append(markdown_table([{"job": k, "seconds": v} for k, v in seconds.items()]))
    path = Path(out_dir) / "summary.md"
    path.write_text("".join(parts))
    return path


def series_by(rows: Sequence[Row], keys: Sequence[str], x: str,
              y: str) -> dict[str, list[tuple[float, float]]]:
    """Group rows into named (x, y) series, the name joining the ``keys`` values."""
    series: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        name = "/".join(str(row[k]) for k in keys)
        series.setdefault(name, []).append((float(row[x]), float(row[y])))
    return {name: sorted(points) for name, points in series.items()}


def svg_line_plot(series: Mapping[str, Sequence[tuple[float, float]]], title: str,
                  x_label: str, y_label: str, y_max: float | None = None) -> str:
    """A line plot as SVG text; x is spread by rank (buckets are uneven), y is linear."""
    xs = sorted({x for points in series.values() for x, _ in points})
    ys = [y for points in series.values() for _, y in points]
    top = y_max if y_max is not None else max(ys, default=1.0) or 1.0
    left, bottom = PLOT_MARGIN_PX, PLOT_HEIGHT_PX - PLOT_MARGIN_PX
    width = PLOT_WIDTH_PX - 2 * PLOT_MARGIN_PX
    height = PLOT_HEIGHT_PX - 2 * PLOT_MARGIN_PX

    def px(x: float) -> float:
        return left + (xs.index(x) / max(len(xs) - 1, 1)) * width

    def py(y: float) -> float:
        return bottom - (y / top) * height

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{PLOT_WIDTH_PX}" '
           f'height="{PLOT_HEIGHT_PX}" font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{PLOT_WIDTH_PX / 2}" y="20" text-anchor="middle" font-size="14">'
           f'{escape(title)}</text>',
           f'<line x1="{left}" y1="{bottom}" x2="{left + width}" y2="{bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{bottom}" x2="{left}" y2="{bottom - height}" stroke="black"/>',
           f'<text x="{PLOT_WIDTH_PX / 2}" y="{PLOT_HEIGHT_PX - 15}" text-anchor="middle">'
           f'{escape(x_label)}</text>',
           f'<text x="15" y="{PLOT_HEIGHT_PX / 2}" text-anchor="middle" '
           f'transform="rotate(-90 15 {PLOT_HEIGHT_PX / 2})">{escape(y_label)}</text>']
    for x in xs:
        out.append(f'<text x="{px(x):.1f}" y="{bottom + 15}" text-anchor="middle">{x:g}</text>')
    for i in range(AXIS_TICKS + 1):
        y = top * i / AXIS_TICKS
        out.append(f'<text x="{left - 5}" y="{py(y) + 4:.1f}" text-anchor="end">{y:.3g}</text>')
    for i, (name, points) in enumerate(sorted(series.items())):
        color = PALETTE[i % len(PALETTE)]
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{coords}"/>')
        out.append(f'<text x="{left + width - 150}" y="{45 + 15 * i}" fill="{color}">'
                   f'{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def write_plots(out_dir: Path | str, tables: Mapping[str, Sequence[Row]]) -> list[Path]:
    """The t-visibility and k-staleness curves, one line per mode/scenario."""
    out = Path(out_dir)
    written = []
    plots = (("t_visibility", "t_bucket_ms", "p_fresh", "t-visibility",
              "t after the write (ms, bucket lower edge)", "P(read is fresh)"),
             ("k_staleness", "k", "p_within_k", "k-staleness", "k (versions)",
              "P(read within k versions)"))
    for table, x, y, title, x_label, y_label in plots:
        rows = tables.get(table, [])
        if not rows:
            continue
        svg = svg_line_plot(series_by(rows, ("mode", "scenario"), x, y), title, x_label,
                            y_label, y_max=1.0)
        path = out / f"{table}.svg"
        path.write_text(svg)
        written.append(path)
    return written
