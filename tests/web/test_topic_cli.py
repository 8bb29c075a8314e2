"""``manage.py topic`` answers as the REST API and the console do: the same rules with the
same sentences, ``topic list`` with the API's rows, "what changed" on a repeated create,
and an audit entry for every change and refusal.

The command runs in-process (``call_command``, the test database, the session's real
gateway); creates and deletes use ``--method namesrv``, since this gateway's brokers are
registrations without processes (tests/integration/test_topic_admin.py covers the
brokers' path).
"""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from namesrv_app import audit, gateway_client
from namesrv_app.models import AuditEntry
from tests.web.conftest import BROKERS, TOPICS, RunningGateway, log_in, project_cast

NEGATIVE_QUEUES = "Queue counts are 1 to 1024 queues per broker group; -4 is not."
UNKNOWN_GROUP = "unknown broker groups: nope"
REPEATED = "CliRepeat"


@pytest.fixture
def known_brokers(db: Any, wired: RunningGateway) -> None:
    """broker-a and broker-b with TopicTest, DemoOrders and CliRepeat (4 + 4 queues, perm 6)
    in this node's projection, and registered with the session's gateway again
    (``RunningGateway.register_again``: else a topic created there could have no route)."""
    project_cast(("TopicTest", "DemoOrders", REPEATED))
    wired.register_again(BROKERS, TOPICS)


def topic(*args: str) -> str:
    """``manage.py topic ARGS``: its stdout (CommandError propagates)."""
    out = StringIO()
    call_command("topic", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def refusal(*args: str) -> str:
    """The CommandError of ``manage.py topic ARGS``, which must refuse."""
    with pytest.raises(CommandError) as refused:
        topic(*args)
    return str(refused.value)


def api_create(api: APIClient, name: str, group: str, read: int) -> Any:
    body = {
        "topic": name,
        "method": "namesrv",
        "queue_datas": [
            {"broker_name": group, "read_queue_nums": read, "write_queue_nums": 4, "perm": 6}
        ],
    }
    return api.post("/api/v1/topics/", body, format="json")


def test_the_cli_the_api_and_the_console_refuse_with_the_same_sentence_and_the_audit_says_why(
    wired: RunningGateway,
    known_brokers: None,
    operator_api: APIClient,
    client: Client,
    operator: User,
) -> None:
    negative = refusal("create", "NegQ", "--brokers", "broker-a", "--read-queue-nums", "-4")
    unknown = refusal("create", "X1", "--brokers", "nope")
    bad_name = refusal("create", "bad name", "--brokers", "broker-a", "--perm", "7")
    not_int = refusal("create", "NotInt", "--brokers", "broker-a", "--write-queue-nums", "x")

    assert negative == f"refused, nothing changed: --read-queue-nums: {NEGATIVE_QUEUES}"
    assert unknown == f"refused, nothing changed: --brokers: {UNKNOWN_GROUP}"
    assert bad_name == (
        "refused, nothing changed: topic: A topic name may only contain letters, digits, "
        "%, |, _ and -.; --perm: perm must be 2 (write), 4 (read) or 6 (read+write)."
    )
    assert not_int == "refused, nothing changed: --write-queue-nums: A valid integer is required."

    api_negative = api_create(operator_api, "NegQ", "broker-a", -4)
    api_unknown = api_create(operator_api, "X1", "nope", 4)
    assert api_negative.status_code == api_unknown.status_code == 400
    assert api_negative.json() == {"queue_datas": {"0": {"read_queue_nums": [NEGATIVE_QUEUES]}}}
    assert api_unknown.json() == {"queue_datas": [UNKNOWN_GROUP]}

    assert log_in(client, operator.username)
    form = {"topic": "NegQ", "read_queue_nums": -4, "write_queue_nums": 4, "perm": 6}
    page = client.post("/ops/register-topic/", {**form, "brokers": "broker-a"})
    assert page.status_code == 400 and NEGATIVE_QUEUES in page.content.decode()
    page = client.post("/ops/register-topic/", {**form, "read_queue_nums": 4, "brokers": "nope"})
    assert page.status_code == 400 and UNKNOWN_GROUP in page.content.decode()

    for name in ("NegQ", "X1"):
        assert gateway_client.topic_route(name, linearizable=True) is None
    cli = list(AuditEntry.objects.filter(channel="cli").order_by("id"))
    assert [(e.action, e.target, e.status, e.ok) for e in cli] == [
        ("topic create", "NegQ", 400, False),
        ("topic create", "X1", 400, False),
        ("topic create", "bad name", 400, False),
        ("topic create", "NotInt", 400, False),
    ]
    assert {e.username for e in cli} == {audit.os_user()} and {e.node_id for e in cli} == {"n1"}
    assert cli[0].result == f"--read-queue-nums: {NEGATIVE_QUEUES}"
    assert cli[0].detail["brokers"] == ["broker-a"] and cli[0].detail["read_queue_nums"] == "-4"
    api = list(AuditEntry.objects.filter(channel="api").order_by("id"))
    assert [e.result for e in api] == [
        f"queue_datas.0.read_queue_nums: {NEGATIVE_QUEUES}",
        f"queue_datas: {UNKNOWN_GROUP}",
    ]
    console = AuditEntry.objects.filter(channel="console").order_by("id")
    assert [e.result for e in console] == [
        f"read_queue_nums: {NEGATIVE_QUEUES}",
        f"brokers: {UNKNOWN_GROUP}",
    ]


def test_topic_list_prints_the_apis_rows_as_a_table_and_as_its_json(
    wired: RunningGateway, known_brokers: None, viewer_api: APIClient
) -> None:
    table = topic("list", "--type", "user").splitlines()
    listed = json.loads(topic("list", "--type", "user", "--json"))
    api = viewer_api.get("/api/v1/topics/?type=user").json()

    assert listed == api
    assert table[0].split() == [
        "TOPIC", "TYPE", "BROKER", "GROUPS", "READ", "QUEUES", "WRITE", "QUEUES", "PERM", "VERSION"
    ]  # fmt: skip
    rows = {line.split()[0]: line.split() for line in table[1:-1]}
    assert set(rows) == {"CliRepeat", "DemoOrders", "TopicTest"}
    assert rows["TopicTest"][:7] == ["TopicTest", "normal", "broker-a,", "broker-b", "8", "8", "6"]
    assert table[-1] == "3 topics"
    assert topic("list", "--search", "NoSuchTopic").splitlines()[-1] == "0 topics"


def test_a_repeated_create_says_what_changed_and_changes_are_audited(
    wired: RunningGateway, known_brokers: None, operator_api: APIClient
) -> None:
    same = topic("create", REPEATED, "--brokers", "broker-a", "--read-queue-nums", "4",
                 "--write-queue-nums", "4", "--method", "namesrv")  # fmt: skip
    changed = topic("create", REPEATED, "--brokers", "broker-a", "broker-b", "--read-queue-nums",
                    "8", "--write-queue-nums", "4", "--method", "namesrv")  # fmt: skip
    fresh = topic("create", "CliFresh", "--brokers", "broker-a", "--method", "namesrv", "--json")
    api = api_create(operator_api, REPEATED, "broker-b", 2)
    deleted = topic("delete", "CliFresh", "--method", "namesrv")

    assert same.startswith(
        f"Topic {REPEATED} already exists on broker-a with these settings; nothing changed. "
        "Registered on the NameServers only (queues on broker-a)"
    ), same
    assert changed.startswith(
        f"Topic {REPEATED} updated on broker-a: readQueueNums 4 -> 8; "
        "updated on broker-b: readQueueNums 4 -> 8. Registered"
    ), changed
    assert "  node n1: done" in changed
    assert json.loads(fresh)["detail"].startswith("Registered topic CliFresh on the NameServers")
    assert json.loads(fresh)["status"] == 201
    assert api.status_code == 201
    assert api.json()["detail"].startswith(
        f"Topic {REPEATED} updated on broker-b: readQueueNums 4 -> 2. Registered"
    )
    assert deleted.startswith("Deleted topic CliFresh (NameServer only: no broker asked)")

    entries = list(AuditEntry.objects.filter(channel="cli").order_by("id"))
    assert [(e.action, e.target, e.status, e.ok) for e in entries] == [
        ("topic create", REPEATED, 201, True),
        ("topic create", REPEATED, 201, True),
        ("topic create", "CliFresh", 201, True),
        ("topic delete", "CliFresh", 200, True),
    ]
    assert entries[1].result == changed.splitlines()[0]
    assert entries[3].detail == {"topic": "CliFresh", "cluster": "", "method": "namesrv"}
    # The session's gateway outlives this test: leave it as it was.
    topic("delete", REPEATED, "--method", "namesrv")
