"""Console pages of the consistency experiments: the runs, a report per run, a timeline.

The rows come from ``ExperimentRun`` (written by ``manage.py run_experiment``); the report
reads back, with :mod:`experiment_reports`, the files the analysis wrote into the run's
analysis folder and renders them as its ``summary.md`` does, and the timeline
reads the run's Parquet history with pyarrow (no Spark in the web process). Operators may
start an experiment: the command runs detached, so the request never waits for it.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from django import forms
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from experiment_reports import report, seeds as report_seeds, text as report_text
from experiments.config import REPORT_DIR_NAME, RUNS_DIR_NAME
from namesrv_app.models import ASKED_DURATION_KEY, ExperimentRun
from namesrv_app.roles import is_operator
from namesrv_app.web.views import _context, console_view
from node.processes import manage_argv
from raftstore.vocab import MODES

REPO_ROOT = Path(__file__).resolve().parents[2]
MODE_BOTH = "both"
SEED_MIN = 0
DURATION_S_MIN = 10
DURATION_S_MAX = 600
DURATION_S_DEFAULT = 30
LIST_ROWS_MAX = 200
ANALYSIS_PREFIX = "analysis-"
TIMELINE_OPS_MAX = 2_000
TIMELINE_WIDTH_PX = 1_000
TIMELINE_LABEL_PX = 140
TIMELINE_RIGHT_PX = 30
TIMELINE_LANE_PX = 18
TIMELINE_TOP_PX = 24
TIMELINE_TICKS = 10
TIMELINE_BAR_MIN_PX = 1.0
LANE_KEYS = ("process", "node")
OUTCOME_COLORS = {"ok": "#2ca02c", "not_found": "#ff7f0e", "error": "#d62728", "timeout": "#7f7f7f"}
OTHER_COLOR = "#1f77b4"
MS_PER_S = 1000
# (analysis table, column, how the value reads, the words after it) on the list per run.
HEADLINES = (
    ("divergence", "topics_diverged_share", "share", "of topics diverged"),
    ("divergence", "longest_ms", "ms", "longest divergence"),
    ("linearizability", "not_linearizable", "count", "non-linearizable topics"),
    ("not_exist_live", "not_exist_live", "count", "TOPIC_NOT_EXIST answers for live topics"),
)


def experiments_root() -> Path:
    """Where console-launched experiments write (``NAMESRV_EXPERIMENTS_DIR`` overrides)."""
    configured = getattr(settings, "NAMESRV_EXPERIMENTS_DIR", None)
    return Path(configured) if configured else REPO_ROOT / "run" / "experiments"


# ------------------------------------------------------------------- launching


def scenario_choices() -> list[tuple[str, str]]:
    """Every scenario, by name. The scenarios bring the whole harness (PySyncObj, the
    simulated brokers): imported when the form is first shown, not at the web
    process's start (docs/BENCHMARKS.md, "start-up")."""
    from experiments.scenarios import SCENARIOS

    return [(name, name) for name in sorted(SCENARIOS)]


def _files() -> ModuleType:
    """The run's Parquet and JSON files (:mod:`namesrv_app.web.experiment_files`): pyarrow
    is imported on the first page that reads them, not at the web process's start
    (docs/BENCHMARKS.md, "start-up")."""
    from namesrv_app.web import experiment_files

    return experiment_files


class ExperimentLaunchForm(forms.Form):
    """What an operator may choose when starting an experiment from the console."""

    scenario = forms.ChoiceField(choices=scenario_choices)
    mode = forms.ChoiceField(choices=[(m, m) for m in (MODE_BOTH, *MODES)], initial=MODE_BOTH)
    seed = forms.IntegerField(min_value=SEED_MIN, initial=1)
    duration_s = forms.IntegerField(
        min_value=DURATION_S_MIN,
        max_value=DURATION_S_MAX,
        initial=DURATION_S_DEFAULT,
        label="Recording duration (s)",
        help_text="the run's wall time adds its cluster's boot, the warm-up and the teardown",
    )

    def command(self, out_root: Path) -> list[str]:
        """The ``run_experiment`` argv of the validated choices (through the project's
        command-line module, which an installed host has too)."""
        data = self.cleaned_data
        return manage_argv(
            "run_experiment",
            data["scenario"],
            "--mode",
            data["mode"],
            "--seed",
            str(data["seed"]),
            "--duration-s",
            str(data["duration_s"]),
            "--out",
            str(out_root),
            "--analyze",
        )

    def log_path(self, out_root: Path) -> Path:
        """A fresh log file name for this launch."""
        data = self.cleaned_data
        stamp = int(time.time())
        return out_root / f"console-{data['scenario']}-{data['mode']}-s{data['seed']}-{stamp}.log"


def start_detached(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session with output to ``log_path``; do not wait for it."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    # Reap the child when it ends so finished experiments leave no zombie behind.
    threading.Thread(target=proc.wait, name="experiment-reaper", daemon=True).start()
    return proc


# ------------------------------------------------------------------- list


def _headline_value(value: Any, kind: str) -> str:
    """A headline number with its unit: a share as a percentage, ms as seconds."""
    if kind == "share":
        return report_text.percent(float(value))
    if kind == "ms":
        return f"{float(value) / MS_PER_S:.1f} s"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def headline(run: ExperimentRun) -> list[dict[str, Any]]:
    """The run's headline numbers from its stored analysis (empty before analysis), each
    with its unit: ``{"value": "25 %", "label": "of topics diverged"}``."""
    analysis = (run.summary or {}).get("analysis") or {}
    out = []
    for table, column, kind, label in HEADLINES:
        rows = analysis.get(table) or []
        values = [r[column] for r in rows if isinstance(r, dict) and r.get(column) is not None]
        if values:
            out.append({"label": label, "value": _headline_value(values[0], kind)})
    return out


def asked_duration_s(run: ExperimentRun) -> float | None:
    """The recording time the run was asked for (``--duration-s``): stored on the row when
    the run starts; for rows older than that, from the run's ``run.json`` (None while
    such a run is going or when the file is gone)."""
    stored = (run.summary or {}).get(ASKED_DURATION_KEY)
    if isinstance(stored, int | float):
        return float(stored)
    try:
        value = _files().read_meta(run.out_dir).params.get("duration_s")
    except (OSError, ValueError, TypeError):
        return None
    return float(value) if isinstance(value, int | float) else None


def run_times(run: ExperimentRun) -> dict[str, Any]:
    """The asked duration and the actual wall time of a run, with what the wall time
    spent on: the recording, the warm-up, and the rest (cluster boot and teardown).

    The wall time runs from the row's start to its end, so it covers booting the run's
    own cluster, the warm-up, the recording and the teardown; the Spark analysis of a
    batch runs after its runs ended and is not in it.
    """
    wall_s = None if run.finished is None else (run.finished - run.started).total_seconds()
    timings = (run.summary or {}).get("timings") or {}
    parts = {
        name: float(timings[key]) / MS_PER_S
        for name, key in (("warm-up", "warmup_ms"), ("recording", "recorded_ms"))
        if isinstance(timings.get(key), int | float)
    }
    if wall_s is not None and parts:
        parts["cluster boot and teardown"] = max(0.0, wall_s - sum(parts.values()))
    return {
        "asked_s": asked_duration_s(run),
        "wall_s": None if wall_s is None else round(wall_s, 1),
        "parts": [(name, round(seconds, 1)) for name, seconds in parts.items()],
    }


def _list_context(
    request: HttpRequest, form: ExperimentLaunchForm | None, launched: str = ""
) -> dict[str, Any]:
    runs = list(ExperimentRun.objects.all()[:LIST_ROWS_MAX])
    rows = [
        {
            "run": r,
            "times": run_times(r),
            "headline": headline(r),
            "error": (r.summary or {}).get("error", ""),
        }
        for r in runs
    ]
    can_launch = is_operator(request.user)
    return _context(
        request,
        "experiments",
        rows=rows,
        rows_max=LIST_ROWS_MAX,
        form=(form or ExperimentLaunchForm()) if can_launch else None,
        launched=launched,
    )


@console_view()
@require_http_methods(["GET"])
def experiment_list(request: HttpRequest) -> HttpResponse:
    """Every recorded run, newest first, with its headline numbers."""
    context = _list_context(request, None, launched=request.GET.get("launched", ""))
    return render(request, "experiments/list.html", context)


@console_view(operator=True)
@require_POST
def experiment_launch(request: HttpRequest) -> HttpResponse:
    """Validate the form, start the experiment detached, and go back to the list."""
    form = ExperimentLaunchForm(request.POST)
    if not form.is_valid():
        return render(request, "experiments/list.html", _list_context(request, form), status=400)
    out_root = experiments_root()
    log_path = form.log_path(out_root)
    start_detached(form.command(out_root), log_path)
    return redirect(f"{reverse('console:experiments')}?launched={log_path.name}")


# ------------------------------------------------------------------- report


def report_dir(run: ExperimentRun) -> Path | None:
    """The analysis report that covers ``run``: the one its analysis recorded, else the
    ``report/`` beside its ``runs/`` folder, else (older layout) the newest
    ``analysis-*/report`` that links it."""
    candidates = []
    recorded = (run.summary or {}).get("report_dir")
    if isinstance(recorded, str) and recorded:
        candidates.append(Path(recorded))
    run_dir = Path(run.out_dir)
    if run_dir.parent.name == RUNS_DIR_NAME:
        candidates.append(run_dir.parent.parent / REPORT_DIR_NAME)
    for folder in candidates:
        if (folder / "summary.json").is_file():
            return folder
    parent = run_dir.parent
    if not parent.is_dir():
        return None
    found = [
        d / "report"
        for d in parent.iterdir()
        if d.name.startswith(ANALYSIS_PREFIX)
        and (d / "history" / run.run_id).exists()
        and (d / "report" / "summary.json").is_file()
    ]
    return max(found, key=lambda p: p.stat().st_mtime, default=None)


def sibling(run: ExperimentRun) -> ExperimentRun | None:
    """The other mode's newest run of the same scenario and seed, if any."""
    return (
        ExperimentRun.objects.filter(scenario=run.scenario, seed=run.seed)
        .exclude(mode=run.mode)
        .exclude(pk=run.pk)
        .order_by("-started")
        .first()
    )


def _belongs(row: dict[str, Any], run: ExperimentRun) -> bool:
    """Rows carry a run_id, or (mode, scenario) for the per-mode tables."""
    if "run_id" in row:
        return bool(row["run_id"] == run.run_id)
    return row.get("mode") == run.mode and row.get("scenario", run.scenario) == run.scenario


def pair_tables(runs: list[tuple[ExperimentRun, Path | None]]) -> dict[str, list[dict[str, Any]]]:
    """Every report table restricted to the rows of the given runs (one run per mode)."""
    loaded: dict[Path, dict[str, list[dict[str, Any]]]] = {}
    merged: dict[str, list[dict[str, Any]]] = {}
    for run, folder in runs:
        if folder is None:
            continue
        tables = loaded.setdefault(folder, report.read_tables(folder))
        for name, rows in tables.items():
            merged.setdefault(name, []).extend(r for r in rows if _belongs(r, run))
    return merged


def report_cell(value: Any, share: bool) -> str:
    """One report table cell as text; a share as a percentage (``25 %``)."""
    if share and isinstance(value, int | float) and not isinstance(value, bool):
        return report_text.percent(float(value))
    return report.cell(value)


def _grid(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Columns and text cells; a column of shares, or a side-by-side row whose measure is
    a share, shows percentages."""
    columns = list(dict.fromkeys(c for r in rows for c in r))
    return {
        "columns": columns,
        "rows": [
            [
                report_cell(
                    r.get(c), report_text.is_share(c) or report_text.is_share(str(r.get("measure")))
                )
                for c in columns
            ]
            for r in rows
        ],
    }


def report_sections(
    tables: dict[str, list[dict[str, Any]]], modes: list[str]
) -> list[dict[str, Any]]:
    """The report's tables as ``summary.md`` has them: every mode side by side, the line
    on why the modes differ, and for an empty table (or a mode without rows, or a table
    the scenario cannot produce) the sentence that says what that means."""
    sections = []
    for section in report.SECTIONS:
        rows = tables.get(section.name, [])
        shown = report.shown_section(section, tables, modes)
        absent = [m for m in modes if rows and not any(r.get("mode") == m for r in rows)]
        sections.append(
            {
                "name": section.name,
                "title": section.title,
                "about": section.about,
                "empty": shown.instead or section.empty,
                "reason": shown.reason,
                **_grid(shown.rows),
                "absent": [] if shown.instead else [f"{m}: {section.empty}" for m in absent],
            }
        )
    return sections


@console_view()
@require_http_methods(["GET"])
def experiment_report(request: HttpRequest, run_id: str) -> HttpResponse:
    """One run's report next to the other mode's: verdicts side by side, every table with
    both modes, the counterexamples as operations, and the plots."""
    run = get_object_or_404(ExperimentRun, run_id=run_id)
    other = sibling(run)
    pair = [run] if other is None else sorted([run, other], key=lambda r: r.mode)
    folders = [(member, report_dir(member)) for member in pair]
    tables = pair_tables(folders)
    modes = report.modes_in(tables) or [m.mode for m in pair]
    folder = report_dir(run)
    plots = [n for n in report.PLOT_NAMES if folder is not None and (folder / f"{n}.png").is_file()]
    verdict_rows = report.verdicts_with_reasons(tables, modes) if tables else []
    seed_rows = tables.get(report_seeds.SEED_INTERVALS, [])
    if not report_seeds.several_seeds(seed_rows):
        seed_rows = []  # one seed per mode: no interval, and the tables hold its numbers
    context = _context(
        request,
        "experiments",
        run=run,
        pair=[{"run": member, "times": run_times(member)} for member in pair],
        plots=plots,
        modes=modes,
        verdicts=[
            {"label": r[""], "values": [r[m] for m in modes], "why": r[report.WHY]}
            for r in verdict_rows
        ],
        any_reason=any(r[report.WHY] for r in verdict_rows),
        sections=report_sections(tables, modes),
        seeds=_grid(report_seeds.interval_table(seed_rows, modes)),
        seeds_title=report_seeds.SEEDS_TITLE,
        seeds_about=report_seeds.SEEDS_ABOUT,
        counterexamples=_grid(tables.get(report.COUNTEREXAMPLE_OPS, [])),
        summary_json=json.dumps(run.summary, indent=2, sort_keys=True, default=str),
    )
    return render(request, "experiments/report.html", context)


@console_view()
@require_http_methods(["GET"])
def experiment_plot(request: HttpRequest, run_id: str, name: str) -> HttpResponse:
    """One PNG plot of the run's report."""
    run = get_object_or_404(ExperimentRun, run_id=run_id)
    folder = report_dir(run)
    if name not in report.PLOT_NAMES or folder is None or not (folder / f"{name}.png").is_file():
        raise Http404("no such plot")
    return HttpResponse((folder / f"{name}.png").read_bytes(), content_type="image/png")


# ------------------------------------------------------------------- timeline


def timeline_layout(
    ops: list[dict[str, Any]],
    faults: list[dict[str, Any]],
    lane_key: str,
    span_ms: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Pixel geometry of the timeline: lanes, op bars, fault windows and time ticks.

    The axis runs over ``span_ms`` (the whole recording, from every operation) when given,
    else over the drawn operations, and stretches to every fault's end, so a heal after
    the last operation is drawn too."""
    lanes = sorted({str(op[lane_key]) or "-" for op in ops})
    lane_y = {lane: TIMELINE_TOP_PX + i * TIMELINE_LANE_PX for i, lane in enumerate(lanes)}
    if span_ms is None:
        t0 = min((op["invoke_ms"] for op in ops), default=0)
        t1 = max((max(op["complete_ms"], op["invoke_ms"]) for op in ops), default=t0 + 1)
    else:
        t0, t1 = span_ms
    t1 = max([t1, *(int(f["end_ms"]) for f in faults if f["end_ms"] >= f["start_ms"])])
    span = max(t1 - t0, 1)
    # The right margin keeps the last tick label inside the picture.
    plot_px = TIMELINE_WIDTH_PX - TIMELINE_LABEL_PX - TIMELINE_RIGHT_PX

    def px(ms: float) -> float:
        return TIMELINE_LABEL_PX + (min(max(ms, t0), t1) - t0) / span * plot_px

    height = TIMELINE_TOP_PX + len(lanes) * TIMELINE_LANE_PX + 4
    bars = []
    for op in ops:
        x = px(op["invoke_ms"])
        bars.append(
            {
                "x": round(x, 1),
                "y": lane_y[str(op[lane_key]) or "-"] + 2,
                "w": round(max(px(op["complete_ms"]) - x, TIMELINE_BAR_MIN_PX), 1),
                "color": OUTCOME_COLORS.get(op["outcome"], OTHER_COLOR),
                "op": op,
                "start_s": round((op["invoke_ms"] - t0) / MS_PER_S, 3),
                "took_ms": op["complete_ms"] - op["invoke_ms"],
            }
        )
    windows = []
    for fault in faults:
        end = fault["end_ms"] if fault["end_ms"] >= fault["start_ms"] else t1
        if end < t0 or fault["start_ms"] > t1:
            continue
        x = px(fault["start_ms"])
        windows.append(
            {
                "x": round(x, 1),
                "w": round(max(px(end) - x, TIMELINE_BAR_MIN_PX), 1),
                "fault": fault_seconds(fault, t0),
                "open": fault["end_ms"] < fault["start_ms"],
            }
        )
    ticks = [
        {
            "x": round(px(t0 + span * i / TIMELINE_TICKS), 1),
            "label": f"{span * i / TIMELINE_TICKS / MS_PER_S:.1f} s",
        }
        for i in range(TIMELINE_TICKS + 1)
    ]
    return {
        "lanes": [
            {"name": n, "y": y, "text_y": y + TIMELINE_LANE_PX - 5} for n, y in lane_y.items()
        ],
        "bars": bars,
        "windows": windows,
        "ticks": ticks,
        "height": height,
        "width": TIMELINE_WIDTH_PX,
        "label_px": TIMELINE_LABEL_PX,
        "plot_right": TIMELINE_LABEL_PX + plot_px,
        "axis_y": height,
        "t0": t0,
        "span_ms": span,
        "faults": [fault_seconds(f, t0) for f in faults],
    }


def fault_seconds(fault: dict[str, Any], t0_ms: float) -> dict[str, Any]:
    """A fault row with its start and heal in seconds from the recording's start
    (``start_s``, ``end_s``; ``end_s`` None while the fault is open to the run's end)."""
    healed = fault["end_ms"] >= fault["start_ms"]
    return {
        **fault,
        "start_s": round((fault["start_ms"] - t0_ms) / MS_PER_S, 1),
        "end_s": round((fault["end_ms"] - t0_ms) / MS_PER_S, 1) if healed else None,
    }


@console_view()
@require_http_methods(["GET"])
def experiment_timeline(request: HttpRequest, run_id: str) -> HttpResponse:
    """The run's history as an SVG timeline: op bars per process (or node), fault windows."""
    run = get_object_or_404(ExperimentRun, run_id=run_id)
    lane_key = request.GET.get("by", LANE_KEYS[0])
    if lane_key not in LANE_KEYS:
        lane_key = LANE_KEYS[0]
    run_dir = Path(run.out_dir)
    files = _files()
    ops, total, span_ms = files.read_ops(run_dir, TIMELINE_OPS_MAX)
    layout = timeline_layout(ops, files.read_faults(run_dir), lane_key, span_ms)
    context = _context(
        request,
        "experiments",
        run=run,
        total=total,
        drawn=len(ops),
        limit=TIMELINE_OPS_MAX,
        lane_key=lane_key,
        lane_keys=LANE_KEYS,
        layout=layout,
        faults=layout["faults"],
        recording_s=round(layout["span_ms"] / MS_PER_S, 1),
        colors=sorted(OUTCOME_COLORS.items()),
    )
    return render(request, "experiments/timeline.html", context)
