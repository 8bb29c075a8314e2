"""The apply path: a node applies the entries it proposed from its own command
objects (and the verification mode catches a command its decode would not
reproduce); the leader announces a commit before it applies it."""

from __future__ import annotations

import asyncio
import collections
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from raftstore.commands import PutKV, RegisterBroker
from raftstore.raft import RaftReplicator, RaftSettings
from remoting.model import TopicConfig
from tests.raftstore import cast
from tests.raftstore.raft_node import InProcessCluster
from tests.waiting import eventually


def _count_decodes(node: RaftReplicator) -> list[int]:
    calls = [0]
    decode: Callable[..., Any] = node._applied.decode

    def counting(*args: Any) -> Any:
        calls[0] += 1
        return decode(*args)

    node._applied.decode = counting  # type: ignore[method-assign]
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
        assert leader._commits.own_entries == {}
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
            "DefaultCluster",
            "10.0.0.1:10911",
            "broker-a",
            0,
            "",
            1_700_000_000_000,
            filter_server_list=["fs1"],  # type: ignore[arg-type]
        )
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
        big = {
            f"AnnouncedTopic{i:05d}": TopicConfig(f"AnnouncedTopic{i:05d}", 8, 8)
            for i in range(1000)
        }
        register = RegisterBroker(
            "DefaultCluster",
            "10.0.0.2:10911",
            "broker-b",
            0,
            "",
            1_700_000_000_000,
            topic_config_wrapper=cast.wrapper(big),
        )
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
        def long_gap() -> Any:
            status = leader.status()
            return status if status.long_tick_gaps >= 1 else None

        status = await eventually(
            long_gap,
            what="a long tick gap in the status",
            timeout_s=5.0,
            interval_s=0.02,
        )
        assert status.tick_gap_max_ms >= 1000, status


async def _applies_per_tick(root: Path, apply_slice_s: float) -> tuple[int, int]:
    """Ten one-command entries proposed together on the leader, each taking 0.1 s to
    apply there: the most entries one of the leader's ticks applied, and how many
    ticks left entries for the next one. Counted, not timed, so a loaded machine
    changes neither figure."""
    settings = RaftSettings(
        apply_slice_s=apply_slice_s, max_batch_commands=1, max_batches_in_flight=16
    )
    async with InProcessCluster(root, settings=settings) as cluster:
        leader = await cluster.leader()
        await cluster.converged()
        terms = {s.term for s in await cluster.converged()}
        ticks = itertools.count()
        tick_now = [0]
        sync = leader._require_started()
        sync.addOnTickCallback(lambda: tick_now.__setitem__(0, next(ticks)))
        applied_in: list[int] = []

        def slow(_command: object, _result: object) -> None:
            applied_in.append(tick_now[0])
            time.sleep(0.1)

        leader.subscribe(slow)
        await asyncio.gather(*(leader.propose(PutKV("slice", f"k{i}", "v")) for i in range(10)))
        statuses = await cluster.converged()
        assert {s.term for s in statuses} == terms, "an election happened during the applies"
        assert len({s.digest for s in statuses}) == 1
        assert len(applied_in) == 10
        return max(collections.Counter(applied_in).values()), sync.apply_slices_cut


async def test_committed_entries_apply_in_slices_between_ticks(tmp_path: Path) -> None:
    """A tick applies committed entries for about ``apply_slice_s`` and leaves the rest
    to the next tick (which sends the leader's round and reads its sockets first), so
    a run of slow entries committed together never stalls one tick for all of it: with
    a 0.05 s slice and 0.1 s entries, each tick applies one. The same run with a slice
    longer than it applies several entries in one tick and never cuts."""
    sliced_most, cuts = await _applies_per_tick(tmp_path / "sliced", 0.05)
    whole_most, whole_cuts = await _applies_per_tick(tmp_path / "whole", 30.0)
    assert cuts >= 1 and whole_cuts == 0
    assert sliced_most == 1, f"a tick applied {sliced_most} entries of 0.1 s"
    assert whole_most >= 2, "the unsliced run never applied two entries in one tick"
