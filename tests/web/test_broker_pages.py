"""The Brokers page and its forms, against one real broker process of a run folder.

The broker (broker-a, master) is started by ``broker_control.start_broker`` in a
temporary run folder, registers with the test gateway, and is projected into the
test database the way the gateway would project it. A consumer group is made on the
wire as a client makes one (HEART_BEAT, then UPDATE_CONSUMER_OFFSET); the parsing
of the consumer-group answers is also checked against a fake broker connection.
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
from pytest_django.asserts import assertInHTML

from broker_app.messages import build_send_request
from gateway.clock import ManualClock
from gateway.services import NameServerService
from localcluster import broker_control
from localcluster.broker_control import BadBodyError, BrokerSpec, LocalBroker, QueueProgress
from namesrv_app.projection.delta import read_full_state
from namesrv_app.projection.rows import write_full_state
from namesrv_app.web import brokers as brokers_view
from raftstore.replicator import LocalReplicator
from remoting import fastjson
from remoting.blocking import BlockingClient
from remoting.codes import LanguageCode, RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.register_request import BrokerRegistration
from tests.integration.gateway_harness import write_test_acl
from tests.integration.raft_cluster_harness import free_port
from tests.waiting import wait_until
from tests.web.conftest import RunningGateway, log_in, node_settings

LABEL = "broker-a-0"
TOPIC = "ConsoleTopic"
GROUP = "ConsoleGroup"
CLIENT_ID = "127.0.0.1@console-test"
RETRY_TOPIC = f"%RETRY%{GROUP}"
SENT = {0: 5, 1: 3}
"""Messages sent per queue of TOPIC."""
COMMITTED = {0: 2, 1: 3}
"""The group's committed offset per queue: lag 3 on queue 0, none on queue 1."""


def logged_in(username: str) -> Client:
    """A browser-like client with a session."""
    client = Client()
    assert log_in(client, username)
    return client


@pytest.fixture
def run_dir(tmp_path: Path, gateway: RunningGateway) -> Iterator[Path]:
    """A run folder holding one real broker registered with the test gateway."""
    # The broker's port checks the test accounts: the console signs as the test admin.
    spec = BrokerSpec(
        "broker-a",
        0,
        free_port(),
        free_port(),
        (gateway.addr,),
        settings={"aclFile": str(write_test_acl(tmp_path))},
    )
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
    asyncio.run(
        service.register_broker(
            BrokerRegistration(
                cluster_name="DefaultCluster",
                broker_addr=local.spec.addr,
                broker_name="broker-a",
                broker_id=0,
                ha_server_addr=f"127.0.0.1:{local.spec.ha_port}",
            )
        )
    )
    write_full_state(replicator.read(read_full_state), "n1", "eventual")
    return local


def test_the_page_shows_the_brokers_role_and_offsets(broker: LocalBroker, viewer: User) -> None:
    page = logged_in("vera").get("/brokers/").content.decode()
    assert broker.spec.addr in page and "ASYNC_MASTER" in page
    assert "s ago" in page and "running" in page
    # Started without an HA secret: the master says it refuses slaves, and has none.
    assert "refused (no haSecretFile) · 0 slaves connected" in page
    assert "Send a test message" not in page
    assert "No consumer group has committed an offset on these brokers yet." in page


def heart_beat_body(group: str, topic: str) -> bytes:
    """A consumer's HEART_BEAT body: one clustering group subscribed to ``topic``."""
    return fastjson.dumps(
        {
            "clientID": CLIENT_ID,
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "subscriptionDataSet": [
                        {"topic": topic, "subString": "*", "subVersion": 1, "expressionType": "TAG"}
                    ],
                }
            ],
            "producerDataSet": [],
        }
    ).encode()


@pytest.fixture
def consumer_group(broker: LocalBroker) -> Iterator[BlockingClient]:
    """GROUP on the broker: its client connected (the open connection), SENT messages
    on TOPIC and COMMITTED offsets, plus an idle commit on the group's retry topic."""
    with BlockingClient(broker.spec.addr, timeout_s=5.0) as client:
        beat = RemotingCommand.request(
            RequestCode.HEART_BEAT, body=heart_beat_body(GROUP, TOPIC), language=LanguageCode.PYTHON
        )
        assert client.invoke(beat).code == ResponseCode.SUCCESS
        for queue_id, count in SENT.items():
            for n in range(count):
                request = build_send_request(
                    TOPIC,
                    f"m{n}".encode(),
                    queue_id=queue_id,
                    producer_group="PG",
                    tags=None,
                    born_timestamp_ms=int(time.time() * 1000),
                )
                assert client.invoke(request).code == ResponseCode.SUCCESS
        for topic, queue_id, offset in [
            *((TOPIC, q, o) for q, o in COMMITTED.items()),
            (RETRY_TOPIC, 0, 0),
        ]:
            commit = RemotingCommand.request(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {
                    "consumerGroup": GROUP,
                    "topic": topic,
                    "queueId": str(queue_id),
                    "commitOffset": str(offset),
                },
            )
            assert client.invoke(commit).code == ResponseCode.SUCCESS
        yield client


def test_the_page_shows_a_consumer_group_its_client_and_its_lag(
    broker: LocalBroker, consumer_group: BlockingClient, viewer: User
) -> None:
    (group,) = broker_control.consumer_groups(broker.spec.addr)
    assert group.name == GROUP and group.online
    assert [c.client_id for c in group.clients] == [CLIENT_ID]
    assert group.subscriptions == ((TOPIC, "*"),)
    assert group.queues == (
        QueueProgress(TOPIC, 0, 5, 2),
        QueueProgress(TOPIC, 1, 3, 3),
        QueueProgress(RETRY_TOPIC, 0, 0, 0),
    )
    assert group.total_lag == 3

    page = logged_in("vera").get("/brokers/").content.decode()
    assert "No consumer group has committed" not in page
    assertInHTML('<span class="total-lag">3</span>', page)
    client_addr = group.clients[0].addr
    assertInHTML(
        f"<tr><td>broker-a</td><td><code>{CLIENT_ID}</code></td>"
        f"<td><code>{client_addr}</code></td><td>PYTHON</td></tr>",
        page,
    )
    for queue_id, (sent, committed) in enumerate(((5, 2), (3, 3))):
        assertInHTML(
            f'<tr><td>broker-a</td><td><code>{TOPIC}</code></td><td class="num">{queue_id}</td>'
            f'<td class="num">{sent}</td><td class="num">{committed}</td>'
            f'<td class="num">{sent - committed}</td></tr>',
            page,
        )
    # The retry queue has no lag: counted, not listed.
    assert "1 idle retry queue not listed" in page
    assert f"<code>{RETRY_TOPIC}</code>" not in page


def test_a_group_whose_client_left_still_shows_its_offsets(
    broker: LocalBroker, consumer_group: BlockingClient, viewer: User
) -> None:
    consumer_group.close()
    wait_until(
        lambda: not broker_control.consumer_groups(broker.spec.addr)[0].online,
        what="the closed client gone from the broker",
        timeout_s=10,
    )
    page = logged_in("vera").get("/brokers/").content.decode()
    assert "no client online" in page and CLIENT_ID not in page
    assertInHTML('<span class="total-lag">3</span>', page)


# ------------------------------------------------------- consumer groups, bad bodies


class FakeBrokerClient:
    """Stands in for ``BlockingClient``: answers each request code from ``ANSWERS``."""

    ANSWERS: dict[int, RemotingCommand] = {}

    def __init__(self, addr: str, **_kwargs: Any) -> None:
        self.addr = addr
        self.timeout_s = 1.0

    def __enter__(self) -> FakeBrokerClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

    def invoke(self, request: RemotingCommand) -> RemotingCommand:
        return self.ANSWERS[request.code]


def answer(
    body: str | None, code: int = ResponseCode.SUCCESS, ext_fields: dict[str, str] | None = None
) -> RemotingCommand:
    """A broker's answer with ``body``."""
    request = RemotingCommand.request(RequestCode.GET_ALL_CONSUMER_OFFSET)
    return request.make_response(
        code, None, ext_fields=ext_fields, body=None if body is None else body.encode()
    )


GOOD_ANSWERS = {
    RequestCode.GET_ALL_CONSUMER_OFFSET: (
        '{"dataVersion":{"counter":1,"timestamp":1},"offsetTable":{"T@g":{0:5,1:7}}}'
    ),
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: (
        '{"dataVersion":{"counter":1,"timestamp":1},"subscriptionGroupTable":{"g":{}}}'
    ),
    RequestCode.GET_CONSUMER_CONNECTION_LIST: (
        '{"connectionSet":[{"clientId":"c1","clientAddr":"127.0.0.1:5","language":"JAVA",'
        '"version":1}],"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",'
        '"subscriptionTable":{"T":{"subString":"a || b"}}}'
    ),
}


@pytest.fixture
def fake_broker(monkeypatch: pytest.MonkeyPatch) -> dict[int, RemotingCommand]:
    """The answers the fake broker gives, good ones to begin with (max offset 9)."""
    answers = {code: answer(body) for code, body in GOOD_ANSWERS.items()}
    answers[RequestCode.GET_MAX_OFFSET] = answer(None, ext_fields={"offset": "9"})
    monkeypatch.setattr(FakeBrokerClient, "ANSWERS", answers)
    monkeypatch.setattr(broker_control, "BlockingClient", FakeBrokerClient)
    return answers


def test_consumer_groups_parses_what_a_broker_answers(
    fake_broker: dict[int, RemotingCommand],
) -> None:
    (group,) = broker_control.consumer_groups("127.0.0.1:1")
    assert group.subscriptions == (("T", "a || b"),)
    assert group.queues == (QueueProgress("T", 0, 9, 5), QueueProgress("T", 1, 9, 7))
    assert group.total_lag == 6 and group.message_model == "CLUSTERING"
    fake_broker[RequestCode.GET_CONSUMER_CONNECTION_LIST] = answer(
        None, ResponseCode.CONSUMER_NOT_ONLINE
    )
    (offline,) = broker_control.consumer_groups("127.0.0.1:1")
    assert not offline.online and offline.clients == () and offline.total_lag == 6


@pytest.mark.parametrize(
    ("code", "body", "why"),
    [
        (RequestCode.GET_ALL_CONSUMER_OFFSET, "not json", "bad GET_ALL_CONSUMER_OFFSET body"),
        (
            RequestCode.GET_ALL_CONSUMER_OFFSET,
            '{"offsetTable":[]}',
            "offsetTable is not a JSON object",
        ),
        (
            RequestCode.GET_ALL_CONSUMER_OFFSET,
            '{"offsetTable":{"T":{0:1}}}',
            "key 'T' is not topic@group",
        ),
        (
            RequestCode.GET_ALL_CONSUMER_OFFSET,
            '{"offsetTable":{"T@g":{"x":1}}}',
            "the offsets of 'T@g' are not integers by queue id",
        ),
        (
            RequestCode.GET_ALL_CONSUMER_OFFSET,
            '{"offsetTable":{"T@g":{0:"1"}}}',
            "the offsets of 'T@g' are not integers by queue id",
        ),
        (
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
            "[]",
            "bad GET_ALL_SUBSCRIPTIONGROUP_CONFIG body: not a JSON object",
        ),
        (
            RequestCode.GET_CONSUMER_CONNECTION_LIST,
            '{"connectionSet":[{}],"subscriptionTable":{}}',
            "a connection without a clientId",
        ),
        (
            RequestCode.GET_CONSUMER_CONNECTION_LIST,
            '{"connectionSet":[]}',
            "subscriptionTable is not a JSON object",
        ),
    ],
)
def test_consumer_groups_refuses_a_bad_body(
    fake_broker: dict[int, RemotingCommand], code: int, body: str, why: str
) -> None:
    fake_broker[code] = answer(body)
    with pytest.raises(BadBodyError) as raised:
        broker_control.consumer_groups("127.0.0.1:1")
    assert str(raised.value).startswith("broker 127.0.0.1:1 answered a bad "), raised.value
    assert why in str(raised.value)


def test_consumer_groups_refuses_a_max_offset_without_its_field(
    fake_broker: dict[int, RemotingCommand],
) -> None:
    fake_broker[RequestCode.GET_MAX_OFFSET] = answer(None)
    with pytest.raises(broker_control.BrokerControlError, match="without an integer offset"):
        broker_control.consumer_groups("127.0.0.1:1")


def test_an_operator_creates_a_topic_on_the_broker(broker: LocalBroker, operator: User) -> None:
    response = logged_in("otto").post(
        "/brokers/topic/",
        {
            "broker_addr": broker.spec.addr,
            "topic": TOPIC,
            "read_queue_nums": 4,
            "write_queue_nums": 4,
            "perm": 6,
        },
    )
    assert response.status_code == 200
    assert f"topic {TOPIC} created or updated" in response.content.decode()


def test_an_operator_sends_a_test_message(broker: LocalBroker, operator: User) -> None:
    response = logged_in("otto").post(
        "/brokers/send/",
        {
            "broker_addr": broker.spec.addr,
            "topic": TOPIC,
            "body": "hello",
        },
    )
    assert "sent: code 0, msgId" in response.content.decode()
    info = broker_control.runtime_info(broker.spec.addr)
    assert int(info["commitLogMaxOffset"]) > 0


def test_a_bad_topic_name_is_refused_before_reaching_the_broker(
    broker: LocalBroker, operator: User
) -> None:
    response = logged_in("otto").post(
        "/brokers/send/",
        {
            "broker_addr": broker.spec.addr,
            "topic": "bad topic!",
            "body": "x",
        },
    )
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
    stopped = client.post("/brokers/control/", {"label": LABEL, "action": "stop", "confirm": "on"})
    assert f"{LABEL} stopped" in stopped.content.decode()
    assert not broker_control.local_brokers(run_dir)[0].running
    started = client.post("/brokers/control/", {"label": LABEL, "action": "start"})
    assert f"{LABEL} started" in started.content.decode()
    assert broker_control.runtime_info(broker.spec.addr)["brokerRole"] == "ASYNC_MASTER"


@pytest.mark.parametrize(
    ("broker_id", "info", "shown"),
    [
        (
            0,
            {"haAuth": "authenticated", "haConnections": "1", "haRefusedConnections": "0"},
            "authenticated · 1 slave connected",
        ),
        (
            0,
            {"haAuth": "authenticated", "haConnections": "2", "haRefusedConnections": "7"},
            "authenticated · 2 slaves connected · 7 peers refused",
        ),
        (1, {"haAuth": "authenticated", "haConnected": "false"}, "authenticated · not connected"),
        (
            1,
            {"haAuth": "classic (haAuthEnable=false)", "haConnected": "true"},
            "classic (haAuthEnable=false) · connected",
        ),
        # A stock broker says nothing of authentication; nonsense counts are left out.
        (0, {"haConnections": "x", "haRefusedConnections": "-3"}, ""),
        (1, {}, ""),
        (0, None, ""),
    ],
)
def test_the_ha_link_column_says_what_the_broker_reports(
    broker_id: int, info: dict[str, str] | None, shown: str
) -> None:
    assert brokers_view._ha_link(broker_id, info) == shown
