"""The scan fallback: an eventual-mode gateway that hears no external scan scans itself.

Real in-process gateways on free ports: brokers register over the real remoting wire,
scans and NODE_STATUS go over the real internal port, metrics come from the real
metrics port. Nothing of the project is replaced; only the periods are short
(``scan_fallback_s`` 0.5: the fallback takes over after 1.5 s without a scan).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.options import GatewayConfigError, GatewayOptions, scan_fallback_period_s
from gateway.private_codes import InternalCode
from gateway.scan_fallback import SCAN_FALLBACK_MISSED_PERIODS, ScanFallback
from gateway.server import Gateway
from localcluster.demo import DemoBroker, register_request, topic_table
from raftstore.vocab import MODE_EVENTUAL, MODE_RAFT
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.model import DataVersion
from tests.gateway.test_metrics import SECRET, metrics_port, options, scrape, value
from tests.waiting import eventually

PERIOD_S = 0.5
HEARTBEAT_TIMEOUT_MS = 1000
DEADLINE_S = 10.0
POLL_S = 0.05
CLUSTER = "FallbackCluster"
SILENT = DemoBroker(CLUSTER, "broker-silent", 0, "127.0.0.1:31011", "127.0.0.1:31012")
SILENT_TOPIC = "FallbackSilentTopic"
ALARM_PREFIX = "scan fallback: no scan from Celery beat for "


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    """A remoting client whose connections stay open (a closed broker connection
    would unregister the broker and hide what the scans do)."""
    remoting = RemotingClient()
    try:
        yield remoting
    finally:
        await remoting.close()


async def started(tmp_path: Path, **overrides: object) -> Gateway:
    """A started eventual-mode gateway with its metrics port."""
    node = Gateway(options(tmp_path, **overrides))
    await node.start()
    return node


def addr(node: Gateway) -> str:
    """The public remoting address."""
    return f"127.0.0.1:{node.server.port}"


def internal_addr(node: Gateway) -> str:
    """The internal (loopback, secret) address."""
    return f"127.0.0.1:{node.internal_server.port}"


async def register_silent(node: Gateway, client: RemotingClient) -> None:
    """REGISTER_BROKER of a broker with a 1 s heartbeat timeout that never speaks again."""
    request = register_request(
        SILENT,
        topic_table([SILENT_TOPIC, SILENT.broker_name]),
        DataVersion(timestamp=1, counter=1),
        heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS,
    )
    answer = await client.invoke(addr(node), request)
    assert answer.code == ResponseCode.SUCCESS, answer.remark


async def route_code(node: Gateway, client: RemotingClient, topic: str) -> int:
    """GET_ROUTEINFO_BY_TOPIC's answer code."""
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return (await client.invoke(addr(node), request)).code


async def node_status(node: Gateway, client: RemotingClient) -> dict[str, Any]:
    """NODE_STATUS over the internal port."""
    request = RemotingCommand.request(InternalCode.NODE_STATUS, {"secret": SECRET})
    answer = await client.invoke(internal_addr(node), request)
    assert answer.code == ResponseCode.SUCCESS and answer.body is not None, answer.remark
    status: dict[str, Any] = json.loads(answer.body)
    return status


async def external_scan(node: Gateway, client: RemotingClient) -> int:
    """One SCAN_NOT_ACTIVE_BROKER as the Celery task sends it: the number expired."""
    fields = {"secret": SECRET, "now_ms": str(time.time_ns() // 1_000_000)}
    request = RemotingCommand.request(InternalCode.SCAN_NOT_ACTIVE_BROKER, fields)
    answer = await client.invoke(internal_addr(node), request)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return int((answer.ext_fields or {})["expired"])


async def wait_for_route_code(node: Gateway, client: RemotingClient, code: int) -> float:
    """Seconds until the silent broker's topic answers ``code``."""
    started_at = time.monotonic()

    async def answered() -> bool:
        return await route_code(node, client, SILENT_TOPIC) == code

    await eventually(
        answered, what=f"{SILENT_TOPIC} answering {code}", timeout_s=DEADLINE_S, interval_s=POLL_S
    )
    return time.monotonic() - started_at


async def test_without_scans_the_gateway_expires_a_silent_broker_and_raises_an_alarm(
    tmp_path: Path, client: RemotingClient
) -> None:
    node = await started(tmp_path, scan_fallback_s=PERIOD_S)
    try:
        await register_silent(node, client)
        assert await route_code(node, client, SILENT_TOPIC) == ResponseCode.SUCCESS
        quiet = await node_status(node, client)
        assert quiet["alarms"] == []
        assert quiet["scan_fallback"]["enabled"] and not quiet["scan_fallback"]["active"]
        assert quiet["last_scan"] is None

        waited_s = await wait_for_route_code(node, client, ResponseCode.TOPIC_NOT_EXIST)

        # Not before the broker timed out, and not before three periods passed.
        assert waited_s >= HEARTBEAT_TIMEOUT_MS / 1000 - 0.2
        status = await node_status(node, client)
        assert status["scan_fallback"]["active"] and status["scan_fallback"]["runs"] >= 1
        # The scan that expired the broker, as the console and `cluster status` show it.
        assert status["last_scan"]["role"] == "standalone"
        assert status["last_scan"]["at_ms"] <= time.time_ns() // 1_000_000
        [alarm] = status["alarms"]
        assert alarm.startswith(ALARM_PREFIX)
        assert alarm.endswith(f"s; this node scans itself every {PERIOD_S:g} s")
        silent_for = float(alarm.removeprefix(ALARM_PREFIX).split(" ")[0])
        assert silent_for >= SCAN_FALLBACK_MISSED_PERIODS * PERIOD_S - 0.5
        samples = await scrape(metrics_port(node))
        assert value(samples, "namesrv_scan_fallback_active") == 1
        runs = value(samples, "namesrv_scan_fallback_runs_total")
        assert runs is not None and runs >= 1
        # The fallback's scans are scans like any other: they count there too.
        assert value(samples, "namesrv_scan_expired_total") == 1
        scans = value(samples, "namesrv_scan_runs_total")
        assert scans is not None and scans >= runs

        # The Celery scan comes back: the node stops scanning itself, the alarm clears.
        assert await external_scan(node, client) == 0
        status = await node_status(node, client)
        assert status["alarms"] == [] and not status["scan_fallback"]["active"]
        runs_then = status["scan_fallback"]["runs"]
        await asyncio.sleep(2 * PERIOD_S)  # less than three periods
        samples = await scrape(metrics_port(node))
        assert value(samples, "namesrv_scan_fallback_active") == 0
        assert value(samples, "namesrv_scan_fallback_runs_total") == runs_then
    finally:
        await node.stop()


async def test_with_regular_external_scans_the_fallback_never_triggers(
    tmp_path: Path, client: RemotingClient
) -> None:
    node = await started(tmp_path, scan_fallback_s=PERIOD_S)
    try:
        await register_silent(node, client)
        expired = 0
        alarms_seen: list[str] = []
        # Six fallback periods, twice the silence that would trigger it, one scan
        # every 0.4 s (a beat a little faster than the period, as a phased beat is).
        deadline = time.monotonic() + 6 * PERIOD_S
        while time.monotonic() < deadline:
            expired += await external_scan(node, client)
            alarms_seen += (await node_status(node, client))["alarms"]
            await asyncio.sleep(0.4)
        status = await node_status(node, client)
        samples = await scrape(metrics_port(node))
    finally:
        await node.stop()

    assert alarms_seen == [] and status["alarms"] == []
    assert status["scan_fallback"] == {
        "enabled": True,
        "active": False,
        "period_s": PERIOD_S,
        "silence_s": pytest.approx(0.5, abs=0.5),  # never near the 1.5 s trigger
        "runs": 0,
    }
    assert value(samples, "namesrv_scan_fallback_active") == 0
    assert value(samples, "namesrv_scan_fallback_runs_total") == 0
    # The external scans did the expiry.
    assert expired == 1


async def test_off_by_default_no_fallback_scan_and_no_alarm(
    tmp_path: Path, client: RemotingClient
) -> None:
    node = await started(tmp_path)
    try:
        await register_silent(node, client)
        await asyncio.sleep(HEARTBEAT_TIMEOUT_MS / 1000 + 4 * PERIOD_S)
        assert await route_code(node, client, SILENT_TOPIC) == ResponseCode.SUCCESS
        status = await node_status(node, client)
        samples = await scrape(metrics_port(node))
    finally:
        await node.stop()
    assert status["alarms"] == [] and not status["scan_fallback"]["enabled"]
    assert value(samples, "namesrv_scan_fallback_active") == 0
    assert value(samples, "namesrv_scan_fallback_runs_total") == 0


def test_raft_mode_and_a_self_scanning_gateway_ignore_the_fallback() -> None:
    raft = GatewayOptions(node_id="n1", mode=MODE_RAFT, scan_fallback_s=10, scan_interval_ms=1000)
    assert scan_fallback_period_s(raft, MODE_RAFT) == 0
    own_loop = GatewayOptions(node_id="n1", scan_fallback_s=10, scan_interval_ms=1000)
    assert scan_fallback_period_s(own_loop, MODE_EVENTUAL) == 0
    eventual = GatewayOptions(node_id="n1", scan_fallback_s=10)
    assert scan_fallback_period_s(eventual, MODE_EVENTUAL) == 10


def test_a_negative_period_is_refused(tmp_path: Path) -> None:
    with pytest.raises(GatewayConfigError, match="scan_fallback_s"):
        Gateway(options(tmp_path, scan_fallback_s=-1))
    with pytest.raises(ValueError):
        ScanFallback(float("nan"))


def test_the_fallback_takes_over_after_three_silent_periods_and_yields_to_a_scan() -> None:
    now = [100.0]
    fallback = ScanFallback(10, monotonic=lambda: now[0])
    assert fallback.seconds_until_due() == 30
    now[0] += 29
    assert fallback.seconds_until_due() == pytest.approx(1) and fallback.alarms() == []
    now[0] += 2
    assert fallback.seconds_until_due() == 0
    fallback.begin_run()
    assert fallback.alarms() == [
        "scan fallback: no scan from Celery beat for 31 s; this node scans itself every 10 s"
    ]
    now[0] += 10
    assert fallback.seconds_until_due() == 0  # still silent: scan again every period
    fallback.external_scan()
    assert not fallback.active and fallback.alarms() == []
    assert fallback.seconds_until_due() == 30 and fallback.runs == 1
