"""With DEBUG off the console answers errors with its own plain pages, never a traceback."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from tests.web.conftest import log_in

DEBUG_MARKERS = ("Traceback", "URLconf", "DEBUG = True", "technical_500", "settings.py")


def assert_plain(html: str) -> None:
    """The console's look and no debugging detail."""
    assert 'href="/static/namesrv/console.css"' in html and 'id="error-page"' in html
    assert not any(marker in html for marker in DEBUG_MARKERS)


def test_an_unknown_page_is_the_consoles_plain_404(db: Any) -> None:
    response = Client().get("/no-such-page/<b>x</b>")
    html = response.content.decode()
    assert response.status_code == 404
    assert response.templates[0].name == "404.html"
    assert "Not found" in html and "<b>x</b>" not in html
    assert_plain(html)


def test_a_server_error_is_the_consoles_plain_500(viewer: User, settings: Any) -> None:
    settings.NAMESRV_WEB = {**settings.NAMESRV_WEB, "PAGE_SIZE": "not a number"}
    client = Client(raise_request_exception=False)
    assert log_in(client, "vera")
    response = client.get("/topics/")
    html = response.content.decode()
    assert response.status_code == 500
    assert "Server error" in html and "not a number" not in html
    assert_plain(html)


def test_a_missing_role_is_the_consoles_plain_403(nobody: User) -> None:
    client = Client()
    assert log_in(client, "nobody")
    response = client.get("/")
    html = response.content.decode()
    assert response.status_code == 403
    assert "this page needs a console role" in html
    assert_plain(html)
