"""Follower-side AppendEntries trimming: only a real conflict truncates (Raft section 5.3).

PySyncObj 0.3.17 truncates everything after prevLogIdx whenever the follower holds
more entries; under load its leader re-sends batches the follower already holds,
which deleted already-applied entries. These tests pin the rewrite that prevents it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from raftstore.commands import PutKV
from raftstore.raft.append import trim_append_entries
from tests.raftstore.raft_node import InProcessCluster, ProcessCluster

BURST_WAVES = 4
BURST_PROPOSALS = 150
SLOW_REPLY_MS = 120
SLOW_WAVES = 3
SLOW_PROPOSALS = 60


class ListLog:
    """A follower log of (index, term) pairs starting at ``first``."""

    def __init__(self, terms: list[int], first: int = 1, committed: int = 0) -> None:
        self.terms = terms
        self.first = first
        self.committed = committed

    def first_index(self) -> int:
        return self.first

    def last_index(self) -> int:
        return self.first + len(self.terms) - 1

    def term_at(self, index: int) -> int:
        return self.terms[index - self.first]

    def committed_index(self) -> int:
        return self.committed


def append(prev: int, prev_term: int, entries: list[tuple[int, int]], term: int) -> dict[str, Any]:
    """An append_entries message carrying (index, term) entries."""
    return {
        "type": "append_entries",
        "term": term,
        "commit_index": 0,
        "prevLogIdx": prev,
        "prevLogTerm": prev_term,
        "entries": [(b"cmd", index, t) for index, t in entries],
    }


def test_a_resent_batch_the_follower_holds_acknowledges_its_whole_log() -> None:
    log = ListLog([1] * 20, committed=15)
    message = append(10, 1, [(11, 1), (12, 1)], term=1)

    trimmed = trim_append_entries(log, message)

    assert trimmed["prevLogIdx"] == 20
    assert trimmed["entries"] == []


def test_new_entries_after_held_ones_keep_only_the_new_part() -> None:
    log = ListLog([1] * 12)
    message = append(10, 1, [(11, 1), (12, 1), (13, 1), (14, 1)], term=1)

    trimmed = trim_append_entries(log, message)

    assert trimmed["prevLogIdx"] == 12
    assert [e[1] for e in trimmed["entries"]] == [13, 14]


def test_a_conflicting_entry_still_truncates_from_the_conflict() -> None:
    log = ListLog([1] * 12, committed=10)
    message = append(10, 1, [(11, 1), (12, 2), (13, 2)], term=2)

    trimmed = trim_append_entries(log, message)

    assert trimmed["prevLogIdx"] == 11
    assert [(e[1], e[2]) for e in trimmed["entries"]] == [(12, 2), (13, 2)]


def test_uncommitted_entries_of_an_older_term_past_the_batch_may_still_go() -> None:
    log = ListLog([1] * 10 + [1] * 5, committed=10)
    message = append(8, 1, [(9, 1), (10, 1)], term=2)

    trimmed = trim_append_entries(log, message)

    assert trimmed["prevLogIdx"] == 10
    assert trimmed["entries"] == []


def test_committed_entries_of_an_older_term_are_kept_past_the_batch() -> None:
    log = ListLog([1] * 15, committed=15)
    message = append(8, 1, [(9, 1), (10, 1)], term=2)

    assert trim_append_entries(log, message)["prevLogIdx"] == 15


def test_messages_it_cannot_judge_are_left_to_pysyncobj() -> None:
    log = ListLog([1] * 10, first=5)
    behind_snapshot = append(2, 1, [(3, 1)], term=1)
    wrong_prev_term = append(8, 3, [(9, 3)], term=3)
    at_the_end = append(14, 1, [(15, 1)], term=1)
    transmission = {**append(8, 1, [], term=1), "transmission": "start", "data": b""}

    for message in (behind_snapshot, wrong_prev_term, at_the_end, transmission):
        assert trim_append_entries(log, message) is message


async def test_a_burst_of_concurrent_proposals_never_truncates_applied_entries(
    tmp_path: Path,
) -> None:
    """The load that made PySyncObj re-send held batches (and truncate applied entries)."""
    async with InProcessCluster(tmp_path, propose_timeout_s=10.0) as cluster:
        await cluster.leader()
        for wave in range(BURST_WAVES):
            await asyncio.gather(
                *(
                    cluster.nodes[i % len(cluster.nodes)].propose(
                        PutKV("burst", f"k{wave}-{i}", "x" * 512)
                    )
                    for i in range(BURST_PROPOSALS)
                )
            )
        statuses = await cluster.converged()

    assert all(status.alarms == () for status in statuses)
    assert len({(s.applied_version, s.digest) for s in statuses}) == 1
    assert statuses[0].applied_version == BURST_WAVES * BURST_PROPOSALS


@pytest.mark.slow
@pytest.mark.integration
async def test_replies_slower_than_the_append_period_never_truncate_applied_entries(
    tmp_path: Path,
) -> None:
    """One slow follower: the fast one moves the commit index on, the slow one applies a
    batch, then the leader (reset backwards by a late reply) re-sends that batch to it."""
    cluster = ProcessCluster(tmp_path)
    await cluster.start()
    try:
        leader = await cluster.leader()
        slow = next(i for i in range(len(cluster.nodes)) if i != leader)
        for name in cluster.proxy.links():
            if str(slow) in name.split("->"):
                cluster.proxy.set_mode(name, "pass", delay_ms=SLOW_REPLY_MS)
        for wave in range(SLOW_WAVES):
            await asyncio.gather(
                *(
                    cluster.nodes[i % len(cluster.nodes)].put(f"k{wave}-{i}", "x" * 256)
                    for i in range(SLOW_PROPOSALS)
                )
            )
        cluster.heal()
        statuses = await cluster.converged()
    finally:
        await cluster.close()

    assert sum(s["resends_trimmed"] for s in statuses) > 0, "the re-send condition never arose"
    assert all(s["alarms"] == [] for s in statuses)
    assert len({(s["applied_version"], s["digest"]) for s in statuses}) == 1
