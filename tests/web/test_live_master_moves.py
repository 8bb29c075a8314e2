"""A master address change reaches the console's live events by name: "broker-a's
master moved from A to B", from the route table's change set through the projection's
delta to the websocket."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User

from namesrv_app.events import MASTER_MOVES_MAX, ChangeEvent, channel_layer_publisher
from namesrv_app.live import EventsConsumer, change_event
from namesrv_app.projection.delta import read_delta
from raftstore.commands import RegisterBroker
from raftstore.results import ApplyResult, MasterMove
from raftstore.route_table import RouteTable
from remoting.model import TopicConfig, TopicConfigSerializeWrapper

OLD, NEW = "127.0.0.1:10911", "127.0.0.1:10951"
MOVE = MasterMove("DefaultCluster", "broker-a", OLD, NEW)
RECEIVE_TIMEOUT_S = 3.0


def register(table: RouteTable, addr: str) -> ApplyResult:
    topics = {t: TopicConfig(t, 4, 4) for t in ("TopicTest", "Other")}
    return table.apply(
        RegisterBroker(
            cluster_name="DefaultCluster",
            broker_addr=addr,
            broker_name="broker-a",
            broker_id=0,
            ha_server_addr="",
            now_ms=1_700_000_000_000,
            topic_config_wrapper=TopicConfigSerializeWrapper(topic_config_table=topics),
        )
    )


def test_the_projection_event_of_a_moved_master_names_both_addresses() -> None:
    table = RouteTable()
    first = read_delta(table, register(table, OLD))
    first.merge(read_delta(table, register(table, NEW)))

    event = change_event(first.event("n1"))

    assert event["kind"] == "brokers" and not event["liveness_only"]
    assert event["master_moves"] == [
        {"cluster": "DefaultCluster", "broker_name": "broker-a", "from": OLD, "to": NEW}
    ]


def test_a_flapping_master_keeps_only_the_latest_moves_in_one_event() -> None:
    table = RouteTable()
    delta = read_delta(table, register(table, OLD))
    addrs = [NEW, OLD] * MASTER_MOVES_MAX
    for addr in addrs:
        delta.merge(read_delta(table, register(table, addr)))

    moves = delta.event("n1").master_moves

    assert len(moves) == MASTER_MOVES_MAX
    assert [move.new_addr for move in moves] == addrs[-MASTER_MOVES_MAX:]


@pytest.mark.django_db(transaction=True)
async def test_the_stock_publisher_carries_the_move_to_the_console(
    settings: Any, viewer: User
) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    communicator = WebsocketCommunicator(EventsConsumer.as_asgi(), "/ws/events/")
    communicator.scope["user"] = viewer
    await communicator.connect()
    await communicator.receive_json_from(RECEIVE_TIMEOUT_S)  # hello
    change = ChangeEvent(
        node_id="n2",
        applied_version=9,
        routes_version=4,
        broker_names=frozenset({"broker-a"}),
        master_moves=(MOVE,),
    )

    await sync_to_async(channel_layer_publisher, thread_sensitive=False)(change)
    event = await communicator.receive_json_from(RECEIVE_TIMEOUT_S)

    assert event["master_moves"] == [
        {"cluster": "DefaultCluster", "broker_name": "broker-a", "from": OLD, "to": NEW}
    ]
    await communicator.disconnect()
