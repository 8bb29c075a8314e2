"""The console's numbers in Chromium: the Config page fits a 1400 px window with three and
with five nodes, the Overview shows one applied version per node, reload after reload
and after a live refresh, while a broker keeps registering, and it explains the demo
brokers' short heartbeat timings where a demo broker is shown."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster.demo import DemoBroker, register_request, topic_table
from localcluster.launcher import accepts_connections, asgi_server_argv, free_port
from namesrv_app.web.units import DEMO_TIMEOUT_MS, demo_timing_note
from remoting.blocking import BlockingClient
from remoting.model import DataVersion
from tests.browser.conftest import (
    OPERATOR,
    OPERATOR_PASSWORD,
    REPO_ROOT,
    START_TIMEOUT_S,
    ConsoleNode,
    log_in,
    screenshot,
    settle,
)
from tests.waiting import wait_until
from tests.web.conftest import BROKERS, CLUSTER, TOPICS

pytestmark = pytest.mark.slow

VIEWPORT = {"width": 1400, "height": 900}
NODE_COUNTS = (3, 5)
RELOADS = 6
LIVE_TIMEOUT_MS = 15_000
STOP_TIMEOUT_S = 20
APPLIED_VERSIONS_JS = """() => {
  const seen = {};
  for (const el of document.querySelectorAll("[data-applied-version]")) {
    (seen[el.dataset.node] = seen[el.dataset.node] || []).push(el.dataset.appliedVersion);
  }
  return seen;
}"""
CONFIG_LAYOUT_JS = """() => {
  const box = el => el.getBoundingClientRect();
  const table = box(document.getElementById("config-table"));
  const heads = [...document.querySelectorAll("#config-table thead th")];
  const last = box(heads[heads.length - 1]);
  const cells = [...document.querySelectorAll("#config-table tbody tr td:last-child")];
  return {
    columns: heads.length,
    lastLeft: last.left,
    lastRight: last.right,
    cellsRight: Math.max(...cells.map(c => box(c).right)),
    tableBottom: table.bottom,
    eventsTop: box(document.getElementById("events")).top,
    scrollWidth: document.documentElement.scrollWidth,
    viewport: window.innerWidth,
  };
}"""


@pytest.fixture
def cluster_file(tmp_path: Path) -> Path:
    """The cluster file a second web process reads its members from (re-read per page)."""
    return tmp_path / "cluster.json"


def _members(node: ConsoleNode, count: int) -> dict[str, Any]:
    """``count`` members, every one answered by the session's gateway (its real config)."""
    return {
        "nodes": [
            {
                "id": f"n{i + 1}",
                "host": "127.0.0.1",
                "remoting_port": node.gateway.port,
                "internal_port": node.gateway.internal_port,
            }
            for i in range(count)
        ]
    }


@pytest.fixture
def wide_console(console_node: ConsoleNode, cluster_file: Path, tmp_path: Path) -> Iterator[str]:
    """A web process of the same node whose cluster file lists several members."""
    cluster_file.write_text(json.dumps(_members(console_node, NODE_COUNTS[0])))
    port = free_port()
    env = {**console_node.env, "NAMESRV_CLUSTER_FILE": str(cluster_file)}
    with (tmp_path / "web.log").open("ab") as log:
        proc = subprocess.Popen(
            asgi_server_argv("127.0.0.1", port, workers=1),
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=log,
        )
    try:
        wait_until(lambda: accepts_connections(port), what="web", timeout_s=START_TIMEOUT_S)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(STOP_TIMEOUT_S)


def test_the_config_page_fits_a_1400_px_window_with_three_and_five_nodes(
    browser: Any, console_node: ConsoleNode, wide_console: str, cluster_file: Path
) -> None:
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = log_in(context.new_page(), wide_console, OPERATOR, OPERATOR_PASSWORD)
        for count in NODE_COUNTS:
            cluster_file.write_text(json.dumps(_members(console_node, count)))
            page.goto(f"{wide_console}/config/")
            assert "the same on every node" in page.inner_text("h1")
            layout = page.evaluate(CONFIG_LAYOUT_JS)
            assert layout["columns"] == count + 1, layout
            assert layout["viewport"] == VIEWPORT["width"]
            # The rightmost node's column and every cell of it inside the window, no
            # horizontal scrolling, and the Live panel below the table, not over it.
            assert layout["lastLeft"] < layout["lastRight"] <= VIEWPORT["width"], layout
            assert layout["cellsRight"] <= VIEWPORT["width"], layout
            assert layout["scrollWidth"] <= VIEWPORT["width"], layout
            assert layout["eventsTop"] >= layout["tableBottom"], layout
            assert page.locator(".key-note.refused").count() > 0
            settle()
            screenshot(page, "config.png" if count == 3 else f"config-{count}-nodes.png")
    finally:
        context.close()


def _keep_registering(node: ConsoleNode, stop: threading.Event) -> None:
    """broker-a's master registers again and again, so applied versions keep moving."""
    while not stop.is_set():
        assert node.gateway.register(BROKERS[0], TOPICS) == 0


def _one_version_per_node(page: Any) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = page.evaluate(APPLIED_VERSIONS_JS)
    assert seen, "no applied version on the page"
    for node_id, versions in seen.items():
        assert len(set(versions)) == 1, (node_id, versions)
    return seen


def test_the_overview_shows_one_applied_version_per_node_while_versions_move(
    page: Any, console_node: ConsoleNode
) -> None:
    stop = threading.Event()
    writer = threading.Thread(target=_keep_registering, args=(console_node, stop), daemon=True)
    writer.start()
    try:
        versions = []
        for _ in range(RELOADS):
            page.goto(f"{console_node.url}/")
            seen = _one_version_per_node(page)
            assert len(seen["n1"]) == 2  # the card and the nodes table
            versions.append(int(seen["n1"][0]))
        assert versions[-1] > versions[0]  # the versions did move under the reloads
        page.wait_for_function(
            "window.namesrvLive && window.namesrvLive.connected", timeout=LIVE_TIMEOUT_MS
        )
        page.evaluate("delete document.body.dataset.refreshed")
        page.wait_for_function("document.body.dataset.refreshed", timeout=LIVE_TIMEOUT_MS)
        _one_version_per_node(page)
    finally:
        stop.set()
        writer.join()


def test_the_overview_explains_the_demo_brokers_timings(
    page: Any, console_node: ConsoleNode
) -> None:
    """A broker registered with the demo fleet's 3 s timeout: the Overview says what the
    demo timings are against RocketMQ's defaults. Its connection closes at the end, which
    unregisters it (eventual mode), so the other tests see the usual cast."""
    broker = DemoBroker(CLUSTER, "broker-demo", 0, "127.0.0.1:10991", "127.0.0.1:10992")
    request = register_request(
        broker,
        topic_table(("DemoTimingTopic", broker.broker_name)),
        DataVersion(timestamp=1, counter=1),
        heartbeat_timeout_ms=DEMO_TIMEOUT_MS,
    )
    with BlockingClient(console_node.gateway.addr, timeout_s=5.0) as client:
        assert client.invoke(request).code == 0

        def note_shown() -> bool:
            page.goto(f"{console_node.url}/")
            return bool(page.locator("#heartbeat-timing-note").count())

        wait_until(note_shown, what="the demo timing note", timeout_s=LIVE_TIMEOUT_MS / 1000)
        assert page.inner_text("#heartbeat-timing-note") == demo_timing_note([DEMO_TIMEOUT_MS])
        screenshot(page, "overview-demo-timings.png")
