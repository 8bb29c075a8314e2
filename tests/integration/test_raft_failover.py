"""Raft mode: when the leader's process is SIGKILLed, writes resume on a new leader."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from remoting.codes import ResponseCode
from tests.integration import leader_log
from tests.integration.raft_cluster_harness import (
    RaftGatewayCluster,
    register_frame,
    route_frame,
    topic_of,
    write_until_accepted,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LEADER_RECORD_WAIT_S = 5.0
"""The gateway polls leadership every 0.5 s; give a loaded machine some slack."""
FAILOVER_BOUND_S = 10.0
"""Generous for a loaded 2-core machine; the bench measures the real figure (docs/BENCHMARKS.md)."""


def test_writes_resume_on_a_new_leader_after_the_leader_is_killed(
    cluster: RaftGatewayCluster,
) -> None:
    """SIGKILL the leader; REGISTER_BROKER through a survivor succeeds on a new leader,
    the acknowledged write before the kill survives, the survivor tells its leader
    publisher (the consoles) about the new leader, and the old leader catches up."""
    old = cluster.leader()
    survivor = cluster.nodes[(old + 1) % len(cluster)]
    assert survivor.invoke(register_frame(10)).code == ResponseCode.SUCCESS
    cluster.nodes[old].kill()
    killed_at = time.monotonic()
    took_s = write_until_accepted(survivor, register_frame(11), FAILOVER_BOUND_S)
    assert time.monotonic() - killed_at < FAILOVER_BOUND_S
    survivors = [i for i in range(len(cluster)) if i != old]
    new = cluster.leader(among=survivors)
    assert new != old and took_s < FAILOVER_BOUND_S
    for index in (10, 11):
        answer = survivor.invoke(route_frame(topic_of(index), linearizable=True))
        assert answer.code == ResponseCode.SUCCESS, index
    seen = _wait_for_leader_record(survivor.leader_log, cluster.nodes[new].raft_addr)
    assert seen[-1]["term"] > min(entry["term"] for entry in seen)
    cluster.start([old])
    statuses = cluster.converged()
    assert len(statuses) == len(cluster)
    rejoined = cluster.nodes[old].invoke(route_frame(topic_of(11), linearizable=True))
    assert rejoined.code == ResponseCode.SUCCESS


def _wait_for_leader_record(path: Path, leader: str) -> list[dict[str, Any]]:
    """The node's leader-change records once the last one names ``leader`` (polled)."""
    seen: list[dict[str, Any]] = []

    def told() -> list[dict[str, Any]] | None:
        seen[:] = leader_log.read(path)
        return seen if seen and seen[-1]["leader"] == leader else None

    return wait_until(
        told,
        what=lambda: f"the consoles told of {leader} (records: {seen})",
        timeout_s=LEADER_RECORD_WAIT_S,
        interval_s=0.1,
    )
