"""Console wording: per-broker queues and totals, "missing on nX", calm "expiring",
follower indexes, and which live events are heartbeats."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.template.loader import render_to_string
from django.test import Client

from gateway.clock import ManualClock
from gateway.services import NameServerService
from namesrv_app.events import ChangeEvent
from namesrv_app.live import change_event
from namesrv_app.projection.delta import read_full_state
from namesrv_app.projection.rows import write_full_state
from namesrv_app.web import reads
from raftstore.replicator import LocalReplicator
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from remoting.register_request import BrokerRegistration
from tests.web.conftest import (
    BROKERS,
    START_MS,
    TOPICS,
    RunningGateway,
    log_in,
)

DEMO_TIMEOUT_MS = 3000
"""``make run``'s brokers: a heartbeat every second, a 3 s timeout."""


def logged_in(username: str) -> Client:
    client = Client()
    assert log_in(client, username)
    return client


# ------------------------------------------------------------------- queue counts


def test_the_topics_page_labels_per_broker_queues_and_totals(cast: Any, viewer: User) -> None:
    html = logged_in("vera").get("/topics/").content.decode()
    table = html.split('id="topic-table"', 1)[1].split("</table>", 1)[0]
    assert "<th>queues per broker</th>" in table
    assert '<th class="num">total read queues</th>' in table
    assert '<th class="num">total write queues</th>' in table
    row = table.split(">TopicTest</a>", 1)[1].split("</tr>", 1)[0]
    assert "broker-a: 4 read / 4 write" in row and "broker-b: 4 read / 4 write" in row
    assert 'title="read queues of its 2 brokers added up">8<' in row


def test_the_topic_page_labels_queues_per_broker_and_in_total(
    wired: RunningGateway, cast: Any, viewer: User
) -> None:
    html = logged_in("vera").get("/topics/TopicTest/").content.decode()
    queues = html.split('id="queue-datas"', 1)[1].split("</table>", 1)[0]
    assert "read queues on this broker" in queues
    assert "total (2 brokers)" in queues and ">8 read<" in queues and ">8 write<" in queues
    answers = html.split('id="node-routes"', 1)[1].split("</table>", 1)[0]
    assert "broker-a: 4 read / 4 write (RW)" in answers
    assert "missing on" not in html


# ------------------------------------------------------------------- missing on a node


def test_a_topic_missing_on_a_node_says_so_instead_of_listing_fields(
    second_node: RunningGateway, cast: Any, viewer: User
) -> None:
    comparison = reads.compare_route("DemoOrders")
    by_node = {n["node_id"]: n for n in comparison["nodes"]}
    assert comparison["missing_on"] == ["n2"] and comparison["reference_node"] == "n1"
    assert by_node["n2"]["missing"] and by_node["n2"]["status"] == "not_found"
    assert not by_node["n1"]["missing"] and not by_node["n3"]["missing"]  # n3: unreachable

    html = logged_in("vera").get("/topics/DemoOrders/").content.decode()
    assert 'id="missing-on">missing on n2<' in html
    answers = html.split('id="node-routes"', 1)[1].split("</table>", 1)[0]
    n2 = answers.split("<td>n2", 1)[1].split("</tr>", 1)[0]
    assert "missing on n2" in n2
    assert "queueDatas[" not in n2 and "brokerDatas[" not in n2
    assert "<td>n3" in answers and "missing on n3" not in answers


def test_a_node_with_a_different_route_keeps_its_field_differences(
    second_node: RunningGateway, cast: Any, viewer: User
) -> None:
    html = logged_in("vera").get("/topics/TopicTest/").content.decode()
    assert "missing on" not in html
    answers = html.split('id="node-routes"', 1)[1].split("</table>", 1)[0]
    n2 = answers.split("<td>n2", 1)[1].split("</tr>", 1)[0]
    assert "<mark>queueDatas[broker-b].readQueueNums</mark>" in n2
    assert "<mark>brokerDatas[broker-b].cluster</mark>" in n2
    assert "broker-a: 4 read / 4 write" in n2


# ------------------------------------------------------------------- expiring


async def _beat(service: NameServerService, addrs: set[str]) -> None:
    for broker in BROKERS:
        if broker.addr not in addrs:
            continue
        await service.register_broker(
            BrokerRegistration(
                cluster_name=broker.cluster,
                broker_addr=broker.addr,
                broker_name=broker.broker_name,
                broker_id=broker.broker_id,
                ha_server_addr=broker.ha_addr,
                heartbeat_timeout_ms=DEMO_TIMEOUT_MS,
            ),
            TopicConfigSerializeWrapper(
                data_version=DataVersion(timestamp=START_MS, counter=1),
                topic_config_table={t: TopicConfig(t, 4, 4, 6) for t in TOPICS},
            ),
            channel=f"chan-{broker.addr}",
        )


SILENT = BROKERS[3].addr
"""broker-b's slave: its last heartbeat is 800 ms older than the others'."""


@pytest.fixture
def demo_heartbeats(db: Any) -> int:
    """Four brokers with a 3 s timeout: all beat at START_MS, three again 800 ms later
    (a real table, projected). Returns the time of the second beat."""
    replicator = LocalReplicator("n1")
    clock = ManualClock(START_MS)
    service = NameServerService(replicator, clock)
    asyncio.run(_beat(service, {b.addr for b in BROKERS}))
    second = clock.advance(800)
    asyncio.run(_beat(service, {b.addr for b in BROKERS} - {SILENT}))
    write_full_state(replicator.read(read_full_state), "n1", "eventual")
    return second


def _expiring(at_ms: int) -> set[str]:
    groups = reads.replicas_of(reads.broker_groups(), at_ms=at_ms)
    return {r["addr"] for g in groups for r in g["replicas"] if r["expiring"]}


def test_expiring_needs_two_missed_heartbeats_and_half_the_timeout() -> None:
    assert reads.expiring_after_ms(DEMO_TIMEOUT_MS) == 2000  # 2 x (3 s / 3)
    assert reads.expiring_after_ms(DEMO_TIMEOUT_MS, heartbeat_interval_ms=500) == 1500
    assert reads.expiring_after_ms(120_000) == 80_000
    assert reads.expiring_after_ms(120_000, heartbeat_interval_ms=30_000) == 60_000


def test_healthy_demo_brokers_are_not_expiring(demo_heartbeats: int) -> None:
    # 1.7 s after the last beat of three: past half the timeout (1.5 s, the old rule) but
    # only one beat missed. The silent one: 2.5 s, two beats missed, past half: expiring.
    at = demo_heartbeats + 1700
    assert _expiring(at) == {SILENT}
    assert reads.liveness_counts(at_ms=at) == {"live": 4, "expiring": 1}
    # 1.9 s: the silent one is past half its timeout but missed one beat only.
    early = START_MS + 1900
    assert _expiring(early) == set()
    assert reads.liveness_counts(at_ms=early) == {"live": 4, "expiring": 0}
    # 2 s without a beat is not yet "more than two missed"; just over is.
    assert _expiring(demo_heartbeats + 2000) == {SILENT}
    everyone = demo_heartbeats + 2001
    assert _expiring(everyone) == {b.addr for b in BROKERS}
    assert reads.liveness_counts(at_ms=everyone)["expiring"] == 4
    # Past its 3 s timeout the silent one is no longer alive, hence not "expiring".
    assert _expiring(START_MS + 3001) == {b.addr for b in BROKERS} - {SILENT}


def test_the_overview_explains_expiring(cast: Any, viewer: User, settings: Any) -> None:
    settings.NAMESRV = {"NODE_ID": "n1", "PORT": 1, "INTERNAL_PORT": 1, "INTERNAL_SECRET": "x"}
    html = logged_in("vera").get("/").content.decode()
    assert "missed 2 heartbeats, past half their timeout" in html


# ------------------------------------------------------------------- follower indexes


def _panel(node_id: str, state: str, match: int, next_index: int) -> dict[str, Any]:
    return {
        "node_id": node_id,
        "reachable": True,
        "local": node_id == "n1",
        "mode": "raft",
        "state": state,
        "leader": "127.0.0.1:7001",
        "term": 3,
        "commit_index": 42,
        "applied_index": 42,
        "log_length": 43,
        "has_quorum": True,
        "applied_version": 9,
        "digest": "d",
        "view_digest": "v",
        "disagrees": False,
        "alarms": [],
        "peers": [
            {
                "address": "127.0.0.1:7003",
                "connected": True,
                "match_index": match,
                "next_index": next_index,
            }
        ],
    }


def test_follower_indexes_say_they_are_known_on_the_leader() -> None:
    html = render_to_string(
        "console/nodes.html",
        {
            "nodes": [_panel("n1", "leader", 42, 43), _panel("n2", "follower", -1, -1)],
            "disagree": False,
            "can_write": False,
            "raft_mode": True,
        },
    )
    leader, follower = html.split("<h2>n2", 1)
    assert '<td class="num">42</td><td class="num">43</td>' in leader
    assert "known on the leader" not in leader
    assert follower.count("known on the leader</span>") == 2
    assert "-1" not in follower.split("<table", 1)[1]
    assert "only on the leader; this node is follower" in follower


def test_a_node_without_a_quorum_says_so_on_its_panel() -> None:
    """What NODE_STATUS reports on a node cut off from its quorum (as
    tests/integration/test_raft_no_quorum.py sees it) is shown on the node's panel: quorum
    NO, the alarm in words, and the panel marked."""
    alarm = "no raft quorum: this node has not heard from a majority for 2300 ms"
    cut_off = {**_panel("n2", "follower", -1, -1), "has_quorum": False, "alarms": [alarm]}
    html = render_to_string(
        "console/nodes.html",
        {
            "nodes": [_panel("n1", "leader", 42, 43), cut_off],
            "disagree": False,
            "can_write": False,
            "raft_mode": True,
        },
    )
    healthy, lost = html.split("<h2>n2", 1)
    assert "<dt>quorum</dt><dd>yes</dd>" in healthy and "alarm:" not in healthy
    assert "<dt>quorum</dt><dd>NO</dd>" in lost
    assert f"<li>alarm: {alarm}</li>" in lost
    panels = html.split('<section class="card raft')[1:]
    assert [p.startswith(' warn">') for p in panels] == [False, True]


# ------------------------------------------------------------------- live events


def test_heartbeat_batches_are_marked_liveness_only() -> None:
    heartbeat = change_event(ChangeEvent("n1", 7, 3, live_changed=True))
    assert heartbeat["kind"] == "brokers" and heartbeat["liveness_only"] is True
    registration = change_event(
        ChangeEvent("n1", 8, 4, broker_names=frozenset({"broker-c"}), live_changed=True)
    )
    assert registration["liveness_only"] is False
    topics = change_event(ChangeEvent("n1", 9, 5, topics=frozenset({"T"}), live_changed=True))
    assert topics["kind"] == "brokers" and topics["liveness_only"] is False
    kv = change_event(ChangeEvent("n1", 10, 5, kv_namespaces=frozenset({"ns"})))
    assert kv["kind"] == "kv" and kv["liveness_only"] is False


def test_heartbeat_ages_are_taken_at_the_projections_last_write_while_it_writes(
    demo_heartbeats: int,
) -> None:
    """The live-broker rows lag the gateway by up to the liveness linger: while the
    projection keeps writing, ages are measured at its last write, not the wall clock;
    once it stops writing, the wall clock takes over and silent brokers age."""
    import datetime as dt

    from namesrv_app import models

    now = reads.now_ms()
    written = now - 1_500
    models.NodeState.objects.filter(node_id="n1").update(
        updated_at=dt.datetime.fromtimestamp(written / 1000, tz=dt.UTC)
    )
    assert abs(reads.liveness_now_ms() - written) <= 1
    stale = now - int(reads.PROJECTION_WRITING_S * 1000) - 5_000
    models.NodeState.objects.filter(node_id="n1").update(
        updated_at=dt.datetime.fromtimestamp(stale / 1000, tz=dt.UTC)
    )
    assert reads.liveness_now_ms() >= now
