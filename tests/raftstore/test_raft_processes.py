"""Three raft node processes behind a fault proxy: kills, partitions, restarts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.raftstore.raft_node import ProcessCluster
from tests.waiting import eventually

pytestmark = [pytest.mark.slow, pytest.mark.integration]

PROPOSE_TIMEOUT_S = 3.0


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[ProcessCluster]:
    nodes = ProcessCluster(tmp_path)
    await nodes.start()
    yield nodes
    await nodes.close()


async def _write_until_ok(cluster: ProcessCluster, key: str, budget_s: float = 20.0) -> int:
    """Write through any running node until one acknowledges; returns its index."""

    async def acknowledged() -> tuple[int] | None:
        for i, node in enumerate(cluster.nodes):
            if node.running and (await node.put(key, "v"))["ok"]:
                return (i,)
        return None

    (index,) = await eventually(
        acknowledged, what=f"a node acknowledging {key}", timeout_s=budget_s, interval_s=0.2
    )
    return index


async def test_writes_resume_on_a_new_leader_after_the_leader_is_killed(
    cluster: ProcessCluster,
) -> None:
    old = await cluster.leader()
    assert (await cluster.nodes[old].put("before", "v"))["ok"]
    await cluster.nodes[old].kill()
    new = await cluster.leader()
    assert new != old
    assert (await cluster.nodes[new].put("after", "v"))["ok"]
    statuses = await cluster.converged()
    assert len(statuses) == 2
    for node in cluster.nodes:
        if node.running:
            assert (await node.call("get", namespace="ns", key="before"))["value"] == "v"


async def test_a_partitioned_minority_refuses_writes_and_converges_after_healing(
    cluster: ProcessCluster,
) -> None:
    leader = await cluster.leader()
    minority = (leader + 1) % 3
    assert (await cluster.nodes[minority].put("k0", "v"))["ok"]
    cluster.partition(minority)
    loop = asyncio.get_running_loop()
    started = loop.time()
    refused = await cluster.nodes[minority].put("lost?", "v")
    assert not refused["ok"] and refused["error"].startswith("NoQuorumError")
    assert loop.time() - started < PROPOSE_TIMEOUT_S + 1.5
    majority = [i for i in range(3) if i != minority]
    for n in range(5):
        assert (await cluster.nodes[majority[n % 2]].put(f"m{n}", "v"))["ok"]
    cluster.heal()
    statuses = await cluster.converged(timeout_s=30)
    assert len(statuses) == 3
    assert (await cluster.nodes[minority].call("get", namespace="ns", key="m4"))["value"] == "v"


async def test_a_whole_cluster_restart_keeps_every_acknowledged_write(
    cluster: ProcessCluster,
) -> None:
    await cluster.leader()
    acknowledged = [
        f"k{i}" for i in range(30) if (await cluster.nodes[i % 3].put(f"k{i}", "v"))["ok"]
    ]
    assert len(acknowledged) == 30
    before = await cluster.converged()
    await asyncio.gather(*(node.kill() for node in cluster.nodes))
    await asyncio.gather(*(node.start() for node in cluster.nodes))
    await cluster.leader()
    await _write_until_ok(cluster, "after-restart")
    after = await cluster.converged(timeout_s=30)
    assert after[0]["applied_index"] > before[0]["applied_index"]
    for node in cluster.nodes:
        values = [await node.call("get", namespace="ns", key=k) for k in acknowledged]
        assert all(v["value"] == "v" for v in values)
