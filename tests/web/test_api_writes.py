"""API writes go to the real gateway; bad input answers 400 and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from namesrv_app import gateway_client
from tests.web.conftest import RunningGateway, project_cast


@pytest.fixture
def known_brokers(db: Any) -> None:
    """The projection knows broker-a and broker-b (the API checks names against it)."""
    project_cast()


def _route_perms(topic: str) -> dict[str, int]:
    route = gateway_client.topic_route(topic, linearizable=True)
    return {} if route is None else {q.broker_name: q.perm for q in route.queue_datas}


def test_an_operator_registers_a_topic_on_the_nameservers_only_and_the_gateway_serves_it(
    wired: RunningGateway, known_brokers: None, operator_api: APIClient
) -> None:
    # method=namesrv: this gateway's brokers are only registrations, no processes
    # (tests/integration/test_topic_admin.py covers the default, through real brokers).
    body = {
        "topic": "ApiCreated",
        "method": "namesrv",
        "queue_datas": [
            {"broker_name": "broker-a", "read_queue_nums": 3, "write_queue_nums": 2, "perm": 6},
        ],
    }
    response = operator_api.post("/api/v1/topics/", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["brokers"] == []
    assert [n["ok"] for n in response.json()["nodes"]] == [True]
    route = gateway_client.topic_route("ApiCreated", linearizable=True)
    assert route is not None
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [
        ("broker-a", 3, 2)
    ]
    deleted = operator_api.delete("/api/v1/topics/ApiCreated/?method=namesrv")
    assert deleted.status_code == 200, deleted.content
    assert "NameServer only" in deleted.json()["detail"]
    assert gateway_client.topic_route("ApiCreated", linearizable=True) is None


def test_deleting_a_topic_no_nameserver_routes_answers_404_in_json(
    wired: RunningGateway, known_brokers: None, operator_api: APIClient
) -> None:
    response = operator_api.delete("/api/v1/topics/NoSuchTopic/?method=namesrv")
    assert response.status_code == 404, response.content
    assert "No topic NoSuchTopic" in response.json()["detail"]
    assert gateway_client.topic_route("TopicTest", linearizable=True) is not None


def test_an_unknown_topic_method_is_refused(
    wired: RunningGateway, known_brokers: None, operator_api: APIClient
) -> None:
    response = operator_api.delete("/api/v1/topics/TopicTest/?method=both")
    assert response.status_code == 400
    assert "method" in response.json()
    assert gateway_client.topic_route("TopicTest", linearizable=True) is not None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"topic": "bad topic", "queue_datas": []}, "topic"),
        ({"topic": "x" * 128, "queue_datas": []}, "topic"),
        (
            {
                "topic": "Fine",
                "queue_datas": [
                    {
                        "broker_name": "broker-a",
                        "read_queue_nums": 0,
                        "write_queue_nums": 1,
                        "perm": 6,
                    }
                ],
            },
            "queue_datas",
        ),
        (
            {
                "topic": "Fine",
                "queue_datas": [
                    {
                        "broker_name": "broker-a",
                        "read_queue_nums": 1,
                        "write_queue_nums": 1025,
                        "perm": 6,
                    }
                ],
            },
            "queue_datas",
        ),
        (
            {
                "topic": "Fine",
                "queue_datas": [
                    {
                        "broker_name": "broker-a",
                        "read_queue_nums": 1,
                        "write_queue_nums": 1,
                        "perm": 7,
                    }
                ],
            },
            "queue_datas",
        ),
        (
            {
                "topic": "Fine",
                "queue_datas": [
                    {
                        "broker_name": "broker-zz",
                        "read_queue_nums": 1,
                        "write_queue_nums": 1,
                        "perm": 6,
                    }
                ],
            },
            "queue_datas",
        ),
    ],
)
def test_bad_topic_registrations_answer_400_with_the_field_and_change_nothing(
    wired: RunningGateway,
    known_brokers: None,
    operator_api: APIClient,
    body: dict[str, Any],
    field: str,
) -> None:
    response = operator_api.post("/api/v1/topics/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert gateway_client.topic_route("Fine", linearizable=True) is None


def test_wiping_and_adding_write_permission_reports_the_topic_count(
    wired: RunningGateway, known_brokers: None, operator_api: APIClient
) -> None:
    wiped = operator_api.post("/api/v1/broker-groups/broker-b/wipe-write-perm/")
    assert wiped.status_code == 200, wiped.content
    assert wiped.json()["count"] == 2
    assert _route_perms("TopicTest")["broker-b"] == 4
    added = operator_api.post("/api/v1/broker-groups/broker-b/add-write-perm/")
    assert added.json()["count"] == 2
    assert _route_perms("TopicTest")["broker-b"] == 6


def test_write_permission_of_an_unknown_broker_is_refused(
    wired: RunningGateway, known_brokers: None, operator_api: APIClient
) -> None:
    response = operator_api.post("/api/v1/broker-groups/broker-zz/wipe-write-perm/")
    assert response.status_code == 400
    assert "broker_name" in response.json()


def test_kv_items_are_put_and_deleted_through_the_gateway(
    wired: RunningGateway, operator_api: APIClient
) -> None:
    body = {"namespace": "ORDER_TOPIC_CONFIG", "key": "ApiOrders", "value": "broker-a:8"}
    assert operator_api.post("/api/v1/kv/", body, format="json").status_code == 200
    assert gateway_client.get_kv("ORDER_TOPIC_CONFIG", "ApiOrders") == "broker-a:8"
    deleted = operator_api.delete("/api/v1/kv/?namespace=ORDER_TOPIC_CONFIG&key=ApiOrders")
    assert deleted.status_code == 200
    assert gateway_client.get_kv("ORDER_TOPIC_CONFIG", "ApiOrders") is None


def test_a_blank_kv_key_is_refused(wired: RunningGateway, operator_api: APIClient) -> None:
    response = operator_api.post(
        "/api/v1/kv/", {"namespace": "ns", "key": " ", "value": "v"}, format="json"
    )
    assert response.status_code == 400
    assert "key" in response.json()


def test_unregistering_a_slave_removes_it_from_the_route(
    wired: RunningGateway, operator_api: APIClient
) -> None:
    from tests.web.conftest import BROKERS, TOPICS

    slave = BROKERS[3]
    body = {
        "cluster_name": slave.cluster,
        "broker_name": slave.broker_name,
        "broker_addr": slave.addr,
        "broker_id": slave.broker_id,
    }
    try:
        assert (
            operator_api.post("/api/v1/brokers/unregister/", body, format="json").status_code == 200
        )
        route = gateway_client.topic_route("TopicTest", linearizable=True)
        assert route is not None
        addrs = {b.broker_name: b.broker_addrs for b in route.broker_datas}
        assert addrs["broker-b"] == {0: BROKERS[2].addr}
    finally:
        assert wired.register(slave, TOPICS) == 0


def test_membership_changes_answer_409_in_eventual_mode(
    wired: RunningGateway, operator_api: APIClient
) -> None:
    response = operator_api.post(
        "/api/v1/nodes/membership/", {"action": "add", "address": "127.0.0.1:7001"}, format="json"
    )
    assert response.status_code == 409
    assert "raft" in response.json()["detail"]


def test_writes_answer_503_when_the_gateway_is_down(
    settings: Any, known_brokers: None, operator_api: APIClient
) -> None:
    settings.NAMESRV = {"NODE_ID": "n1", "PORT": 1, "INTERNAL_PORT": 1, "INTERNAL_SECRET": "x"}
    response = operator_api.post("/api/v1/broker-groups/broker-a/wipe-write-perm/")
    assert response.status_code == 503
    assert "unavailable" in response.json()["detail"]
