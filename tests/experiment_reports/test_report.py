"""The report of one experiment: both modes side by side, a sentence for every empty table,
counterexamples as the operations themselves (which the analysis's report folder reads from
the runs). Plain tables, no Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from experiment_history.runs import HistoryWriter, RunMeta
from experiment_reports.report import (
    COUNTEREXAMPLE_OPS,
    SECTION_BY_NAME,
    Row,
    linearizability_verdict,
    markdown_verdicts,
    mode_summary,
    read_tables,
    section_markdown,
    side_by_side,
    write_markdown,
    write_tables,
)
from experiment_reports.text import client_markdown, client_paragraph, percent
from spark_jobs.checker import check_rows
from spark_jobs.report_folder import counterexample_operations

MODES = ["eventual", "raft"]
ROUTE_A = "broker-a:h1:10911:4:4:6"
ROUTE_AB = "broker-a:h1:10911:4:4:6,broker-b:h2:10911:4:4:6"


def _availability() -> list[dict[str, Any]]:
    """Eventual has a write row inside the window, raft none (no write was attempted)."""
    return [
        {
            "mode": "eventual",
            "scenario": "s1",
            "op_class": "read",
            "ops": 100,
            "ok_share": 0.9,
            "answered_share": 0.95,
        },
        {
            "mode": "eventual",
            "scenario": "s1",
            "op_class": "write",
            "ops": 4,
            "ok_share": 0.5,
            "answered_share": 0.5,
        },
        {
            "mode": "raft",
            "scenario": "s1",
            "op_class": "read",
            "ops": 98,
            "ok_share": 1.0,
            "answered_share": 1.0,
        },
    ]


def test_every_mode_shows_in_a_keyed_table_with_a_dash_where_it_has_no_row() -> None:
    rows = side_by_side(_availability(), MODES, ("op_class",))
    assert [r["op_class"] for r in rows] == ["read", "write"]
    assert rows[0]["ok_share eventual"] == 0.9 and rows[0]["ok_share raft"] == 1.0
    assert rows[1]["ops eventual"] == 4 and rows[1]["ops raft"] is None
    text = section_markdown(SECTION_BY_NAME["availability"], _availability(), MODES)
    assert "| write | 4 | — |" in text


def test_a_table_without_keys_has_one_row_per_measure_and_a_sentence_for_a_missing_mode() -> None:
    rows = [{"mode": "eventual", "scenario": "s1", "topics": 8, "longest_ms": 9100}]
    assert side_by_side(rows, MODES) == [
        {"measure": "topics", "eventual": 8, "raft": None},
        {"measure": "longest_ms", "eventual": 9100, "raft": None},
    ]
    text = section_markdown(SECTION_BY_NAME["divergence"], rows, MODES)
    assert "_raft: no node states were sampled" in text


def test_an_empty_table_says_what_its_emptiness_means() -> None:
    text = section_markdown(SECTION_BY_NAME["stale_route"], [], MODES)
    assert "No broker was killed in this scenario" in text
    assert "no rows" not in text


def test_verdicts_count_topics_with_fewer_than_two_writes_as_not_exercised() -> None:
    rows = [
        {
            "run_id": "e",
            "mode": "eventual",
            "scenario": "s1",
            "linearizable": 5,
            "not_linearizable": 2,
            "unknown": 0,
            "not_exercised": 1,
        },
        {
            "run_id": "r",
            "mode": "raft",
            "scenario": "s1",
            "linearizable": 0,
            "not_linearizable": 0,
            "unknown": 0,
            "not_exercised": 8,
        },
    ]
    assert linearizability_verdict(rows, "eventual") == (
        "not linearizable",
        "2 of 7 exercised topics not linearizable; 1 of 8 not exercised (fewer than two writes)",
    )
    assert linearizability_verdict(rows, "raft")[0] == "not exercised"
    table = markdown_verdicts({"linearizability": rows, "availability": _availability()})
    assert table.splitlines()[0] == "|  | eventual | raft |"
    assert (
        "| writes acknowledged in the fault window | 50.0 % of 4 | no write in a "
        "fault window |" in table
    )


def _history(root: Path) -> str:
    """A run whose topic T is read stale after a write completed (not linearizable)."""
    run_id = "s1-eventual-s7-1"
    meta = RunMeta(run_id=run_id, scenario="s1", mode="eventual", seed=7, nodes=["n1", "n2"])
    with HistoryWriter(root / run_id, meta) as out:
        out.fault((1_000, 5_000, "asymmetric_partition", "n1", "{}"))
        for op in (
            (1, "warmup", "register", "", "T", 0, 10, "ok", ROUTE_A, -1, "", "{}"),
            (2, "ns-n2", "register", "n2", "T", 10, 1_500, "ok", ROUTE_AB, -1, "", "{}"),
            (3, "producer-0", "route_read", "n1", "T", 1_600, 1_610, "ok", ROUTE_A, -1, "", "{}"),
            (4, "producer-1", "route_read", "n2", "T", 1_620, 1_625, "ok", ROUTE_AB, -1, "", "{}"),
        ):
            out.operation((*op, op[5] * 1_000, op[6] * 1_000))
    return run_id


def test_counterexamples_are_listed_as_their_operations_in_us_since_the_fault(
    tmp_path: Path,
) -> None:
    run_id = _history(tmp_path)
    from experiment_history.runs import iter_rows

    result = check_rows(list(iter_rows(tmp_path / run_id, "operations")))
    assert result.verdict == "not_linearizable"
    ops = counterexample_operations(
        tmp_path, [{"run_id": run_id, "topic": "T", "counterexample": list(result.counterexample)}]
    )
    stale = next(o for o in ops if o["op_id"] == 3)
    assert stale == {
        "mode": "eventual",
        "run_id": run_id,
        "topic": "T",
        "op_id": 3,
        "node": "n1",
        "client": "producer-0",
        "operation": "route_read",
        "outcome": "ok",
        "value": "broker-a",
        "invoke_us": 600_000,
        "complete_us": 610_000,
    }
    assert [o["invoke_us"] for o in ops] == sorted(o["invoke_us"] for o in ops)


def test_summary_md_puts_verdicts_first_and_embeds_the_plots(tmp_path: Path) -> None:
    plot = tmp_path / "t_visibility.png"
    plot.write_bytes(b"")
    tables = {"availability": _availability(), COUNTEREXAMPLE_OPS: []}
    text = write_markdown(
        tmp_path, tables, {"availability": 1.5}, [plot], "s1: eventual vs raft (seed 7)"
    ).read_text()
    assert text.startswith("# s1: eventual vs raft (seed 7)\n\n## Verdicts\n")
    assert "![t_visibility](t_visibility.png)" in text
    assert "there is no counterexample" in text
    assert "No broker was killed" in text
    prose = text.index("## What this means for a client")
    assert text.index("## Verdicts") < prose < text.index("## Availability inside")


def _t_visibility() -> list[dict[str, Any]]:
    return [
        {"mode": m, "scenario": "s1", "t_bucket_ms": t, "reads": n, "p_fresh": p}
        for m, points in (
            ("eventual", ((0, 20, 0.5), (500, 55, 0.8), (300_000, 4, 1.0))),
            ("raft", ((0, 17, 0.8823529411764706), (500, 42, 1.0))),
        )
        for t, n, p in points
    ]


def test_freshness_buckets_are_named_by_both_edges_in_summary_md() -> None:
    text = section_markdown(SECTION_BY_NAME["t_visibility"], _t_visibility(), MODES)
    header = next(line for line in text.splitlines() if line.startswith("| after the write"))
    assert "t_bucket_ms" not in text
    assert header.startswith("| after the write | reads eventual | reads raft |")
    rows = [
        line.split(" | ")[0] for line in text.splitlines() if line.startswith("| ") and "%" in line
    ]
    assert rows == ["| 0-100 ms", "| 0.5-1 s", "| ≥ 300 s"]


def test_summary_md_shows_shares_as_percentages() -> None:
    text = section_markdown(SECTION_BY_NAME["availability"], _availability(), MODES)
    assert "| read | 100 | 98 | 90 % | 100 % | 95 % | 100 % |" in text
    assert "0.9 " not in text and "0.95" not in text
    freshness = section_markdown(SECTION_BY_NAME["t_visibility"], _t_visibility(), MODES)
    assert "| 0-100 ms | 20 | 17 | 50 % | 88.2 % |" in freshness
    assert percent(0.0004) == "0.04 %" and percent(1.0) == "100 %"


def _harm_tables(killed: bool) -> dict[str, list[dict[str, Any]]]:
    kills = [
        {
            "mode": "eventual",
            "scenario": "s2",
            "target": "broker-b",
            "nodes_window_ms": 31_000,
            "clients_window_ms": 62_500,
            "client_topics_never_dropped": 0,
        },
        {
            "mode": "raft",
            "scenario": "s2",
            "target": "broker-b",
            "nodes_window_ms": 3_000,
            "clients_window_ms": 33_000,
            "client_topics_never_dropped": 2,
        },
    ]
    return {
        "t_visibility": _t_visibility(),
        "dead_sends": [
            {"mode": "eventual", "scenario": "s2", "sends": 400, "sends_to_dead": 37},
            {"mode": "raft", "scenario": "s2", "sends": 380, "sends_to_dead": 12},
        ],
        "stale_route": kills if killed else [],
        "ownership": [
            {
                "mode": "eventual",
                "scenario": "s2",
                "checkpoints": 80,
                "orphan_share": 0.0,
                "double_share": 0.125,
                "max_orphan_queues": 0,
                "max_double_queues": 3,
                "double_ms": 4_200,
            }
        ],
    }


def test_the_client_prose_is_built_from_the_tables_of_each_mode() -> None:
    tables = _harm_tables(killed=True)
    eventual, raft = (client_paragraph(tables, mode) for mode in MODES)
    assert eventual.startswith("**eventual.** Of the 20 route reads that started 0-100 ms ")
    assert "after a write, 10 of 20 (50 %) still returned an older route." in eventual
    assert "37 of 400 (9.25 %) sends went to a broker while it was dead" in eventual
    assert "clients kept routing to the killed broker for up to 62.5 s after the kill" in eventual
    assert "the NameServer nodes answered with it for up to 31.0 s" in eventual
    assert "owned the same queue for 4.2 s (summed over groups), at 12.5 % of the 80" in eventual
    assert "up to 3 queues at once" in eventual
    assert "2 of 17 (11.8 %) still returned an older route" in raft
    assert "12 of 380 (3.16 %) sends" in raft and "up to 33.0 s" in raft
    assert "2 client routes still named it when the run ended" in raft
    assert "queue ownership was not measured" in raft


def test_the_client_prose_says_when_no_broker_was_killed() -> None:
    text = client_markdown(_harm_tables(killed=False), MODES)
    assert text.startswith("\n## What this means for a client\n")
    assert "No broker was killed, so none of the 400 sends could go to a dead broker." in text
    assert "No broker was killed, so none of the 380 sends could go to a dead broker." in text
    assert "No queue was owned" not in text  # eventual has doubles; raft has no rows
    empty = client_paragraph({}, "raft")
    assert "freshness was not measured" in empty and "No send was recorded" in empty


def _change(mode: str, run: str, topic: str, inferred: int, repeated: int, verdict: str) -> Row:
    return {
        "run_id": run,
        "mode": mode,
        "scenario": "s1",
        "topic": topic,
        "writes": 3,
        "writes_in_fault": 2,
        "inferred_writes": inferred,
        "repeated_values": repeated,
        "verdict": verdict,
    }


def test_summary_json_gives_each_mode_its_headline_counts(tmp_path: Path) -> None:
    """``summary.json`` keeps every table and adds ``modes``: per mode the inferred
    writes, whether every write value was unique, the unknown topics, the anomaly
    classes' counts, the checker's power by mutation kind and the faults as scheduled,
    read off the tables the analysis made."""
    power = {"run_id": "r1", "mode": "raft", "scenario": "nemesis", "topics": 2}
    fault = {"run_id": "r1", "mode": "raft", "scenario": "nemesis", "open_end": False}
    tables: dict[str, list[Row]] = {
        "checker_power": [
            {**power, "kind": "lost_write", "region": "whole", "injected": 4, "caught": 4},
            {**power, "kind": "lost_write", "region": "passing_prefix", "injected": 2},
            {**power, "kind": "never_written", "region": "whole", "injected": 3, "caught": 2},
        ],
        "fault_windows": [
            {**fault, "kind": "pause_namesrv", "target": "n2", "start_ms": 0, "end_ms": 4100},
            {**fault, "kind": "kill_broker", "target": "b1", "start_ms": 900, "end_ms": 5000},
        ],
        "route_changes": [
            _change("eventual", "e1", "t0", 2, 0, "not_linearizable"),
            _change("eventual", "e2", "t0", 1, 1, "linearizable"),
            _change("raft", "r1", "t0", 0, 0, "linearizable"),
            _change("raft", "r1", "t1", 1, 0, "unknown"),
        ],
        "linearizability": [
            {
                "run_id": "e1",
                "mode": "eventual",
                "scenario": "s1",
                "linearizable": 0,
                "not_linearizable": 1,
                "unknown": 0,
                "not_exercised": 0,
            },
            {
                "run_id": "e2",
                "mode": "eventual",
                "scenario": "s1",
                "linearizable": 1,
                "not_linearizable": 0,
                "unknown": 0,
                "not_exercised": 0,
            },
            {
                "run_id": "r1",
                "mode": "raft",
                "scenario": "s1",
                "linearizable": 1,
                "not_linearizable": 0,
                "unknown": 1,
                "not_exercised": 0,
            },
        ],
        "anomalies": [
            {
                "mode": "eventual",
                "scenario": "s1",
                "reads": 50,
                "never_written": 0,
                "not_exist_live": 1,
                "stale_read": 4,
                "non_monotonic_read": 2,
                "version_backwards": 0,
                "examples": ["stale_read e1/7"],
            },
            {
                "mode": "eventual",
                "scenario": "s2",
                "reads": 10,
                "never_written": 0,
                "not_exist_live": 0,
                "stale_read": 1,
                "non_monotonic_read": 0,
                "version_backwards": 3,
                "examples": [],
            },
            {
                "mode": "raft",
                "scenario": "s1",
                "reads": 60,
                "never_written": 0,
                "not_exist_live": 0,
                "stale_read": 0,
                "non_monotonic_read": 0,
                "version_backwards": 0,
                "examples": [],
            },
        ],
    }
    write_tables(tmp_path, tables)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["modes"] == {
        "eventual": {
            "inferred_writes": 3,
            "unique_write_values": False,
            "unknown_topics": 0,
            "anomalies": {
                "never_written": 0,
                "non_monotonic_read": 2,
                "not_exist_live": 1,
                "stale_read": 5,
                "version_backwards": 3,
            },
            "power": {},
            "schedule": [],
            "monotonic_reads": {"satisfied": None, "violations": 0, "checked": 0},
            "read_your_writes": {"satisfied": None, "violations": 0, "checked": 0},
            "checker": {
                "topics": 0,
                "ops": 0,
                "ops_per_topic_max": 0,
                "check_ms_max": 0.0,
                "check_ms_total": 0,
            },
            "two_masters": {"count": 0, "groups_checked": 0},
        },
        "raft": {
            "inferred_writes": 1,
            "unique_write_values": True,
            "unknown_topics": 1,
            "anomalies": {
                "never_written": 0,
                "non_monotonic_read": 0,
                "not_exist_live": 0,
                "stale_read": 0,
                "version_backwards": 0,
            },
            "power": {
                "lost_write": {"injected": 6, "caught": 4, "unknown": 0},
                "never_written": {"injected": 3, "caught": 2, "unknown": 0},
            },
            "schedule": [
                {"run_id": "r1", "scenario": "nemesis", "kind": "pause_namesrv", "target": "n2"}
                | {"start_ms": 0, "end_ms": 4100},
                {"run_id": "r1", "scenario": "nemesis", "kind": "kill_broker", "target": "b1"}
                | {"start_ms": 900, "end_ms": 5000},
            ],
            "monotonic_reads": {"satisfied": None, "violations": 0, "checked": 0},
            "read_your_writes": {"satisfied": None, "violations": 0, "checked": 0},
            "checker": {
                "topics": 0,
                "ops": 0,
                "ops_per_topic_max": 0,
                "check_ms_max": 0.0,
                "check_ms_total": 0,
            },
            "two_masters": {"count": 0, "groups_checked": 0},
        },
    }
    assert summary["route_changes"] == tables["route_changes"], "the tables stay as they were"
    assert read_tables(tmp_path) == tables, "and read back without the mode summary"


def test_tables_of_an_older_analysis_leave_unique_write_values_unknown() -> None:
    """Rows without ``repeated_values`` (tables written before the column) say nothing
    about the write values: null, not true."""
    old = dict(_change("raft", "r1", "t0", 0, 0, "linearizable"))
    del old["repeated_values"], old["inferred_writes"]
    summary = mode_summary({"route_changes": [old]})
    assert summary == {
        "raft": {
            "inferred_writes": 0,
            "unique_write_values": None,
            "unknown_topics": 0,
            "anomalies": {},
            "power": {},
            "schedule": [],
            "monotonic_reads": {"satisfied": None, "violations": 0, "checked": 0},
            "read_your_writes": {"satisfied": None, "violations": 0, "checked": 0},
            "checker": {
                "topics": 0,
                "ops": 0,
                "ops_per_topic_max": 0,
                "check_ms_max": 0.0,
                "check_ms_total": 0,
            },
            "two_masters": {"count": 0, "groups_checked": 0},
        }
    }


def _one_seed_partition_tables() -> dict[str, list[dict[str, Any]]]:
    """A one-seed ``--mode both`` report of a partition that kills no broker."""
    scenario = "s1-asymmetric-partition"
    return {
        "fault_windows": [
            {"mode": m, "scenario": scenario, "kind": "asymmetric_partition", "target": "n1"}
            for m in MODES
        ],
        "dead_sends": [
            {"mode": m, "scenario": scenario, "sends": 696, "sends_to_dead": 0} for m in MODES
        ],
        "stale_route": [],
        "divergence": [
            {"mode": m, "scenario": scenario, "topics_diverged_share": share, "longest_ms": ms}
            for m, share, ms in (("eventual", 0.5, 4_000), ("raft", 0.0, 0))
        ],
        "latency": [
            {"mode": m, "scenario": scenario, "kind": kind, "ops": 10, "p50_us": p50}
            for m, kind, p50 in (
                ("eventual", "route_read", 1_902),
                ("raft", "route_read", 777),
                ("eventual", "send", 0),
                ("raft", "send", 0),
                ("eventual", "consume_alloc", 0),
                ("raft", "consume_alloc", 0),
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


def test_a_one_seed_partition_report_leaves_out_what_the_run_cannot_tell(tmp_path: Path) -> None:
    """summary.md of one seed and no broker kill: no across-seeds table, no dead-broker
    verdict or table, simulated latencies labelled, and a line on each differing figure."""
    text = write_markdown(tmp_path, _one_seed_partition_tables(), {}).read_text()
    assert "## Across seeds" not in text and "n=1" not in text
    assert "One seed (1) in raft mode, so no interval" in text  # the client paragraph says so
    verdicts = text.split("## Verdicts", 1)[1].split("\n## ", 1)[0]
    assert "sends to a dead broker" not in verdicts
    assert "| nodes diverged | 50 % of topics, longest 4.0 s | never |" in verdicts
    assert "Why the modes differ:\n- nodes diverged: Eventual nodes each take" in verdicts
    assert "- route history:" not in verdicts  # neither mode had a topic: they agree
    dead = text.split("## Sends to dead brokers", 1)[1].split("\n## ", 1)[0]
    assert "_No broker was killed in this scenario" in dead and "696" not in dead
    latency = text.split("## Operation latency", 1)[1].split("\n## ", 1)[0]
    assert "| send (simulated: no message is sent; the harness's broker model answers" in latency
    assert "| consume_alloc (computed in the client, not timed: 0 µs) |" in latency
    assert "route_read is the client's wall time from asking one node to its answer" in latency


def test_a_broker_kill_keeps_its_dead_broker_rows_and_agreeing_modes_get_no_reason() -> None:
    tables = _one_seed_partition_tables()
    tables["fault_windows"] = [
        {"mode": m, "scenario": "s2-broker-kill", "kind": "kill_broker", "target": "broker-a"}
        for m in MODES
    ]
    verdicts = markdown_verdicts(tables)
    assert "| sends to a dead broker | 0 of 696 | 0 of 696 |" in verdicts
    assert "Why" not in verdicts  # the table itself carries no reason column
    dead = section_markdown(SECTION_BY_NAME["dead_sends"], tables["dead_sends"], MODES, tables)
    assert "| sends_to_dead | 0 | 0 |" in dead and "Why the modes differ" not in dead
