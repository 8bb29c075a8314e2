"""Every route read gets a class against its topic's writes (``spark_jobs.anomalies``).

Times are microseconds unless a row says ``_ms``. The hand-written histories name each class
and its near misses; hypothesis checks that reads of a real sequential register are never
flagged, and that a flagged read always makes the history fail the linearizability checker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from experiment_history.runs import HistoryWriter, RunMeta
from experiment_history.schema import OPERATIONS_SCHEMA
from experiment_history.superseding import TIME_MAX_US, TimedWrite
from experiment_reports.report import SECTION_BY_NAME, section_markdown
from spark_jobs.anomalies import (
    NEVER_WRITTEN,
    NON_MONOTONIC_READ,
    NOT_EXIST_LIVE,
    OK,
    STALE_READ,
    TimedRead,
    anomaly_summary,
    classify_reads,
    classify_rows,
    classify_topics,
    not_exist_live_summary,
)
from spark_jobs.checker import NOT_LINEARIZABLE, RegisterOp, check_register

A = "a:h1:10911:4:4:6"
B = "a:h1:10911:4:4:6,b:h2:10911:4:4:6"
C = "c:h3:10911:4:4:6"
PENDING = None


def write(value: str, invoke: int, complete: int | None) -> TimedWrite:
    """A write; ``complete`` None: it timed out (pending)."""
    return TimedWrite(value, invoke, TIME_MAX_US if complete is None else complete)


def read(
    op_id: int,
    value: str,
    invoke: int,
    complete: int,
    client: str = "c1",
    node: str = "n0",
    version: int = -1,
) -> TimedRead:
    """A read that answered ``value`` (``""``: TOPIC_NOT_EXIST)."""
    return TimedRead(op_id, client, node, value, invoke, complete, version)


def classes(reads: list[TimedRead], writes: list[TimedWrite]) -> dict[int, str]:
    return {v.op_id: v.anomaly for v in classify_reads(reads, writes)}


CHURN = [write(A, 0, 10), write(B, 20, 30), write(A, 40, 50)]
"""The route churn: A, then B, then A again."""


def test_a_read_of_a_route_replaced_before_it_was_asked_is_stale() -> None:
    writes = [write(A, 0, 10), write(B, 20, 30)]
    assert classes([read(1, A, 40, 41)], writes) == {1: STALE_READ}


def test_a_read_concurrent_with_the_replacing_write_is_not_stale() -> None:
    writes = [write(A, 0, 10), write(B, 20, 50)]
    assert classes([read(1, A, 40, 41), read(2, B, 40, 41)], writes) == {1: OK, 2: OK}


def test_concurrent_writes_may_land_in_either_order() -> None:
    writes = [write(A, 0, 10), write(B, 20, 30), write(C, 25, 35)]
    assert classes([read(1, B, 40, 41), read(2, C, 40, 41), read(3, A, 40, 41)], writes) == {
        1: OK,
        2: OK,
        3: STALE_READ,
    }


def test_in_the_churn_a_read_of_the_old_route_is_fine_while_it_is_written_again() -> None:
    reads = [read(1, A, 45, 46), read(2, A, 35, 36), read(3, B, 60, 61), read(4, B, 45, 46)]
    assert classes(reads, CHURN) == {1: OK, 2: STALE_READ, 3: STALE_READ, 4: OK}


def test_a_write_that_timed_out_may_have_happened_but_replaces_nothing_for_sure() -> None:
    writes = [write(A, 0, 10), write(B, 20, PENDING)]
    assert classes([read(1, A, 100, 101), read(2, B, 100, 101)], writes) == {1: OK, 2: OK}


def test_a_route_no_write_had_is_never_written() -> None:
    assert classes([read(1, C, 40, 41)], CHURN) == {1: NEVER_WRITTEN}


def test_a_route_put_together_from_written_shares_is_never_written_but_composed() -> None:
    # The write of C+A timed out; B+C was valued without its share of a, and landed after.
    a, b, c = A, B.split(",")[1], C
    writes = [write(a, 0, 10), write(f"{a},{c}", 20, PENDING), write(f"{b},{c}", 30, 40)]
    reads = [read(1, f"{a},{b},{c}", 50, 51), read(2, f"{a},{b},{c}", 5, 6), read(3, A, 50, 51)]
    verdicts = {v.op_id: (v.anomaly, v.composed) for v in classify_reads(reads, writes)}
    assert verdicts == {
        1: (NEVER_WRITTEN, True),
        # Before any write with b or c was called: a share nobody had written yet.
        2: (NEVER_WRITTEN, False),
        3: (STALE_READ, False),
    }


def test_a_route_from_a_write_invoked_after_the_read_is_never_written() -> None:
    writes = [write(A, 0, 10), write(B, 50, 60)]
    assert classes([read(1, B, 20, 30), read(2, B, 45, 55)], writes) == {
        1: NEVER_WRITTEN,
        2: OK,
    }


def test_topic_not_exist_after_the_topic_was_written_is_for_a_live_topic() -> None:
    writes = [write(A, 0, 10)]
    assert classes([read(1, "", 20, 21), read(2, "", 5, 6)], writes) == {
        1: NOT_EXIST_LIVE,
        2: OK,
    }


def test_topic_not_exist_during_a_concurrent_delete_is_fine() -> None:
    writes = [write(A, 0, 10), write("", 20, 40)]
    assert classes([read(1, "", 25, 26), read(2, "", 50, 51)], writes) == {1: OK, 2: OK}


def test_topic_not_exist_after_a_recreate_was_acknowledged_is_for_a_live_topic() -> None:
    writes = [write(A, 0, 10), write("", 20, 30), write(B, 40, 50)]
    assert classes([read(1, "", 60, 61)], writes) == {1: NOT_EXIST_LIVE}


def test_a_client_reading_an_older_route_than_it_saw_is_non_monotonic() -> None:
    writes = [write(A, 0, 10), write(B, 20, 30)]
    reads = [
        read(1, B, 25, 26),
        read(2, A, 27, 28),
        read(3, A, 27, 28, client="c2"),
        read(4, A, 26, 29, client="c3"),
        read(5, B, 25, 27, client="c3"),
    ]
    assert classes(reads, writes) == {1: OK, 2: NON_MONOTONIC_READ, 3: OK, 4: OK, 5: OK}


def test_a_client_in_the_churn_may_see_the_old_route_again_once_it_is_rewritten() -> None:
    reads = [read(1, B, 35, 36), read(2, A, 45, 46)]
    assert classes(reads, CHURN) == {1: OK, 2: OK}


def test_a_stale_read_is_counted_once_as_stale_not_also_non_monotonic() -> None:
    writes = [write(A, 0, 10), write(B, 20, 30)]
    assert classes([read(1, B, 31, 32), read(2, A, 40, 41)], writes) == {1: OK, 2: STALE_READ}


def test_versions_going_back_are_reported_across_nodes_only_in_raft() -> None:
    writes = [write(A, 0, 10)]
    reads = [
        read(1, A, 20, 21, node="n1", version=5),
        read(2, A, 30, 31, node="n2", version=3),
        read(3, A, 40, 41, node="n1", version=4),
        read(4, A, 50, 51, node="n1", version=-1),
    ]
    raft = classify_reads(reads, writes, versions_across_nodes=True)
    eventual = classify_reads(reads, writes, versions_across_nodes=False)
    assert [v.version_backwards for v in raft] == [False, True, True, False]
    assert [v.version_backwards for v in eventual] == [False, False, True, False]
    assert {v.anomaly for v in raft + eventual} == {OK}


def _row(op_id: int, kind: str, outcome: str, value: str, ms: tuple[int, int], **us: int) -> Any:
    return {
        "op_id": op_id,
        "process": "c1",
        "node": "n0",
        "kind": kind,
        "outcome": outcome,
        "value": value,
        "version": -1,
        "invoke_ms": ms[0],
        "complete_ms": ms[1],
        **us,
    }


def test_rows_are_ordered_by_microseconds_when_they_have_them() -> None:
    rows = [
        _row(1, "register", "ok", A, (0, 0)),
        _row(2, "register", "ok", B, (1, 1), invoke_us=1100, complete_us=1200),
        _row(3, "route_read", "ok", A, (1, 1), invoke_us=1500, complete_us=1600),
    ]
    in_ms = [{k: v for k, v in r.items() if not k.endswith("_us")} for r in rows]
    assert [v.anomaly for v in classify_rows(rows)] == [STALE_READ]
    assert [v.anomaly for v in classify_rows(in_ms)] == [OK]


def test_rows_that_are_no_reads_are_not_classified() -> None:
    rows = [
        _row(1, "register", "timeout", C, (0, 5)),
        _row(2, "route_read", "timeout", "", (10, 20)),
        _row(3, "route_read", "not_found", "", (10, 20)),
        _row(4, "route_read", "ok", C, (30, 31)),
        _row(5, "send", "ok", "0", (30, 31)),
    ]
    assert {v.op_id: v.anomaly for v in classify_rows(rows)} == {3: OK, 4: OK}


# ----------------------------------------------------------------- random histories

VALUES = ("", "a", "b")


@st.composite
def sequential_histories(draw: st.DrawFn) -> tuple[list[TimedWrite], list[TimedRead]]:
    """A register run one operation at a time: every write and read takes effect at its
    own instant inside its interval; a timed-out write took effect at its instant or
    never. Versions count the writes applied, as a raft node's routes version does."""
    count = draw(st.integers(1, 14))
    instants = sorted(draw(st.sets(st.integers(0, 400), min_size=count, max_size=count)))
    state, version = "", 0
    writes: list[TimedWrite] = []
    reads: list[TimedRead] = []
    for op_id, instant in enumerate(instants):
        invoke = instant - draw(st.integers(0, 60))
        complete = instant + draw(st.integers(0, 60))
        if draw(st.booleans()):
            value = draw(st.sampled_from(VALUES))
            lost = draw(st.integers(0, 4)) == 0
            applied = not lost or draw(st.booleans())
            writes.append(TimedWrite(value, invoke, TIME_MAX_US if lost else complete))
            if applied:
                state, version = value, version + 1
        else:
            client = draw(st.sampled_from(("c1", "c2")))
            node = draw(st.sampled_from(("n0", "n1")))
            reads.append(TimedRead(op_id, client, node, state, invoke, complete, version))
    return writes, reads


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequential_histories())
def test_reads_of_a_sequential_register_have_no_anomaly(
    history: tuple[list[TimedWrite], list[TimedRead]],
) -> None:
    writes, reads = history
    verdicts = classify_reads(reads, writes, versions_across_nodes=True)
    assert [(v.anomaly, v.version_backwards) for v in verdicts] == [(OK, False)] * len(reads)


@st.composite
def any_histories(draw: st.DrawFn) -> tuple[list[TimedWrite], list[TimedRead]]:
    """Small histories of any shape: overlapping, pending, reads of any value."""
    writes, reads = [], []
    for op_id in range(draw(st.integers(1, 7))):
        invoke = draw(st.integers(0, 40))
        complete = invoke + draw(st.integers(0, 8))
        value = draw(st.sampled_from(VALUES))
        if draw(st.booleans()):
            pending = draw(st.integers(0, 4)) == 0
            writes.append(TimedWrite(value, invoke, TIME_MAX_US if pending else complete))
        else:
            client = draw(st.sampled_from(("c1", "c2")))
            reads.append(TimedRead(op_id, client, "n0", value, invoke, complete))
    return writes, reads


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_histories())
def test_a_flagged_read_makes_the_history_fail_the_checker(
    history: tuple[list[TimedWrite], list[TimedRead]],
) -> None:
    writes, reads = history
    if all(v.anomaly == OK for v in classify_reads(reads, writes)):
        return
    ops = [
        RegisterOp(
            -i - 1,
            True,
            w.value,
            w.invoke_us,
            None if w.complete_us == TIME_MAX_US else w.complete_us,
        )
        for i, w in enumerate(writes)
    ]
    ops += [RegisterOp(r.op_id, False, r.value, r.invoke_us, r.complete_us) for r in reads]
    assert check_register(ops).verdict == NOT_LINEARIZABLE


# --------------------------------------------------------------------------- in Spark


def _history_root(root: Path) -> Path:
    """One run of topic T with one read of each class and two fine reads, and a topic U
    answered TOPIC_NOT_EXIST before it was created."""
    meta = RunMeta(run_id="a1", scenario="anom", mode="raft", seed=0, nodes=["n0", "n1"])
    rows = [
        (1, "admin", "register", "n0", "T", 0, 10, "ok", A, -1),
        (2, "admin", "register", "n0", "T", 20, 30, "ok", B, -1),
        (3, "c1", "route_read", "n0", "T", 25, 26, "ok", B, 7),
        (4, "c1", "route_read", "n1", "T", 27, 28, "ok", A, 6),
        (5, "c2", "route_read", "n0", "T", 40, 41, "ok", A, -1),
        (6, "c2", "route_read", "n0", "T", 42, 43, "ok", C, -1),
        (7, "c2", "route_read", "n0", "T", 44, 45, "not_found", "", -1),
        (8, "c2", "route_read", "n0", "T", 46, 47, "ok", B, -1),
        (9, "c2", "route_read", "n0", "T", 48, 49, "error", "", -1),
        (10, "c3", "route_read", "n0", "U", 0, 1, "not_found", "", -1),
        (11, "admin", "create_topic", "n0", "U", 5, 9, "ok", C, -1),
    ]
    names = ("op_id", "process", "kind", "node", "topic", "invoke_ms", "complete_ms")
    names += ("outcome", "value", "version")
    with HistoryWriter(root / "a1", meta) as out:
        for row in rows:
            out.operation(_schema_row(dict(zip(names, row, strict=True))))
    return root


def _schema_row(row: dict[str, Any]) -> tuple[Any, ...]:
    """The row in the order of the operations schema, microseconds from the milliseconds
    where the schema has them."""
    row = {**row, "broker": "", "extra": "{}"}
    row["invoke_us"], row["complete_us"] = row["invoke_ms"] * 1000, row["complete_ms"] * 1000
    return tuple(row.get(field.name) for field in OPERATIONS_SCHEMA)


@pytest.mark.slow
def test_the_anomalies_table_counts_each_class_per_mode_and_scenario(
    spark: Any, tmp_path: Path
) -> None:
    from spark_jobs.dataset import load_history

    history = load_history(spark, _history_root(tmp_path))
    per_topic = classify_topics(history.operations).cache()
    [row] = [r.asDict() for r in anomaly_summary(per_topic).collect()]
    [live] = [r.asDict() for r in not_exist_live_summary(per_topic).collect()]
    per_topic.unpersist()
    assert row == {
        "mode": "raft",
        "scenario": "anom",
        "reads": 7,
        "never_written": 1,
        "not_exist_live": 1,
        "stale_read": 1,
        "non_monotonic_read": 1,
        "version_backwards": 1,
        "never_written_composed": 0,
        "examples": [
            "never_written a1/6",
            "non_monotonic_read a1/4",
            "not_exist_live a1/7",
            "stale_read a1/5",
            "version_backwards a1/4",
        ],
    }
    assert (live["reads"], live["not_exist_live"]) == (7, 1)


def test_the_report_gives_each_class_in_reads_for_both_modes() -> None:
    rows = [
        {"mode": "eventual", "scenario": "s", "reads": 120, "stale_read": 5, "examples": []},
        {"mode": "raft", "scenario": "s", "reads": 118, "stale_read": 0, "examples": []},
    ]
    text = section_markdown(SECTION_BY_NAME["anomalies"], rows, ["eventual", "raft"])
    assert "## Read anomalies (reads)" in text
    assert "| stale_read | 5 | 0 |" in text
    assert "stale_read: it got a route some acknowledged write had already replaced" in text
