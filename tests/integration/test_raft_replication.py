"""Raft mode over the wire: a write through one node is read on another, and
liveness follows the raft rules (a closed connection is local, UNREGISTER is global)."""

from __future__ import annotations

import json
import time

import pytest

from remoting.blocking import BlockingClient
from remoting.bodies import decode_topic_route_data
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.consistency import ROUTES_VERSION_FIELD
from remoting.register_request import APPLIED_VERSION_FIELD, RAFT_LOG_INDEX_FIELD
from tests.integration.gateway_harness import WAIT_S
from tests.integration.raft_cluster_harness import (
    DIGEST_CHECKPOINTS,
    RAFT_ADD_NODE,
    SCAN_NOT_ACTIVE_BROKER,
    WIRE_TIMEOUT_S,
    RaftGatewayCluster,
    broker,
    register_frame,
    route_frame,
    topic_of,
    unregister_frame,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FAR_PAST_MS = 1


def test_a_broker_registered_through_node_2_is_routed_by_node_3(
    cluster: RaftGatewayCluster,
) -> None:
    """REGISTER_BROKER on n2; a linearizable read on n3 sees it at once, a local one soon."""
    n2, n3 = cluster.nodes[1], cluster.nodes[2]
    assert n2.invoke(register_frame(1)).code == ResponseCode.SUCCESS
    fresh = n3.invoke(route_frame(topic_of(1), linearizable=True))
    assert fresh.code == ResponseCode.SUCCESS and fresh.body is not None
    route = decode_topic_route_data(fresh.body)
    assert [bd.broker_addrs for bd in route.broker_datas] == [{0: broker(1).addr}]
    wait_until(
        lambda: cluster.nodes[0].invoke(route_frame(topic_of(1))).code == 0,
        what="the route on n1 (a local read)",
        timeout_s=WAIT_S,
    )
    assert all(s["has_quorum"] for s in cluster.converged())


def test_nodes_that_applied_the_same_log_answer_with_the_same_routes_version(
    cluster: RaftGatewayCluster,
) -> None:
    """Ext ``routesVersion`` counts applied route changes, so it compares across raft nodes;
    a registration that changes a route moves it on every node."""
    before = agreed_routes_version(cluster, topic_of(1))
    assert cluster.nodes[0].invoke(register_frame(7)).code == ResponseCode.SUCCESS
    assert agreed_routes_version(cluster, topic_of(7)) > before


def test_a_registration_s_answer_names_the_log_entry_that_applied_it(
    cluster: RaftGatewayCluster,
) -> None:
    """``raftLogIndex`` and ``appliedVersion``: a registration that changed the table
    names the entry that applied it and the table version it left, a later one later
    ones; the same request again, answered from the
    applied state, names none (no entry carried it); an unregistration names its entry."""
    n2 = cluster.nodes[1]
    first, second = n2.invoke(register_frame(11)), n2.invoke(register_frame(12))
    assert (first.code, second.code) == (ResponseCode.SUCCESS, ResponseCode.SUCCESS)
    places = [_place(a) for a in (first, second)]
    assert (0, 0) < places[0] < places[1], places
    again = n2.invoke(register_frame(12))
    assert again.code == ResponseCode.SUCCESS
    assert not {RAFT_LOG_INDEX_FIELD, APPLIED_VERSION_FIELD} & set(again.ext_fields or {})
    gone = n2.invoke(unregister_frame(12))
    assert gone.code == ResponseCode.SUCCESS
    assert _place(gone) > places[1], gone.ext_fields


def _place(answer: RemotingCommand) -> tuple[int, int]:
    """(raftLogIndex, appliedVersion) of a write's answer."""
    ext = answer.ext_fields or {}
    return int(ext[RAFT_LOG_INDEX_FIELD]), int(ext[APPLIED_VERSION_FIELD])


def agreed_routes_version(cluster: RaftGatewayCluster, topic: str) -> int:
    """The routes version every node answers with once converged (the liveness scan may
    apply an expiry between two reads: then converge and ask again)."""
    answers: set[int] = set()
    for _ in range(20):
        cluster.converged()
        answers = {routes_version(n.invoke(route_frame(topic))) for n in cluster.nodes}
        if len(answers) == 1:
            return answers.pop()
    raise AssertionError(f"the nodes never agreed on a routes version: {answers}")


def routes_version(answer: RemotingCommand) -> int:
    """The answering node's routes version (on found and TOPIC_NOT_EXIST answers alike)."""
    return int((answer.ext_fields or {})[ROUTES_VERSION_FIELD])


def test_node_status_reports_the_raft_state(cluster: RaftGatewayCluster) -> None:
    """NODE_STATUS in raft mode: members, a leader, peers with match indices, no alarms."""
    leader = cluster.nodes[cluster.leader()]
    status = leader.node_status()
    assert status["mode"] == "raft" and status["state"] == "leader"
    assert sorted(status["members"]) == sorted(n.raft_addr for n in cluster.nodes)
    assert {p["address"] for p in status["peers"]} == set(status["members"]) - {leader.raft_addr}
    assert all(p["match_index"] >= 1 for p in status["peers"])
    assert status["alarms"] == [] and status["commit_index"] >= status["applied_index"] >= 1


def test_a_closed_broker_connection_keeps_the_routes_cluster_wide(
    cluster: RaftGatewayCluster,
) -> None:
    """Closing the connection a broker registered on is one node's observation only."""
    n1 = cluster.nodes[0]
    with BlockingClient(n1.addr, timeout_s=WIRE_TIMEOUT_S) as connection:
        assert connection.invoke(register_frame(2)).code == ResponseCode.SUCCESS
    time.sleep(0.5)
    for node in cluster.nodes:
        assert node.invoke(route_frame(topic_of(2), linearizable=True)).code == 0, node.node_id


def test_a_graceful_unregister_drops_the_routes_everywhere(cluster: RaftGatewayCluster) -> None:
    """UNREGISTER_BROKER through n2 is replicated: every node stops routing the topic."""
    n1, n2 = cluster.nodes[0], cluster.nodes[1]
    assert n1.invoke(register_frame(3)).code == ResponseCode.SUCCESS
    assert n2.invoke(unregister_frame(3)).code == ResponseCode.SUCCESS
    gone = cluster.nodes[2].invoke(route_frame(topic_of(3), linearizable=True))
    assert gone.code == ResponseCode.TOPIC_NOT_EXIST
    wait_until(
        lambda: all(
            n.invoke(route_frame(topic_of(3))).code == ResponseCode.TOPIC_NOT_EXIST
            for n in cluster.nodes
        ),
        what="the unregistered topic gone on every node",
        timeout_s=WAIT_S,
    )
    cluster.converged()


def test_only_the_leader_proposes_the_liveness_scan(cluster: RaftGatewayCluster) -> None:
    """SCAN_NOT_ACTIVE_BROKER: followers answer expired=0 role=follower; the leader scans."""
    leader_index = cluster.leader()
    for index, node in enumerate(cluster.nodes):
        answer = node.internal(SCAN_NOT_ACTIVE_BROKER, now_ms=str(FAR_PAST_MS))
        expected_role = "leader" if index == leader_index else "follower"
        assert (answer.code, answer.ext_fields) == (
            ResponseCode.SUCCESS,
            {"expired": "0", "role": expected_role},
        )


def test_membership_refusals_come_back_as_system_errors(cluster: RaftGatewayCluster) -> None:
    """Adding an existing member is refused with the MembershipError text."""
    leader = cluster.nodes[cluster.leader()]
    answer = leader.internal(RAFT_ADD_NODE, addr=cluster.nodes[1].raft_addr)
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "already a member" in (answer.remark or "")


def test_every_node_has_the_same_digest_checkpoints_and_projection(
    cluster: RaftGatewayCluster,
) -> None:
    """Equal digests at equal applied index, and each projection matches its table."""
    statuses = cluster.converged()
    checkpoints = [json.loads(n.internal(DIGEST_CHECKPOINTS).body or b"{}") for n in cluster.nodes]
    assert all(points == checkpoints[0] for points in checkpoints)
    for node in cluster.nodes:
        projected = node.wait_for_projection()
        assert projected["digest"] == statuses[0]["digest"]
    counts = {n.projection_count("queuedata") for n in cluster.nodes}
    assert len(counts) == 1 and counts.pop() >= 2
