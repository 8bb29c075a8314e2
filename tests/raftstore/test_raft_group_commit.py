"""Group commit: concurrent proposals travel as one log entry, each caller gets its own answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from raftstore.commands import Command, PutKV
from raftstore.raft import RaftReplicator
from raftstore.raft.codec import encode_batch, encode_entry
from raftstore.results import ApplyResult
from tests.raftstore.raft_node import InProcessCluster

CONCURRENT = 200


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    nodes = InProcessCluster(tmp_path, propose_timeout_s=10.0)
    await nodes.start()
    yield nodes
    await nodes.close()


def _kv(node: RaftReplicator, key: str) -> str | None:
    return node.read(lambda table: table.kv_get("gc", key))


async def test_concurrent_proposals_share_log_entries_and_each_gets_its_own_answer(
    cluster: InProcessCluster,
) -> None:
    follower = await cluster.follower()
    before = follower._commits.batches_submitted
    results = await asyncio.gather(
        *(follower.propose(PutKV("gc", f"k{i}", str(i))) for i in range(CONCURRENT))
    )

    assert [r.changes.kv for r in results] == [
        frozenset({("gc", f"k{i}")}) for i in range(CONCURRENT)
    ]
    assert len({r.applied_version for r in results}) == CONCURRENT
    assert follower._commits.batches_submitted - before < CONCURRENT / 4
    statuses = await cluster.converged()
    assert statuses[0].applied_version == CONCURRENT
    for node in cluster.nodes:
        assert [_kv(node, f"k{i}") for i in range(CONCURRENT)] == [
            str(i) for i in range(CONCURRENT)
        ]
    assert all(s.alarms == () for s in statuses)


async def test_a_batch_applies_its_commands_in_proposal_order_on_every_node(
    cluster: InProcessCluster,
) -> None:
    leader = await cluster.leader()
    versions = await asyncio.gather(
        *(leader.propose(PutKV("gc", "same", f"v{i}")) for i in range(50))
    )

    assert [r.applied_version for r in versions] == sorted(r.applied_version for r in versions)
    await cluster.converged()
    assert {_kv(node, "same") for node in cluster.nodes} == {"v49"}


async def test_a_command_repeated_inside_a_batch_is_applied_once(
    cluster: InProcessCluster,
) -> None:
    node = await cluster.follower()
    applied: list[tuple[Command, ApplyResult]] = []
    node.subscribe(lambda command, result: applied.append((command, result)))
    once = encode_entry("dup/1/1", PutKV("gc", "once", "a"))
    other = encode_entry("dup/1/2", PutKV("gc", "other", "b"))
    node._require_started().apply_entry(encode_batch([once, other, once]))
    await node.barrier()

    assert [command for command, _ in applied if isinstance(command, PutKV)] == [
        PutKV("gc", "once", "a"),
        PutKV("gc", "other", "b"),
    ]
    await cluster.converged()


async def test_proposals_made_while_the_leader_is_gone_all_fail_within_the_bound(
    tmp_path: Path,
) -> None:
    async with InProcessCluster(tmp_path, propose_timeout_s=1.0) as cluster:
        await cluster.leader()
        survivor, *stopped = cluster.nodes
        await asyncio.gather(*(n.stop() for n in stopped))
        loop = asyncio.get_running_loop()
        started = loop.time()
        outcomes = await asyncio.gather(
            *(survivor.propose(PutKV("gc", f"lost{i}", "x")) for i in range(20)),
            return_exceptions=True,
        )
        assert loop.time() - started < 2.5
        assert all("no quorum: PutKV was not applied" in str(o) for o in outcomes)
        assert [_kv(survivor, f"lost{i}") for i in range(20)] == [None] * 20
