"""Redis dies under a running local cluster: nothing that matters stops.

A real two-node eventual cluster (``cluster up``) whose Celery beat scans every
second (``NAMESRV_SCAN_INTERVAL_S=1``; the gateways' scan fallback defaults to the
same period). Its Redis, the only way beat's scans reach the gateways and the
console's live events reach the browsers, is killed with SIGKILL. Then:

* the routes of a broker that keeps heart-beating are still served over the wire;
* a silent broker expires on both nodes anyway: each gateway notices the missing
  scans and scans itself, and says so in NODE_STATUS's alarms and on the console;
* the console still answers a logged-in operator (pages read the database), and
  in Chromium it shows "Live updates paused: reconnecting…" instead of failing,
  until Redis is back; then beat's scans arrive again and the alarms clear.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import os
import re
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster import readiness
from localcluster.launcher import accepts_connections, find_redis_server, redis_answers
from localcluster.run_secrets import read_run_secrets
from remoting.blocking import BlockingClient
from remoting.codes import ResponseCode
from tests.browser.conftest import CHROMIUM_ARGS, installed_chromium, log_in
from tests.integration.cluster_fixtures import (
    create_operator,
    make_broker,
    query_route,
    register_broker,
    remoting_addr,
    start_cluster,
    stop_cluster,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NODES = 2
SCAN_INTERVAL_S = "1"
HEARTBEAT_TIMEOUT_MS = 3000
HEARTBEAT_PERIOD_S = 0.5
EXPIRY_DEADLINE_S = 12.0
"""Three missed 1 s periods, then a 3 s timeout and a scan every second: about 4 s."""
LIVE_TOPIC = "RedisDownLiveTopic"
SILENT_TOPIC = "RedisDownSilentTopic"
OPERATOR = "redis-down-ops"
OPERATOR_PASSWORD = "redis-down-console-password-1"
ALARM_PREFIX = "scan fallback: no scan from Celery beat for "
BANNER = "Live updates paused: reconnecting…"
HTTP_TIMEOUT_S = 15.0
BROWSER_TIMEOUT_MS = 30_000
SCANS_BACK_DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh run folder for the module's cluster."""
    return tmp_path_factory.mktemp("redis-down")


@pytest.fixture(scope="module")
def summary(run_dir: Path) -> Iterator[dict[str, Any]]:
    """Two eventual nodes, beat scanning every second, and a console operator."""
    started = start_cluster(run_dir, nodes=NODES, env={"NAMESRV_SCAN_INTERVAL_S": SCAN_INTERVAL_S})
    try:
        create_operator(run_dir, OPERATOR, password=OPERATOR_PASSWORD)
        yield started
    finally:
        stop_cluster(run_dir)


def kill_redis(summary: dict[str, Any]) -> None:
    """SIGKILL the cluster's Redis (once) and wait until its port refuses connections."""
    port = int(summary["redis"]["port"])
    if accepts_connections(port):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(summary["redis"]["pid"]), signal.SIGKILL)
    wait_until(lambda: not accepts_connections(port), what="redis gone after SIGKILL", timeout_s=10)


def node_status(summary: dict[str, Any], run_dir: Path, index: int) -> dict[str, Any]:
    """NODE_STATUS of node ``index`` over its internal port, with the run's node secret."""
    secret = read_run_secrets(run_dir).internal
    return readiness.node_status(int(summary["nodes"][index]["internal_port"]), secret, 5.0)


class Heartbeat:
    """One broker re-registering on every node every half second, on open connections;
    records any route answer of its topic that was not SUCCESS."""

    def __init__(self, addrs: list[str]) -> None:
        self.addrs = addrs
        self.clients = [BlockingClient(addr, timeout_s=5.0) for addr in addrs]
        self.broker = make_broker("broker-live", 10931)
        self.stop = threading.Event()
        self.failures: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def beat(self) -> None:
        for client in self.clients:
            register_broker(
                client, self.broker, [LIVE_TOPIC], heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS
            )

    def _run(self) -> None:
        while not self.stop.wait(HEARTBEAT_PERIOD_S):
            try:
                self.beat()
                for addr in self.addrs:
                    code = query_route(addr, LIVE_TOPIC)[0]
                    if code != ResponseCode.SUCCESS:
                        self.failures.append(f"{addr} answered {code}")
            except Exception as exc:  # a wire failure is a finding, not a crash
                self.failures.append(f"{type(exc).__name__}: {exc}")

    def __enter__(self) -> Heartbeat:
        self.beat()
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()
        for client in self.clients:
            client.close()


class Console:
    """A logged-in console session over plain HTTP (cookies, CSRF), as a browser has."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, path: str) -> tuple[int, str]:
        with self.opener.open(self.base + path, timeout=HTTP_TIMEOUT_S) as response:
            return int(response.status), response.read().decode("utf-8")

    def log_in(self, username: str, password: str) -> tuple[int, str]:
        """The login form, then its POST; the page it lands on."""
        _, form = self.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
        assert token is not None, form
        body = urllib.parse.urlencode(
            {"username": username, "password": password, "csrfmiddlewaretoken": token.group(1)}
        ).encode()
        request = urllib.request.Request(
            self.base + "/accounts/login/", data=body, headers={"Referer": self.base + "/"}
        )
        with self.opener.open(request, timeout=HTTP_TIMEOUT_S) as response:
            return int(response.status), response.read().decode("utf-8")


def wait_for_expiry(addrs: list[str]) -> float:
    """Seconds until the silent broker's topic is gone on every node."""
    started = time.monotonic()
    codes: dict[str, int] = {}

    def gone() -> bool:
        codes.update((addr, query_route(addr, SILENT_TOPIC)[0]) for addr in addrs)
        return all(code == ResponseCode.TOPIC_NOT_EXIST for code in codes.values())

    wait_until(
        gone,
        what=lambda: f"{SILENT_TOPIC} gone after Redis died (codes: {codes})",
        timeout_s=EXPIRY_DEADLINE_S,
        interval_s=0.2,
    )
    return time.monotonic() - started


def test_without_redis_routes_are_served_silent_brokers_expire_and_the_console_answers(
    summary: dict[str, Any], run_dir: Path
) -> None:
    addrs = [remoting_addr(summary, index) for index in range(NODES)]
    silent = [BlockingClient(addr, timeout_s=5.0) for addr in addrs]
    try:
        with Heartbeat(addrs) as heartbeat:
            for client in silent:
                register_broker(
                    client,
                    make_broker("broker-silent", 10921),
                    [SILENT_TOPIC],
                    heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS,
                )
            kill_redis(summary)
            # Killed well within the silent broker's timeout: beat could not expire it.
            assert all(query_route(a, SILENT_TOPIC)[0] == ResponseCode.SUCCESS for a in addrs)

            waited_s = wait_for_expiry(addrs)
            statuses = [node_status(summary, run_dir, index) for index in range(NODES)]

            # Past another timeout, the broker that heart-beats was served all along.
            time.sleep(HEARTBEAT_TIMEOUT_MS / 1000)
            live = [query_route(addr, LIVE_TOPIC) for addr in addrs]
            failures = list(heartbeat.failures)

            console = Console(f"http://127.0.0.1:{summary['nodes'][0]['web_port']}")
            landed_status, landed = console.log_in(OPERATOR, OPERATOR_PASSWORD)
            overview_status, overview = console.get("/")
    finally:
        for client in silent:
            client.close()  # only now: a closed channel must not be what removed it

    assert waited_s >= HEARTBEAT_TIMEOUT_MS / 1000 - 1.0
    for status in statuses:
        assert status["scan_fallback"]["active"] and status["scan_fallback"]["runs"] >= 1
        [alarm] = status["alarms"]
        assert alarm.startswith(ALARM_PREFIX)
        assert alarm.endswith(f"this node scans itself every {SCAN_INTERVAL_S} s")
    assert failures == []
    for code, route in live:
        assert code == ResponseCode.SUCCESS and route is not None
        assert [q.broker_name for q in route.queue_datas] == ["broker-live"]
    assert landed_status == 200 and "Overview" in landed
    assert overview_status == 200
    assert "Overview" in overview and 'id="live-banner"' in overview
    # Both nodes' alarms, on the overview's node table.
    assert overview.count(ALARM_PREFIX) == NODES


def test_the_console_shows_live_updates_paused_until_redis_is_back(
    summary: dict[str, Any], run_dir: Path
) -> None:
    chromium = installed_chromium()
    from playwright.sync_api import sync_playwright

    kill_redis(summary)
    url = f"http://127.0.0.1:{summary['nodes'][1]['web_port']}"
    redis: subprocess.Popen[bytes] | None = None
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        try:
            page = log_in(browser.new_page(), url, OPERATOR, OPERATOR_PASSWORD)
            banner = page.wait_for_selector(
                "#live-banner", state="visible", timeout=BROWSER_TIMEOUT_MS
            )
            assert banner is not None and banner.inner_text() == BANNER
            assert "Overview" in page.inner_text("h1")
            assert page.evaluate("window.namesrvLive.connected") is False

            # Redis back on its port, with its config: the page reconnects, the banner goes.
            port = int(summary["redis"]["port"])
            password = read_run_secrets(run_dir).redis_password()
            log = (run_dir / "redis" / "restarted.log").open("ab")
            redis = subprocess.Popen(
                [find_redis_server(), str(run_dir / "redis" / "redis.conf")],
                stdout=log,
                stderr=log,
            )
            wait_until(
                lambda: redis_answers(port, password),
                what="the restarted redis answering",
                timeout_s=15,
                interval_s=0.1,
            )
            page.wait_for_selector("#live-banner", state="hidden", timeout=BROWSER_TIMEOUT_MS)
            assert page.evaluate("window.namesrvLive.connected") is True
            # Beat and its worker reconnect on their own: the scans arrive again and
            # every gateway stops scanning itself and clears its alarm.
            wait_until(
                lambda: not any(node_status(summary, run_dir, i)["alarms"] for i in range(NODES)),
                what="every alarm cleared after Redis's return",
                timeout_s=SCANS_BACK_DEADLINE_S,
                interval_s=0.5,
            )
        finally:
            browser.close()
            if redis is not None:
                redis.terminate()
                redis.wait(10)
