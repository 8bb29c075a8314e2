"""Figures of the experiment report: matplotlib on the Agg canvas, written as PNG and SVG.

Every figure compares the consistency modes of the runs in a report: one colour and line
style per mode (``eventual`` red and solid, ``raft`` blue and dashed, drawn on top so equal
curves stay visible), and the series are named ``mode`` or, when the tables hold several
scenarios, ``mode/scenario``. The input is the ``tables`` of ``spark_jobs.analysis.analyze``
(plain rows); a figure whose table is missing or empty is left out.

No pyplot: figures are plain :class:`~matplotlib.figure.Figure` objects on their own
:class:`~matplotlib.backends.backend_agg.FigureCanvasAgg`, so there is no global figure
registry and no process-wide backend switch: threads (Django requests) each draw
their own figures.
Styles are passed to each artist instead of through the global ``rcParams``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    LogLocator,
    NullLocator,
)

from experiment_history.schema import FAULT_KILL_BROKER, US_PER_MS
from experiment_reports.report import PLOT_NAMES
from experiment_reports.t_buckets import t_bucket_label

Row = Mapping[str, Any]
Tables = Mapping[str, Sequence[Row]]
Series = dict[tuple[str, str], list[tuple[float, float]]]  # (mode, scenario) -> (x, y)

FIGURE_NAMES = PLOT_NAMES
FIGSIZE_IN = (7.5, 4.6)
PNG_DPI = 120
MODE_STYLES: dict[str, dict[str, Any]] = {
    "eventual": {
        "color": "#d62728",
        "linestyle": "-",
        "linewidth": 2.4,
        "marker": "o",
        "markersize": 8,
        "markerfacecolor": "none",
        "zorder": 3,
    },
    "raft": {
        "color": "#1f77b4",
        "linestyle": "--",
        "linewidth": 1.6,
        "marker": "s",
        "markersize": 4.5,
        "zorder": 4,
    },
}
OTHER_COLORS = ("#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf")
SCENARIO_MARKERS = ("o", "s", "^", "D", "v", "P")
NODE_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d")
FAULT_COLORS = {
    "asymmetric_partition": "#ff7f0e",
    "partition": "#ff7f0e",
    FAULT_KILL_BROKER: "#7f7f7f",
    "kill_namesrv": "#9467bd",
    "leader_kill": "#8c564b",
}
FAULT_ALPHA = 0.18
NODE_LINE_WIDTH = 1.8
NODE_PANEL_WIDTH_IN = 2.6  # divergence: one panel per node, at least this wide
PROBABILITY_PAD = 0.15  # y axes of probabilities: 15% of (1 - lowest value) below it
PROBABILITY_MIN_SPAN = 0.02
MS_TICK = 1  # a millisecond stamp difference d means the read took less than d + 1 ms
LEGEND_FONT = 9
SPARSE_READS = 30  # t-visibility buckets with fewer reads get an n= note
MINUS = "\N{MINUS SIGN}"


# ------------------------------------------------------------------------------- public


def build_figures(tables: Tables) -> dict[str, Figure]:
    """The report's figures by name (the file stem), in :data:`FIGURE_NAMES` order; those
    without data are left out (no broker kill: no ``stale_route_window``)."""
    builders = {
        "t_visibility": lambda: _t_visibility(tables.get("t_visibility", ())),
        "k_staleness": lambda: _k_staleness(tables.get("k_staleness", ())),
        "divergence_timeline": lambda: _divergence_timeline(
            tables.get("divergence_timeline", ()), tables.get("fault_windows", ())
        ),
        "read_latency_cdf": lambda: _read_latency_cdf(tables.get("read_latency_cdf", ())),
        "stale_route_window": lambda: _stale_route_window(tables.get("stale_route_by_node", ())),
    }
    figures: dict[str, Figure] = {}
    for name in FIGURE_NAMES:
        figure = builders[name]()
        if figure is not None:
            figures[name] = figure
    return figures


def write_plots(out_dir: Path | str, tables: Tables) -> list[Path]:
    """Write ``<name>.png`` and ``<name>.svg`` for every figure; return the PNG paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, figure in build_figures(tables).items():
        png = out / f"{name}.png"
        figure.savefig(png, format="png", dpi=PNG_DPI, metadata={"Software": None})
        figure.savefig(out / f"{name}.svg", format="svg", metadata={"Date": None})
        figure.clear()  # free the artists now; no registry holds the figure
        written.append(png)
    return written


# ------------------------------------------------------------------------------ helpers


def _new_figure(rows: int = 1, height_in: float | None = None) -> tuple[Figure, list[Axes]]:
    width, height = FIGSIZE_IN
    figure = Figure(figsize=(width, height_in or height), layout="constrained")
    FigureCanvasAgg(figure)  # attaches itself: savefig draws with Agg
    axes = figure.subplots(rows, 1, sharex=True, sharey=True, squeeze=False)
    return figure, [row[0] for row in axes]


def _scenarios(rows: Iterable[Row]) -> list[str]:
    return sorted({str(row.get("scenario", "")) for row in rows})


def _label(mode: str, scenario: str, many_scenarios: bool) -> str:
    return f"{mode}/{scenario}" if many_scenarios else mode


def _series(rows: Sequence[Row], x: str, y: str) -> Series:
    """(mode, scenario) -> points sorted by x; rows without a value are skipped."""
    series: Series = defaultdict(list)
    for row in rows:
        if row.get(x) is None or row.get(y) is None:
            continue
        key = (str(row.get("mode", "")), str(row.get("scenario", "")))
        series[key].append((float(row[x]), float(row[y])))
    return {key: sorted(points) for key, points in sorted(series.items())}


def _mode_style(mode: str, scenario: str, scenarios: Sequence[str]) -> dict[str, Any]:
    """Colour and line style per mode; when several scenarios share a figure, the marker
    tells the scenario."""
    style = dict(MODE_STYLES.get(mode, {}))
    if not style:  # a mode this module does not know: a stable colour from its name
        color = OTHER_COLORS[sum(map(ord, mode)) % len(OTHER_COLORS)]
        style = {
            "color": color,
            "linestyle": "-.",
            "linewidth": 1.8,
            "marker": "^",
            "markersize": 6,
            "zorder": 2,
        }
    if len(scenarios) > 1:
        style["marker"] = SCENARIO_MARKERS[scenarios.index(scenario) % len(SCENARIO_MARKERS)]
    return style


def _legend_below(
    figure: Figure, axes: Axes | None = None, extra: Sequence[tuple[Any, str]] = ()
) -> None:
    """One figure legend under the plot area (never over the data); ``extra`` adds
    (handle, label) pairs after the plotted ones."""
    handles: list[Any] = []
    labels: list[str] = []
    for ax in [axes] if axes is not None else figure.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    handles += [handle for handle, _ in extra]
    labels += [label for _, label in extra]
    if handles:
        figure.legend(
            handles,
            labels,
            loc="outside lower center",
            ncols=min(len(labels), 4),
            fontsize=LEGEND_FONT,
            frameon=False,
        )


def _probability_axis(ax: Axes, label: str, values: Sequence[float]) -> None:
    """y from a bit below the lowest plotted value to just above 1.0, so a difference of a
    few per cent is visible and points at 1.0 are not hidden under the frame; the label
    says so when the axis does not start at 0."""
    low = min(values, default=0.0)
    span = max((1.0 - low) * (1 + PROBABILITY_PAD), PROBABILITY_MIN_SPAN)
    bottom = max(0.0, 1.0 - span)
    ax.set_ylim(bottom, 1.0 + (1.0 - bottom) * 0.04)
    ax.yaxis.set_major_formatter(_percent_formatter())
    cut = f"\n(axis starts at {100 * bottom:.3g} %, not 0)" if bottom > 0 else ""
    ax.set_ylabel(f"{label} (%){cut}")


def _percent_formatter() -> FuncFormatter:
    """Shares on an axis as whole-looking percentages: 0%, 12.5%, 100% (never -0%)."""
    return FuncFormatter(lambda v, _pos: f"{round(100 * v, 6) + 0.0:g}%")  # + 0.0: no -0


# ------------------------------------------------------------------------------ figures


def _t_visibility(rows: Sequence[Row]) -> Figure | None:
    series = _series(rows, "t_bucket_ms", "p_fresh")
    if not series:
        return None
    # One slot per bucket that holds reads, named as the report's table names it.
    lowers = sorted({x for points in series.values() for x, _ in points})
    slot = {lower: float(index) for index, lower in enumerate(lowers)}
    labels = [t_bucket_label(lower) for lower in lowers]
    figure, (ax,) = _new_figure()
    scenarios = _scenarios(rows)
    for (mode, scenario), points in series.items():
        ax.plot(
            [slot[x] for x, _ in points],
            [y for _, y in points],
            label=_label(mode, scenario, len(scenarios) > 1),
            **_mode_style(mode, scenario, scenarios),
        )
    _mark_sparse_points(ax, rows, slot)
    ax.xaxis.set_major_locator(FixedLocator(list(slot.values())))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _slot_label(labels, v)))
    ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    ax.set_xlim(-0.5, len(lowers) - 0.5)
    ax.set_xlabel(t_visibility_caption(labels))
    ax.set_title("t-visibility: share of route reads returning the latest write")
    _probability_axis(
        ax, "reads returning the latest write", [y for points in series.values() for _, y in points]
    )
    ax.grid(True, which="major", alpha=0.3)
    _legend_below(figure, ax)
    return figure


def t_visibility_caption(labels: Sequence[str]) -> str:
    """The x label of t-visibility, naming the first and last bucket actually drawn."""
    span = labels[0] if len(labels) == 1 else f"{labels[0]} to {labels[-1]}"
    return (
        f"time from the write to the read's start, in buckets (lower edge included, upper "
        f"excluded;\none slot per bucket with reads, not to scale): {span}"
    )


def _slot_label(labels: Sequence[str], position: float) -> str:
    index = round(position)
    return labels[index] if 0 <= index < len(labels) else ""


def _mark_sparse_points(ax: Axes, rows: Sequence[Row], slot: Mapping[float, float]) -> None:
    """Write ``n=<reads>`` under buckets with few reads (a share of 4 reads is noise)."""
    seen = set()
    for row in rows:
        reads, share = row.get("reads"), row.get("p_fresh")
        if reads is None or share is None or reads >= SPARSE_READS:
            continue
        spot = (slot[float(row["t_bucket_ms"])], float(share), int(reads))
        if spot not in seen:  # equal points of two modes: one note
            seen.add(spot)
            ax.annotate(
                f"n={spot[2]} reads",
                spot[:2],
                xytext=(7, -11),
                textcoords="offset points",
                fontsize=7,
                color="0.3",
            )


def _k_staleness(rows: Sequence[Row]) -> Figure | None:
    series = _series(rows, "k", "p_within_k")
    if not series:
        return None
    figure, (ax,) = _new_figure()
    scenarios = _scenarios(rows)
    for (mode, scenario), points in series.items():
        ax.plot(
            [x for x, _ in points],
            [y for _, y in points],
            label=_label(mode, scenario, len(scenarios) > 1),
            **_mode_style(mode, scenario, scenarios),
        )
    ks = sorted({x for points in series.values() for x, _ in points})
    ax.xaxis.set_major_locator(FixedLocator(ks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.set_xlabel("k (versions behind the latest write; linear)")
    ax.set_title("k-staleness: share of route reads at most k versions old")
    _probability_axis(
        ax, "reads at most k versions old", [y for points in series.values() for _, y in points]
    )
    ax.grid(True, alpha=0.3)
    _legend_below(figure, ax)
    return figure


def _divergence_timeline(rows: Sequence[Row], faults: Sequence[Row]) -> Figure | None:
    """Small multiples: a row per run, a column per node, so no node's line can hide
    another's (equal shares of two nodes would draw one line over the other)."""
    if not rows:
        return None
    runs = sorted({(str(r["mode"]), str(r["scenario"]), str(r["run_id"])) for r in rows})
    many_scenarios = len({scenario for _, scenario, _ in runs}) > 1
    labels = [_label(mode, scenario, many_scenarios) for mode, scenario, _ in runs]
    titles = [
        f"{label} ({run_id})" if labels.count(label) > 1 else label
        for label, (_, _, run_id) in zip(labels, runs, strict=True)
    ]
    nodes = sorted({str(r["node"]) for r in rows})
    top = max(float(r["diverged_share"] or 0.0) for r in rows)
    y_top = min(1.05, max(top * 1.15, 0.05))
    figure, grid = _grid_figure(len(runs), len(nodes))
    for axes, (_mode, _scenario, run_id), title in zip(grid, runs, titles, strict=True):
        mine = [r for r in rows if r["run_id"] == run_id]
        for index, (ax, node) in enumerate(zip(axes, nodes, strict=True)):
            _shade_faults(ax, [f for f in faults if f.get("run_id") == run_id])
            _node_panel(ax, [r for r in mine if r["node"] == node], node, index)
            ax.set_title(f"{title} · node {node}", loc="left", fontsize=9)
            ax.grid(True, alpha=0.3)
    grid[0][0].set_ylim(-0.03 * y_top, y_top)
    grid[0][0].yaxis.set_major_formatter(_percent_formatter())
    with_faults = {str(f.get("run_id")) for f in faults} & {run_id for _, _, run_id in runs}
    origin = (
        "the run's first fault started"
        if len(with_faults) == len(runs)
        else "the run started"
        if not with_faults
        else "the run's first fault started (runs without faults: since they started)"
    )
    # Under the middle panel, not a figure-wide label: that one collides with the legend.
    grid[-1][len(nodes) // 2].set_xlabel(
        f"time since {origin} (s); one sample per sampling round", fontsize=10
    )
    figure.supylabel("sampled topics where the node\ndiffers from the majority (%)", fontsize=10)
    figure.suptitle(
        "Divergence: per node, share of topics answered differently than the majority", fontsize=11
    )
    _legend_below(figure)
    return figure


def _grid_figure(rows: int, columns: int) -> tuple[Figure, list[list[Axes]]]:
    width = max(FIGSIZE_IN[0], NODE_PANEL_WIDTH_IN * columns)
    figure = Figure(figsize=(width, 1.2 + 1.9 * rows), layout="constrained")
    FigureCanvasAgg(figure)  # attaches itself: savefig draws with Agg
    axes = figure.subplots(rows, columns, sharex=True, sharey=True, squeeze=False)
    return figure, [list(row) for row in axes]


def _node_panel(ax: Axes, rows: Sequence[Row], node: str, index: int) -> None:
    """One node's divergence over time in its own panel; a note when it never diverged."""
    points = sorted((float(r["t_ms"]) / 1000, float(r["diverged_share"] or 0.0)) for r in rows)
    if points:
        ax.plot(
            [t for t, _ in points],
            [s for _, s in points],
            label=f"node {node}",
            drawstyle="steps-post",
            color=NODE_COLORS[index % len(NODE_COLORS)],
            linewidth=NODE_LINE_WIDTH,
            zorder=3,
        )
    if not any(s > 0 for _, s in points):
        ax.text(
            0.5,
            0.55,
            "never differed\nfrom the majority",
            ha="center",
            va="center",
            transform=ax.transAxes,
            fontsize=8,
            color="0.3",
        )


def _shade_faults(ax: Axes, faults: Sequence[Row]) -> None:
    """One span per distinct fault window (faults of one kind with the same window, e.g.
    the two cut-off nodes of an asymmetric partition, share one span and one label)."""
    windows: dict[tuple[str, float, float, bool], list[str]] = defaultdict(list)
    for fault in faults:
        key = (
            str(fault["kind"]),
            float(fault["start_ms"]) / 1000,
            float(fault["end_ms"]) / 1000,
            bool(fault.get("open_end")),
        )
        windows[key].append(str(fault["target"]))
    for (kind, start, end, open_end), targets in sorted(windows.items()):
        until = " (until the run ended)" if open_end else ""
        ax.axvspan(
            start,
            max(end, start),
            color=FAULT_COLORS.get(kind, "#bcbd22"),
            alpha=FAULT_ALPHA,
            linewidth=0,
            zorder=1,
            label=f"fault {kind}: {', '.join(sorted(targets))}{until}",
        )


def _read_latency_cdf(rows: Sequence[Row]) -> Figure | None:
    """Microseconds when every read had monotonic microsecond stamps (``latency_us`` with
    ``monotonic`` not false); otherwise the whole-millisecond wall-clock difference ``d``
    (``latency_ms``, or ``latency_us`` / 1,000), drawn honestly as "took less than d + 1
    ms" (a read inside one clock tick is "< 1 ms", never a made-up 0.5)."""
    micro = any(r.get("latency_us") is not None for r in rows) and all(
        r.get("monotonic", True) for r in rows
    )
    if not micro:
        rows = [
            {**r, "latency_ms": r["latency_us"] // US_PER_MS}
            if r.get("latency_ms") is None and r.get("latency_us") is not None
            else r
            for r in rows
        ]
    series = _series(rows, "latency_us" if micro else "latency_ms", "quantile")
    if not series:
        return None
    figure, (ax,) = _new_figure()
    scenarios = _scenarios(rows)
    lows, highs = [], []
    for (mode, scenario), points in series.items():
        steps = _cdf_steps(points, micro)
        style = _mode_style(mode, scenario, scenarios)
        style.update(drawstyle="steps-post", markersize=3)
        ax.plot(
            [steps[0][0], *(x for x, _ in steps)],
            [0.0, *(q for _, q in steps)],
            label=_cdf_label(rows, mode, scenario, len(scenarios) > 1, steps, micro),
            **style,
        )
        lows.append(steps[0][0])
        highs.append(steps[-1][0])
    _latency_axis(ax, min(lows), max(highs), micro)
    ax.set_ylabel("cumulative share of reads (%)")
    ax.set_ylim(0, 1.02)
    ax.yaxis.set_major_formatter(_percent_formatter())
    ax.set_title("Route read latency CDF (reads that completed, timeouts excluded)")
    ax.grid(True, which="both", alpha=0.3)
    _legend_below(figure, ax)
    return figure


def _cdf_steps(points: Sequence[tuple[float, float]], micro: bool) -> list[tuple[float, float]]:
    """(x, share) corners of the step CDF: per distinct latency its highest quantile; with
    millisecond stamps x is the bound d + 1 ms the reads stayed under."""
    top: dict[float, float] = {}
    for latency, quantile in points:
        x = max(latency, 1.0) if micro else latency + MS_TICK
        top[x] = max(top.get(x, 0.0), quantile)
    return sorted(top.items())


def _cdf_label(
    rows: Sequence[Row],
    mode: str,
    scenario: str,
    many: bool,
    steps: Sequence[tuple[float, float]],
    micro: bool,
) -> str:
    unit, bound = ("µs", "") if micro else ("ms", "< ")
    summary = ", ".join(
        f"p{round(level * 100)} {bound}{_quantile(steps, level):g} {unit}" for level in (0.5, 0.99)
    )
    reads = next(
        (r.get("reads") for r in rows if (r.get("mode"), r.get("scenario")) == (mode, scenario)),
        None,
    )
    count = f", {reads} reads" if reads is not None else ""
    return f"{_label(mode, scenario, many)} ({summary}{count})"


def _latency_axis(ax: Axes, low: float, high: float, micro: bool) -> None:
    ax.set_xscale("log")
    if high / low < 100:  # a narrow spread: still show at least two decades around it
        middle = (low * high) ** 0.5
        low, high = min(low, middle / 10), max(high, middle * 10)
    # With ms stamps nothing is below "< 1 ms": the axis does not offer a finer tick.
    ax.set_xlim(low / 1.5 if micro else MS_TICK / 1.2, high * 1.5)
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_minor_locator(LogLocator(subs=(3.0, 4.0, 6.0, 7.0, 8.0, 9.0)))
    if micro:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.set_xlabel(
            f"route read latency, complete {MINUS} invoke (µs, monotonic clock, log scale)"
        )
        return
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"< {v:g}"))
    ax.set_xlabel(
        f"route read latency, complete {MINUS} invoke (ms, log scale): the history has whole-ms\n"
        'wall-clock stamps only, so a step at "< x" counts the reads that took less than x ms'
    )


def _quantile(points: Sequence[tuple[float, float]], level: float) -> float:
    """The latency of the first (latency, quantile) point at or above ``level``."""
    for latency, quantile in sorted(points, key=lambda p: p[1]):
        if quantile >= level - 1e-9:
            return latency
    return points[-1][0]


def _stale_route_window(rows: Sequence[Row]) -> Figure | None:
    if not rows:
        return None
    scenarios = _scenarios(rows)
    keys = sorted({(str(r["mode"]), str(r["scenario"])) for r in rows})
    nodes = sorted({str(r["node"]) for r in rows})
    kills = len({(r["run_id"], r["target"], r["start_ms"]) for r in rows})
    runs = len({r["run_id"] for r in rows})
    # Per (mode, scenario, node): the longest window over its kills; never dropped wins.
    worst: dict[tuple[str, str, str], tuple[bool, float]] = {}
    for row in rows:
        key = (str(row["mode"]), str(row["scenario"]), str(row["node"]))
        never = row.get("window_ms") is None
        seconds = float(row["observed_ms"] if never else row["window_ms"]) / 1000
        worst[key] = max(worst.get(key, (False, 0.0)), (never, seconds))
    figure, (ax,) = _new_figure()
    width = 0.8 / len(keys)
    tallest = max(seconds for _, seconds in worst.values())
    for index, (mode, scenario) in enumerate(keys):
        style = _mode_style(mode, scenario, scenarios)
        label = _label(mode, scenario, len(scenarios) > 1)
        for position, node in enumerate(nodes):
            if (mode, scenario, node) not in worst:
                continue
            never, seconds = worst[(mode, scenario, node)]
            x = position - 0.4 + width * (index + 0.5)
            ax.bar(
                x,
                seconds,
                width * 0.92,
                color=style["color"],
                alpha=0.45 if never else 0.85,
                hatch="//" if never else None,
                edgecolor=style["color"],
                label=label,
            )
            text = f"never dropped\n(≥ {seconds:g} s)" if never else f"{seconds:g} s"
            ax.annotate(
                text,
                (x, seconds),
                xytext=(0, 2),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=8,
            )
    ax.set_xticks(range(len(nodes)), [f"node {n}" for n in nodes])
    ax.set_ylim(0, tallest * 1.2 or 1.0)
    ax.set_ylabel("s from the broker kill until the node's\nanswers no longer route to it")
    targets = sorted({str(r["target"]) for r in rows})
    killed = ", ".join(targets) if len(targets) <= 3 else f"{len(targets)} brokers"
    per = f"; the longest over {kills} kills in {runs} runs" if kills > runs else ""
    ax.set_title(f"Stale routes per NameServer node after killing {killed}{per}", fontsize=11)
    ax.grid(True, axis="y", alpha=0.3)
    extra = []
    if any(never for never, _ in worst.values()):
        extra.append(
            (
                Patch(facecolor="white", edgecolor="0.3", hatch="//"),
                "hatched: still routed to it at the last sample (bar = time watched)",
            )
        )
    _legend_below(figure, ax, extra)
    return figure
