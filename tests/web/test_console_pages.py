"""Console pages: login required, roles enforced, forms validated, queries bounded."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from namesrv_app import gateway_client
from tests.web.conftest import RunningGateway, log_in, project_cast

PAGES = ("/", "/topology/", "/topics/", "/topics/TopicTest/", "/nodes/", "/kv/", "/ops/")


def logged_in(username: str) -> Client:
    """A browser-like client with a session."""
    client = Client()
    assert log_in(client, username)
    return client


def test_every_page_redirects_anonymous_users_to_the_login(db: Any) -> None:
    for url in PAGES:
        response = Client().get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/")


def test_a_viewer_sees_every_page(wired: RunningGateway, cast: Any, viewer: User) -> None:
    client = logged_in("vera")
    for url in PAGES:
        response = client.get(url)
        assert response.status_code == 200, url
    topology = client.get("/topology/").content.decode()
    assert "<svg" in topology and "127.0.0.1:10921" in topology and "slave" in topology
    topic = client.get("/topics/TopicTest/").content.decode()
    assert "broker-a" in topic and "all nodes agree" in topic


def test_a_user_without_a_role_is_forbidden(cast: Any, nobody: User) -> None:
    assert logged_in("nobody").get("/").status_code == 403


def test_a_viewer_cannot_open_an_operation(cast: Any, viewer: User) -> None:
    assert logged_in("vera").get("/ops/register-topic/").status_code == 403


def test_the_topic_form_refuses_bad_input_with_field_messages(
    wired: RunningGateway, cast: Any, operator: User
) -> None:
    client = logged_in("otto")
    response = client.post(
        "/ops/register-topic/",
        {
            "topic": "no spaces",
            "brokers": ["broker-a"],
            "read_queue_nums": 2000,
            "write_queue_nums": 8,
            "perm": 3,
        },
    )
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert set(errors) == {"topic", "read_queue_nums", "perm"}
    assert gateway_client.topic_route("no spaces") is None


def test_a_destructive_form_needs_confirmation(
    wired: RunningGateway, cast: Any, operator: User
) -> None:
    client = logged_in("otto")
    response = client.post("/ops/delete-topic/", {"topic": "TopicTest", "cluster": ""})
    assert response.status_code == 400
    assert "confirm" in response.context["form"].errors
    assert gateway_client.topic_route("TopicTest") is not None


def test_an_operator_registers_a_topic_through_the_form(
    wired: RunningGateway, cast: Any, operator: User
) -> None:
    client = logged_in("otto")
    response = client.post(
        "/ops/register-topic/",
        {
            "topic": "FormTopic",
            "brokers": ["broker-b"],
            "read_queue_nums": 4,
            "write_queue_nums": 4,
            "perm": 6,
        },
    )
    assert response.status_code == 200
    assert "Registered topic FormTopic" in response.content.decode()
    route = gateway_client.topic_route("FormTopic", linearizable=True)
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-b"]
    gateway_client.delete_topic("FormTopic")


def test_the_membership_form_explains_eventual_mode(
    wired: RunningGateway, cast: Any, operator: User
) -> None:
    response = logged_in("otto").post(
        "/ops/membership/", {"action": "add", "address": "127.0.0.1:7001", "confirm": "on"}
    )
    assert response.status_code == 409
    assert "not in raft mode" in response.content.decode()


@pytest.mark.parametrize("url", ["/topology/", "/topics/", "/topics/?search=T1&page=2"])
def test_pages_use_a_bounded_number_of_queries_with_many_brokers(
    db: Any, settings: Any, viewer: User, url: str, django_assert_max_num_queries: Any
) -> None:
    settings.NAMESRV = {"NODE_ID": "n1", "PORT": 1, "INTERNAL_PORT": 1, "INTERNAL_SECRET": "x"}
    project_cast(topics=tuple(f"T{i}" for i in range(300)))
    client = logged_in("vera")
    with django_assert_max_num_queries(12):
        assert client.get(url).status_code == 200
