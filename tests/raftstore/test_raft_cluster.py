"""Three RaftReplicators in one process: writes, reads, elections, quorum loss."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from raftstore.commands import Barrier, Command, PutKV
from raftstore.raft import RaftReplicator, find_divergence
from raftstore.raft.codec import encode_entry
from raftstore.replicator import NoQuorumError
from raftstore.results import ApplyResult
from tests.raftstore.raft_node import InProcessCluster, stall_tick_thread
from tests.waiting import eventually

PROPOSE_TIMEOUT_S = 1.5


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    nodes = InProcessCluster(tmp_path, propose_timeout_s=PROPOSE_TIMEOUT_S)
    await nodes.start()
    yield nodes
    await nodes.close()


def _kv(node: RaftReplicator, key: str) -> str | None:
    return node.read(lambda table: table.kv_get("ns", key))


async def test_the_cluster_agrees_on_exactly_one_leader(cluster: InProcessCluster) -> None:
    leader = await cluster.leader()
    states = sorted(n.status().state for n in cluster.nodes)
    assert states == ["follower", "follower", "leader"]
    assert {n.status().leader for n in cluster.nodes} == {leader.self_addr}
    assert len({n.status().term for n in cluster.nodes}) == 1


async def test_a_write_proposed_on_a_follower_is_read_on_another_node_after_a_barrier(
    cluster: InProcessCluster,
) -> None:
    follower = await cluster.follower()
    result = await follower.propose(PutKV("ns", "colour", "blue"))
    assert result.changes.kv == frozenset({("ns", "colour")})
    # The result names the log entry that carried it: nothing applied after it yet, so
    # the proposer reads the state it left at that very index, in that term.
    _, index, term = follower.read_at(lambda table: None)
    assert (result.log_index, result.log_term) == (index, term)
    second = await follower.propose(PutKV("ns", "shade", "dark"))
    assert second.log_index > result.log_index and second.log_term == term
    assert _kv(follower, "colour") == "blue"
    for reader in cluster.nodes:
        await reader.barrier()
        assert _kv(reader, "colour") == "blue"
    statuses = await cluster.converged()
    assert statuses[0].applied_version == 2


async def test_a_node_left_without_quorum_refuses_writes_within_the_bound(
    cluster: InProcessCluster,
) -> None:
    await cluster.leader()
    survivor, *stopped = cluster.nodes
    await asyncio.gather(*(n.stop() for n in stopped))
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(NoQuorumError, match="no quorum: PutKV was not applied"):
        await survivor.propose(PutKV("ns", "k", "v"))
    assert loop.time() - started < PROPOSE_TIMEOUT_S + 1.0
    assert _kv(survivor, "k") is None


async def test_a_follower_whose_tick_runs_late_proposes_but_answers_nothing_from_state(
    cluster: InProcessCluster,
) -> None:
    """A tick thread held up past the quorum window (here an apply listener that sleeps,
    as a large entry or a starved core does) has not read the leader's messages, which
    says nothing about the quorum: a proposal still goes ahead, its commit decides;
    an answer from the applied state, which nothing commits, is refused meanwhile."""
    await cluster.leader()
    follower = await cluster.follower()
    pending, release = await stall_tick_thread(follower)
    try:
        await eventually(
            lambda: follower.quorum_refusal() is not None,
            what="contact with the quorum stale by the clock",
            timeout_s=5,
        )
        assert follower.quorum_refusal(proposing=True) is None
        assert isinstance(follower.quorum_refusal(), NoQuorumError)
        proposal = asyncio.ensure_future(follower.propose(PutKV("ns", "after", "1")))
        await asyncio.sleep(0.2)
        assert not proposal.done(), "the commit waits for the tick"
    finally:
        release()
    result = await proposal
    assert result.changes.kv == frozenset({("ns", "after")})
    # The apply and the tick's next read of the leader's messages are two steps: contact
    # comes back with the read, a moment after the answer (a CI run caught it between).
    await eventually(
        lambda: follower.quorum_refusal() is None,
        what="contact back once the tick reads again",
        timeout_s=5,
    )
    await pending


async def test_one_barrier_serves_every_caller_that_arrived_before_it(
    cluster: InProcessCluster,
) -> None:
    node = await cluster.follower()
    barriers: list[Command] = []
    node.subscribe(lambda command, _result: barriers.append(command))
    await asyncio.gather(*(node.barrier() for _ in range(20)))
    assert 1 <= sum(isinstance(c, Barrier) for c in barriers) <= 2


async def test_listeners_see_every_apply_in_log_order_on_every_node(
    cluster: InProcessCluster,
) -> None:
    seen: dict[str, list[str]] = {n.node_id: [] for n in cluster.nodes}
    for node in cluster.nodes:
        node.subscribe(
            lambda command, _r, log=seen[node.node_id]: log.append(getattr(command, "key", "-"))
        )
    for i in range(10):
        await cluster.nodes[i % 3].propose(PutKV("ns", f"k{i}", "v"))
    await cluster.converged()
    assert seen["n0"] == seen["n1"] == seen["n2"] == [f"k{i}" for i in range(10)]


async def test_the_leader_reports_each_peers_match_index(cluster: InProcessCluster) -> None:
    leader = await cluster.leader()
    await leader.propose(PutKV("ns", "k", "v"))
    await cluster.converged()
    await asyncio.sleep(0.2)
    status = leader.status()
    assert status.has_quorum and status.commit_index == status.applied_index
    assert len(status.peers) == 2
    assert all(p.connected and p.match_index == status.applied_index for p in status.peers)
    assert status.alarms == ()


async def test_a_second_copy_of_the_same_proposal_is_applied_once(
    cluster: InProcessCluster,
) -> None:
    node = await cluster.follower()
    applied: list[ApplyResult] = []
    node.subscribe(lambda _c, result: applied.append(result))
    entry = encode_entry("retry/1/1", PutKV("ns", "once", "v"))
    sync = node._require_started()
    sync.apply_entry(entry)
    sync.apply_entry(entry)
    await node.barrier()
    assert [r.changes.kv for r in applied if r.changes.kv] == [frozenset({("ns", "once")})]
    await cluster.converged()


async def test_a_restarted_cluster_restores_the_committed_state_from_snapshot_and_log(
    tmp_path: Path,
) -> None:
    from raftstore.raft import RaftSettings

    settings = RaftSettings(log_compaction_min_entries=20)
    cluster = InProcessCluster(tmp_path, settings=settings)
    await cluster.start()
    for i in range(60):
        await cluster.nodes[i % 3].propose(PutKV("ns", f"k{i}", str(i)))
    before = await cluster.converged()
    await cluster.close()
    assert (tmp_path / "n0" / "raft.snapshot").exists()

    cluster.nodes = [cluster.make(i) for i in range(3)]
    await cluster.start()
    after = await cluster.converged()
    assert {(s.digest, s.applied_version) for s in after} == {
        (before[0].digest, before[0].applied_version)
    }
    assert all(_kv(n, "k59") == "59" for n in cluster.nodes)
    await cluster.nodes[0].propose(PutKV("ns", "after", "restart"))
    statuses = await cluster.converged()
    assert statuses[0].applied_index > before[0].applied_index
    checkpoints = {n.node_id: n.digest_checkpoints() for n in cluster.nodes}
    assert find_divergence(checkpoints) == []
    await cluster.close()


async def test_a_pysyncobj_divergence_warning_shows_up_in_that_nodes_status(
    cluster: InProcessCluster,
) -> None:
    import logging

    node = cluster.nodes[1]
    sync = node._require_started()
    fired: list[bool] = []

    def warn_once() -> None:
        if not fired:
            fired.append(True)
            logging.getLogger("pysyncobj.syncobj").critical(
                "truncating already-applied log entries from index %d (last applied: %d)", 5, 9
            )

    sync.addOnTickCallback(warn_once)
    await eventually(lambda: node.status().alarms, what="an alarm", timeout_s=5, interval_s=0.05)
    assert "truncating already-applied" in node.status().alarms[0]
    assert cluster.nodes[0].status().alarms == ()
