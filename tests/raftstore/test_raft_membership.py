"""Raft membership changes at run time: one at a time, unsafe ones refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from raftstore.commands import PutKV
from raftstore.raft import MembershipError, RaftReplicator
from tests.raftstore.raft_node import CLUSTER_SECRET, InProcessCluster, free_port
from tests.waiting import eventually


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    nodes = InProcessCluster(tmp_path)
    await nodes.start()
    await nodes.leader()
    yield nodes
    await nodes.close()


async def test_a_fourth_node_joins_catches_up_and_leaves_again(
    cluster: InProcessCluster, tmp_path: Path
) -> None:
    await cluster.nodes[0].propose(PutKV("ns", "early", "v"))
    new_addr = f"127.0.0.1:{free_port()}"
    joiner = RaftReplicator(
        "n3", new_addr, cluster.addrs, tmp_path / "n3", ready_timeout_s=0, secret=CLUSTER_SECRET
    )
    await joiner.start()
    try:
        await cluster.nodes[1].add_node(new_addr)
        cluster.nodes.append(joiner)
        await cluster.nodes[0].propose(PutKV("ns", "late", "v"))
        await cluster.converged()
        assert joiner.read(lambda t: t.kv_get("ns", "early")) == "v"
        await asyncio.sleep(0.2)
        assert len(cluster.nodes[0].status().members) == 4
        await cluster.nodes[0].remove_node(new_addr)
        cluster.nodes.pop()
        await cluster.nodes[2].propose(PutKV("ns", "after-removal", "v"))
        await asyncio.sleep(0.3)
        assert len(cluster.nodes[1].status().members) == 3
    finally:
        await joiner.stop()


async def test_unsafe_membership_changes_are_refused(cluster: InProcessCluster) -> None:
    node = cluster.nodes[0]
    with pytest.raises(MembershipError, match="does not remove itself"):
        await node.remove_node(node.self_addr)
    with pytest.raises(MembershipError, match="already a member"):
        await node.add_node(cluster.addrs[1])
    with pytest.raises(MembershipError, match="not a member"):
        await node.remove_node("127.0.0.1:1")
    slow = asyncio.ensure_future(node.add_node(f"127.0.0.1:{free_port()}"))
    await asyncio.sleep(0)
    with pytest.raises(MembershipError, match="another membership change is pending"):
        await node.add_node(f"127.0.0.1:{free_port()}")
    await slow


async def test_a_node_without_quorum_refuses_to_add_members(cluster: InProcessCluster) -> None:
    survivor = cluster.nodes[0]
    await asyncio.gather(*(n.stop() for n in cluster.nodes[1:]))
    await eventually(
        lambda: not survivor.status().has_quorum,
        what="the survivor without quorum",
        timeout_s=10,
        interval_s=0.1,
    )
    with pytest.raises(MembershipError, match="without quorum"):
        await survivor.add_node(f"127.0.0.1:{free_port()}")
