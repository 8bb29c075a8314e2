"""Without Redis the console keeps working: the websocket is refused cleanly and the
page carries the "Live updates paused" banner its script shows; a node's scan fallback
alarm shows on the overview and the nodes page; run_gateway's ``--scan-fallback-s``."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from localcluster.argv import GatewayArgs
from localcluster.launcher import find_redis_server, redis_answers, write_redis_config
from namesrv_app.conf import namesrv_settings
from namesrv_app.live import CLOSE_LAYER_DOWN, EventsConsumer
from namesrv_app.management.commands.run_gateway import scan_fallback_s
from remoting.blocking import BlockingClient
from remoting.command import RemotingCommand
from tests.waiting import wait_until
from tests.web.conftest import (
    SECRET,
    RunningGateway,
    log_in,
    node_settings,
    start_gateway,
    stop_gateway,
)
from tools.ports import free_port

IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
RECEIVE_TIMEOUT_S = 5.0
BANNER = "Live updates paused: reconnecting…"
ALARM_PREFIX = "scan fallback: no scan from Celery beat for "
NODE_STATUS = 40002
ALARM_DEADLINE_S = 30.0


def dead_redis_layer() -> dict[str, Any]:
    """The Redis channel layer pointed at a loopback port nobody listens on."""
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [f"redis://127.0.0.1:{free_port()}/0"]},
        }
    }


async def _communicator(user: User) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(EventsConsumer.as_asgi(), "/ws/events/")
    communicator.scope["user"] = user
    return communicator


@pytest.mark.django_db(transaction=True)
async def test_without_the_channel_layer_the_socket_is_refused_cleanly(
    settings: Any, viewer: User
) -> None:
    settings.CHANNEL_LAYERS = dead_redis_layer()
    communicator = await _communicator(viewer)
    connected, code = await communicator.connect(timeout=RECEIVE_TIMEOUT_S)
    assert not connected
    assert code == CLOSE_LAYER_DOWN
    # The consumer's own layer receive fails too, after the refusal: it ends quietly.
    await communicator.wait(RECEIVE_TIMEOUT_S)


@pytest.fixture
def redis_layer(settings: Any, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A throw-away Redis (the launcher's binary and config) as the channel layer."""
    port = free_port()
    proc = subprocess.Popen(
        [find_redis_server(), str(write_redis_config(tmp_path, port))],
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
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(10)


@pytest.mark.django_db(transaction=True)
async def test_redis_dying_under_an_open_socket_closes_it_as_layer_down(
    redis_layer: subprocess.Popen[bytes], viewer: User
) -> None:
    communicator = await _communicator(viewer)
    connected, _ = await communicator.connect(timeout=RECEIVE_TIMEOUT_S)
    assert connected
    assert (await communicator.receive_json_from(RECEIVE_TIMEOUT_S))["kind"] == "hello"
    redis_layer.kill()
    redis_layer.wait(10)
    closed = await communicator.receive_output(RECEIVE_TIMEOUT_S)
    assert closed == {"type": "websocket.close", "code": CLOSE_LAYER_DOWN}
    await communicator.wait(RECEIVE_TIMEOUT_S)


@pytest.mark.django_db(transaction=True)
async def test_a_ping_is_answered_through_the_channel_layer(settings: Any, viewer: User) -> None:
    settings.CHANNEL_LAYERS = IN_MEMORY
    communicator = await _communicator(viewer)
    connected, _ = await communicator.connect()
    assert connected
    assert (await communicator.receive_json_from(RECEIVE_TIMEOUT_S))["kind"] == "hello"
    await communicator.send_json_to({"kind": "ping"})
    assert (await communicator.receive_json_from(RECEIVE_TIMEOUT_S)) == {"kind": "pong"}
    await communicator.disconnect()


def test_pages_carry_the_hidden_banner_and_the_script_that_shows_it(
    wired: RunningGateway, cast: Any, viewer: User
) -> None:
    client = Client()
    assert log_in(client, "vera")
    page = client.get("/").content.decode()
    assert f'<div id="live-banner" class="banner warn" role="status" hidden>{BANNER}</div>' in page
    script = Path(__file__).resolve().parents[2] / "namesrv_app/static/namesrv/live.js"
    source = script.read_text(encoding="utf-8")
    assert 'getElementById("live-banner")' in source and "banner.hidden = on" in source
    # Logged out: no banner, no socket.
    assert "live-banner" not in Client().get("/accounts/login/").content.decode()


# ------------------------------------------------------------------ the alarm


@pytest.fixture(scope="module")
def fallback_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """A gateway with the default fallback of a 1 s scan period and no Celery at all:
    it takes over after 3 s."""
    running = start_gateway(
        tmp_path_factory.mktemp("fallback"),
        extra_env={"NAMESRV_SCAN_INTERVAL_S": "1"},
        scan_fallback_s=None,
    )
    try:
        yield running
    finally:
        stop_gateway(running)


def wait_for_alarm(gateway: RunningGateway) -> list[str]:
    """NODE_STATUS's alarms once the fallback has raised one."""

    def alarms() -> list[str]:
        with BlockingClient(f"127.0.0.1:{gateway.internal_port}") as client:
            answer = client.invoke(RemotingCommand.request(NODE_STATUS, {"secret": SECRET}))
        assert answer.body is not None
        raised: list[str] = json.loads(answer.body)["alarms"]
        return raised

    return wait_until(
        alarms, what="a scan fallback alarm", timeout_s=ALARM_DEADLINE_S, interval_s=0.2
    )


def test_the_scan_fallback_alarm_shows_on_the_overview_and_the_nodes_page(
    settings: Any, fallback_gateway: RunningGateway, cast: Any, viewer: User
) -> None:
    [alarm] = wait_for_alarm(fallback_gateway)
    assert alarm.startswith(ALARM_PREFIX) and alarm.endswith("this node scans itself every 1 s")
    settings.NAMESRV = node_settings(fallback_gateway)
    client = Client()
    assert log_in(client, "vera")
    overview = client.get("/").content.decode()
    assert ALARM_PREFIX in overview and '<span class="badge warn">alarm</span>' in overview
    nodes = client.get("/nodes/").content.decode()
    assert '<ul class="alarms"><li>alarm: ' + ALARM_PREFIX in nodes


# ------------------------------------------------------------------ run_gateway


def test_run_gateway_defaults_the_fallback_to_the_scan_interval_in_eventual_mode() -> None:
    conf = namesrv_settings()
    assert scan_fallback_s({"scan_fallback_s": None, "mode": "eventual"}, conf) == float(
        conf.SCAN_INTERVAL_S
    )
    assert scan_fallback_s({"scan_fallback_s": None, "mode": "raft"}, conf) == 0
    assert scan_fallback_s({"scan_fallback_s": 0.0, "mode": "eventual"}, conf) == 0
    assert scan_fallback_s({"scan_fallback_s": 2.5, "mode": "eventual"}, conf) == 2.5


@pytest.mark.parametrize("given", [-1.0, float("nan")])
def test_run_gateway_refuses_a_negative_fallback(given: float) -> None:
    args = GatewayArgs(port=0, internal_port=0, scan_fallback_s=given).args()
    with pytest.raises(CommandError, match="--scan-fallback-s must be 0"):
        call_command("run_gateway", *args)
