"""The audit log: each change a signed-in user asks for, console or API, with its result."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from namesrv_app.models import AuditEntry
from tests.web.conftest import RunningGateway, log_in, project_cast


@pytest.fixture
def known_brokers(db: Any) -> None:
    project_cast()


def test_api_writes_are_recorded_with_who_what_where_and_the_result(
    wired: RunningGateway, known_brokers: None, operator_api: APIClient, operator: User
) -> None:
    created = operator_api.post(
        "/api/v1/kv/", {"namespace": "audit", "key": "k", "value": "v"}, format="json"
    )
    refused = operator_api.post(
        "/api/v1/kv/", {"namespace": "audit", "key": "", "value": "v"}, format="json"
    )

    assert created.status_code == 200 and refused.status_code == 400
    first, second = AuditEntry.objects.order_by("id")
    assert (first.username, first.node_id, first.channel) == (operator.username, "n1", "api")
    assert first.action == "kv POST" and first.ok and first.status == 200
    assert first.detail == {"namespace": "audit", "key": "k", "value": "v"}
    assert "audit" in first.result
    assert not second.ok and second.status == 400


def test_console_forms_are_recorded_with_their_result_sentence(
    wired: RunningGateway, known_brokers: None, client: Client, operator: User
) -> None:
    assert log_in(client, operator.username)
    answer = client.post("/ops/kv-put/", {"namespace": "audit", "key": "c", "value": "1"})

    assert answer.status_code == 200
    entry = AuditEntry.objects.get()
    assert entry.channel == "console" and entry.action == "ops:kv-put" and entry.ok
    assert entry.target == "c" and entry.result and "csrfmiddlewaretoken" not in entry.detail


def test_reads_and_anonymous_requests_are_not_recorded(
    wired: RunningGateway, known_brokers: None, client: Client, viewer_api: APIClient
) -> None:
    assert viewer_api.get("/api/v1/topics/").status_code == 200
    anonymous = client.post("/ops/kv-put/", {"namespace": "x", "key": "y", "value": "z"})
    assert anonymous.status_code in (302, 403)
    # A login failure is not an audit entry (django-axes keeps those), and no password
    # ever reaches the log.
    client.post("/accounts/login/", {"username": "otto", "password": "wrong"})
    assert AuditEntry.objects.count() == 0


def test_viewers_read_the_log_in_the_console_and_the_api(
    wired: RunningGateway,
    known_brokers: None,
    operator_api: APIClient,
    viewer_api: APIClient,
    client: Client,
    viewer: User,
) -> None:
    operator_api.post(
        "/api/v1/kv/", {"namespace": "audit", "key": "k", "value": "v"}, format="json"
    )
    listed = viewer_api.get("/api/v1/audit/").json()
    assert listed["count"] == 1 and listed["results"][0]["action"] == "kv POST"
    assert log_in(client, viewer.username)
    page = client.get("/audit/")
    assert page.status_code == 200 and b"kv POST" in page.content
