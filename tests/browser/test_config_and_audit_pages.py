"""The Config and Audit pages in a real browser: what an operator sees after a change."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import ConsoleNode, screenshot, settle

pytestmark = pytest.mark.slow


def test_a_config_change_shows_on_the_config_and_audit_pages(
    page: Any, console_node: ConsoleNode
) -> None:
    page.goto(f"{console_node.url}/config/")
    assert "the same on every node" in page.inner_text("h1")
    assert page.locator("#config-table tbody tr").count() > 10
    before = page.inner_text("#config-table")
    assert "orderMessageEnable" in before

    page.fill("input[name=key]", "orderMessageEnable")
    page.fill("input[name=value]", "true")
    page.check("input[name=confirm]")
    page.click("form[action='/ops/namesrv-config/'] button[type=submit]")
    page.wait_for_load_state()
    assert "Set orderMessageEnable=true on n1." in page.inner_text("main")

    page.goto(f"{console_node.url}/config/")
    row = page.locator("#config-table tr", has_text="orderMessageEnable")
    assert "true" in row.inner_text()

    page.goto(f"{console_node.url}/audit/")
    first = page.locator("table.grid tbody tr").first.inner_text()
    assert "ops:namesrv-config" in first and "ok" in first
    settle()
    screenshot(page, "audit.png")
