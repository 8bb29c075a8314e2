"""The static files through the web process's own stack (namesrv_app.web.static_files).

The suite's own Django serves them from the apps' folders under their plain names
(tests/conftest.py); the hashed, compressed copies a launched node collects are
tested against a real cluster (tests/integration/test_cluster_lifecycle.py).
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import pytest
from django.core.handlers.asgi import ASGIHandler
from django.test import Client

from tests.web.asgi import asgi_answer, asgi_scope

CSS_PATH = "/static/namesrv/console.css"
CSS_FILE = Path(__file__).resolve().parents[2] / "namesrv_app/static/namesrv/console.css"


async def asgi_get(path: str) -> tuple[int, dict[bytes, bytes], bytes]:
    """One GET through ``namesrv_site.asgi.application`` (what uvicorn serves)."""
    from namesrv_site.asgi import application

    status, headers, body = await asgi_answer(application, asgi_scope(path, []))
    return status, {name.lower(): value for name, value in headers}, body


@pytest.mark.django_db
async def test_the_async_lane_serves_a_static_file_with_its_type_and_the_security_headers() -> None:
    with warnings.catch_warnings():
        # Django warns when an async response has to drain a sync iterator.
        warnings.simplefilter("error")
        status, headers, body = await asgi_get(CSS_PATH)

    assert status == 200
    assert headers[b"content-type"].startswith(b"text/css")
    assert body == CSS_FILE.read_bytes()
    assert headers[b"content-length"] == str(len(body)).encode()
    # Served below SecurityMiddleware, so it carries the headers every answer carries.
    assert headers[b"x-content-type-options"] == b"nosniff"
    assert b"max-age" in headers[b"cache-control"]


@pytest.mark.django_db
async def test_a_path_that_is_no_static_file_goes_on_to_the_pages() -> None:
    status, _headers, body = await asgi_get("/healthz")

    assert (status, body) == (200, b"ok\n")


def test_the_sync_lane_serves_the_same_file(client: Client) -> None:
    answer = client.get(CSS_PATH)

    assert answer.status_code == 200
    assert answer["Content-Type"].startswith("text/css")
    assert b"".join(answer.streaming_content) == CSS_FILE.read_bytes()  # type: ignore[attr-defined]


def test_no_middleware_is_adapted_off_the_async_lane(
    settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Django logs every adapter it puts around a middleware (when DEBUG is on): each
    # would cost every request two thread hops under uvicorn.
    settings.DEBUG = True
    with caplog.at_level(logging.DEBUG, logger="django.request"):
        ASGIHandler()

    adapted = [r.getMessage() for r in caplog.records if "adapted" in r.getMessage()]
    assert adapted == []
