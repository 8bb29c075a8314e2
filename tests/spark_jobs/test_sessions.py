"""Session guarantees (``spark_jobs.sessions``): monotonic reads and read-your-writes per
client process.

Each rule is tested on hand-written histories in microseconds (no Spark), a violating and
a satisfying one each, then both in Spark over a small hand-built root of two runs (times
in ms there, every number worked out by hand from the rows), and in the report and
``summary.json``'s per-mode objects.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import HistoryWriter, RunMeta
from experiment_history.superseding import TIME_MAX_US
from experiment_reports.report import (
    MODES_KEY,
    SECTION_BY_NAME,
    SESSION_TABLE,
    markdown_verdicts,
    section_markdown,
    write_tables,
)
from experiment_reports.text import client_paragraph
from spark_jobs.sessions import (
    SessionRead,
    SessionWrite,
    monotonic_reads,
    read_your_writes,
    session_summary,
    sessions_by_topic,
    split_rows,
)
from tests.spark_jobs.conftest import op

A = "a:h1:10911:4:4:6"
B = "a:h1:10911:4:4:6,b:h2:10911:4:4:6"
C = "c:h3:10911:4:4:6"


def w(
    op_id: int, value: str, invoke: int, complete: int | None, process: str = "w"
) -> SessionWrite:
    """An acknowledged write; ``complete`` None: it failed or timed out (pending)."""
    end = TIME_MAX_US if complete is None else complete
    return SessionWrite(op_id, process, value, invoke, end, own=complete is not None)


def r(op_id: int, value: str, invoke: int, complete: int, process: str = "c1") -> SessionRead:
    return SessionRead(op_id, process, value, invoke, complete)


WRITES = [w(1, A, 0, 10), w(2, B, 20, 30)]
"""A then B, one after the other: A precedes B."""


# ------------------------------------------------------------------ monotonic reads


def test_a_session_reading_b_then_a_goes_back_in_time() -> None:
    count = monotonic_reads([r(10, B, 40, 41), r(11, A, 50, 51)], WRITES)
    assert (count.checked, count.violations, count.examples) == (1, 1, [(11, 10)])
    assert count.sessions == {"c1"}


def test_a_session_reading_a_then_b_is_monotonic() -> None:
    count = monotonic_reads([r(10, A, 25, 26), r(11, B, 50, 51)], WRITES)
    assert (count.checked, count.violations) == (1, 0)


def test_two_sessions_are_never_compared_and_overlapping_reads_are_not_ordered() -> None:
    # c2's A after c1's B is no session going back; c1's two reads overlap.
    reads = [r(10, B, 40, 41), r(11, A, 50, 51, "c2"), r(12, A, 40, 45), r(13, B, 41, 44)]
    count = monotonic_reads(reads, WRITES)
    assert (count.checked, count.violations) == (0, 0)


def test_concurrent_writes_may_be_read_in_either_order() -> None:
    writes = [w(1, A, 0, 30), w(2, B, 20, 40)]
    count = monotonic_reads([r(10, B, 50, 51), r(11, A, 60, 61)], writes)
    assert (count.checked, count.violations) == (1, 0)


def test_a_pending_write_precedes_nothing() -> None:
    writes = [w(1, A, 0, None), w(2, B, 20, 30)]
    count = monotonic_reads([r(10, B, 40, 41), r(11, A, 50, 51)], writes)
    assert (count.checked, count.violations) == (1, 0)


def test_the_absent_route_after_a_created_one_goes_back() -> None:
    count = monotonic_reads([r(10, A, 40, 41), r(11, "", 50, 51)], [w(1, A, 0, 10)])
    assert (count.checked, count.violations) == (1, 1)


# ------------------------------------------------------------------ read-your-writes


def test_the_writer_reading_the_route_its_write_replaced_misses_its_write() -> None:
    reads = [r(10, A, 40, 41, "admin")]
    count = read_your_writes(reads, [w(1, A, 0, 10), w(2, B, 20, 30, "admin")])
    assert (count.checked, count.violations, count.examples) == (1, 1, [(10, 2)])
    assert count.sessions == {"admin"}


def test_the_writer_reading_its_write_or_a_later_one_sees_it() -> None:
    writes = [w(1, A, 0, 10), w(2, B, 20, 30, "admin"), w(3, C, 60, 70)]
    reads = [r(10, B, 40, 41, "admin"), r(11, C, 80, 81, "admin")]
    count = read_your_writes(reads, writes)
    assert (count.checked, count.violations) == (2, 0)


def test_only_reads_invoked_after_the_ack_and_of_the_writer_count() -> None:
    writes = [w(1, A, 0, 10), w(2, B, 20, 30, "admin")]
    # Invoked before the ack (may precede the write); another session's stale read.
    reads = [r(10, A, 25, 41, "admin"), r(11, A, 40, 41, "c1")]
    count = read_your_writes(reads, writes)
    assert (count.checked, count.violations) == (0, 0)


def test_the_raft_cluster_and_inferred_writes_are_no_session_s_own() -> None:
    rows = [
        op(1, "raft", "expire", "T", 0, 10, value=A),
        op(2, "raft", "route_read", "T", 20, 21, value=""),
        op(3, "ns-n1", "register", "T", 30, 40, value=B),
        op(4, "ns-n1", "route_read", "T", 50, 51, value=""),
    ]
    names = ("op_id", "process", "kind", "node", "topic", "invoke_ms", "complete_ms")
    names += ("outcome", "value", "version", "broker", "extra", "invoke_us", "complete_us")
    dict_rows = [dict(zip(names, row, strict=True)) for row in rows]
    dict_rows[2]["origin"] = "inferred"
    reads, writes = split_rows(dict_rows)
    assert [x.own for x in writes] == [False, False]
    assert read_your_writes(reads, writes).checked == 0


# ------------------------------------------------------------------------- in Spark


def _run(root: Path, run_id: str, mode: str, ops: list[Any]) -> None:
    meta = RunMeta(run_id=run_id, scenario="sessions", mode=mode, seed=0, nodes=["n0", "n1"])
    with HistoryWriter(root / run_id, meta) as out:
        for row in ops:
            out.operation(row)


def _root(root: Path) -> Path:
    """Run ``ev`` (eventual): topic T written A then B by the admin; client c1 reads B then
    A (a monotonic-reads violation), the admin reads A back after B's ack (a
    read-your-writes violation), c2 reads A then B (fine). Topic U: the admin writes C and
    reads C back (fine). Run ``rf`` (raft): the same writes, every read in order."""
    writes = [
        op(1, "admin", "register", "T", 0, 10, value=A),
        op(2, "admin", "register", "T", 20, 30, value=B),
        op(3, "admin", "create_topic", "U", 0, 10, value=C),
    ]
    _run(
        root,
        "ev",
        "eventual",
        [
            *writes,
            op(10, "c1", "route_read", "T", 40, 41, value=B),
            op(11, "c1", "route_read", "T", 50, 51, value=A),
            op(12, "admin", "route_read", "T", 40, 42, value=A),
            op(13, "c2", "route_read", "T", 12, 14, value=A),
            op(14, "c2", "route_read", "T", 50, 51, value=B),
            op(15, "admin", "route_read", "U", 20, 21, value=C),
        ],
    )
    _run(
        root,
        "rf",
        "raft",
        [
            *writes,
            op(10, "c1", "route_read", "T", 40, 41, value=B),
            op(11, "c1", "route_read", "T", 50, 51, value=B),
            op(12, "admin", "route_read", "T", 40, 42, value=B),
            op(15, "admin", "route_read", "U", 20, 21, value=C),
        ],
    )
    return root


@pytest.mark.slow
def test_both_rules_in_spark_in_the_report_and_in_summary_json(spark: Any, tmp_path: Path) -> None:
    from spark_jobs.dataset import load_history

    history = load_history(spark, _root(tmp_path / "runs"))
    rows = [x.asDict(recursive=True) for x in session_summary(sessions_by_topic(history)).collect()]
    assert rows == [
        {
            "run_id": "ev",
            "mode": "eventual",
            "scenario": "sessions",
            "monotonic_reads_sessions": 2,
            "monotonic_reads_checked": 2,
            "monotonic_reads_violations": 1,
            "read_your_writes_sessions": 1,
            "read_your_writes_checked": 2,
            "read_your_writes_violations": 1,
            "examples": [
                "monotonic_reads ev/11 (against 10)",
                "read_your_writes ev/12 (against 2)",
            ],
        },
        {
            "run_id": "rf",
            "mode": "raft",
            "scenario": "sessions",
            "monotonic_reads_sessions": 1,
            "monotonic_reads_checked": 1,
            "monotonic_reads_violations": 0,
            "read_your_writes_sessions": 1,
            "read_your_writes_checked": 2,
            "read_your_writes_violations": 0,
            "examples": [],
        },
    ]
    tables = {SESSION_TABLE: rows}
    text = section_markdown(SECTION_BY_NAME[SESSION_TABLE], rows, ["eventual", "raft"])
    assert "## Session guarantees: monotonic reads and read-your-writes" in text
    assert "monotonic_reads ev/11 (against 10)" in text
    verdicts = markdown_verdicts(tables)
    assert (
        "| satisfies monotonic reads (per session) | no (1 violations of 2 reads checked, "
        "2 sessions) | yes (0 violations of 1 reads checked, 1 sessions) |"
    ) in verdicts
    assert (
        "| satisfies read-your-writes (per session) | no (1 violations of 2 reads checked, "
        "1 sessions) | yes (0 violations of 2 reads checked, 1 sessions) |"
    ) in verdicts
    write_tables(tmp_path / "report", tables)
    modes = json.loads((tmp_path / "report" / "summary.json").read_text())[MODES_KEY]
    assert modes["eventual"]["monotonic_reads"] == {
        "satisfied": False,
        "violations": 1,
        "checked": 2,
    }
    assert modes["eventual"]["read_your_writes"] == {
        "satisfied": False,
        "violations": 1,
        "checked": 2,
    }
    assert modes["raft"]["monotonic_reads"] == {"satisfied": True, "violations": 0, "checked": 1}
    assert modes["raft"]["read_your_writes"] == {"satisfied": True, "violations": 0, "checked": 2}


def test_the_client_prose_says_which_guarantee_held() -> None:
    rows = [
        {
            "run_id": "ev",
            "mode": "eventual",
            "monotonic_reads_checked": 40,
            "monotonic_reads_violations": 2,
            "read_your_writes_checked": 0,
            "read_your_writes_violations": 0,
        },
        {
            "run_id": "rf",
            "mode": "raft",
            "monotonic_reads_checked": 30,
            "monotonic_reads_violations": 0,
            "read_your_writes_checked": 3,
            "read_your_writes_violations": 0,
        },
    ]
    tables = {SESSION_TABLE: rows}
    eventual, raft = (client_paragraph(tables, mode) for mode in ("eventual", "raft"))
    assert (
        "In 2 of 40 (5 %) reads checked a client session got a route older than one it had "
        "already read (monotonic reads broken); read-your-writes had no read to check."
    ) in eventual
    assert "(monotonic reads held over 30 reads)" in raft
    assert "(read-your-writes held over 3 reads)" in raft
    assert "Session guarantees were not measured." in client_paragraph({}, "raft")
