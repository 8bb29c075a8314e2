"""The console in headless Chromium: log in, browse, create a topic, watch a live update."""

from __future__ import annotations

from typing import Any

import pytest

from localcluster.demo import DemoBroker
from tests.browser.conftest import ConsoleNode, screenshot, settle
from tests.web.conftest import CLUSTER

pytestmark = pytest.mark.slow
LIVE_TIMEOUT_MS = 15_000


def test_the_overview_shows_the_node_and_the_live_brokers(
    page: Any, console_node: ConsoleNode
) -> None:
    page.wait_for_function(
        "window.namesrvLive && window.namesrvLive.connected", timeout=LIVE_TIMEOUT_MS
    )
    assert "nodes agree" in page.inner_text("h1")
    assert "eventual" in page.inner_text("#nodes-table")
    assert page.inner_text("#topic-count") == "2"
    screenshot(page, "overview.png")


def test_the_topology_lists_every_replica_with_its_role(
    page: Any, console_node: ConsoleNode
) -> None:
    page.click("text=Topology")
    table = page.inner_text("#replica-table")
    for addr in ("127.0.0.1:10911", "127.0.0.1:10921", "127.0.0.1:10931", "127.0.0.1:10941"):
        assert addr in table
    assert table.count("master") == 2 and table.count("slave") == 2
    assert page.locator("svg.topology circle.alive").count() == 4
    screenshot(page, "topology.png")


def test_a_topic_created_through_the_form_shows_in_the_route_view(
    page: Any, console_node: ConsoleNode
) -> None:
    page.goto(f"{console_node.url}/ops/register-topic/")
    page.fill("input[name=topic]", "BrowserTopic")
    page.select_option("select[name=brokers]", ["broker-a", "broker-b"])
    page.fill("input[name=read_queue_nums]", "6")
    page.fill("input[name=write_queue_nums]", "6")
    # This node's brokers are simulated registrations, not broker processes, so the
    # advanced NameServer-only method (the default asks the brokers to create it).
    page.check("input[name=method][value=namesrv]")
    page.click("button[type=submit]")
    assert "Registered topic BrowserTopic" in page.inner_text("#operation-result")
    page.goto(f"{console_node.url}/topics/BrowserTopic/")
    queues = page.inner_text("#queue-datas")
    assert "broker-a" in queues and "broker-b" in queues and "6" in queues
    assert "all nodes agree" in page.inner_text("h1")
    screenshot(page, "topic.png")


def test_a_broker_registering_appears_live_without_a_reload(
    page: Any, console_node: ConsoleNode
) -> None:
    page.wait_for_function(
        "window.namesrvLive && window.namesrvLive.connected", timeout=LIVE_TIMEOUT_MS
    )
    page.evaluate("window.loadedMarker = 'same page'")
    topics_before = int(page.inner_text("#topic-count"))
    newcomer = DemoBroker(CLUSTER, "broker-c", 0, "127.0.0.1:10951", "127.0.0.1:10952")
    assert console_node.gateway.register(newcomer, ("LiveTopic", "LiveOrders")) == 0
    page.wait_for_selector("#event-list li:has-text('broker-c')", timeout=LIVE_TIMEOUT_MS)
    page.wait_for_function("document.body.dataset.refreshed", timeout=LIVE_TIMEOUT_MS)
    settle()
    assert page.evaluate("window.loadedMarker") == "same page"
    assert int(page.inner_text("#topic-count")) == topics_before + 2
    screenshot(page, "live.png")
