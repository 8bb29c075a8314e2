"""Availability inside the fault window counts every kind of fault, the nemesis' steps
included, per kind and for any fault at once (``spark_jobs.metrics.availability``), and the
report's "reads answered in the fault window" verdict reads the any-fault row.

One hand-built run: a window of each nemesis kind, one after the other, each holding a
read answered, a read that timed out and an acknowledged write; a second link partition
overlapping the first (its operations count once); one read outside every window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import HistoryWriter, RunMeta
from experiment_reports.report import ANY_FAULT, markdown_verdicts
from experiments.nemesis import KINDS, LINK_PARTITION
from tests.spark_jobs.conftest import op

pytestmark = pytest.mark.slow

WINDOW_MS = 5_000
A = "a:h1:10911:4:4:6"


def _start(index: int) -> int:
    return 10_000 * (index + 1)


def _root(root: Path) -> Path:
    ops: list[Any] = [op(1, "c1", "route_read", "T", 1_000, 1_002, value=A)]
    faults: list[Any] = []
    for index, kind in enumerate(KINDS):
        start = _start(index)
        faults.append((start, start + WINDOW_MS, kind, f"target-{index}", "{}"))
        first = 10 * (index + 1)
        ops += [
            op(first, "c1", "route_read", "T", start + 100, start + 102, value=A),
            op(first + 1, "c1", "route_read", "T", start + 200, start + 1_200, "timeout"),
            op(first + 2, "admin", "register", "T", start + 300, start + 310, value=A),
        ]
    # A second link partition over the first one's window, of another target.
    faults.append((_start(0) + 50, _start(0) + 400, LINK_PARTITION, "other", "{}"))
    meta = RunMeta(run_id="nem", scenario="nemesis", mode="raft", seed=0, nodes=["n0", "n1"])
    with HistoryWriter(root / "nem", meta) as out:
        for row in ops:
            out.operation(row)
        for row in faults:
            out.fault(row)
    return root


def test_every_nemesis_kind_counts_once_per_operation(spark: Any, tmp_path: Path) -> None:
    from spark_jobs.dataset import load_history
    from spark_jobs.metrics import availability

    history = load_history(spark, _root(tmp_path))
    rows = [x.asDict() for x in availability(history).collect()]
    by_key = {(r["fault_kind"], r["op_class"]): r for r in rows}
    assert set(by_key) == {(k, c) for k in (*KINDS, ANY_FAULT) for c in ("read", "write")}
    for kind in KINDS:
        read, write = by_key[(kind, "read")], by_key[(kind, "write")]
        assert (read["ops"], read["answered_share"], read["ok_share"]) == (2, 0.5, 0.5), kind
        assert (write["ops"], write["ok_share"]) == (1, 1.0), kind
    read, write = by_key[(ANY_FAULT, "read")], by_key[(ANY_FAULT, "write")]
    assert (read["ops"], read["answered_share"]) == (2 * len(KINDS), 0.5)
    assert (write["ops"], write["ok_share"]) == (len(KINDS), 1.0)
    verdicts = markdown_verdicts({"availability": rows})
    assert f"| reads answered in the fault window | 50.0 % of {2 * len(KINDS)} |" in verdicts
    assert f"| writes acknowledged in the fault window | 100.0 % of {len(KINDS)} |" in verdicts
