"""Who may do what: viewers read, operators write, others nothing; tokens and sessions."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.web.conftest import PASSWORD, log_in, token_client

READS = (
    "/api/v1/topics/",
    "/api/v1/clusters/",
    "/api/v1/broker-groups/",
    "/api/v1/kv/",
    "/api/v1/routes/TopicTest/",
)


def test_a_viewer_reads_everything(cast: Any, viewer_api: APIClient) -> None:
    for url in READS:
        assert viewer_api.get(url).status_code == 200, url


def test_a_viewer_may_not_write(cast: Any, viewer_api: APIClient) -> None:
    assert (
        viewer_api.post(
            "/api/v1/kv/", {"namespace": "n", "key": "k", "value": "v"}, format="json"
        ).status_code
        == 403
    )
    assert viewer_api.delete("/api/v1/topics/TopicTest/").status_code == 403
    assert viewer_api.post("/api/v1/broker-groups/broker-a/wipe-write-perm/").status_code == 403


def test_a_user_without_a_role_sees_nothing(cast: Any, nobody: User) -> None:
    client = token_client(nobody)
    for url in READS:
        assert client.get(url).status_code == 403, url


def test_anonymous_requests_are_refused(cast: Any) -> None:
    client = token_client(None)
    for url in READS:
        assert client.get(url).status_code in (401, 403), url
    assert client.post("/api/v1/kv/", {}, format="json").status_code in (401, 403)


def test_a_superuser_counts_as_an_operator(cast: Any, settings: Any) -> None:
    admin = User.objects.create_superuser("root", password=PASSWORD)
    settings.NAMESRV = {"NODE_ID": "n1", "PORT": 1, "INTERNAL_PORT": 1, "INTERNAL_SECRET": "x"}
    # Permission passes; the gateway is down, so the write itself answers 503.
    response = token_client(admin).post("/api/v1/broker-groups/broker-a/wipe-write-perm/")
    assert response.status_code == 503


def test_session_writes_need_the_csrf_token(cast: Any, operator: User) -> None:
    client = APIClient(enforce_csrf_checks=True)
    assert log_in(client, "otto")
    response = client.post(
        "/api/v1/kv/", {"namespace": "n", "key": "k", "value": "v"}, format="json"
    )
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


def test_a_viewers_write_is_refused_naming_the_role_it_needs_and_the_one_it_has(
    viewer_api: APIClient,
) -> None:
    response = viewer_api.post(
        "/api/v1/kv/", {"namespace": "n", "key": "k", "value": "v"}, format="json"
    )

    assert response.status_code == 403
    assert response.json()["detail"] == (
        "This needs the operator role; your account has the viewer role."
    )


def test_an_operator_only_endpoint_names_the_operator_role_to_a_viewer(
    viewer_api: APIClient,
) -> None:
    response = viewer_api.get("/api/v1/nodes/membership/")

    assert response.status_code == 403
    detail = response.json()["detail"]
    assert "needs the operator role" in detail and "has the viewer role" in detail


def test_a_user_without_a_role_is_told_what_a_read_needs_and_that_it_has_none(
    nobody: User,
) -> None:
    response = token_client(nobody).get("/api/v1/topics/")

    assert response.status_code == 403
    assert response.json()["detail"] == (
        "This needs the viewer (or operator) role; your account has no console role."
    )
