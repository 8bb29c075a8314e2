"""The OpenAPI schema and its docs need a console role unless NAMESRV_WEB_PUBLIC_API_DOCS."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.web.conftest import token_client

SCHEMAS = ("/api/schema/", "/api/v1/schema/")
DOCS = "/api/v1/docs/"


def session(user: User) -> Client:
    """A browser logged in as ``user``."""
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("url", SCHEMAS)
def test_an_anonymous_caller_gets_no_schema(db: Any, url: str) -> None:
    response = Client().get(url)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_an_anonymous_browser_is_sent_from_the_docs_to_the_login_page(db: Any) -> None:
    response = Client().get(DOCS)
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/api/v1/docs/"


def test_a_user_without_a_console_role_is_refused(nobody: User) -> None:
    for url in (*SCHEMAS, DOCS):
        assert session(nobody).get(url).status_code == 403, url


def test_a_viewer_reads_the_schema_and_the_docs(viewer: User) -> None:
    for url in SCHEMAS:
        assert token_client(viewer).get(url, {"format": "json"}).status_code == 200, url
        assert session(viewer).get(url).status_code == 200, url
    docs = session(viewer).get(DOCS)
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()


def test_the_setting_opens_schema_and_docs_to_anyone(db: Any, settings: Any) -> None:
    settings.NAMESRV_WEB = {**settings.NAMESRV_WEB, "PUBLIC_API_DOCS": True}
    for url in (*SCHEMAS, DOCS):
        assert Client().get(url).status_code == 200, url
    assert Client().get("/api/v1/topics/").status_code == 401  # only the docs opened
