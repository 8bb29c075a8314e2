"""Two masters of one broker name at once (``spark_jobs.two_masters``).

The rule on hand-written items of one broker name in microseconds (no Spark), then the
table once in Spark over two small runs: one whose client is sent back to the deposed
master after another client saw the elected one, one clean failover.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import HistoryWriter, RunMeta
from experiment_reports.report import mode_summary
from spark_jobs.two_masters import Flagged, flags_of, named_masters
from tests.spark_jobs.conftest import op

OLD = "127.0.0.1:30001"
NEW = "127.0.0.1:30003"
BEFORE = [(True, 1, OLD, 0, 10)]
"""The warm-up's write naming the old master."""
ELECTION = [(True, 2, NEW, 100, 200)]
"""The election: the slave becomes the master."""


def test_a_read_of_the_deposed_master_after_another_read_saw_the_new_one_is_flagged() -> None:
    reads = [(False, 10, NEW, 210, 220), (False, 11, OLD, 230, 240)]
    assert flags_of(BEFORE + ELECTION + reads) == [Flagged(11, 10)]


def test_reads_of_the_old_master_during_the_election_are_not_flagged() -> None:
    # 11 overlaps the read that saw the new master; 12 ran while the election was in flight.
    reads = [(False, 10, NEW, 150, 160), (False, 11, OLD, 155, 170), (False, 12, OLD, 120, 130)]
    assert flags_of(BEFORE + ELECTION + reads) == []


def test_a_later_failover_back_to_the_old_master_is_not_flagged() -> None:
    back = [(True, 3, OLD, 300, 400)]
    reads = [(False, 10, NEW, 210, 220), (False, 11, OLD, 390, 410)]
    assert flags_of(BEFORE + ELECTION + back + reads) == []
    # The same read before the write back to the old master was called is flagged.
    early = [(False, 10, NEW, 210, 220), (False, 11, OLD, 250, 260)]
    assert flags_of(BEFORE + ELECTION + back + early) == [Flagged(11, 10)]


def test_a_pending_write_of_the_old_master_explains_the_read() -> None:
    pending = [(True, 3, OLD, 205, None)]
    reads = [(False, 10, NEW, 210, 220), (False, 11, OLD, 230, 240)]
    assert flags_of(BEFORE + ELECTION + pending + reads) == []


def test_a_master_no_write_named_is_never_written_not_this_class() -> None:
    reads = [(False, 10, NEW, 210, 220), (False, 11, "127.0.0.1:9", 230, 240)]
    assert flags_of(BEFORE + ELECTION + reads) == []


def test_a_route_names_each_broker_with_its_master_and_no_master_is_none() -> None:
    value = f"a:{OLD}:4:4:6,a:{NEW}:4:4:6,b:-:4:4:6"
    assert named_masters(value) == {"a": {OLD, NEW}}


def _route(master: str, queues: int = 4) -> str:
    return f"fo:{master}:{queues}:{queues}:6"


def _write_run(root: Path, run_id: str, ops: list[tuple[Any, ...]]) -> None:
    meta = RunMeta(run_id=run_id, scenario="nemesis", mode="raft", seed=0, nodes=["n0", "n1"])
    with HistoryWriter(root / run_id, meta) as out:
        for row in ops:
            out.operation(row)


def _root(root: Path) -> Path:
    """Run ``flip``: the election (op 2) names the new master; c1 reads it at 300 ms, then
    c2 asks n1 at 400 ms and is told the old master (op 11), plus one answer naming both
    (op 12). Run ``clean``: the same failover, every read after the first read of the new
    master names it (op 11 of the old master overlaps the election)."""
    common = [
        op(1, "warmup", "register", "failover-000", 0, 10, value=_route(OLD)),
        op(2, "raft", "register", "failover-000", 100, 200, value=_route(NEW)),
        op(3, "fo", "register", "failover-000", 500, 510, value=_route(NEW, 5)),
        op(4, "p1", "route_read", "topic-000", 50, 51, value="x:h9:1:4:4:6"),
    ]
    flip = [
        op(10, "c1", "route_read", "failover-000", 300, 301, value=_route(NEW)),
        op(11, "c2", "route_read", "failover-000", 400, 401, value=_route(OLD), node="n1"),
        op(12, "c2", "route_read", "failover-000", 402, 403, value=f"{_route(OLD)},{_route(NEW)}"),
    ]
    clean = [
        op(10, "c1", "route_read", "failover-000", 300, 301, value=_route(NEW)),
        op(11, "c2", "route_read", "failover-000", 150, 160, value=_route(OLD), node="n1"),
        op(12, "c2", "route_read", "failover-000", 600, 601, value=_route(NEW, 5)),
    ]
    _write_run(root, "flip", common + flip)
    _write_run(root, "clean", common + clean)
    return root


@pytest.mark.slow
def test_the_table_in_spark_and_in_summary_json(spark: Any, tmp_path: Path) -> None:
    from spark_jobs.dataset import load_history
    from spark_jobs.two_masters import two_masters_by_run

    history = load_history(spark, _root(tmp_path))
    rows = [r.asDict() for r in two_masters_by_run(history).collect()]
    assert rows == [
        {
            "run_id": "clean",
            "mode": "raft",
            "scenario": "nemesis",
            "groups_checked": 2,
            "two_masters": 0,
            "split_answers": 0,
            "examples": [],
        },
        {
            "run_id": "flip",
            "mode": "raft",
            "scenario": "nemesis",
            "groups_checked": 2,
            "two_masters": 2,
            "split_answers": 1,
            "examples": ["flip/11 after 10 (fo)", "flip/12 (split, fo)"],
        },
    ]
    summary = mode_summary({"two_masters": rows})
    assert summary["raft"]["two_masters"] == {"count": 2, "groups_checked": 4}
