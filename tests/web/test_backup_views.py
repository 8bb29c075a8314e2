"""``GET /api/v1/backup/`` and the Nodes page's backup link against a real gateway (the
web tests' eventual node): operators get the file, viewers a 403 naming the role,
anonymous callers nothing; every signed-in attempt is in the audit log; the schema
documents the binary answer."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from namesrv_app.models import AuditEntry
from raftstore.backup import read_backup
from tests.web.conftest import RunningGateway, log_in, project_cast


def _body(response: Any) -> bytes:
    return b"".join(response.streaming_content)


def test_an_operator_gets_the_nodes_backup_as_an_attachment(
    wired: RunningGateway, operator_api: APIClient, operator: User
) -> None:
    project_cast()

    response = operator_api.get("/api/v1/backup/", HTTP_ACCEPT="application/octet-stream")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Cache-Control"] == "no-store"
    read = read_backup(_body(response))
    assert response["Content-Disposition"] == f'attachment; filename="{read.header.file_name()}"'
    assert (read.header.mode, read.header.node, read.header.cluster) == (
        "eventual",
        "n1",
        "namesrv",
    )
    assert read.table.pickup_topic_route("TopicTest") is not None
    entry = AuditEntry.objects.get()
    assert (entry.username, entry.channel, entry.action) == (operator.username, "api", "backup")
    assert entry.ok and entry.status == 200 and f"index {read.header.index}" in entry.result


def test_viewers_are_refused_and_recorded_anonymous_callers_refused(
    wired: RunningGateway, viewer_api: APIClient, viewer: User, client: Client
) -> None:
    refused = viewer_api.get("/api/v1/backup/", HTTP_ACCEPT="application/octet-stream")
    anonymous = client.get("/api/v1/backup/")

    assert refused.status_code == 403
    assert refused.json()["detail"] == (
        "This needs the operator role; your account has the viewer role."
    )
    assert anonymous.status_code == 401 and "detail" in anonymous.json()
    entry = AuditEntry.objects.get()
    assert (entry.username, entry.action, entry.status, entry.ok) == (
        viewer.username,
        "backup",
        403,
        False,
    )


def test_the_console_link_is_for_operators(
    wired: RunningGateway, client: Client, operator: User, viewer: User
) -> None:
    assert log_in(client, viewer.username)
    assert client.get("/nodes/backup/").status_code == 403
    assert 'id="backup-download"' not in client.get("/nodes/").content.decode()

    assert log_in(client, operator.username)
    assert 'id="backup-download"' in client.get("/nodes/").content.decode()
    answer = client.get("/nodes/backup/")

    assert answer.status_code == 200
    assert read_backup(_body(answer)).header.node == "n1"
    assert [(e.username, e.channel, e.status) for e in AuditEntry.objects.order_by("id")] == [
        (viewer.username, "console", 403),
        (operator.username, "console", 200),
    ]


def test_the_schema_documents_the_binary_answer(viewer: User) -> None:
    client = Client()
    client.force_login(viewer)

    operation = client.get("/api/v1/schema/?format=json").json()["paths"]["/api/v1/backup/"]

    assert set(operation) == {"get"}
    assert "application/octet-stream" in operation["get"]["responses"]["200"]["content"]
    assert {"401", "403", "502", "503"} <= set(operation["get"]["responses"])
