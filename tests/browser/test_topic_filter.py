"""The Topics page's type filter and the calm live view, in headless Chromium."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from localcluster.demo import DemoBroker
from tests.browser.conftest import ConsoleNode, screenshot, settle
from tests.waiting import wait_until
from tests.web.conftest import BROKERS, CLUSTER, TOPICS

pytestmark = pytest.mark.slow
LIVE_TIMEOUT_MS = 15_000
SYSTEM_BROKER = DemoBroker(CLUSTER, "broker-s", 0, "127.0.0.1:10961", "127.0.0.1:10962")
# What a real broker registers next to the users' topics, plus a group's retry and DLQ.
SYSTEM_TOPICS = ("TBW102", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", CLUSTER, "broker-s")
GROUP_TOPICS = ("%RETRY%demo-group", "%DLQ%demo-group")
PROJECTION_WAIT_S = 10.0
HEARTBEATS = 3
HEARTBEAT_GAP_S = 1.2
"""Longer than the projection's liveness linger (1 s): one event per heartbeat."""


@pytest.fixture
def system_broker(console_node: ConsoleNode) -> Iterator[DemoBroker]:
    """broker-s with system, retry and DLQ topics; unregistered afterwards (in eventual
    mode a broker's closed connection unregisters it), so later tests see the cast only."""
    assert console_node.gateway.register(SYSTEM_BROKER, SYSTEM_TOPICS + GROUP_TOPICS) == 0
    try:
        yield SYSTEM_BROKER
    finally:
        client = console_node.gateway.broker_clients.pop(SYSTEM_BROKER.addr, None)
        if client is not None:
            client.close()


def _types_listed(page: Any) -> dict[str, str]:
    rows = page.locator("#topic-table tbody tr")
    listed = {}
    for i in range(rows.count()):
        cells = rows.nth(i).locator("td")
        if cells.count() > 1:
            listed[cells.nth(0).inner_text()] = cells.nth(1).inner_text()
    return listed


def test_the_topics_page_hides_system_topics_unless_asked(
    page: Any, console_node: ConsoleNode, system_broker: DemoBroker
) -> None:
    # The page reads the projection, which may write broker-s's topics (and the cast's,
    # registered again by the page fixture after a long test let them expire) a moment
    # after the gateway answered the registration: load it until they are there.
    listed: dict[str, str] = {}

    def cast_listed() -> bool:
        page.goto(f"{console_node.url}/topics/")
        listed.clear()
        listed.update(_types_listed(page))
        return {"TopicTest", *GROUP_TOPICS} <= set(listed)

    wait_until(
        cast_listed,
        what=lambda: f"the cast's topics on the page (listed: {sorted(listed)})",
        timeout_s=PROJECTION_WAIT_S,
        interval_s=0.3,
    )
    assert listed["TopicTest"] == "NORMAL"
    assert listed["%RETRY%demo-group"] == "RETRY" and listed["%DLQ%demo-group"] == "DLQ"
    assert not set(SYSTEM_TOPICS) & set(listed)
    assert page.locator("#type-filter").input_value() == "user"
    note = page.locator("#hidden-system")
    assert note.is_visible()
    hidden = int(page.inner_text("#hidden-system-count"))
    assert hidden >= len(SYSTEM_TOPICS) and "system topics hidden" in note.inner_text()
    per_broker = page.locator("#topic-table tr:has(a:text-is('TopicTest')) td.per-broker")
    assert "broker-a: 4 read / 4 write" in per_broker.inner_text()
    assert "total read queues" in page.inner_text("#topic-table thead")
    screenshot(page, "topics.png")

    page.select_option("#type-filter", "system")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**type=system**")
    system = _types_listed(page)
    assert set(SYSTEM_TOPICS) <= set(system) and set(system.values()) == {"SYSTEM"}
    assert len(system) == hidden
    assert not page.locator("#hidden-system").is_visible()

    page.select_option("#type-filter", "all")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**type=all**")
    assert set(SYSTEM_TOPICS + GROUP_TOPICS + TOPICS) <= set(_types_listed(page))


def test_heartbeats_fold_into_one_line_and_changes_stand_out(
    page: Any, console_node: ConsoleNode
) -> None:
    page.wait_for_function(
        "window.namesrvLive && window.namesrvLive.connected", timeout=LIVE_TIMEOUT_MS
    )
    newcomer = DemoBroker(CLUSTER, "broker-h", 0, "127.0.0.1:10971", "127.0.0.1:10972")
    assert console_node.gateway.register(newcomer, ("HeartbeatTopic", "HeartbeatOrders")) == 0
    try:
        registration = page.locator("#event-list li.notable:has-text('broker-h')")
        registration.first.wait_for(timeout=LIVE_TIMEOUT_MS)
        before = page.evaluate("window.namesrvLive.heartbeats")
        for _ in range(HEARTBEATS):
            # A known broker re-registering unchanged: only its live entry moves.
            assert console_node.gateway.register(BROKERS[0], TOPICS) == 0
            time.sleep(HEARTBEAT_GAP_S)
        page.wait_for_function(
            f"window.namesrvLive.heartbeats >= {before + 2}", timeout=LIVE_TIMEOUT_MS
        )
        settle()
        lines = page.locator("#event-list li.liveness")
        # The heartbeats since the newest other line are one line, and nowhere do two
        # heartbeat lines touch. (A heartbeat line may stand further down, from before
        # the registration: on a loaded machine an earlier liveness batch can arrive late.)
        kinds = page.eval_on_selector_all(
            "#event-list li", "items => items.map(li => li.classList.contains('liveness'))"
        )
        newest_other = kinds.index(False) if False in kinds else len(kinds)
        assert newest_other == 1, kinds
        assert not any(a and b for a, b in itertools.pairwise(kinds)), kinds
        assert "brokers heartbeating on n1" in lines.first.inner_text()
        assert page.locator("#event-list li:has-text('changed on n1: liveness')").count() == 0
        assert "notable" not in (lines.first.get_attribute("class") or "")
        assert page.locator("#event-list li").first.get_attribute("class") == "event liveness"
    finally:
        client = console_node.gateway.broker_clients.pop(newcomer.addr, None)
        if client is not None:
            client.close()
