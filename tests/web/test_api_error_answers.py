"""Every answer under /api/ is JSON with its status; the console keeps its HTML pages."""

from __future__ import annotations

from typing import Any

from django.test import AsyncClient, Client
from rest_framework.test import APIClient

from tests.web.conftest import log_in

JSON_TYPE = "application/json"


def json_of(response: Any) -> dict[str, Any]:
    """The answer's JSON body, after checking it says it is JSON."""
    assert response["Content-Type"].startswith(JSON_TYPE), response["Content-Type"]
    body: dict[str, Any] = response.json()
    return body


def test_a_path_no_api_url_matches_is_a_json_404(viewer_api: APIClient) -> None:
    response = viewer_api.get("/api/v1/routes/A%2FB/")

    assert response.status_code == 404
    assert json_of(response)["detail"].startswith("No API endpoint at /api/v1/routes/A/B/")


def test_a_read_without_its_trailing_slash_is_a_json_301_naming_the_url(
    viewer_api: APIClient,
) -> None:
    response = viewer_api.get("/api/v1/routes/TopicTest?fresh=1")

    assert response.status_code == 301
    assert response["Location"] == "/api/v1/routes/TopicTest/?fresh=1"
    assert json_of(response)["location"] == "/api/v1/routes/TopicTest/?fresh=1"


def test_a_write_without_its_trailing_slash_is_a_308_that_keeps_method_and_body(
    operator_api: APIClient,
) -> None:
    response = operator_api.post("/api/v1/kv", {"namespace": "n", "key": "k"}, format="json")

    assert response.status_code == 308
    assert response["Location"] == "/api/v1/kv/"
    assert "/api/v1/kv/" in json_of(response)["detail"]


def test_a_method_the_endpoint_does_not_take_is_a_json_405(
    operator_api: APIClient,
) -> None:
    response = operator_api.put("/api/v1/topics/", {}, format="json")

    assert response.status_code == 405
    assert "PUT" in json_of(response)["detail"]


def test_a_server_error_under_the_api_is_a_json_500_without_its_cause(
    viewer: Any, settings: Any
) -> None:
    settings.NAMESRV_WEB = {**settings.NAMESRV_WEB, "PEER_TIMEOUT_S": "not a number"}
    client = Client(raise_request_exception=False)
    assert log_in(client, "vera")

    response = client.get("/api/v1/nodes/")

    assert response.status_code == 500
    detail = json_of(response)["detail"]
    assert detail.startswith("Server error") and "not a number" not in detail


def test_the_console_keeps_its_html_404_and_its_slash_redirect(viewer: Any) -> None:
    client = Client()
    assert log_in(client, "vera")

    missing = client.get("/no-such-page/")
    moved = client.get("/topics")

    assert missing.status_code == 404 and missing["Content-Type"].startswith("text/html")
    assert missing.templates[0].name == "404.html"
    assert moved.status_code == 301 and moved["Location"] == "/topics/"


async def test_the_async_stack_a_node_serves_answers_in_json_too(db: Any) -> None:
    # uvicorn runs the middleware's async lane; the test Client above runs the sync one.
    client = AsyncClient()

    missing = await client.get("/api/v1/no-such-endpoint/")
    moved = await client.delete("/api/v1/topics/TopicTest")

    assert missing.status_code == 404 and "No API endpoint" in json_of(missing)["detail"]
    assert moved.status_code == 308 and moved["Location"] == "/api/v1/topics/TopicTest/"
