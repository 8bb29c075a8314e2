"""Read endpoints: clusters, broker groups with liveness, topics, KV, node status."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from namesrv_app import models
from tests.web.conftest import RunningGateway, project_cast


def test_clusters_count_groups_replicas_and_live_brokers(cast: Any, viewer_api: APIClient) -> None:
    [cluster] = viewer_api.get("/api/v1/clusters/").json()
    assert cluster["name"] == "DefaultCluster"
    assert (cluster["broker_groups"], cluster["replicas"], cluster["live_brokers"]) == (2, 4, 4)


def test_broker_groups_show_each_replica_with_role_and_liveness(
    cast: Any, viewer_api: APIClient
) -> None:
    body = viewer_api.get("/api/v1/broker-groups/?search=broker-a").json()
    assert body["count"] == 1
    [group] = body["results"]
    master, slave = group["replicas"]
    assert (master["role"], master["addr"], master["ha_server_addr"]) == (
        "master",
        "127.0.0.1:10911",
        "127.0.0.1:10912",
    )
    assert slave["role"] == "slave"
    assert master["registered"] is True
    assert master["heartbeat_timeout_ms"] == 120_000
    # The cast registered at a fixed past time, so by now it is long silent.
    assert master["alive"] is False


def test_topics_are_searched_filtered_and_paginated(db: Any, viewer_api: APIClient) -> None:
    project_cast(topics=tuple(f"Topic{i:03d}" for i in range(120)))
    page = viewer_api.get("/api/v1/topics/?search=Topic0").json()
    assert page["count"] == 100
    assert len(page["results"]) == 50
    assert page["results"][0] == {
        "topic": "Topic000",
        "brokers": 2,
        "read_queues": 8,
        "write_queues": 8,
        "perm_min": 6,
        "perm_max": 6,
        "version": page["results"][0]["version"],
        "type": "normal",
    }
    assert viewer_api.get("/api/v1/topics/?cluster=NoCluster").json()["count"] == 0
    assert viewer_api.get("/api/v1/topics/?page=2&search=Topic0").json()["next"] is None


def test_kv_config_lists_namespaces_with_entries(cast: Any, viewer_api: APIClient) -> None:
    [namespace] = viewer_api.get("/api/v1/kv/").json()
    assert namespace["namespace"] == "ORDER_TOPIC_CONFIG"
    assert [(e["key"], e["value"]) for e in namespace["entries"]] == [("DemoOrders", "broker-a:4")]


def test_node_status_comes_from_the_gateway_and_the_projection(
    wired: RunningGateway, cast: Any, viewer_api: APIClient
) -> None:
    body = viewer_api.get("/api/v1/node/").json()
    assert body["status"]["node_id"] == "n1"
    assert body["status"]["mode"] == "eventual"
    assert body["projection"]["applied_version"] == models.NodeState.objects.get().applied_version
    raft = viewer_api.get("/api/v1/node/raft/").json()
    assert raft["state"] == "standalone" and raft["has_quorum"] is True


def test_node_status_reports_a_gateway_that_is_down(
    cast: Any, settings: Any, viewer_api: APIClient
) -> None:
    settings.NAMESRV = {"NODE_ID": "n1", "PORT": 1, "INTERNAL_PORT": 1, "INTERNAL_SECRET": "x"}
    body = viewer_api.get("/api/v1/node/").json()
    assert body["status"] is None
    assert "unavailable" in body["gateway_error"]
    assert viewer_api.get("/api/v1/node/raft/").status_code == 503
