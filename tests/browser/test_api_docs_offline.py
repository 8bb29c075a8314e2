"""The API docs render with no internet: Swagger UI comes from the node itself."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.browser.conftest import ConsoleNode, screenshot

pytestmark = pytest.mark.slow


def test_the_api_docs_render_with_the_network_cut(page: Any, console_node: ConsoleNode) -> None:
    node_host = urlsplit(console_node.url).netloc
    outside: list[str] = []

    def only_the_node(route: Any) -> None:
        if urlsplit(route.request.url).netloc == node_host:
            route.continue_()
        else:  # what a machine without internet would do to a CDN request
            outside.append(route.request.url)
            route.abort()

    page.context.route("**/*", only_the_node)
    page.goto(f"{console_node.url}/api/v1/docs/")
    page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)

    assert outside == []
    assert page.locator(".swagger-ui .opblock").count() > 10
    # Under the console's top bar, API marked: every page is one click away.
    assert page.locator("header.top nav a.on").inner_text() == "API"
    assert page.locator("header.top nav a", has_text="Overview").count() == 1
    screenshot(page, "api-docs.png")


def test_the_favicon_is_served(page: Any, console_node: ConsoleNode) -> None:
    answer = page.request.get(f"{console_node.url}/favicon.ico")
    assert answer.status == 200 and answer.headers["content-type"] == "image/svg+xml"
