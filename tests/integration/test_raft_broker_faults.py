"""A broker process through a raft NameServer cluster's faults: the leader SIGKILLed,
then a node cut off from the others (a minority partition).

The broker is ``manage.py run_broker`` (the project's own broker, which registers as a
4.9.4 broker does: every NameServer in turn, each answer logged, the round going on past
a failed one). Through both faults the broker keeps serving sends, its routes stay on
every node that has a quorum, a topic created during the fault reaches the majority, and
the node without a quorum refuses the registration with "no raft quorum", which the
broker logs and goes past. Healed, every node routes every topic.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster import broker_control
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.broker_app.support import BrokerProcess, send
from tests.integration.gateway_harness import ADMIN
from tests.integration.raft_cluster_harness import (
    RaftGateway,
    RaftGatewayCluster,
    free_port,
    running_cluster,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BROKER_NAME = "broker-f"
ROUTE_BOUND_S = 15.0
"""A created topic's registration, over an election or a refused propose (3 s)."""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RaftGatewayCluster]:
    """Three raft gateways, each on a fixed client port, so that a restarted node is at the
    address the broker was configured with, as a deployed NameServer is."""
    root = tmp_path / "cluster"
    root.mkdir()
    with running_cluster(root, node_args=lambda: ("--port", str(free_port()))) as nodes:
        yield nodes


@pytest.fixture
def broker(tmp_path: Path, cluster: RaftGatewayCluster) -> Iterator[BrokerProcess]:
    """A master registering with every node of the cluster, heartbeating twice a second."""
    namesrv = ";".join(node.addr for node in cluster.nodes)
    process = BrokerProcess(
        tmp_path,
        "master",
        role="ASYNC_MASTER",
        broker_id=0,
        namesrv=namesrv,
        broker_name=BROKER_NAME,
        extra={"fast_heartbeat": "true", "heartbeat_interval_ms": "500"},
    )
    yield process
    process.terminate()


def _routed(node: RaftGateway, topic: str) -> bool:
    answer = node.invoke(
        RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    )
    return answer.code == ResponseCode.SUCCESS


def _create(broker: BrokerProcess, topic: str) -> None:
    """A topic created on the broker, which registers its table with every NameServer."""
    broker_control.create_topic(
        broker.addr, topic, read_queue_nums=4, write_queue_nums=4, perm=6, credentials=ADMIN
    )


def _routed_on(nodes: list[RaftGateway], topic: str) -> None:
    wait_until(
        lambda: all(_routed(node, topic) for node in nodes),
        what=f"{topic} routed on {[node.node_id for node in nodes]}",
        timeout_s=ROUTE_BOUND_S,
    )


def test_a_broker_keeps_working_through_a_leader_kill_and_a_minority_partition(
    cluster: RaftGatewayCluster, broker: BrokerProcess
) -> None:
    _create(broker, "BeforeFaults")
    _routed_on(cluster.nodes, "BeforeFaults")

    leader = cluster.leader()
    survivors = [i for i in range(len(cluster)) if i != leader]
    cluster.nodes[leader].kill()
    cluster.leader(among=survivors)
    _create(broker, "AfterLeaderKill")
    _routed_on([cluster.nodes[i] for i in survivors], "AfterLeaderKill")
    assert all(_routed(cluster.nodes[i], "BeforeFaults") for i in survivors)
    assert send(broker.addr, "AfterLeaderKill", b"through a kill").code == ResponseCode.SUCCESS
    cluster.start([leader])
    _routed_on(cluster.nodes, "AfterLeaderKill")

    cut = cluster.leader()
    majority = [i for i in range(len(cluster)) if i != cut]
    cut_addr = cluster.nodes[cut].addr
    cluster.partition(cut)
    try:
        cluster.leader(among=majority)
        _create(broker, "DuringPartition")
        _routed_on([cluster.nodes[i] for i in majority], "DuringPartition")
        wait_until(
            lambda: (
                f"namesrv {cut_addr} refused the registration: code 1: no raft quorum"
                in broker.log_path.read_text(errors="replace")
            ),
            what="the broker's log line for the cut-off node's refusal",
            timeout_s=ROUTE_BOUND_S,
        )
        assert not _routed(cluster.nodes[cut], "DuringPartition")
        assert send(broker.addr, "DuringPartition", b"past a cut").code == ResponseCode.SUCCESS
        assert broker.proc.poll() is None
    finally:
        cluster.heal()
    _routed_on(cluster.nodes, "DuringPartition")
    assert all(_routed(node, "BeforeFaults") for node in cluster.nodes)
