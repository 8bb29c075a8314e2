"""Topic types (NORMAL, RETRY, DLQ, SYSTEM): the rule, its SQL twin, the API and the page."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from namesrv_app import models
from namesrv_app.topic_types import (
    DLQ,
    NORMAL,
    RETRY,
    SYSTEM,
    SYSTEM_TOPICS,
    topic_type,
    types_of_filter,
)
from namesrv_app.web import reads
from tests.web.conftest import CLUSTER, TOPICS, log_in, project_cast

CLUSTERS = {CLUSTER}
BROKER_NAMES = {"broker-a", "broker-b"}

# What a broker of the cast would create, next to the users' own topics.
SYSTEM_NAMED = (
    "TBW102",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
    "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "rmq_sys_SYNC_BROKER_MEMBER_broker-a",
    CLUSTER,
    "broker-a",
    "broker-b",
)
RETRY_AND_DLQ = ("%RETRY%orders-group", "%DLQ%orders-group")
# Look-alikes that are NOT system, retry or DLQ topics: RocketMQ compares case-sensitively.
LOOKALIKES = ("tbw102", "RMQ_sys_x", "Rmq_sys_x", "%retry%g", "%dlq%g", "broker-c", "broker")
EVERY_TOPIC = (*TOPICS, *SYSTEM_NAMED, *RETRY_AND_DLQ, *LOOKALIKES)


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        ("TopicTest", NORMAL),
        ("%RETRY%group", RETRY),
        ("%DLQ%group", DLQ),
        ("TBW102", SYSTEM),
        ("SELF_TEST_TOPIC", SYSTEM),
        ("OFFSET_MOVED_EVENT", SYSTEM),
        ("SCHEDULE_TOPIC_XXXX", SYSTEM),
        ("RMQ_SYS_TRANS_OP_HALF_TOPIC", SYSTEM),
        ("TRANS_CHECK_MAX_TIME_TOPIC", SYSTEM),
        ("BenchmarkTest", SYSTEM),
        ("rmq_sys_anything", SYSTEM),
        (CLUSTER, SYSTEM),
        ("broker-b", SYSTEM),
        ("rmq_sys", NORMAL),
        ("RMQ_SYS_SOMETHING_ELSE", NORMAL),
        ("tbw102", NORMAL),
        ("%retry%group", NORMAL),
        ("x%RETRY%group", NORMAL),
        ("%RETRY%rmq_sys_x", RETRY),
        ("%DLQ%TBW102", DLQ),
        ("broker-c", NORMAL),
    ],
)
def test_topic_type_follows_rocketmqs_rules(topic: str, expected: str) -> None:
    assert topic_type(topic, CLUSTERS, BROKER_NAMES) == expected


def test_cluster_and_broker_names_are_system_only_when_known() -> None:
    assert topic_type("OtherCluster", CLUSTERS, BROKER_NAMES) == NORMAL
    assert topic_type("OtherCluster", {"OtherCluster"}, ()) == SYSTEM
    assert topic_type("broker-z", (), {"broker-z"}) == SYSTEM


def test_the_system_set_holds_rocketmqs_fixed_system_topics() -> None:
    assert {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    } <= SYSTEM_TOPICS


def test_filter_values_select_types() -> None:
    assert types_of_filter("user") == (NORMAL, RETRY, DLQ)
    assert types_of_filter("system") == (SYSTEM,)
    assert set(types_of_filter("all")) == {NORMAL, RETRY, DLQ, SYSTEM}


@pytest.fixture
def typed_cast(db: Any) -> None:
    """The cast serving user, retry, DLQ, system and look-alike topics (a real table)."""
    project_cast(topics=EVERY_TOPIC)


def test_the_sql_type_agrees_with_topic_type_for_every_topic(typed_cast: None) -> None:
    clusters = set(models.Cluster.objects.values_list("name", flat=True))
    brokers = set(models.BrokerGroup.objects.values_list("broker_name", flat=True))
    assert clusters == CLUSTERS and brokers == BROKER_NAMES
    rows = {row["topic"]: row["type"] for row in reads.topic_summaries()}
    assert set(rows) == set(EVERY_TOPIC)
    for topic, kind in rows.items():
        assert kind == topic_type(topic, clusters, brokers), topic
    assert reads.topic_summary("%DLQ%orders-group")["type"] == DLQ  # type: ignore[index]


def test_the_type_filter_leaves_other_callers_alone(typed_cast: None) -> None:
    assert reads.topic_summaries().count() == len(EVERY_TOPIC)
    assert reads.topic_summaries(type_filter="all").count() == len(EVERY_TOPIC)
    system = [r["topic"] for r in reads.topic_summaries(type_filter="system")]
    assert sorted(system) == sorted(SYSTEM_NAMED)
    user = {r["topic"] for r in reads.topic_summaries(type_filter="user")}
    assert user == set(EVERY_TOPIC) - set(SYSTEM_NAMED)
    assert [r["topic"] for r in reads.topic_summaries("orders", type_filter="retry")] == [
        "%RETRY%orders-group"
    ]
    counts = reads.topic_type_counts()
    assert counts == {
        NORMAL: len(TOPICS) + len(LOOKALIKES),
        RETRY: 1,
        DLQ: 1,
        SYSTEM: len(SYSTEM_NAMED),
    }


def test_the_api_filters_by_type_and_shows_it(typed_cast: None, viewer_api: APIClient) -> None:
    everything = viewer_api.get("/api/v1/topics/").json()
    assert everything["count"] == len(EVERY_TOPIC)  # no type: every type, as before
    by_topic = {row["topic"]: row["type"] for row in everything["results"]}
    assert by_topic["TopicTest"] == NORMAL and by_topic["TBW102"] == SYSTEM
    system = viewer_api.get("/api/v1/topics/", {"type": "system"}).json()
    assert {row["topic"] for row in system["results"]} == set(SYSTEM_NAMED)
    assert {row["type"] for row in system["results"]} == {SYSTEM}
    dlq = viewer_api.get("/api/v1/topics/", {"type": "dlq"}).json()
    assert [row["topic"] for row in dlq["results"]] == ["%DLQ%orders-group"]
    user = viewer_api.get("/api/v1/topics/", {"type": "user"}).json()
    assert user["count"] == len(EVERY_TOPIC) - len(SYSTEM_NAMED)
    assert viewer_api.get("/api/v1/topics/", {"type": "bogus"}).status_code == 400
    one = viewer_api.get("/api/v1/topics/SELF_TEST_TOPIC/").json()
    assert one["type"] == SYSTEM


def _page(client: Client, query: str = "") -> str:
    response = client.get(f"/topics/{query}")
    assert response.status_code == 200
    return response.content.decode()


def _listed(html: str) -> set[str]:
    body = html.split('id="topic-table"', 1)[1].split("</table>", 1)[0]
    return {topic for topic in EVERY_TOPIC if f">{topic}</a>" in body}


def test_the_topics_page_hides_system_topics_by_default(typed_cast: None, viewer: User) -> None:
    client = Client()
    assert log_in(client, "vera")
    html = _page(client)
    assert _listed(html) == set(EVERY_TOPIC) - set(SYSTEM_NAMED)
    assert f"{len(SYSTEM_NAMED)}</span> system topics hidden" in html
    assert '<option value="user" selected>normal + retry + DLQ' in html
    assert 'class="badge type type-retry">RETRY<' in html
    assert 'class="badge type type-dlq">DLQ<' in html
    assert 'class="badge type type-system"' not in html


def test_the_topics_page_shows_the_type_asked_for(typed_cast: None, viewer: User) -> None:
    client = Client()
    assert log_in(client, "vera")
    system = _page(client, "?type=system")
    assert _listed(system) == set(SYSTEM_NAMED)
    assert 'id="hidden-system" data-live hidden' in system
    assert 'class="badge type type-system">SYSTEM<' in system
    assert _listed(_page(client, "?type=all")) == set(EVERY_TOPIC)
    assert _listed(_page(client, "?type=retry")) == {"%RETRY%orders-group"}
    assert _listed(_page(client, "?type=normal&search=Topic")) == {"TopicTest"}
    # An unknown value falls back to the default rather than failing.
    assert _listed(_page(client, "?type=nonsense")) == set(EVERY_TOPIC) - set(SYSTEM_NAMED)
