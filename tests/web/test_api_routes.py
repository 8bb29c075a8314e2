"""GET /api/v1/routes/<topic>/: the standard route JSON, with the version it reflects."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from namesrv_app import models
from tests.web.conftest import RunningGateway, token_client


def test_it_answers_the_route_from_the_projection_with_its_applied_version(
    cast: Any, viewer_api: APIClient
) -> None:
    response = viewer_api.get("/api/v1/routes/TopicTest/")
    assert response.status_code == 200
    body = response.json()
    state = models.NodeState.objects.get()
    assert body["applied_version"] == state.applied_version > 0
    assert body["consistency"] == "local"
    assert [q["brokerName"] for q in body["route"]["queueDatas"]] == ["broker-a", "broker-b"]
    broker_a = body["route"]["brokerDatas"][0]
    assert broker_a["brokerAddrs"] == {"0": "127.0.0.1:10911", "1": "127.0.0.1:10921"}
    assert body["route"]["queueDatas"][0]["perm"] == 6


def test_it_answers_404_for_a_topic_without_route(cast: Any, viewer_api: APIClient) -> None:
    response = viewer_api.get("/api/v1/routes/NoSuchTopic/")
    assert response.status_code == 404
    assert "NoSuchTopic" in response.json()["detail"]


def test_a_name_outside_the_topic_rule_is_read_like_any_other(
    cast: Any, viewer_api: APIClient
) -> None:
    """The wire answers GET_ROUTEINFO for any name, and so does the REST read: no route, 404."""
    response = viewer_api.get("/api/v1/routes/bad$topic/")
    assert response.status_code == 404
    assert "bad$topic" in response.json()["detail"]


def test_it_refuses_an_unknown_consistency(cast: Any, viewer_api: APIClient) -> None:
    response = viewer_api.get("/api/v1/routes/TopicTest/?consistency=sometimes")
    assert response.status_code == 400
    assert "consistency" in response.json()


def test_anonymous_route_reads_need_the_setting(cast: Any, settings: Any) -> None:
    anonymous = token_client(None)
    assert anonymous.get("/api/v1/routes/TopicTest/").status_code in (401, 403)
    settings.NAMESRV_WEB = {"ALLOW_ANONYMOUS_ROUTE_READS": True}
    assert anonymous.get("/api/v1/routes/TopicTest/").status_code == 200
    assert anonymous.get("/api/v1/topics/").status_code in (401, 403)


def test_a_linearizable_read_asks_the_gateway(wired: RunningGateway, viewer_api: APIClient) -> None:
    response = viewer_api.get("/api/v1/routes/TopicTest/?consistency=linearizable")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["consistency"] == "linearizable"
    assert body["node_id"] == "n1"
    assert body["applied_version"] >= 4
    assert {b["brokerName"] for b in body["route"]["brokerDatas"]} == {"broker-a", "broker-b"}


def test_the_comparison_marks_a_node_that_answers_differently(
    wired: RunningGateway, viewer_api: APIClient, settings: Any, tmp_path: Any
) -> None:
    from tests.web.conftest import start_gateway, stop_gateway, three_node_settings

    other = start_gateway(tmp_path, node_id="n2")
    try:
        settings.NAMESRV = three_node_settings(wired, other, tmp_path)
        body = viewer_api.get("/api/v1/routes/TopicTest/compare/").json()
        by_node = {n["node_id"]: n for n in body["nodes"]}
        assert body["agree"] is False
        assert by_node["n1"]["status"] == "ok" and by_node["n1"]["differences"] == []
        assert by_node["n2"]["status"] == "not_found"
        assert "queueDatas[broker-a].perm" in by_node["n2"]["differences"]
        assert by_node["n3"]["status"] == "unreachable"
        nodes = viewer_api.get("/api/v1/nodes/").json()
        assert nodes["agree"] is False
        assert {n["node_id"]: n["reachable"] for n in nodes["nodes"]} == {
            "n1": True,
            "n2": True,
            "n3": False,
        }
    finally:
        stop_gateway(other)


def test_an_unknown_consistency_is_refused_with_the_valid_ones(
    cast: Any, viewer_api: APIClient
) -> None:
    response = viewer_api.get("/api/v1/routes/TopicTest/?consistency=strong")
    assert response.status_code == 400
    assert '"strong" is not a valid choice: use local or linearizable.' in str(response.json())
