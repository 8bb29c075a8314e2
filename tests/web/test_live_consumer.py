"""The console's websocket: who may connect, and events arriving from any thread."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser, User

from localcluster.launcher import (
    LauncherError,
    find_redis_server,
    free_port,
    redis_answers,
    write_redis_config,
)
from namesrv_app.events import ChangeEvent, channel_layer_publisher
from namesrv_app.live import CLOSE_FORBIDDEN, EventsConsumer, publish_change, publish_event
from tests.waiting import wait_until

IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
RECEIVE_TIMEOUT_S = 3.0


@pytest.fixture
def memory_layer(settings: Any) -> None:
    """The in-memory channel layer (one process)."""
    settings.CHANNEL_LAYERS = IN_MEMORY


async def _connected(user: Any) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(EventsConsumer.as_asgi(), "/ws/events/")
    communicator.scope["user"] = user
    return communicator


@pytest.mark.django_db(transaction=True)
async def test_a_viewer_receives_published_events(memory_layer: None, viewer: User) -> None:
    communicator = await _connected(viewer)
    connected, _ = await communicator.connect()
    assert connected
    assert (await communicator.receive_json_from(RECEIVE_TIMEOUT_S))["kind"] == "hello"
    await sync_to_async(publish_event)(
        {"kind": "leader", "node_id": "n2", "leader": "n1", "term": 7}
    )
    event = await communicator.receive_json_from(RECEIVE_TIMEOUT_S)
    assert (event["kind"], event["leader"], event["term"]) == ("leader", "n1", 7)
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_anonymous_and_roleless_users_are_closed(memory_layer: None, nobody: User) -> None:
    for user in (AnonymousUser(), nobody):
        communicator = await _connected(user)
        connected, code = await communicator.connect()
        assert not connected
        assert code == CLOSE_FORBIDDEN


@pytest.mark.django_db(transaction=True)
async def test_a_projection_change_from_a_writer_thread_arrives_as_a_broker_event(
    memory_layer: None, viewer: User
) -> None:
    communicator = await _connected(viewer)
    await communicator.connect()
    await communicator.receive_json_from(RECEIVE_TIMEOUT_S)
    change = ChangeEvent(
        node_id="n1",
        applied_version=12,
        routes_version=5,
        topics=frozenset({"TopicTest"}),
        broker_names=frozenset({"broker-a"}),
        live_changed=True,
    )
    # The projection writer publishes from its own plain thread.
    writer = threading.Thread(target=publish_change, args=(change,))
    await sync_to_async(writer.start)()
    await sync_to_async(writer.join)()
    event = await communicator.receive_json_from(RECEIVE_TIMEOUT_S)
    assert event["kind"] == "brokers"
    assert event["broker_names"] == ["broker-a"] and event["applied_version"] == 12
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_the_stock_channel_layer_publisher_reaches_the_console_too(
    memory_layer: None, viewer: User
) -> None:
    communicator = await _connected(viewer)
    await communicator.connect()
    await communicator.receive_json_from(RECEIVE_TIMEOUT_S)
    change = ChangeEvent(
        node_id="n3",
        applied_version=3,
        routes_version=3,
        kv_namespaces=frozenset({"ORDER_TOPIC_CONFIG"}),
    )
    await sync_to_async(channel_layer_publisher, thread_sensitive=False)(change)
    event = await communicator.receive_json_from(RECEIVE_TIMEOUT_S)
    assert (event["kind"], event["kv_namespaces"]) == ("kv", ["ORDER_TOPIC_CONFIG"])
    await communicator.disconnect()


@pytest.fixture
def redis_layer(settings: Any, tmp_path: Path) -> Iterator[None]:
    """A throw-away Redis from the launcher's helper, as the channel layer."""
    try:
        binary = find_redis_server()
    except LauncherError as exc:
        pytest.fail(f"no redis-server available: {exc}")
    port = free_port()
    proc = subprocess.Popen(
        [binary, str(write_redis_config(tmp_path, port))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: redis_answers(port), what="redis", timeout_s=15.0)
        settings.CHANNEL_LAYERS = {
            "default": {
                "BACKEND": "channels_redis.core.RedisChannelLayer",
                "CONFIG": {"hosts": [f"redis://127.0.0.1:{port}/0"]},
            }
        }
        yield
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.django_db(transaction=True)
async def test_events_cross_processes_through_the_redis_layer(
    redis_layer: None, viewer: User
) -> None:
    communicator = await _connected(viewer)
    await communicator.connect()
    await communicator.receive_json_from(RECEIVE_TIMEOUT_S)
    await sync_to_async(publish_event, thread_sensitive=False)(
        {"kind": "divergence", "nodes": [{"node_id": "n1", "digest": "a", "applied_version": 1}]}
    )
    event = await communicator.receive_json_from(RECEIVE_TIMEOUT_S)
    assert event["kind"] == "divergence"
    await communicator.disconnect()
