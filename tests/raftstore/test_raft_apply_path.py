"""The apply path: a node applies the entries it proposed from its own command
objects (and the verification mode catches a command its decode would not
reproduce); the leader announces a commit before it applies it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from raftstore.commands import PutKV, RegisterBroker
from raftstore.raft import RaftReplicator, RaftSettings
from remoting.model import TopicConfig
from tests.raftstore import cast
from tests.raftstore.raft_node import InProcessCluster


def _count_decodes(node: RaftReplicator) -> list[int]:
    calls = [0]
    decode: Callable[..., Any] = node._decode

    def counting(*args: Any) -> Any:
        calls[0] += 1
        return decode(*args)

    node._decode = counting  # type: ignore[method-assign]
    return calls


async def test_the_proposer_applies_its_own_entries_without_decoding_them(
    tmp_path: Path,
) -> None:
    settings = RaftSettings(verify_own_entries=False)
    async with InProcessCluster(tmp_path, settings=settings) as cluster:
        leader = await cluster.leader()
        follower = await cluster.follower()
        await cluster.converged()
        leader_decodes, follower_decodes = _count_decodes(leader), _count_decodes(follower)

        await asyncio.gather(*(leader.propose(PutKV("own", f"k{i}", str(i))) for i in range(40)))
        statuses = await cluster.converged()

        assert leader_decodes == [0]
        assert follower_decodes[0] >= 1
        assert leader._own_entries == {}
        assert all(s.alarms == () for s in statuses)
        assert {n.read(lambda t: t.kv_get("own", "k39")) for n in cluster.nodes} == {"39"}


async def test_verification_alarms_when_a_command_differs_from_its_decode(
    tmp_path: Path,
) -> None:
    settings = RaftSettings(verify_own_entries=True)
    async with InProcessCluster(tmp_path, settings=settings) as cluster:
        leader = await cluster.leader()
        # A list where the command declares a tuple: the log carries an array, which
        # every other node decodes as a tuple, so the proposer's object is not what
        # they apply.
        odd = RegisterBroker(
            "DefaultCluster", "10.0.0.1:10911", "broker-a", 0, "", 1_700_000_000_000,
            filter_server_list=["fs1"],  # type: ignore[arg-type]
        )  # fmt: skip
        await leader.propose(odd)
        statuses = await cluster.converged()

        alarms = leader.status().alarms
        assert any("differs from the commands it was made from" in a for a in alarms)
        assert len({s.digest for s in statuses}) == 1


async def test_only_the_leader_announces_commits_before_applying_them(tmp_path: Path) -> None:
    settings = RaftSettings(announce_commit_first=True)
    async with InProcessCluster(tmp_path, settings=settings) as cluster:
        leader = await cluster.leader()
        # Lone small entries, one at a time: not worth an extra round.
        for i in range(5):
            await leader.propose(PutKV("ann", f"k{i}", "v"))
        await cluster.converged()
        assert leader._require_started()._announced_commit == 0
        # One entry above ANNOUNCE_MIN_BYTES: announced before the leader applies it.
        big = {f"AnnouncedTopic{i:05d}": TopicConfig(f"AnnouncedTopic{i:05d}", 8, 8)
               for i in range(1000)}  # fmt: skip
        register = RegisterBroker(
            "DefaultCluster", "10.0.0.2:10911", "broker-b", 0, "", 1_700_000_000_000,
            topic_config_wrapper=cast.wrapper(big),
        )  # fmt: skip
        await leader.propose(register)
        statuses = await cluster.converged()

        commit = leader._require_started().raftCommitIndex
        assert 0 < leader._require_started()._announced_commit <= commit
        followers = [n for n in cluster.nodes if n is not leader]
        assert [n._require_started()._announced_commit for n in followers] == [0, 0]
        assert all(s.alarms == () for s in statuses)


async def test_a_leader_keeps_leading_through_a_long_apply(tmp_path: Path) -> None:
    """Applying a run of entries that takes longer than the election timeout (here a
    listener that takes 0.15 s per command on the leader, 1.8 s in all) sends the due
    heartbeats between commands, so no follower starts an election."""
    async with InProcessCluster(tmp_path) as cluster:
        leader = await cluster.leader()
        await cluster.converged()
        terms = {n.status().term for n in cluster.nodes}
        assert len(terms) == 1

        def slow(_command: object, _result: object) -> None:
            time.sleep(0.15)  # the tick thread is busy; the GIL is free for the others

        leader.subscribe(slow)
        await asyncio.gather(*(leader.propose(PutKV("slow", f"k{i}", "v")) for i in range(12)))
        statuses = await cluster.converged()
        assert {s.term for s in statuses} == terms, "an election happened during the apply"
        assert leader.is_leader()
        # The long tick shows in the status (NODE_STATUS, the storm bench), once the
        # tick that applied the run has ended: the answers leave as each entry
        # applies, before the tick's end is counted.
        deadline = time.monotonic() + 5.0
        while (status := leader.status()).long_tick_gaps < 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert status.long_tick_gaps >= 1 and status.tick_gap_max_ms >= 1000, status
