"""Raft mode: a node left without a quorum refuses every write, those it could answer
from its applied state included, says so in NODE_STATUS, ``cluster status`` and its
metrics, and takes writes again by itself once the quorum is back."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator

import pytest

from namesrv_app.management import cluster_text
from remoting.bodies import encode_data_version
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.model import DataVersion
from tests.integration.gateway_harness import write_test_acl
from tests.integration.raft_cluster_harness import (
    CLUSTER,
    RaftGateway,
    RaftGatewayCluster,
    broker,
    free_port,
    register_frame,
    running_cluster,
    unregister_frame,
    write_until_accepted,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BROKER = 40
REFUSAL_BOUND_S = 6.0
"""From the SIGKILL to the first refused registration: the rule allows about 2 s (a
follower's election deadline, then the contact window); the old behaviour never refuses."""
FAST_REFUSAL_S = 1.5
"""A write on a node known to be cut off is refused at once, not after the propose bound."""
RECOVERY_BOUND_S = 20.0
REMARK_PREFIX = "no raft quorum: this node has not heard from a majority for "


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RaftGatewayCluster]:
    """Three raft gateways, each with its metrics port and the test admin account, and
    an agreed leader."""
    root = tmp_path_factory.mktemp("raft_no_quorum")
    acl = ("--acl-file", str(write_test_acl(root)))
    with running_cluster(root, acl, lambda: ("--metrics-port", str(free_port()))) as nodes:
        yield nodes


def _broker_fields() -> dict[str, str]:
    b = broker(BROKER)
    return {
        "clusterName": CLUSTER,
        "brokerAddr": b.addr,
        "brokerName": b.broker_name,
        "brokerId": "0",
    }


def _heartbeat() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, _broker_fields())


def _data_version_query() -> RemotingCommand:
    """The broker's QUERY_DATA_VERSION with the version it registered: a liveness touch
    that an in-contact node may answer from its applied state."""
    body = encode_data_version(DataVersion(timestamp=1, counter=1))
    return RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, _broker_fields(), body)


def _put_kv(node: RaftGateway, value: str) -> RemotingCommand:
    with node.admin_client() as admin:
        return admin.invoke(
            RemotingCommand.request(
                RequestCode.PUT_KV_CONFIG, {"namespace": "quorum", "key": "k", "value": value}
            )
        )


def _quorum_gauge(node: RaftGateway) -> float:
    url = f"http://127.0.0.1:{node.info['metrics_port']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    found = re.search(r"^namesrv_raft_quorum (\S+)$", text, re.MULTILINE)
    assert found is not None, text
    return float(found.group(1))


def _status_text(node: RaftGateway) -> str:
    """``manage.py cluster status`` as it prints this node's NODE_STATUS answer."""
    status = {
        "run_dir": "-",
        "processes": [{"name": f"{node.node_id}-gateway", "pid": 1, "alive": True, "log": "-"}],
        "running": True,
        "nodes": [{"id": node.node_id, "status": node.node_status(), "error": None}],
    }
    return cluster_text.status_text(status)


def _assert_refused(answer: RemotingCommand) -> None:
    assert answer.code == ResponseCode.SYSTEM_ERROR, answer
    assert (answer.remark or "").startswith(REMARK_PREFIX), answer.remark


def _refused_quickly(node: RaftGateway, request: RemotingCommand) -> None:
    started = time.monotonic()
    _assert_refused(node.invoke(request))
    assert time.monotonic() - started < FAST_REFUSAL_S


def test_a_node_cut_off_from_its_quorum_refuses_writes_and_recovers_by_itself(
    cluster: RaftGatewayCluster,
) -> None:
    """Kill the leader and the other follower: the survivor refuses a repeated
    registration, a heartbeat, a data-version query, an unregister and a KV put, and
    shows no quorum; restart them, and the same requests succeed again."""
    leader = cluster.leader()
    survivor_index = next(i for i in range(len(cluster)) if i != leader)
    survivor = cluster.nodes[survivor_index]
    others = [i for i in range(len(cluster)) if i != survivor_index]
    for node in cluster.nodes:
        assert node.invoke(register_frame(BROKER)).code == ResponseCode.SUCCESS
    assert survivor.invoke(register_frame(BROKER)).code == ResponseCode.SUCCESS
    assert survivor.invoke(_heartbeat()).code == ResponseCode.SUCCESS
    assert survivor.invoke(_data_version_query()).code == ResponseCode.SUCCESS
    assert _quorum_gauge(survivor) == 1.0

    for i in others:
        cluster.nodes[i].kill()

    def refusal() -> RemotingCommand | None:
        answer = survivor.invoke(register_frame(BROKER))
        return answer if answer.code != ResponseCode.SUCCESS else None

    _assert_refused(
        wait_until(refusal, what="a registration refused after the kill", timeout_s=REFUSAL_BOUND_S)
    )
    _refused_quickly(survivor, register_frame(BROKER))
    _refused_quickly(survivor, _heartbeat())
    _refused_quickly(survivor, _data_version_query())
    _refused_quickly(survivor, unregister_frame(BROKER))
    started = time.monotonic()
    _assert_refused(_put_kv(survivor, "lost"))
    assert time.monotonic() - started < FAST_REFUSAL_S

    status = survivor.node_status()
    assert not status["quorum_contact"] and not status["has_quorum"]
    assert any(alarm.startswith(REMARK_PREFIX) for alarm in status["alarms"]), status
    assert f"{survivor.node_id} ALARM: {REMARK_PREFIX}" in _status_text(survivor)
    assert _quorum_gauge(survivor) == 0.0

    cluster.start(others)
    write_until_accepted(survivor, register_frame(BROKER), RECOVERY_BOUND_S)
    assert survivor.invoke(register_frame(BROKER)).code == ResponseCode.SUCCESS
    assert survivor.invoke(_heartbeat()).code == ResponseCode.SUCCESS
    assert survivor.invoke(_data_version_query()).code == ResponseCode.SUCCESS
    assert _put_kv(survivor, "kept").code == ResponseCode.SUCCESS
    assert survivor.invoke(unregister_frame(BROKER)).code == ResponseCode.SUCCESS
    status = survivor.node_status()
    assert status["quorum_contact"] and not status["alarms"], status
    assert _quorum_gauge(survivor) == 1.0
