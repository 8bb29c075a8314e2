"""The follow-up reader is one client session per node it reads (process
``follow-up-reader@<node>``): the per-client anomaly classes compare its reads of one node
with each other, never a fresh answer of n1 with n2's older one."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import HistoryWriter, RunMeta, iter_rows
from experiment_history.schema import (
    KIND_REGISTER,
    KIND_ROUTE_READ,
    KIND_UNREGISTER,
    OUTCOME_OK,
    PROCESS_FOLLOW_UP,
    RouteItem,
    canonical_route,
    follow_up_process,
    is_follow_up,
)
from experiments import follow_up
from experiments.follow_up import FollowUpReader
from experiments.workload import ReadResult, Recorder, now_ms, now_us
from spark_jobs.anomalies import NON_MONOTONIC_READ, OK, STALE_READ, classify_rows

TOPIC = "topic-000"
NODES = {"n1": "127.0.0.1:1", "n2": "127.0.0.1:2", "n3": "127.0.0.1:3"}
A = canonical_route([RouteItem("broker-a", "127.0.0.1:10", 4, 4, 6)])
B = canonical_route(
    [
        RouteItem("broker-a", "127.0.0.1:10", 4, 4, 6),
        RouteItem("broker-churn", "127.0.0.1:11", 4, 4, 6),
    ]
)
ANSWERS = {"127.0.0.1:1": B, "127.0.0.1:2": A}
"""n1 has applied the churn's registration (B), n2 not yet (A)."""


def test_each_node_read_is_its_own_process() -> None:
    assert follow_up_process("n2") == f"{PROCESS_FOLLOW_UP}@n2"
    assert is_follow_up(follow_up_process("n2")) and is_follow_up(PROCESS_FOLLOW_UP)
    assert not is_follow_up("producer-0") and not is_follow_up("follow-up-readerx")


async def _fake_read(_client: Any, addr: str, _topic: str, *_: Any) -> ReadResult:
    invoke = now_us()
    await asyncio.sleep(0.001)
    return ReadResult(OUTCOME_OK, ANSWERS[addr], invoke, now_us(), version=1)


def _history(tmp_path: Path, b_acked_before_the_reads: bool) -> list[dict[str, Any]]:
    """The churn's unregistration (A) acknowledged by n3, then its registration (B) sent;
    the follow-up reader reads n1 (B) and n2 (A) at 0 and 20 ms after n3's ack. B's ack
    comes before the reads (``b_acked_before_the_reads``: n2's A is then a stale read) or
    after them (B was in flight: n2's A is a value the register could still hold)."""
    writer = HistoryWriter(tmp_path / "run", RunMeta("r", "unit", "raft", 1, sorted(NODES)))
    recorder = Recorder(writer)
    recorder.start()

    def write(kind: str, value: str, invoke_us: int, complete_us: int) -> None:
        recorder.operation(
            process="broker-churn",
            kind=kind,
            node="n3",
            topic=TOPIC,
            invoke_us=invoke_us,
            complete_us=complete_us,
            outcome=OUTCOME_OK,
            value=value,
        )

    async def run() -> None:
        t0 = now_us()
        write(KIND_UNREGISTER, A, t0 - 3_000, t0 - 2_000)
        b_invoke = t0 - 1_000
        if b_acked_before_the_reads:
            write(KIND_REGISTER, B, b_invoke, t0 - 500)
        reader = FollowUpReader(NODES, recorder, 1.0, "local", offsets_ms=(0, 20))
        reader.after_ack("n3", now_ms(), [TOPIC])
        await reader.close()
        if not b_acked_before_the_reads:
            write(KIND_REGISTER, B, b_invoke, now_us() + 1_000)

    asyncio.run(run())
    writer.close()
    return list(iter_rows(tmp_path / "run", "operations"))


@pytest.fixture(autouse=True)
def _scripted_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follow_up, "read_route", _fake_read)


def _verdicts(rows: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    """(process, node) -> the classes of its reads."""
    reads = {r["op_id"]: r for r in rows if r["kind"] == KIND_ROUTE_READ}
    out: dict[tuple[str, str], set[str]] = {}
    for verdict in classify_rows(rows):
        read = reads[verdict.op_id]
        out.setdefault((read["process"], read["node"]), set()).add(verdict.anomaly)
    return out


def test_a_fresh_n1_then_an_older_n2_is_no_non_monotonic_read(tmp_path: Path) -> None:
    rows = _history(tmp_path, b_acked_before_the_reads=False)
    reads = [r for r in rows if r["kind"] == KIND_ROUTE_READ]
    assert len(reads) == 4
    # n1's read at 0 ms ended before n2's read at 20 ms began: one process reading
    # both would have gone back from B to A.
    n1_first = min((r for r in reads if r["node"] == "n1"), key=lambda r: r["invoke_us"])
    n2_later = max((r for r in reads if r["node"] == "n2"), key=lambda r: r["invoke_us"])
    assert (n1_first["value"], n2_later["value"]) == (B, A)
    assert n1_first["complete_us"] < n2_later["invoke_us"]
    classes = {v for found in _verdicts(rows).values() for v in found}
    assert NON_MONOTONIC_READ not in classes
    assert _verdicts(rows) == {
        (follow_up_process("n1"), "n1"): {OK},
        (follow_up_process("n2"), "n2"): {OK},
    }


def test_n2_answering_an_acknowledged_write_s_old_route_is_still_a_stale_read(
    tmp_path: Path,
) -> None:
    rows = _history(tmp_path, b_acked_before_the_reads=True)
    assert _verdicts(rows) == {
        (follow_up_process("n1"), "n1"): {OK},
        (follow_up_process("n2"), "n2"): {STALE_READ},
    }
