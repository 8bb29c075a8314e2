"""The Brokers page and its forms, against one real broker process of a run folder.

The broker (broker-a, master) is started by ``broker_control.start_broker`` in a
temporary run folder, registers with the test gateway, and is projected into the
test database the way the gateway would project it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from gateway.clock import ManualClock
from gateway.services import NameServerService
from localcluster import broker_control
from localcluster.broker_control import BrokerSpec, LocalBroker
from namesrv_app.projection import read_full_state, write_full_state
from raftstore.replicator import LocalReplicator
from tests.integration.gateway_harness import write_test_acl
from tests.integration.raft_cluster_harness import free_port
from tests.web.conftest import RunningGateway, log_in, node_settings

LABEL = "broker-a-0"
TOPIC = "ConsoleTopic"


def logged_in(username: str) -> Client:
    """A browser-like client with a session."""
    client = Client()
    assert log_in(client, username)
    return client


@pytest.fixture
def run_dir(tmp_path: Path, gateway: RunningGateway) -> Iterator[Path]:
    """A run folder holding one real broker registered with the test gateway."""
    # The broker's port checks the test accounts: the console signs as the test admin.
    spec = BrokerSpec("broker-a", 0, free_port(), free_port(), (gateway.addr,),
                      settings={"aclFile": str(write_test_acl(tmp_path))})
    broker_control.start_broker(tmp_path, spec)
    (tmp_path / "cluster.json").write_text(json.dumps({"nodes": []}), encoding="utf-8")
    try:
        yield tmp_path
    finally:
        broker_control.stop_broker(tmp_path, LABEL, kill=True)


@pytest.fixture
def broker(run_dir: Path, settings: Any, gateway: RunningGateway, db: Any) -> LocalBroker:
    """The running broker, projected into the test DB; settings point at the run folder."""
    settings.NAMESRV = {**node_settings(gateway), "CLUSTER_FILE": str(run_dir / "cluster.json")}
    (local,) = broker_control.local_brokers(run_dir)
    replicator = LocalReplicator("n1")
    service = NameServerService(replicator, ManualClock(int(time.time() * 1000)))
    asyncio.run(service.register_broker(
        cluster_name="DefaultCluster", broker_addr=local.spec.addr, broker_name="broker-a",
        broker_id=0, ha_server_addr=f"127.0.0.1:{local.spec.ha_port}",
    ))  # fmt: skip
    write_full_state(replicator.read(read_full_state), "n1", "eventual")
    return local


def test_the_page_shows_the_brokers_role_and_offsets(broker: LocalBroker, viewer: User) -> None:
    page = logged_in("vera").get("/brokers/").content.decode()
    assert broker.spec.addr in page and "ASYNC_MASTER" in page
    assert "s ago" in page and "running" in page
    assert "Send a test message" not in page


def test_an_operator_creates_a_topic_on_the_broker(broker: LocalBroker, operator: User) -> None:
    response = logged_in("otto").post("/brokers/topic/", {
        "broker_addr": broker.spec.addr, "topic": TOPIC, "read_queue_nums": 4,
        "write_queue_nums": 4, "perm": 6,
    })  # fmt: skip
    assert response.status_code == 200
    assert f"topic {TOPIC} created or updated" in response.content.decode()


def test_an_operator_sends_a_test_message(broker: LocalBroker, operator: User) -> None:
    response = logged_in("otto").post("/brokers/send/", {
        "broker_addr": broker.spec.addr, "topic": TOPIC, "body": "hello",
    })  # fmt: skip
    assert "sent: code 0, msgId" in response.content.decode()
    info = broker_control.runtime_info(broker.spec.addr)
    assert int(info["commitLogMaxOffset"]) > 0


def test_a_bad_topic_name_is_refused_before_reaching_the_broker(
    broker: LocalBroker, operator: User
) -> None:
    response = logged_in("otto").post("/brokers/send/", {
        "broker_addr": broker.spec.addr, "topic": "bad topic!", "body": "x",
    })  # fmt: skip
    assert "Please correct the form." in response.content.decode()


def test_a_viewer_may_not_write(broker: LocalBroker, viewer: User) -> None:
    client = logged_in("vera")
    for url in ("/brokers/topic/", "/brokers/send/", "/brokers/control/"):
        assert client.post(url, {}).status_code == 403


def test_stopping_needs_a_confirmation_then_start_brings_it_back(
    broker: LocalBroker, operator: User, run_dir: Path
) -> None:
    client = logged_in("otto")
    refused = client.post("/brokers/control/", {"label": LABEL, "action": "stop"})
    assert "Tick the confirmation" in refused.content.decode()
    assert broker_control.local_brokers(run_dir)[0].running
    stopped = client.post("/brokers/control/", {"label": LABEL, "action": "stop",
                                                "confirm": "on"})
    assert f"{LABEL} stopped" in stopped.content.decode()
    assert not broker_control.local_brokers(run_dir)[0].running
    started = client.post("/brokers/control/", {"label": LABEL, "action": "start"})
    assert f"{LABEL} started" in started.content.decode()
    assert broker_control.runtime_info(broker.spec.addr)["brokerRole"] == "ASYNC_MASTER"
