"""An acknowledged admin write is followed like a broker's (the other nodes read at the
follow-up offsets) and read back once by its writer, process ``admin``, from the node the
write picks, :data:`READ_BACK_OFFSET_MS` after the ack: the admin session then both writes
and reads, and read-your-writes (``spark_jobs.sessions``) has reads to check.

The admin write goes through the real :class:`ExperimentContext` and recorder; the admin's
RPC and the nodes' answers are scripted, as in the other follow-up tests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import iter_rows
from experiment_history.schema import (
    KIND_CREATE_TOPIC,
    KIND_ROUTE_READ,
    PROCESS_ADMIN,
    RouteItem,
    canonical_route,
    follow_up_process,
)
from experiments import follow_up
from experiments.follow_up import READ_BACK_OFFSET_MS, FollowUpReader, read_back_node
from experiments.workload import Ack, ReadResult, now_us
from spark_jobs.sessions import read_your_writes, split_rows
from tests.experiments.unit_context import unit_context

TOPICS = ["topic-000"]
NEW_TOPIC = "topic-new"
NODES = ["n1", "n2", "n3"]
ADDRS = {n: f"127.0.0.1:{9000 + i}" for i, n in enumerate(NODES)}
CREATED = canonical_route([RouteItem("broker-a", "127.0.0.1:10", 4, 4, 6)])
ACKED_BY = "n2"


class _Cluster:
    node_ids = NODES

    def remoting_addrs(self) -> dict[str, str]:
        return dict(ADDRS)


def _rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lagging: str) -> list[dict[str, Any]]:
    """Create :data:`NEW_TOPIC` (acknowledged by n2) with the context's follow-up
    reader; node ``lagging`` answers that the topic does not exist yet, the others the
    created route."""

    async def answer(_client: Any, addr: str, _topic: str, *_: Any) -> ReadResult:
        invoke = now_us()
        await asyncio.sleep(0.001)
        value = "" if addr == ADDRS.get(lagging) else CREATED
        return ReadResult("ok" if value else "not_found", value, invoke, now_us(), version=1)

    monkeypatch.setattr(follow_up, "read_route", answer)
    ctx, writer, _ = unit_context(
        tmp_path,
        "topic_subset",
        topics=TOPICS,
        nodes=NODES,
        brokers=2,
        seed=3,
        cluster=_Cluster(),
        watched=[*TOPICS, NEW_TOPIC],
    )

    async def create() -> list[Ack]:
        await asyncio.sleep(0.005)
        return [Ack(ACKED_BY, now_us())]

    async def run() -> None:
        reader = FollowUpReader(ctx.nodes, ctx.recorder, 1.0, "local", offsets_ms=(0, 20))
        ctx.follow_up = reader
        await ctx.admin_write(KIND_CREATE_TOPIC, NEW_TOPIC, CREATED, create)
        await reader.close()
        assert (reader.followed, reader.read_back, reader.skipped) == (1, 1, 0)

    asyncio.run(run())
    writer.close()
    return list(iter_rows(tmp_path / "run", "operations"))


def test_the_admin_reads_its_write_back_and_the_other_nodes_follow_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    picked = read_back_node(NODES, PROCESS_ADMIN, NEW_TOPIC, CREATED)
    rows = _rows(tmp_path, monkeypatch, lagging="none")
    [write] = [r for r in rows if r["kind"] == KIND_CREATE_TOPIC]
    reads = [r for r in rows if r["kind"] == KIND_ROUTE_READ]
    by_process: dict[str, list[str]] = {}
    for read in reads:
        by_process.setdefault(read["process"], []).append(read["node"])
    # Two offsets on each node but the acknowledging one, and one read-back by the writer.
    assert by_process == {
        follow_up_process("n1"): ["n1", "n1"],
        follow_up_process("n3"): ["n3", "n3"],
        PROCESS_ADMIN: [picked],
    }
    [back] = [r for r in reads if r["process"] == PROCESS_ADMIN]
    # At the offset after the ack (less the ack's truncation to whole ms and the clocks'
    # granularity: half of it is plenty).
    assert back["invoke_us"] > write["complete_us"] + READ_BACK_OFFSET_MS // 2 * 1_000
    session_reads, writes = split_rows(rows)
    count = read_your_writes(session_reads, writes)
    assert (count.sessions, count.checked, count.violations) == ({PROCESS_ADMIN}, 1, 0)


def test_a_read_back_from_a_node_without_the_write_breaks_read_your_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    picked = read_back_node(NODES, PROCESS_ADMIN, NEW_TOPIC, CREATED)
    rows = _rows(tmp_path, monkeypatch, lagging=picked)
    [write] = [r for r in rows if r["kind"] == KIND_CREATE_TOPIC]
    session_reads, writes = split_rows(rows)
    count = read_your_writes(session_reads, writes)
    [back] = [r for r in session_reads if r.process == PROCESS_ADMIN]
    assert back.value == ""
    assert (count.checked, count.violations, count.examples) == (
        1,
        1,
        [(back.op_id, write["op_id"])],
    )


def test_the_read_back_node_is_the_write_s_and_writes_spread_over_every_node() -> None:
    first = read_back_node(NODES, PROCESS_ADMIN, NEW_TOPIC, CREATED)
    assert read_back_node(list(reversed(NODES)), PROCESS_ADMIN, NEW_TOPIC, CREATED) == first
    picked = {read_back_node(NODES, PROCESS_ADMIN, f"topic-{i:03d}", CREATED) for i in range(30)}
    assert picked == set(NODES)
