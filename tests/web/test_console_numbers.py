"""The console's numbers decided by a page's context: one applied version per node on the
Overview, the demo brokers' short timeout explained where it is shown, and what drives
each NamesrvConfig key on the Config page."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from experiment_reports import text as report_text
from gateway.clock import ManualClock
from gateway.services import NameServerService
from namesrv_app.models import NodeState
from namesrv_app.projection.delta import read_full_state
from namesrv_app.projection.rows import write_full_state
from namesrv_app.web import units
from raftstore.config import key_notes
from raftstore.replicator import LocalReplicator
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from remoting.register_request import BrokerRegistration
from tests.web.conftest import BROKERS, START_MS, TOPICS, RunningGateway, log_in

DEMO_NOTE = (
    "demo brokers: heartbeat every 1 s, dropped after 3 s of silence; "
    "RocketMQ's defaults are 30 s and 120 s"
)
APPLIED = re.compile(r'data-node="([^"]*)" data-applied-version="([^"]*)"')


@pytest.fixture
def demo_brokers(db: Any) -> None:
    """The cast registered as ``make run``'s demo brokers do: a 3 s timeout (projected)."""
    replicator = LocalReplicator("n1")
    service = NameServerService(replicator, ManualClock(START_MS))
    asyncio.run(_register(service, units.DEMO_TIMEOUT_MS))
    write_full_state(replicator.read(read_full_state), "n1", "eventual")


async def _register(service: NameServerService, timeout_ms: int) -> None:
    for broker in BROKERS:
        await service.register_broker(
            BrokerRegistration(
                cluster_name=broker.cluster,
                broker_addr=broker.addr,
                broker_name=broker.broker_name,
                broker_id=broker.broker_id,
                ha_server_addr=broker.ha_addr,
                heartbeat_timeout_ms=timeout_ms,
            ),
            TopicConfigSerializeWrapper(
                data_version=DataVersion(timestamp=START_MS, counter=1),
                topic_config_table={t: TopicConfig(t, 4, 4, 6) for t in TOPICS},
            ),
            channel=f"chan-{broker.addr}",
        )


def logged_in(username: str) -> Client:
    client = Client()
    assert log_in(client, username)
    return client


def test_the_overview_shows_one_applied_version_per_node(
    wired: RunningGateway, cast: Any, viewer: User
) -> None:
    # A projection lagging its gateway, as it does while the writer batches: the card
    # used to show the projection's version, the table the gateway's.
    NodeState.objects.update(applied_version=1)
    projected = 1
    response = logged_in("vera").get("/")
    local = next(p for p in response.context["nodes"] if p["local"])
    assert local["applied_version"] != projected
    assert response.context["local_applied"]["version"] == local["applied_version"]
    shown = APPLIED.findall(response.content.decode())
    assert len(shown) == 2  # the card and the nodes table
    assert {node for node, _ in shown} == {"n1"}
    assert {version for _, version in shown} == {str(local["applied_version"])}


def test_the_overview_falls_back_to_the_projection_and_says_so(
    cast: Any, viewer: User, settings: Any
) -> None:
    settings.NAMESRV = {"NODE_ID": "n1", "PORT": 1, "INTERNAL_PORT": 1, "INTERNAL_SECRET": "x"}
    html = logged_in("vera").get("/").content.decode()
    card = html.split('id="local-applied"', 1)[1].split("</div>", 1)[0]
    assert f'data-applied-version="{NodeState.objects.get().applied_version}"' in card
    assert "its stored projection: gateway unreachable" in card


def test_the_demo_timings_are_explained_where_they_are_shown(
    demo_brokers: None, viewer: User, settings: Any
) -> None:
    settings.NAMESRV = {"NODE_ID": "n1", "PORT": 1, "INTERNAL_PORT": 1, "INTERNAL_SECRET": "x"}
    client = logged_in("vera")
    for url in ("/", "/topology/"):
        html = client.get(url).content.decode()
        assert f'id="heartbeat-timing-note">{DEMO_NOTE}</p>' in html.replace("&#x27;", "'"), url
        assert "3.0 s" in html, url


def test_brokers_with_rocketmqs_timeout_get_no_demo_note(
    cast: Any, viewer: User, settings: Any
) -> None:
    settings.NAMESRV = {"NODE_ID": "n1", "PORT": 1, "INTERNAL_PORT": 1, "INTERNAL_SECRET": "x"}
    client = logged_in("vera")
    for url in ("/", "/topology/"):
        html = client.get(url).content.decode()
        assert "120.0 s" in html and "heartbeat-timing-note" not in html, url


def test_a_share_reads_as_a_percentage() -> None:
    assert [report_text.percent(s) for s in (0.25, 0.625, 0.0, 1.0, 0.0004)] == [
        "25 %",
        "62.5 %",
        "0 %",
        "100 %",
        "0.04 %",
    ]
    assert report_text.is_share("topics_diverged_share")
    assert report_text.is_share("ok_share raft") and report_text.is_share("p_fresh eventual")
    assert not report_text.is_share("longest_ms") and not report_text.is_share("reads")


def test_the_config_page_says_what_drives_each_key(wired: RunningGateway, viewer: User) -> None:
    html = logged_in("vera").get("/config/").content.decode()
    notes = key_notes()
    drives = html.split("<code>orderMessageEnable</code>", 1)[1].split("</td>", 1)[0]
    assert f'<span class="key-note">{notes["orderMessageEnable"]}</span>' in drives
    refused = html.split("<code>clusterTest</code>", 1)[1].split("</td>", 1)[0]
    assert notes["clusterTest"].startswith("refused")
    assert '<span class="key-note refused">refused' in refused
