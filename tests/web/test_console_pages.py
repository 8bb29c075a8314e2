"""Console pages: login required, roles enforced, forms validated, queries bounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from namesrv_app import gateway_client, topic_admin
from remoting.model import QueueData
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
    # The login page names the first account's command as README's "Next: create an
    # account" step gives it (its user alice, here NAME).
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    step = readme.split("Next: create an account", 1)[1]
    command = step.split("```sh\n", 1)[1].split("\n", 1)[0]
    assert command == ".venv/bin/python manage.py create_operator alice --run-dir run/local"
    hint = command.replace(" alice ", " NAME ")
    assert f"<code>{hint}</code>" in Client().get("/accounts/login/").content.decode()


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
            # This gateway's brokers are registrations, not processes: NameServer-only.
            "method": "namesrv",
        },
    )
    assert response.status_code == 200
    assert "Registered topic FormTopic" in response.content.decode()
    route = gateway_client.topic_route("FormTopic", linearizable=True)
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-b"]
    gateway_client.delete_topic("FormTopic")


def test_a_topic_post_without_a_method_is_created_through_the_brokers(
    wired: RunningGateway, cast: Any, operator: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the REST API and ``manage.py topic`` do: NameServer-only is never a fallback."""
    asked: list[tuple[str, str, int, int, int]] = []

    def broker_creates(
        addr: str, topic: str, *, read_queue_nums: int, write_queue_nums: int, perm: int
    ) -> None:
        # UPDATE_AND_CREATE_TOPIC on a broker that, like a real one, then registers it.
        asked.append((addr, topic, read_queue_nums, write_queue_nums, perm))
        queues = [QueueData("broker-b", read_queue_nums, write_queue_nums, perm)]
        gateway_client.register_topic(topic, queues)

    monkeypatch.setattr(topic_admin, "create_topic_on_broker", broker_creates)
    response = logged_in("otto").post(
        "/ops/register-topic/",
        {
            "topic": "FormDefault",
            "brokers": ["broker-b"],
            "read_queue_nums": 4,
            "write_queue_nums": 4,
            "perm": 6,
        },
    )
    assert response.status_code == 200, response.content.decode()
    assert asked == [("127.0.0.1:10931", "FormDefault", 4, 4, 6)]
    assert "Created topic FormDefault on the masters of broker-b" in response.content.decode()
    gateway_client.delete_topic("FormDefault")


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
