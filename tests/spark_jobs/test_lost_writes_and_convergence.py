"""Lost acknowledged writes (``spark_jobs.lost_writes``) and the time to converge after
each heal (``spark_jobs.convergence``).

The rules are tested on hand-written histories in microseconds (no Spark), then both tables
once in Spark over a small hand-built root (times in ms there, every number worked out by
hand from the rows).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import HistoryWriter, RunMeta
from experiment_history.superseding import TIME_MAX_US, TimedWrite, TopicWrites
from experiment_reports.report import SECTION_BY_NAME, section_markdown
from spark_jobs.convergence import (
    CONVERGED,
    HEAL_COLUMN,
    NOT_CONVERGED,
    START_COLUMN,
    TOPIC_MAX_COLUMN,
    TOPIC_MEDIAN_COLUMN,
    TOPICS_COLUMN,
    convergence_after_heals,
    first_converged,
    round_converged,
)
from spark_jobs.lost_writes import (
    LostWrite,
    ObservedRead,
    OpWrite,
    lost_writes,
    lost_writes_by_topic,
    lost_writes_summary,
    split_rows,
)
from tests.spark_jobs.conftest import op

A = "a:h1:10911:4:4:6"
B = "a:h1:10911:4:4:6,b:h2:10911:4:4:6"
C = "c:h3:10911:4:4:6"


def w(op_id: int, value: str, invoke: int, complete: int | None) -> OpWrite:
    """A write; ``complete`` None: it failed or timed out (pending)."""
    return OpWrite(op_id, value, invoke, TIME_MAX_US if complete is None else complete)


def r(op_id: int, value: str, invoke: int, complete: int) -> ObservedRead:
    return ObservedRead(op_id, value, invoke, complete)


def sample(value: str, ts: int) -> ObservedRead:
    """A node sample: answered at some unknown time from ``ts`` on."""
    return ObservedRead(-1, value, ts, TIME_MAX_US, evidence=False)


# ------------------------------------------------------------------------ lost writes


def test_an_acked_write_never_seen_while_an_older_route_is_read_is_lost() -> None:
    writes = [w(1, A, 0, 10), w(2, B, 20, 30)]
    assert lost_writes([r(10, A, 40, 41)], writes) == [LostWrite(2, 10)]


def test_a_write_simply_replaced_by_a_later_one_is_not_lost() -> None:
    # A is never read, but nothing read between its ack and B's call shows it missing.
    writes = [w(1, A, 0, 10), w(2, B, 20, 30)]
    assert lost_writes([r(10, B, 40, 41)], writes) == []


def test_in_the_churn_a_read_overlapping_the_rewrite_of_the_old_route_proves_nothing() -> None:
    writes = [w(1, A, 0, 10), w(2, B, 20, 30), w(3, A, 40, 50)]
    assert lost_writes([r(10, A, 35, 45), r(11, A, 60, 61)], writes) == []


def test_in_the_churn_the_old_route_before_the_rewrite_is_called_loses_the_write() -> None:
    writes = [w(1, A, 0, 10), w(2, B, 20, 30), w(3, A, 40, 50)]
    assert lost_writes([r(10, A, 32, 35), r(11, A, 60, 61)], writes) == [LostWrite(2, 10)]


def test_a_write_that_timed_out_is_never_counted_lost() -> None:
    writes = [w(1, A, 0, 10), w(2, B, 20, None)]
    assert lost_writes([r(10, A, 40, 41)], writes) == []


def test_a_pending_write_of_the_read_route_explains_the_read() -> None:
    # The timed-out rewrite of A may take effect after B: A at 40 is then no proof.
    writes = [w(1, A, 0, 10), w(3, A, 15, None), w(2, B, 20, 30)]
    assert lost_writes([r(10, A, 40, 41)], writes) == []


def test_a_write_concurrent_with_the_acked_one_explains_the_read() -> None:
    writes = [w(1, A, 0, 10), w(2, B, 20, 30), w(3, C, 25, 28)]
    assert lost_writes([r(10, C, 40, 41)], writes) == []


def test_a_read_that_could_have_returned_the_write_makes_it_seen() -> None:
    writes = [w(1, A, 0, 10), w(2, B, 20, 30)]
    assert lost_writes([r(9, B, 25, 26), r(10, A, 40, 41)], writes) == []


def test_a_node_sample_of_the_route_makes_it_seen() -> None:
    writes = [w(1, A, 0, 10), w(2, B, 20, 30)]
    assert lost_writes([sample(B, 100), r(10, A, 40, 41)], writes) == []
    # A sample never proves a write lost: its answer time is unknown.
    assert lost_writes([sample(A, 35)], writes) == []


def test_the_absent_route_after_an_acked_create_loses_it() -> None:
    assert lost_writes([r(10, "", 40, 41)], [w(1, A, 0, 10)]) == [LostWrite(1, 10)]


def test_writes_of_the_raft_cluster_are_no_candidates() -> None:
    rows = [
        op(1, "admin", "register", "T", 0, 10, value=A),
        op(2, "raft", "expire", "T", 20, 30, value=B),
        op(3, "c1", "route_read", "T", 40, 41, value=A),
    ]
    names = ("op_id", "process", "kind", "node", "topic", "invoke_ms", "complete_ms")
    names += ("outcome", "value", "version", "broker", "extra", "invoke_us", "complete_us")
    reads, writes = split_rows([dict(zip(names, row, strict=True)) for row in rows])
    assert lost_writes(reads, writes) == []
    assert [x.candidate for x in writes] == [True, False]


# ------------------------------------------------------------------------ convergence


def test_a_round_converges_when_every_node_answers_the_latest_acked_route() -> None:
    index = TopicWrites([TimedWrite(A, 0, 10_000), TimedWrite(B, 1_000_000, 1_010_000)])
    assert round_converged(index, 2000, [B], answered=2, nodes=2)
    assert not round_converged(index, 2000, [A, B], answered=2, nodes=2)
    assert not round_converged(index, 2000, [A], answered=2, nodes=2)
    assert not round_converged(index, 2000, [B], answered=1, nodes=2)


def test_the_time_to_converge_counts_from_the_heal_and_none_is_not_a_number() -> None:
    assert first_converged(2000, [0, 5000, 7500]) == 3000
    assert first_converged(8000, [0, 5000, 7500]) is None


# ------------------------------------------------------------------------- in Spark


def _run(root: Path, run_id: str, ops: list[Any], faults: list[Any], states: list[Any]) -> None:
    meta = RunMeta(run_id=run_id, scenario="heal", mode="raft", seed=0, nodes=["n0", "n1"])
    with HistoryWriter(root / run_id, meta) as out:
        for row in ops:
            out.operation(row)
        for row in faults:
            out.fault(row)
        for row in states:
            out.node_state(row)


def _root(root: Path) -> Path:
    """Run ``conv``: topic T written A then B (acked at 1010 ms), a partition healed at
    2000 ms and a namesrv kill healed at 4000; the nodes agree on B from the round at
    5000 on. Topic L loses its acked write B (read 12 returns A before any other write).
    Topic U is sampled but never written (not exercised). Run ``never``: healed at 1000,
    n1 keeps answering A after B's ack; an open fault has no heal."""
    conv_ops = [
        op(1, "admin", "register", "T", 0, 10, value=A),
        op(2, "admin", "register", "T", 1000, 1010, value=B),
        op(10, "admin", "register", "L", 0, 10, value=A),
        op(11, "admin", "register", "L", 20, 30, value=B),
        op(12, "c1", "route_read", "L", 40, 41, value=A),
    ]
    rounds = {0: (A, A), 2500: (A, B), 5000: (B, B), 7500: (B, B)}
    states = [(ts, f"n{n}", "T", v[n], -1) for ts, v in rounds.items() for n in (0, 1)]
    states += [(ts, f"n{n}", "U", C, -1) for ts in rounds for n in (0, 1)]
    faults = [(500, 2000, "partition", "n1", "{}"), (3000, 4000, "kill_namesrv", "n0", "{}")]
    _run(root, "conv", conv_ops, faults, states)
    never_ops = [
        op(1, "admin", "register", "T", 0, 10, value=A),
        op(2, "admin", "register", "T", 500, 510, value=B),
    ]
    states = [(ts, f"n{n}", "T", (B, A)[n], -1) for ts in (0, 2000, 4000) for n in (0, 1)]
    faults = [(200, 1000, "partition", "n1", "{}"), (3000, -1, "kill_namesrv", "n0", "{}")]
    _run(root, "never", never_ops, faults, states)
    return root


@pytest.mark.slow
def test_both_tables_in_spark_and_in_the_report(spark: Any, tmp_path: Path) -> None:
    from spark_jobs.dataset import load_history

    history = load_history(spark, _root(tmp_path))
    lost = [x.asDict() for x in lost_writes_summary(lost_writes_by_topic(history)).collect()]
    assert lost == [
        {
            "run_id": "conv",
            "mode": "raft",
            "scenario": "heal",
            "acked_writes": 4,
            "lost_writes": 1,
            "lost_share": 0.25,
            "examples": ["conv/11 (read 12)"],
        },
        {
            "run_id": "never",
            "mode": "raft",
            "scenario": "heal",
            "acked_writes": 2,
            "lost_writes": 0,
            "lost_share": 0.0,
            "examples": [],
        },
    ]
    heals = [x.asDict() for x in convergence_after_heals(history).collect()]
    # Both runs' recordings start at 10 ms, their first operation's completion: the heal
    # moments are shown in seconds from there, not as (here tiny) epoch milliseconds.
    assert [
        (h["run_id"], h["fault_kind"], h[HEAL_COLUMN], h["status"], h["converge_ms"]) for h in heals
    ] == [
        ("conv", "partition", 1.99, CONVERGED, 3000),
        ("conv", "kill_namesrv", 3.99, CONVERGED, 1000),
        ("never", "partition", 0.99, NOT_CONVERGED, None),
    ]
    assert [h[START_COLUMN] for h in heals] == [0.49, 2.99, 0.19]
    # Each topic on its own: T agreed from the round at 5000 (3000 and 1000 ms after the
    # heals); in run "never" n1 keeps A, so T never converges.
    assert [(h[TOPICS_COLUMN], h[TOPIC_MEDIAN_COLUMN], h[TOPIC_MAX_COLUMN]) for h in heals] == [
        ("1 of 1", 3000, 3000),
        ("1 of 1", 1000, 1000),
        ("0 of 1", None, None),
    ]
    text = section_markdown(SECTION_BY_NAME["convergence"], heals, ["raft"])
    assert "## Time to converge after each heal" in text
    assert "| start (s from start) | heal (s from start) |" in text
    assert (
        "| never | raft | heal | partition | n1 | 0.19 | 0.99 | not converged | — "
        "| 0 of 1 | — | — |" in text
    )
    text = section_markdown(SECTION_BY_NAME["lost_writes"], lost, ["raft"])
    assert "## Lost acknowledged writes" in text
    assert "conv/11 (read 12)" in text
