"""Lingering proposals: a broker's registrations and heartbeats may wait briefly to
share a log entry (``RaftSettings.linger_s``) while other brokers are writing too; a
lone broker's writes never wait, a proposal that may not wait takes the lingering ones
along at once, and a full queue stops waiting."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.services import NameServerService
from raftstore.commands import PutKV
from raftstore.raft import RaftSettings
from raftstore.raft.batching import LINGER_BATCH_COMMANDS
from raftstore.raft.replicator import RaftReplicator
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from remoting.register_request import BrokerRegistration
from tests.raftstore.raft_node import InProcessCluster


async def _primed(leader: RaftReplicator) -> int:
    """A write of broker ``primer`` (alone, so it leaves at once): the brokers that
    write within ``linger_s`` after it may wait for company. The commit index after it."""
    await asyncio.wait_for(leader.propose(PutKV("primer", "k", "v"), linger_for="primer"), 10.0)
    return leader.status().commit_index


async def test_brokers_writing_a_few_ms_apart_share_one_log_entry_after_the_first(
    tmp_path: Path,
) -> None:
    settings = RaftSettings(linger_s=0.5)
    async with InProcessCluster(tmp_path, settings=settings) as cluster:
        leader = await cluster.leader()
        await cluster.converged()
        before = leader.status().commit_index
        tasks = []
        for index in range(6):
            command = PutKV("linger", f"k{index}", "v")
            tasks.append(asyncio.ensure_future(leader.propose(command, linger_for=f"b{index}")))
            await asyncio.sleep(0.01)
        # The first had no company in sight and left at once; the others wait for it.
        assert tasks[0].done() and not any(task.done() for task in tasks[1:])
        assert leader.status().commit_index == before + 1
        await asyncio.gather(*tasks)
        assert leader.status().commit_index - before == 2
        statuses = await cluster.converged()
        assert len({s.digest for s in statuses}) == 1
        assert {n.read(lambda t: t.kv_get("linger", "k5")) for n in cluster.nodes} == {"v"}


async def test_one_brokers_writes_one_at_a_time_never_wait(tmp_path: Path) -> None:
    """A lone broker's next write comes after its last one's answer: waiting for
    company would only add the linger to each (a minute here, far past the test)."""
    async with InProcessCluster(tmp_path, settings=RaftSettings(linger_s=60.0)) as cluster:
        leader = await cluster.leader()
        await cluster.converged()
        before = leader.status().commit_index
        for index in range(4):
            command = PutKV("lone", f"k{index}", "v")
            await asyncio.wait_for(leader.propose(command, linger_for="lone-broker"), 10.0)
        assert leader.status().commit_index - before == 4


async def test_the_same_proposals_without_linger_each_leave_at_once(tmp_path: Path) -> None:
    async with InProcessCluster(tmp_path, settings=RaftSettings(linger_s=0.5)) as cluster:
        leader = await cluster.leader()
        await cluster.converged()
        before = leader.status().commit_index
        for index in range(4):
            await leader.propose(PutKV("alone", f"k{index}", "v"))
        assert leader.status().commit_index - before == 4


async def test_a_proposal_that_may_not_wait_takes_the_lingering_ones_along(
    tmp_path: Path,
) -> None:
    """With a linger far longer than the test, the lingering proposals are answered
    only because an ordinary one joined the queue and left with them."""
    async with InProcessCluster(tmp_path, settings=RaftSettings(linger_s=60.0)) as cluster:
        leader = await cluster.leader()
        await cluster.converged()
        before = await _primed(leader)
        lingering = [
            asyncio.ensure_future(leader.propose(PutKV("along", f"k{i}", "v"), linger_for=f"b{i}"))
            for i in range(3)
        ]
        await asyncio.sleep(0.2)
        assert not any(task.done() for task in lingering)
        await asyncio.wait_for(leader.propose(PutKV("along", "now", "v")), 10.0)
        await asyncio.wait_for(asyncio.gather(*lingering), 10.0)
        assert leader.status().commit_index - before == 1


async def test_a_full_queue_of_lingering_proposals_leaves_without_waiting(
    tmp_path: Path,
) -> None:
    async with InProcessCluster(tmp_path, settings=RaftSettings(linger_s=60.0)) as cluster:
        leader = await cluster.leader()
        await cluster.converged()
        await _primed(leader)
        tasks = [
            asyncio.ensure_future(leader.propose(PutKV("full", f"k{i}", "v"), linger_for=f"b{i}"))
            for i in range(LINGER_BATCH_COMMANDS)
        ]
        await asyncio.wait_for(asyncio.gather(*tasks), 10.0)
        assert leader.read(lambda t: t.kv_get("full", f"k{LINGER_BATCH_COMMANDS - 1}")) == "v"


async def test_brokers_registering_through_the_service_share_log_entries(tmp_path: Path) -> None:
    """The service proposes a broker's registration as lingering: of six brokers
    registering 10 ms apart on the leader, the first leaves at once and the five that
    follow commit as one log entry."""
    async with InProcessCluster(tmp_path, settings=RaftSettings(linger_s=0.5)) as cluster:
        leader = await cluster.leader()
        await cluster.converged()
        service = NameServerService(leader)
        before = leader.status().commit_index
        tasks = []
        for index in range(6):
            tasks.append(
                asyncio.ensure_future(
                    service.register_broker(
                        BrokerRegistration(
                            cluster_name="DefaultCluster",
                            broker_addr=f"10.0.0.{index}:10911",
                            broker_name=f"broker-{index}",
                            broker_id=0,
                            ha_server_addr=f"10.0.0.{index}:10912",
                            enable_acting_master=False,
                        ),
                        TopicConfigSerializeWrapper(
                            data_version=DataVersion(timestamp=1_000, counter=1),
                            topic_config_table={
                                name: TopicConfig(name) for name in (f"T{index}", f"U{index}")
                            },
                        ),
                    )
                )
            )
            await asyncio.sleep(0.01)
        outcomes = await asyncio.gather(*tasks)
        assert not any(outcome.failed for outcome in outcomes)
        assert leader.status().commit_index - before == 2
        statuses = await cluster.converged()
        assert len({s.digest for s in statuses}) == 1
        assert {n.read(lambda t: len(t.topic_queue_table())) for n in cluster.nodes} == {12}


async def test_lingering_proposals_as_large_as_an_entry_leave_without_waiting(
    tmp_path: Path,
) -> None:
    settings = RaftSettings(linger_s=60.0, max_batch_bytes=4096)
    async with InProcessCluster(tmp_path, settings=settings) as cluster:
        leader = await cluster.leader()
        await cluster.converged()
        await _primed(leader)
        big = PutKV("big", "k", "v" * 5000)
        await asyncio.wait_for(leader.propose(big, linger_for="big-broker"), 10.0)
        assert leader.read(lambda t: t.kv_get("big", "k")) == "v" * 5000
