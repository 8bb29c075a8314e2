"""The experiment pages of the console: runs, reports, timelines and the launch form.

The histories are real Parquet files written with ``HistoryWriter`` and the reports real
files written by ``experiment_reports.report`` and ``spark_jobs.plots`` (from hand-made
tables, so no Spark is needed), which the console reads back with ``experiment_reports``. The
only stand-in is the detached process launch, which would start a real cluster.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from experiment_history.runs import HistoryWriter, RunMeta
from experiment_reports.report import write_tables
from namesrv_app.models import ASKED_DURATION_KEY, ExperimentRun
from namesrv_app.web import experiments
from spark_jobs.plots import write_plots

from .conftest import log_in

SCENARIO = "broker-kill"
SEED = 7
STARTED = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
RUN_IDS = {"eventual": f"{SCENARIO}-eventual-s{SEED}-100", "raft": f"{SCENARIO}-raft-s{SEED}-100"}
OP_MS = 10


def _client(user: User) -> Client:
    client = Client()
    assert log_in(client, user.username)
    return client


def _history(
    run_dir: Path,
    mode: str,
    ops: int,
    base_ms: int = 0,
    faults: tuple[tuple[int, int, str, str, str], ...] = (
        (OP_MS * 3, OP_MS * 9, "kill_broker", "broker-00001", "{}"),
    ),
) -> None:
    """``ops`` route reads, one every ``OP_MS`` from ``base_ms`` (a run's clock is the
    epoch's), and ``faults`` (start and end relative to ``base_ms``)."""
    meta = RunMeta(
        run_id=run_dir.name, scenario=SCENARIO, mode=mode, seed=SEED, nodes=["n1", "n2", "n3"]
    )
    with HistoryWriter(run_dir, meta, chunk_rows=500) as writer:
        for i in range(ops):
            writer.operation(
                (
                    i,
                    f"producer-{i % 3}",
                    "route_read",
                    f"n{i % 3 + 1}",
                    "topic-000",
                    base_ms + i * OP_MS,
                    base_ms + i * OP_MS + 5,
                    "ok" if i % 2 else "not_found",
                    "",
                    -1,
                    "",
                    "{}",
                    (base_ms + i * OP_MS) * 1_000,
                    (base_ms + i * OP_MS + 5) * 1_000,
                )
            )
        for start, end, kind, target, detail in faults:
            writer.fault((base_ms + start, base_ms + end, kind, target, detail))


def _report(batch: Path) -> None:
    """The report of both runs, as ``run_experiment --mode both --analyze`` writes it."""
    tables = {
        "divergence": [
            {
                "mode": m,
                "scenario": SCENARIO,
                "topics": 8,
                "topics_diverged_share": share,
                "longest_ms": longest,
            }
            for m, share, longest in (("eventual", 0.625, 4200), ("raft", 0.0, 0))
        ],
        "linearizability": [
            {
                "run_id": r,
                "mode": m,
                "scenario": SCENARIO,
                "linearizable": 8 - n,
                "not_linearizable": n,
                "unknown": 0,
            }
            for (m, r), n in zip(RUN_IDS.items(), (5, 0), strict=True)
        ],
        "stale_route": [],
        "seed_intervals": [
            {
                "mode": m,
                "scenario": SCENARIO,
                "measure": "sends to a dead broker",
                "unit": "sends",
                "key": "dead_sends",
                "seeds": 3,
                "seed_values": [1, 2, 3],
                "values": values,
                "mean": sum(values) / 3,
                "lo": lo,
                "hi": hi,
            }
            for m, values, lo, hi in (
                ("eventual", [4, 6, 8], 1.03, 10.97),
                ("raft", [0, 0, 0], 0, 0),
            )
        ],
        "t_visibility": [
            {"mode": m, "scenario": SCENARIO, "t_bucket_ms": t, "p_fresh": p}
            for m in RUN_IDS
            for t, p in ((0, 0.5), (1000, 0.9))
        ],
    }
    write_tables(batch / "report", tables)
    assert [p.name for p in write_plots(batch / "report", tables)] == ["t_visibility.png"]


@pytest.fixture
def runs(db: Any, tmp_path: Path) -> dict[str, ExperimentRun]:
    """Two finished runs of one scenario and seed (eventual, raft) with a shared report."""
    rows = {}
    batch = tmp_path / f"{SCENARIO}-s{SEED}-20260102-030405"
    for mode, run_id in RUN_IDS.items():
        _history(batch / "runs" / run_id, mode, ops=12)
        rows[mode] = ExperimentRun.objects.create(
            run_id=run_id,
            scenario=SCENARIO,
            mode=mode,
            seed=SEED,
            started=STARTED,
            finished=STARTED + dt.timedelta(seconds=42),
            status=ExperimentRun.Status.FINISHED,
            out_dir=str(batch / "runs" / run_id),
            summary={
                "analysis": {
                    "divergence": [
                        {
                            "mode": mode,
                            "topics_diverged_share": 0.625 if mode == "eventual" else 0.0,
                        }
                    ]
                }
            },
        )
    _report(batch)
    return rows


def test_the_pages_need_a_login(runs: Any) -> None:
    response = Client().get("/experiments/")
    assert response.status_code == 302
    assert "/login" in response["Location"]


def test_a_user_without_a_role_sees_no_experiment(runs: Any, nobody: User) -> None:
    client = _client(nobody)
    for url in (
        "/experiments/",
        f"/experiments/{RUN_IDS['raft']}/",
        f"/experiments/{RUN_IDS['raft']}/timeline/",
    ):
        assert client.get(url).status_code == 403


def test_the_list_shows_every_run_with_its_headline(runs: Any, viewer: User) -> None:
    page = _client(viewer).get("/experiments/").content.decode()
    assert RUN_IDS["eventual"] in page and RUN_IDS["raft"] in page
    assert "<strong>62.5 %</strong> of topics diverged" in page
    assert "42.0 s" in page
    assert 'id="launch"' not in page
    assert "<th>started (UTC)</th>" in page
    assert '2026-01-02 <span style="white-space: nowrap">03:04:05 UTC</span></td>' in page
    # A run id is one line however narrow the window is.
    assert f'<code style="white-space: nowrap">{RUN_IDS["raft"]}</code>' in page


def test_the_list_shows_the_asked_duration_and_the_wall_time_with_its_parts(
    db: Any, tmp_path: Path, viewer: User
) -> None:
    run_dir = tmp_path / "runs" / "s1-eventual-s1-1"
    meta = RunMeta(
        run_id=run_dir.name,
        scenario=SCENARIO,
        mode="eventual",
        seed=1,
        nodes=["n1"],
        params={"duration_s": 10.0},
    )
    HistoryWriter(run_dir, meta).close()
    ExperimentRun.objects.create(
        run_id=run_dir.name,
        scenario=SCENARIO,
        mode="eventual",
        seed=1,
        started=STARTED,
        finished=STARTED + dt.timedelta(seconds=35.4),
        status=ExperimentRun.Status.FINISHED,
        out_dir=str(run_dir),
        summary={"timings": {"warmup_ms": 4_100, "recorded_ms": 10_200}},
    )
    page = _client(viewer).get("/experiments/").content.decode()
    assert "<th" in page and ">asked duration</th>" in page and ">actual wall time</th>" in page
    row = page.split(f">{run_dir.name}</code>", 1)[1].split("</tr>", 1)[0]
    assert '<td class="num asked-duration">10 s</td>' in row
    assert "35.4 s" in row
    assert "warm-up 4.1 s, recording 10.2 s, cluster boot and teardown 21.1 s" in row
    assert "the analysis runs after" in page


def test_a_running_run_shows_the_duration_it_was_asked_for(db: Any, viewer: User) -> None:
    """run_experiment stores the asked duration on the row as the run starts."""
    ExperimentRun.objects.create(
        run_id="s1-raft-s2-running",
        scenario=SCENARIO,
        mode="raft",
        seed=2,
        started=STARTED,
        out_dir="/nonexistent/s1-raft-s2-running",
        summary={ASKED_DURATION_KEY: 20.0},
    )
    page = _client(viewer).get("/experiments/").content.decode()
    row = page.split(">s1-raft-s2-running</code>", 1)[1].split("</tr>", 1)[0]
    assert '<td class="num asked-duration">20 s</td>' in row


def test_the_report_shows_every_share_as_a_percentage(runs: Any, viewer: User) -> None:
    page = _client(viewer).get(f"/experiments/{RUN_IDS['raft']}/").content.decode()
    divergence = page.split('id="table-divergence"')[1].split("</table>")[0]
    assert "<td>topics_diverged_share</td><td>62.5 %</td><td>0 %</td>" in divergence
    freshness = page.split('id="table-t_visibility"')[1].split("</table>")[0]
    assert "<td>0-100 ms</td><td>50 %</td><td>50 %</td>" in freshness  # buckets as the plot
    assert "0.625" not in divergence and "0.9<" not in freshness


def test_the_report_gives_each_measure_across_seeds_with_its_interval(
    runs: Any, viewer: User
) -> None:
    page = _client(viewer).get(f"/experiments/{RUN_IDS['eventual']}/").content.decode()
    seeds = page.split('id="table-seed_intervals"')[1].split("</table>")[0]
    assert "<th>measure</th><th>eventual</th><th>raft</th>" in seeds
    assert "<td>sends to a dead broker (sends)</td><td>6 sends [1.03, 11], n=3</td>" in seeds


def _one_seed_partition_report(batch: Path) -> None:
    """A one-seed ``--mode both`` report of a scenario that partitions and kills no
    broker, with the tables whose rows such a run has."""
    scenario = "s1-asymmetric-partition"
    tables: dict[str, list[dict[str, Any]]] = {
        "fault_windows": [
            {
                "run_id": f"{scenario}-{m}-s1-1",
                "mode": m,
                "scenario": scenario,
                "kind": "asymmetric_partition",
                "target": "n1",
                "start_ms": 0,
                "end_ms": 9_500,
                "open_end": False,
            }
            for m in ("eventual", "raft")
        ],
        "dead_sends": [
            {"mode": m, "scenario": scenario, "sends": 696, "sends_to_dead": 0}
            for m in ("eventual", "raft")
        ],
        "stale_route": [],
        "latency": [
            {"mode": m, "scenario": scenario, "kind": kind, "ops": 10, "p50_us": p50}
            for m, kind, p50 in (
                ("eventual", "route_read", 1_902),
                ("raft", "route_read", 777),
                ("eventual", "send", 0),
                ("raft", "send", 0),
            )
        ],
        "seed_intervals": [
            {
                "mode": m,
                "scenario": scenario,
                "measure": "route-read latency p50",
                "unit": "ms",
                "key": "read_p50_ms",
                "seeds": 1,
                "seed_values": [1],
                "values": [v],
                "mean": v,
                "lo": None,
                "hi": None,
            }
            for m, v in (("eventual", 1.9), ("raft", 0.78))
        ],
    }
    write_tables(batch / "report", tables)


@pytest.fixture
def one_seed_partition(db: Any, tmp_path: Path) -> str:
    """A raft run of a one-seed partition batch (and its eventual sibling); its run id."""
    scenario = "s1-asymmetric-partition"
    batch = tmp_path / f"{scenario}-s1"
    for mode in ("eventual", "raft"):
        run_id = f"{scenario}-{mode}-s1-1"
        ExperimentRun.objects.create(
            run_id=run_id,
            scenario=scenario,
            mode=mode,
            seed=1,
            started=STARTED,
            finished=STARTED + dt.timedelta(seconds=42),
            status=ExperimentRun.Status.FINISHED,
            out_dir=str(batch / "runs" / run_id),
        )
    _one_seed_partition_report(batch)
    return f"{scenario}-raft-s1-1"


def test_a_one_seed_report_of_a_partition_shows_only_what_the_run_can_tell(
    one_seed_partition: str, viewer: User
) -> None:
    """One seed: no across-seeds table; no broker killed: no dead-broker row or table;
    the simulated sends labelled; a line on why the modes' latencies differ."""
    page = _client(viewer).get(f"/experiments/{one_seed_partition}/").content.decode()
    assert 'id="table-seed_intervals"' not in page and "Across seeds" not in page
    assert "one seed, no interval" not in page
    verdicts = page.split('id="table-verdicts"')[1].split("</table>")[0]
    assert "sends to a dead broker" not in verdicts
    assert "reads answered in the fault window" in verdicts  # a partition has a window
    assert "<th>why the modes differ</th>" not in verdicts  # the modes agree on every row
    assert 'id="table-dead_sends"' not in page and 'id="table-stale_route"' not in page
    assert "No broker was killed in this scenario" in page
    latency = page.split('id="table-latency"')[1].split("</table>")[0]
    assert "<td>send (simulated: no message is sent;" in latency
    assert "<td>route_read</td>" in latency
    why = page.split('id="why-latency"')[1].split("</p>")[0]
    assert "route_read is the client&#x27;s wall time from asking one node" in why
    assert "no replication step is in it" in why


def test_an_operator_sees_the_launch_form(runs: Any, operator: User) -> None:
    page = _client(operator).get("/experiments/").content.decode()
    assert 'id="launch"' in page
    assert '<option value="s1-asymmetric-partition">' in page


def test_the_report_puts_both_modes_side_by_side(runs: Any, viewer: User) -> None:
    page = _client(viewer).get(f"/experiments/{RUN_IDS['raft']}/").content.decode()
    verdicts = page.split('id="table-verdicts"')[1].split("</table>")[0]
    assert "<th>eventual</th><th>raft</th>" in verdicts
    assert "not linearizable (5 of 8 exercised topics not linearizable)" in verdicts
    assert "linearizable (8 of 8 exercised topics linearizable)" in verdicts
    assert "62 % of topics, longest 4.2 s" in verdicts and "<td>never</td>" in verdicts
    # Where the modes answer differently, one line says why; where they agree, nothing.
    assert "<th>why the modes differ</th>" in verdicts
    diverged = verdicts.split("<th>nodes diverged</th>")[1].split("</tr>")[0]
    assert ">Eventual nodes each take broker registrations" in diverged
    writes = verdicts.split("<th>writes acknowledged in the fault window</th>")[1]
    assert '<td class="muted why"></td>' in writes.split("</tr>")[0]
    divergence = page.split('id="table-divergence"')[1].split("</table>")[0]
    assert "<td>longest_ms</td><td>4200</td><td>0</td>" in divergence
    assert page.count('class="plot"') == 1
    assert f"/experiments/{RUN_IDS['raft']}/plot/t_visibility.png" in page


def test_an_empty_table_says_what_it_means(runs: Any, viewer: User) -> None:
    page = _client(viewer).get(f"/experiments/{RUN_IDS['eventual']}/").content.decode()
    assert 'id="empty-stale_route"' in page
    assert "No broker was killed in this scenario" in page
    assert "Every exercised topic is linearizable" not in page.split('id="verdicts"')[0]


def test_a_plot_is_served_as_a_png_image(runs: Any, viewer: User) -> None:
    response = _client(viewer).get(f"/experiments/{RUN_IDS['eventual']}/plot/t_visibility.png")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/png"
    assert response.content.startswith(b"\x89PNG")


def test_only_the_report_plots_are_served(runs: Any, viewer: User) -> None:
    client = _client(viewer)
    assert client.get(f"/experiments/{RUN_IDS['raft']}/plot/summary.png").status_code == 404
    assert client.get(f"/experiments/{RUN_IDS['raft']}/plot/k_staleness.png").status_code == 404


def test_unknown_runs_are_404(runs: Any, viewer: User) -> None:
    client = _client(viewer)
    for url in (
        "/experiments/nope/",
        "/experiments/nope/timeline/",
        "/experiments/nope/plot/t_visibility.png",
    ):
        assert client.get(url).status_code == 404


def test_a_run_without_analysis_says_so(runs: Any, viewer: User, tmp_path: Path) -> None:
    ExperimentRun.objects.create(
        run_id="leader-kill-raft-s1-5",
        scenario="leader-kill",
        mode="raft",
        seed=1,
        started=STARTED,
        out_dir=str(tmp_path / "elsewhere" / "leader-kill-raft-s1-5"),
    )
    page = _client(viewer).get("/experiments/leader-kill-raft-s1-5/").content.decode()
    assert "No analysis report found" in page


def test_the_timeline_draws_ops_per_process_and_fault_windows(runs: Any, viewer: User) -> None:
    page = _client(viewer).get(f"/experiments/{RUN_IDS['raft']}/timeline/").content.decode()
    assert page.count('class="op"') == 12
    assert page.count('class="fault"') == 1
    assert "producer-0" in page and "producer-2" in page
    assert "Showing 12 of 12 operations;" in page


def test_the_timeline_can_lane_by_node(runs: Any, viewer: User) -> None:
    page = _client(viewer).get(f"/experiments/{RUN_IDS['raft']}/timeline/?by=node").content
    assert b">n3</text>" in page and b">producer-0</text>" not in page


def test_the_timeline_covers_the_whole_recording_with_faults_in_seconds(
    db: Any, viewer: User, tmp_path: Path
) -> None:
    """More operations than are drawn: a sample taken evenly over the whole recording, so
    the axis and the last bar reach its end and a heal after the first operations shows."""
    run_id = "big-raft-s1-1"
    ops = experiments.TIMELINE_OPS_MAX * 3 // 2
    recording_ms = (ops - 1) * OP_MS + 5
    heal_ms = recording_ms - 500
    epoch_ms = 1_796_526_475_076
    _history(
        tmp_path / run_id,
        "raft",
        ops=ops,
        base_ms=epoch_ms,
        faults=((9_500, heal_ms, "partition", "n1|n2,n3", "{}"),),
    )
    ExperimentRun.objects.create(
        run_id=run_id,
        scenario=SCENARIO,
        mode="raft",
        seed=1,
        started=STARTED,
        out_dir=str(tmp_path / run_id),
    )
    response = _client(viewer).get(f"/experiments/{run_id}/timeline/")
    page = response.content.decode()
    assert page.count('class="op"') == experiments.TIMELINE_OPS_MAX
    assert f"Showing {experiments.TIMELINE_OPS_MAX} of {ops} operations, taken evenly" in page
    layout = response.context["layout"]
    bucket_px = (layout["plot_right"] - layout["label_px"]) / experiments.TIMELINE_TICKS
    last = max(layout["bars"], key=lambda b: b["x"])
    assert last["op"]["op_id"] == ops - 1  # the recording's last operation is drawn
    assert last["x"] + last["w"] >= layout["plot_right"] - bucket_px
    assert layout["span_ms"] == recording_ms
    assert layout["ticks"][-1]["label"] == f"{recording_ms / 1000:.1f} s"
    # The partition healed after the first TIMELINE_OPS_MAX operations: still drawn.
    (window,) = layout["windows"]
    assert window["x"] + window["w"] > layout["plot_right"] - bucket_px
    faults = page.split('id="timeline-faults"')[1].split("</table>")[0]
    assert "start (s from start)" in faults and "heal (s from start)" in faults
    assert '<td class="num">9.5 s</td>' in faults
    assert f'<td class="num">{heal_ms / 1000:.1f} s</td>' in faults
    assert str(epoch_ms)[:6] not in page  # no epoch milliseconds anywhere on the page


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch, settings: Any, tmp_path: Path) -> list[Any]:
    """Record launches instead of starting a real cluster in the background."""
    settings.NAMESRV_EXPERIMENTS_DIR = str(tmp_path / "console-runs")
    calls: list[Any] = []
    monkeypatch.setattr(
        experiments, "start_detached", lambda argv, log_path: calls.append((argv, log_path))
    )
    return calls


def test_a_viewer_may_not_start_an_experiment(viewer: User, launches: list[Any]) -> None:
    response = _client(viewer).post(
        "/experiments/launch/", {"scenario": SCENARIO, "mode": "both", "seed": 1, "duration_s": 15}
    )
    assert response.status_code == 403
    assert launches == []


@pytest.mark.parametrize(
    "field, value",
    [
        ("seed", -1),
        ("seed", "x"),
        ("duration_s", 9),
        ("duration_s", 601),
        ("scenario", "nope"),
        ("mode", "strong"),
    ],
)
def test_the_launch_form_refuses_bad_input(
    operator: User, launches: list[Any], field: str, value: Any
) -> None:
    data = {"scenario": SCENARIO, "mode": "both", "seed": 1, "duration_s": 15, field: value}
    response = _client(operator).post("/experiments/launch/", data)
    assert response.status_code == 400
    assert response.context["form"].errors[field]
    assert launches == []


def test_a_valid_launch_starts_the_command_detached(
    operator: User, launches: list[Any], tmp_path: Path
) -> None:
    response = _client(operator).post(
        "/experiments/launch/",
        {"scenario": "raft-leader-kill", "mode": "raft", "seed": 0, "duration_s": 10},
    )
    assert response.status_code == 302
    assert response["Location"].startswith("/experiments/?launched=console-raft-leader-kill-raft")
    [(argv, log_path)] = launches
    assert argv[1:3] == ["-m", "namesrv_site.cli"]
    assert argv[3:] == [
        "run_experiment",
        "raft-leader-kill",
        "--mode",
        "raft",
        "--seed",
        "0",
        "--duration-s",
        "10",
        "--out",
        str(tmp_path / "console-runs"),
        "--analyze",
    ]
    assert log_path.parent == tmp_path / "console-runs"


def test_the_launcher_really_runs_the_command_in_the_background(tmp_path: Path) -> None:
    marker = tmp_path / "out" / "marker"
    proc = experiments.start_detached(
        ["/bin/sh", "-c", f"echo started; touch {marker}"], tmp_path / "out" / "x.log"
    )
    assert proc.wait(10) == 0
    assert marker.exists()
    assert (tmp_path / "out" / "x.log").read_text() == "started\n"
