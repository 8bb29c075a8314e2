"""The report figures (spark_jobs.plots) and the Spark tables behind the new ones.

The unit tests draw hand-made tables (plain dicts, no Spark). The slow tests run the new
jobs of ``spark_jobs.metrics`` on the hand-built runs of ``conftest`` (numbers worked out
by hand from its rows) and on a three-node run built here, then plot the result.
"""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Polygon, Rectangle
from PIL import Image

from experiment_history.runs import HistoryWriter, RunMeta
from experiment_reports.report import side_by_side
from spark_jobs.plots import FIGURE_NAMES, build_figures, write_plots

MODES = ("eventual", "raft")
SCENARIO = "asymmetric_partition"
EDGES = (0, 100, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 300_000)
P_FRESH = {
    "eventual": (1.0, 1.0, 0.99, 0.98, 0.97, 0.96, 0.95, 0.94, 0.93, 0.95, 0.96, 0.97),
    "raft": (1.0,) * len(EDGES),
}
FAULT_S = (0.0, 360.0)
SPARSE_BUCKET_MS, SPARSE_READS = 5_000, 4


def _tables() -> dict[str, list[dict[str, Any]]]:
    """One report of the eventual and the raft run of one scenario, all values >= 0.9."""
    runs = {mode: f"sim-{mode}-s1" for mode in MODES}
    t_vis = [
        {
            "mode": m,
            "scenario": SCENARIO,
            "t_bucket_ms": t,
            "p_fresh": p,
            "reads": SPARSE_READS if t == SPARSE_BUCKET_MS else 200,
        }
        for m in MODES
        for t, p in zip(EDGES, P_FRESH[m], strict=True)
    ]
    k_stale = [
        {
            "mode": m,
            "scenario": SCENARIO,
            "reads": 100,
            "k": k,
            "p_within_k": 1.0 if m == "raft" else 0.95 + 0.01 * i,
        }
        for m in MODES
        for i, k in enumerate((0, 1, 2, 3, 5, 10))
    ]
    timeline = [
        {
            "run_id": runs[m],
            "mode": m,
            "scenario": SCENARIO,
            "node": f"ns{n}",
            "t_ms": t,
            "topics": 100,
            "diverged_share": 0.13
            if m == "eventual" and n == 0 and 110_000 <= t < 380_000
            else 0.0,
        }
        for m in MODES
        for n in range(3)
        for t in range(-60_000, 540_000, 5_000)
    ]
    windows = [
        {
            "run_id": runs[m],
            "mode": m,
            "scenario": SCENARIO,
            "kind": "asymmetric_partition",
            "target": f"ns{n}",
            "start_ms": 0,
            "end_ms": 360_000,
            "open_end": False,
        }
        for m in MODES
        for n in (0, 1)
    ]
    cdf = [
        {
            "mode": m,
            "scenario": SCENARIO,
            "reads": 500,
            "quantile": q / 100,
            "latency_ms": (1 + q // 10) * (3 if m == "raft" else 1),
        }
        for m in MODES
        for q in range(1, 101)
    ]
    stale = [
        {
            "run_id": runs[m],
            "mode": m,
            "scenario": SCENARIO,
            "target": "broker-00002",
            "start_ms": 60_000,
            "node": f"ns{n}",
            "observed_ms": 535_000,
            "window_ms": None if (m, n) == ("eventual", 2) else 95_000 + 5_000 * n,
        }
        for m in MODES
        for n in range(3)
    ]
    return {
        "t_visibility": t_vis,
        "k_staleness": k_stale,
        "divergence_timeline": timeline,
        "fault_windows": windows,
        "read_latency_cdf": cdf,
        "stale_route_by_node": stale,
        "divergence": [{"mode": "raft", "scenario": SCENARIO, "topics": 1}],
    }


@pytest.fixture(scope="module")
def figures() -> dict[str, Figure]:
    return build_figures(_tables())


def _drawn(figure: Figure) -> Figure:
    figure.canvas.draw()
    return figure


def _legend_clear_of_axes(figure: Figure, ax: Axes) -> None:
    """The figure has a legend, the axes none of its own, and the legend's box does not
    reach into the axes' data area."""
    _drawn(figure)
    assert ax.get_legend() is None
    assert figure.legends, "no legend"
    for legend in figure.legends:
        box = legend.get_window_extent()
        assert not box.overlaps(ax.get_window_extent()), (box, ax.get_window_extent())


def _probability_axis_ok(ax: Axes, lowest: float) -> None:
    bottom, top = ax.get_ylim()
    assert 0 < bottom < lowest
    assert top >= 1.0
    assert "%, not 0" in ax.get_ylabel()  # the label admits the cut axis, in per cent
    _drawn(ax.figure)
    ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert ticks and all(t.endswith("%") for t in ticks)


# ----------------------------------------------------------------------- unit tests


def test_it_builds_every_figure_by_name(figures):
    assert (
        list(figures)
        == list(FIGURE_NAMES)
        == [
            "t_visibility",
            "k_staleness",
            "divergence_timeline",
            "read_latency_cdf",
            "stale_route_window",
        ]
    )


def test_it_leaves_out_figures_without_data():
    tables = _tables()
    tables["stale_route_by_node"] = []  # no broker kill in the history
    del tables["read_latency_cdf"]
    assert list(build_figures(tables)) == ["t_visibility", "k_staleness", "divergence_timeline"]
    assert build_figures({}) == {}


def _tick_texts(figure: Figure, ax: Axes) -> list[str]:
    _drawn(figure)
    return [t.get_text() for t in ax.get_xticklabels() if t.get_text()]


def test_t_visibility_names_its_buckets_as_the_report_table_does(figures):
    figure = figures["t_visibility"]
    [ax] = figure.axes
    table = side_by_side(_tables()["t_visibility"], list(MODES), ("t_bucket_ms",))
    # One definition: the plot's ticks are the table's bucket cells, in the same order.
    assert _tick_texts(figure, ax) == [row["after the write"] for row in table]
    assert _tick_texts(figure, ax)[:3] == ["0-100 ms", "100-500 ms", "0.5-1 s"]
    assert _tick_texts(figure, ax)[-1] == "≥ 300 s"
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == set(MODES)
    for mode, line in lines.items():
        assert list(line.get_ydata()) == list(P_FRESH[mode])
        assert line.get_marker() not in (None, "None", "")
    _probability_axis_ok(ax, lowest=0.93)


def test_t_visibility_caption_names_only_buckets_on_its_axis():
    tables = _tables()
    tables["t_visibility"] = [r for r in tables["t_visibility"] if r["t_bucket_ms"] <= 2_000]
    figure = build_figures(tables)["t_visibility"]
    [ax] = figure.axes
    ticks = _tick_texts(figure, ax)
    assert ticks == ["0-100 ms", "100-500 ms", "0.5-1 s", "1-2 s", "2-5 s"]
    caption = ax.get_xlabel()
    assert caption.endswith("0-100 ms to 2-5 s")
    assert "300" not in caption and "600" not in caption


def test_t_visibility_notes_the_read_count_of_sparse_buckets(figures):
    [ax] = figures["t_visibility"].axes
    notes = sorted((t.get_text(), t.xy) for t in ax.texts if t.get_text().startswith("n="))
    slot = EDGES.index(SPARSE_BUCKET_MS)  # the 5-10 s bucket, its own slot on the axis
    assert notes == [
        ("n=4 reads", (float(slot), P_FRESH[m][slot]))
        for m in sorted(MODES, key=lambda m: P_FRESH[m][5])
    ]


def test_t_visibility_legend_is_outside_the_data_area(figures):
    _legend_clear_of_axes(figures["t_visibility"], figures["t_visibility"].axes[0])


def test_k_staleness_zooms_on_the_probabilities_and_labels_k(figures):
    figure = figures["k_staleness"]
    [ax] = figure.axes
    assert "k" in ax.get_xlabel() and "linear" in ax.get_xlabel()
    assert ax.get_ylabel().startswith("reads at most k versions old (%)")
    assert [t for t in ax.get_xticks()] == [0, 1, 2, 3, 5, 10]
    _probability_axis_ok(ax, lowest=0.95)
    _legend_clear_of_axes(figure, ax)


def test_a_probability_axis_starts_at_zero_when_values_reach_zero():
    tables = _tables()
    tables["t_visibility"][0]["p_fresh"] = 0.0
    figure = build_figures(tables)["t_visibility"]
    assert figure.axes[0].get_ylim()[0] == 0.0
    assert "not 0" not in figure.axes[0].get_ylabel()


def _span_x_ranges(ax: Axes) -> list[tuple[float, float]]:
    """The x data range of each shaded span (axvspan: a Rectangle, a Polygon before 3.9)."""
    spans = []
    for patch in ax.patches:
        if isinstance(patch, Rectangle | Polygon):
            xs = ax.transData.inverted().transform(patch.get_verts())[:, 0]
            spans.append((round(float(xs.min()), 6), round(float(xs.max()), 6)))
    return spans


def test_divergence_timeline_gives_every_node_of_every_run_its_own_panel(figures):
    figure = figures["divergence_timeline"]
    axes = figure.axes
    nodes = ["ns0", "ns1", "ns2"]
    assert [ax.get_title(loc="left") for ax in axes] == [
        f"{mode} · node {node}" for mode in MODES for node in nodes
    ]
    for ax in axes:
        # One line per panel: a node whose shares equal another's cannot be drawn over.
        [line] = ax.get_lines()
        assert ax.get_title(loc="left").endswith(line.get_label())
        assert len(line.get_xdata()) > 1
        # Both cut-off nodes share one window: one span, not two stacked ones.
        assert _span_x_ranges(ax) == [FAULT_S]
    xlabel = axes[-2].get_xlabel()  # under the bottom row's middle panel
    assert "s)" in xlabel and "fault" in xlabel
    [eventual_ns0] = axes[0].get_lines()
    assert max(eventual_ns0.get_ydata()) == pytest.approx(0.13)
    assert axes[0].get_ylim()[1] < 0.5  # zoomed on the data, not 0..1 with a flat line
    _drawn(figure)
    assert [t.get_text() for t in axes[0].get_yticklabels() if t.get_text()][-1].endswith("%")
    quiet = [ax for ax in axes if ax.texts]  # the flat nodes say so in their panel
    assert len(quiet) == 5 and all("never differed" in ax.texts[0].get_text() for ax in quiet)
    _legend_clear_of_axes(figure, axes[-1])
    _legend_clear_of_axes(figure, axes[0])


def _cdf_rows(column: str, latencies: list[int]) -> list[dict[str, Any]]:
    """One mode's CDF rows: quantile i/len of ``latencies`` (sorted) at each value."""
    steps = len(latencies)
    return [
        {"mode": "raft", "scenario": SCENARIO, "reads": 500, "quantile": (i + 1) / steps, column: v}
        for i, v in enumerate(sorted(latencies))
    ]


def test_read_latency_cdf_from_millisecond_stamps_is_a_step_of_upper_bounds(figures):
    [ax] = figures["read_latency_cdf"].axes
    assert ax.get_xscale() == "log"
    assert "whole-ms" in ax.get_xlabel() and "less than x ms" in ax.get_xlabel()
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] >= 1.0
    lines = ax.get_lines()
    assert sorted(line.get_label().split(" ")[0] for line in lines) == list(MODES)
    for line in lines:
        ys = list(line.get_ydata())
        assert ys[0] == 0.0 and ys[-1] == pytest.approx(1.0) and ys == sorted(ys)
        assert line.get_drawstyle() == "steps-post"
    raft = next(line for line in lines if line.get_label().startswith("raft"))
    # Stamps 3, 6, ..., 33 ms apart: the reads took less than 4, 7, ..., 34 ms.
    assert "p50 < 19 ms" in raft.get_label() and "p99 < 31 ms" in raft.get_label()
    assert list(raft.get_xdata())[:3] == [4.0, 4.0, 7.0]
    _legend_clear_of_axes(figures["read_latency_cdf"], ax)


def test_reads_inside_one_clock_tick_are_drawn_as_under_one_ms():
    rows = _cdf_rows("latency_ms", [0] * 60 + [1] * 30 + [2] * 10)
    figure = build_figures({"read_latency_cdf": rows})["read_latency_cdf"]
    [ax] = figure.axes
    [line] = ax.get_lines()
    assert list(line.get_xdata()) == [1.0, 1.0, 2.0, 3.0]
    assert list(line.get_ydata()) == pytest.approx([0.0, 0.6, 0.9, 1.0])
    assert "p50 < 1 ms" in line.get_label()
    assert "< 1" in _tick_texts(figure, ax) and "0.5" not in _tick_texts(figure, ax)
    assert all(t.endswith("%") for t in (x.get_text() for x in ax.get_yticklabels()) if t)


def test_read_latency_cdf_uses_microseconds_when_the_history_has_them():
    rows = _cdf_rows("latency_us", [180] * 50 + [420] * 49 + [2_500])
    figure = build_figures({"read_latency_cdf": rows})["read_latency_cdf"]
    [ax] = figure.axes
    [line] = ax.get_lines()
    assert "µs" in ax.get_xlabel() and "monotonic" in ax.get_xlabel()
    assert list(line.get_xdata()) == [180.0, 180.0, 420.0, 2_500.0]
    assert "p50 180 µs" in line.get_label() and "p99 420 µs" in line.get_label()


def test_read_latency_cdf_of_a_history_without_monotonic_stamps_is_drawn_in_ms():
    """The series is in µs either way; reads stamped in whole wall-clock ms (x 1,000)
    are drawn as the millisecond step they are, not as µs from a monotonic clock."""
    rows = [
        {**row, "monotonic": False}
        for row in _cdf_rows("latency_us", [0] * 60 + [1_000] * 30 + [2_000] * 10)
    ]
    figure = build_figures({"read_latency_cdf": rows})["read_latency_cdf"]
    [ax] = figure.axes
    [line] = ax.get_lines()
    assert "whole-ms" in ax.get_xlabel() and "monotonic" not in ax.get_xlabel()
    assert list(line.get_xdata()) == [1.0, 1.0, 2.0, 3.0]
    assert "p50 < 1 ms" in line.get_label()


def test_stale_route_window_has_a_bar_per_node_and_mode_and_marks_never_dropped(figures):
    [ax] = figures["stale_route_window"].axes
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(bars) == 6
    heights = sorted(round(bar.get_height(), 3) for bar in bars)
    assert heights == [95.0, 95.0, 100.0, 100.0, 105.0, 535.0]
    [never] = [bar for bar in bars if bar.get_hatch()]
    assert never.get_height() == 535.0  # watched for 535 s, still routed
    assert [t.get_text() for t in ax.get_xticklabels()] == ["node ns0", "node ns1", "node ns2"]
    assert "s from the broker kill" in ax.get_ylabel()
    _legend_clear_of_axes(figures["stale_route_window"], ax)


def _check_files(out: Path, pngs: list[Path], names: list[str]) -> None:
    assert pngs == [out / f"{name}.png" for name in names]
    for name in names:
        with Image.open(out / f"{name}.png") as image:
            image.verify()
        with Image.open(out / f"{name}.png") as image:
            assert image.format == "PNG"
            assert 600 <= image.width <= 2000 and 400 <= image.height <= 2000
        root = ET.parse(out / f"{name}.svg").getroot()
        assert root.tag.endswith("svg")


def test_write_plots_writes_a_png_and_an_svg_per_figure(tmp_path):
    pngs = write_plots(tmp_path / "report", _tables())
    _check_files(tmp_path / "report", pngs, list(FIGURE_NAMES))


def test_write_plots_can_run_in_several_threads_at_once(tmp_path):
    results: dict[int, list[Path]] = {}
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            results[index] = write_plots(tmp_path / str(index), _tables())
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for index in range(3):
        _check_files(tmp_path / str(index), results[index], list(FIGURE_NAMES))


# ------------------------------------------------------------------ through Spark


@pytest.mark.slow
def test_the_new_tables_from_the_hand_built_runs_and_their_plots(spark, history_root, tmp_path):
    from spark_jobs.analysis import analyze

    tables, seconds = analyze(spark, history_root)
    for name in ("divergence_timeline", "fault_windows", "read_latency_cdf", "stale_route_by_node"):
        assert name in seconds

    # r2 ("kill"): b is killed at 10000 with an open end; nodes n0/n1 answer for T:
    # 10000 B/B, 15000 A/B (1:1, no majority: both diverged), 20000 A/A, 25000 A/A.
    kill = {
        (r["node"], r["t_ms"]): (r["topics"], r["diverged_share"])
        for r in tables["divergence_timeline"]
        if r["scenario"] == "kill"
    }
    assert kill == {
        (n, t): (1, 1.0 if t == 5000 else 0.0)
        for n in ("n0", "n1")
        for t in (0, 5000, 10000, 15000)
    }
    # r1 ("fresh"): first fault at 1000; rounds every 5000 from 0; T splits 1:1 in the
    # rounds 5000, 10000 and 20000, U never: half of each node's two topics then.
    fresh = {
        (r["node"], r["t_ms"]): r["diverged_share"]
        for r in tables["divergence_timeline"]
        if r["scenario"] == "fresh"
    }
    assert fresh == {
        (n, ts - 1000): 0.5 if ts in (5000, 10000, 20000) else 0.0
        for n in ("n0", "n1")
        for ts in (0, 5000, 10000, 15000, 20000)
    }

    windows = {
        r["scenario"]: (r["kind"], r["target"], r["start_ms"], r["end_ms"], r["open_end"])
        for r in tables["fault_windows"]
    }
    # r2's open kill ends at the run's last timestamp: read 5 completes at 40002.
    assert windows == {
        "fresh": ("asymmetric_partition", "n0", 0, 2200, False),
        "kill": ("kill_broker", "b", 0, 30002, True),
    }

    # n0 routes to b last in the kill's round (10000) and drops it at 15000; n1 still at
    # 15000, dropped at 20000; the last round in the window is 25000.
    by_node = {
        r["node"]: (r["target"], r["start_ms"], r["window_ms"], r["observed_ms"])
        for r in tables["stale_route_by_node"]
    }
    assert by_node == {"n0": ("b", 10000, 5000, 15000), "n1": ("b", 10000, 10000, 15000)}

    # r5 ("lin"): three route reads taking 10, 10 and 2 ms (µs stamps from the writer).
    lin = {
        r["quantile"]: (r["reads"], r["monotonic"], r["latency_us"])
        for r in tables["read_latency_cdf"]
        if r["scenario"] == "lin"
    }
    assert len(lin) == 100
    assert lin[0.01] == lin[0.33] == (3, True, 2_000)
    assert lin[0.34] == lin[1.0] == (3, True, 10_000)

    pngs = write_plots(tmp_path, tables)
    _check_files(tmp_path, pngs, list(FIGURE_NAMES))


def _three_node_run(root: Path) -> None:
    """Three nodes, two topics, two rounds, no fault: a 2:1 split, then a 1:1:1 split of
    T while n2 skips U."""
    meta = RunMeta(run_id="m1", scenario="majority", mode="raft", seed=0, nodes=["n0", "n1", "n2"])
    values = {
        (0, "T"): ("A", "A", "B"),
        (0, "U"): ("C", "C", "C"),
        (5000, "T"): ("A", "B", ""),
        (5000, "U"): ("C", "C", None),
    }
    with HistoryWriter(root / "m1", meta) as out:
        for (ts, topic), answers in values.items():
            for node, value in enumerate(answers):
                if value is not None:
                    out.node_state((ts, f"n{node}", topic, value, -1))


@pytest.mark.slow
def test_a_node_is_diverged_when_it_differs_from_the_majority_or_there_is_none(spark, tmp_path):
    from spark_jobs.dataset import load_history
    from spark_jobs.plot_series import divergence_timeline

    _three_node_run(tmp_path)
    rows = divergence_timeline(load_history(spark, tmp_path)).collect()
    got = {(r["node"], r["t_ms"]): (r["topics"], r["diverged_share"]) for r in rows}
    assert got == {
        ("n0", 0): (2, 0.0),
        ("n1", 0): (2, 0.0),
        ("n2", 0): (2, 0.5),
        ("n0", 5000): (2, 0.5),
        ("n1", 5000): (2, 0.5),
        ("n2", 5000): (1, 1.0),
    }
