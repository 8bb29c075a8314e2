"""Raft mode: a node cut off from the others refuses writes within the bound, the
majority goes on, and after healing the cut-off node converges."""

from __future__ import annotations

import time

import pytest

from remoting.codes import ResponseCode
from tests.integration.raft_cluster_harness import (
    PROPOSE_TIMEOUT_S,
    RaftGatewayCluster,
    register_frame,
    route_frame,
    topic_of,
    write_until_accepted,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ANSWER_SLACK_S = 1.5
"""What the bound may be exceeded by: a tick, the retry back-off, the wire."""
MAJORITY_WRITE_BOUND_S = 10.0


def test_a_partitioned_leader_refuses_writes_and_converges_after_healing(
    cluster: RaftGatewayCluster,
) -> None:
    """Cut the leader off: it answers SYSTEM_ERROR "no raft quorum" within the bound,
    the two others elect a leader and accept writes; healed, all three agree."""
    cut = cluster.leader()
    majority = [i for i in range(len(cluster)) if i != cut]
    cluster.partition(cut)
    started = time.monotonic()
    refused = cluster.nodes[cut].invoke(register_frame(20))
    waited_s = time.monotonic() - started
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert (refused.remark or "").startswith("no raft quorum:"), refused.remark
    assert waited_s < PROPOSE_TIMEOUT_S + ANSWER_SLACK_S
    write_until_accepted(cluster.nodes[majority[0]], register_frame(21), MAJORITY_WRITE_BOUND_S)
    assert cluster.leader(among=majority) in majority
    stale = cluster.nodes[cut].invoke(route_frame(topic_of(21), linearizable=True))
    assert stale.code == ResponseCode.SYSTEM_ERROR
    cluster.heal()
    statuses = cluster.converged()
    assert len({s["leader"] for s in statuses}) == 1
    healed = cluster.nodes[cut].invoke(route_frame(topic_of(21)))
    assert healed.code == ResponseCode.SUCCESS
