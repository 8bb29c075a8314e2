"""The NameServer config in the console and the API: read, compare, update (blacklist kept)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from namesrv_app import gateway_client
from tests.web.conftest import RunningGateway, log_in


@pytest.fixture
def config_restored(wired: RunningGateway) -> Any:
    before = gateway_client.namesrv_config()
    yield before
    gateway_client.update_namesrv_config({"orderMessageEnable": before["orderMessageEnable"]})


def test_the_api_reads_and_updates_the_config(
    config_restored: dict[str, str], operator_api: APIClient, viewer_api: APIClient
) -> None:
    listed = viewer_api.get("/api/v1/namesrv-config/").json()
    keys = {row["key"] for row in listed["rows"]}
    assert "orderMessageEnable" in keys and "configBlackList" in listed["blacklisted"]
    assert listed["differs"] == []

    flipped = "false" if config_restored["orderMessageEnable"] == "true" else "true"
    body = {"properties": {"orderMessageEnable": flipped}}
    answer = operator_api.post("/api/v1/namesrv-config/", body, format="json")
    assert answer.status_code == 200, answer.content
    assert gateway_client.namesrv_config()["orderMessageEnable"] == flipped
    assert (
        viewer_api.post(
            "/api/v1/namesrv-config/", {"properties": {"x": "1"}}, format="json"
        ).status_code
        == 403
    )


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"kvConfigPath": "/tmp/x"}, "kvConfigPath is a start-time setting of each node"),
        ({"clusterTest": "true"}, "clusterTest=true is refused"),
        ({"configBlackList": ""}, "configBlackList is blacklisted"),
        ({"noSuchKey": "1"}, "noSuchKey is not a NamesrvConfig property"),
        ({"bad key": "1"}, "not a property name"),
        ({}, "properties"),
    ],
)
def test_bad_updates_are_refused_and_change_nothing(
    config_restored: dict[str, str],
    operator_api: APIClient,
    properties: dict[str, str],
    message: str,
) -> None:
    answer = operator_api.post("/api/v1/namesrv-config/", {"properties": properties}, format="json")
    assert answer.status_code == 400 and message in answer.content.decode()
    assert gateway_client.namesrv_config() == config_restored


def test_the_console_page_shows_each_node_and_the_form(
    config_restored: dict[str, str], client: Client, operator: User
) -> None:
    assert log_in(client, operator.username)
    page = client.get("/config/").content.decode()
    assert "orderMessageEnable" in page and "the same on every node" in page
    assert "blacklisted" in page and 'action="/ops/namesrv-config/"' in page
    # Each value with its unit; an empty one (rocketmqHome) says so.
    interval = page.split("<code>scanNotActiveBrokerInterval</code>", 1)[1].split("</tr>", 1)[0]
    assert re.search(r"<code>\d+</code> ms</td>", interval), interval
    home = page.split("<code>rocketmqHome</code>", 1)[1].split("</tr>", 1)[0]
    assert '<span class="muted">(empty)</span>' in home, home

    refused = client.post(
        "/ops/namesrv-config/", {"key": "kvConfigPath", "value": "/x", "confirm": "on"}
    )
    assert refused.status_code == 400 and "start-time setting" in refused.content.decode()
    unhonoured = client.post(
        "/ops/namesrv-config/",
        {"key": "enableControllerInNamesrv", "value": "true", "confirm": "on"},
    )
    assert unhonoured.status_code == 400
    assert "enableControllerInNamesrv=true is refused" in unhonoured.content.decode()
