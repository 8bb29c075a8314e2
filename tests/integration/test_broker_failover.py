"""Raft failover end to end: 3 raft NameServers, broker-a's real master and slave.

The master is SIGKILLed. The leader's 1 s scan expires it (3 s heartbeat
timeout + 1 s skew allowance), elects the in-sync slave in the same replicated
apply and notifies it; the slave becomes master. Every node's route must name
the slave's address as id 0 within the bound, and the slave must take writes.

Meanwhile a forger (any local process: loopback is white-listed) has added a slave
id to broker-a reporting a huge confirmOffset and a made-up HA link, and keeps it
alive with heartbeats. The master never saw it on its HA port, so it is never elected
(raftstore/failover.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster.demo import DemoBroker, register_request, topic_table
from remoting.blocking import BlockingClient
from remoting.bodies import decode_topic_route_data
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.model import DataVersion
from tests.broker_app.support import BROKER_WAIT_S, BrokerProcess, send
from tests.integration.raft_cluster_harness import RaftGateway, free_port
from tests.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.integration]

NODES = 3
SCAN_INTERVAL_MS = 1_000
SKEW_ALLOWANCE_MS = 1_000
HEARTBEAT_TIMEOUT_MS = 3_000
FAILOVER_BOUND_S = 10.0
BROKER_NAME = "broker-a"
FAILOVER_BROKER = {
    "fast_heartbeat": "true",
    "heartbeat_interval_ms": "500",
    "heartbeat_timeout_ms": str(HEARTBEAT_TIMEOUT_MS),
    "raft_failover": "true",
}


@pytest.fixture
def nameservers(tmp_path: Path) -> Iterator[list[RaftGateway]]:
    raft_addrs = tuple(f"127.0.0.1:{free_port()}" for _ in range(NODES))
    nodes = [
        RaftGateway(
            node_id=f"n{i + 1}",
            db_path=tmp_path / f"n{i + 1}.sqlite3",
            ready_file=tmp_path / f"n{i + 1}.ready.json",
            log_path=tmp_path / f"n{i + 1}.log",
            raft_port=int(raft_addrs[i].rpartition(":")[2]),
            peers=raft_addrs,
            raft_dir=tmp_path / f"raft-n{i + 1}",
            # Scans every second: fast failure detection.
            options={"scan_interval_ms": SCAN_INTERVAL_MS, "skew_allowance_ms": SKEW_ALLOWANCE_MS},
        )
        for i in range(NODES)
    ]
    for node in nodes:
        node.launch()
    try:
        for node in nodes:
            node.wait_ready()
        yield nodes
    finally:
        for node in nodes:
            node.kill()


def master_of(node: RaftGateway, topic: str) -> str | None:
    """The address a node's route for ``topic`` shows as broker-a's id 0."""
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    with BlockingClient(node.addr, timeout_s=5.0) as client:
        response = client.invoke(request)
    if response.code != ResponseCode.SUCCESS or response.body is None:
        return None
    route = decode_topic_route_data(response.body)
    for data in route.broker_datas:
        if data.broker_name == BROKER_NAME:
            return data.broker_addrs.get(0)
    return None


FORGED_OFFSET = str(2**62)
VOUCHED_WAIT_S = 2.0
"""After the slave caught up: two of the master's heartbeats (500 ms apart), the first
of which reports the slave's new HA link at once (raftstore/liveness.py)."""


class Forger:
    """Registers broker-a id 7 at an address of its own on every node, with a huge
    confirmOffset and a made-up HA link, and heartbeats it every 500 ms."""

    def __init__(self, nameservers: list[RaftGateway]) -> None:
        self.addr = f"127.0.0.1:{free_port()}"
        self.broker = DemoBroker("DefaultCluster", BROKER_NAME, 7, self.addr, self.addr)
        self.fields = {
            "maxOffset": FORGED_OFFSET,
            "confirmOffset": FORGED_OFFSET,
            "enableRaftFailover": "true",
            "haClientAddr": "127.0.0.1:1",
        }
        self.clients = [BlockingClient(node.addr, timeout_s=5.0) for node in nameservers]
        self.stop = threading.Event()
        self.accepted = 0
        self.thread = threading.Thread(target=self._run, name="forger", daemon=True)

    def __enter__(self) -> Forger:
        request = register_request(
            self.broker,
            topic_table(["FailoverTopic", BROKER_NAME]),
            DataVersion(timestamp=1, counter=1),
            heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS,
        )
        request.ext_fields = {**(request.ext_fields or {}), **self.fields}
        for client in self.clients:
            self.accepted += client.invoke(request).code == ResponseCode.SUCCESS
        self.thread.start()
        return self

    def _run(self) -> None:
        fields = {
            "clusterName": "DefaultCluster",
            "brokerAddr": self.addr,
            "brokerName": BROKER_NAME,
            "brokerId": "7",
            **self.fields,
        }
        while not self.stop.wait(0.5):
            for client in self.clients:
                client.invoke(RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, fields))

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(5.0)
        for client in self.clients:
            client.close()


def test_routes_on_every_node_name_the_slave_as_master_after_a_kill(
    tmp_path: Path, nameservers: list[RaftGateway]
) -> None:
    namesrv = ";".join(node.addr for node in nameservers)
    master = BrokerProcess(
        tmp_path, "master", role="ASYNC_MASTER", broker_id=0, namesrv=namesrv, extra=FAILOVER_BROKER
    )
    slave = BrokerProcess(
        tmp_path, "slave", role="SLAVE", broker_id=1, namesrv=namesrv, extra=FAILOVER_BROKER
    )
    try:
        assert send(master.addr, "FailoverTopic", b"before").code == ResponseCode.SUCCESS
        wait_until(
            lambda: all(master_of(n, "FailoverTopic") == master.addr for n in nameservers),
            what="every node routes FailoverTopic to the master",
            timeout_s=BROKER_WAIT_S,
        )
        wait_until(
            lambda: (
                slave.runtime_info()["commitLogMaxOffset"]
                == master.runtime_info()["commitLogMaxOffset"]
            ),
            what="slave in sync",
            timeout_s=BROKER_WAIT_S,
        )
        with Forger(nameservers) as forger:
            assert forger.accepted == NODES, "a new slave id is anyone's to add"
            time.sleep(VOUCHED_WAIT_S)
            killed_at = time.monotonic()
            master.kill()
            wait_until(
                lambda: all(master_of(n, "FailoverTopic") == slave.addr for n in nameservers),
                what="every node names the slave, not the forger, as master",
                timeout_s=FAILOVER_BOUND_S,
            )
            elapsed_s = time.monotonic() - killed_at
            assert all(master_of(n, "FailoverTopic") != forger.addr for n in nameservers)
        print(f"failover: routes on {NODES} nodes name the new master {elapsed_s:.2f} s after kill")
        assert elapsed_s < FAILOVER_BOUND_S
        wait_until(
            lambda: slave.runtime_info()["brokerRole"] == "ASYNC_MASTER",
            what="the slave switched role",
            timeout_s=BROKER_WAIT_S,
        )
        assert send(slave.addr, "FailoverTopic", b"after").code == ResponseCode.SUCCESS
        assert slave.runtime_info()["brokerId"] == "0"
    finally:
        slave.terminate()
        master.kill()
