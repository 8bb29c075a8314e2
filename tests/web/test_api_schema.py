"""The OpenAPI schema is served, and the API honours it under generated input (schemathesis)."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test import Client
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import (
    response_schema_conformance,
    status_code_conformance,
)

from namesrv_app.models import ApiToken
from namesrv_app.tokens import issue_token
from tests.web.conftest import RunningGateway, make_user, project_cast

EXAMPLES_PER_OPERATION = 3
OPERATOR_KEY: list[str] = []
"""The key of the operator token made by the first example of a test."""


def test_the_schema_and_its_browsable_docs_are_served_to_a_viewer(viewer: Any) -> None:
    client = Client()
    client.force_login(viewer)
    schema = client.get("/api/v1/schema/?format=json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/v1/routes/{topic}/" in paths
    assert "post" in paths["/api/v1/topics/"]
    assert "tokenAuth" in schema.json()["components"]["securitySchemes"]
    assert client.get("/api/v1/docs/").status_code == 200


@pytest.fixture
def api_schema(settings: Any) -> Any:
    """The served schema, loaded by schemathesis against the in-process WSGI app
    (opened to anonymous readers for the load: schemathesis fetches it without a token)."""
    settings.NAMESRV_WEB = {**settings.NAMESRV_WEB, "PUBLIC_API_DOCS": True}
    return schemathesis.openapi.from_wsgi("/api/v1/schema/?format=json", get_wsgi_application())


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck)
)
@pytest.mark.django_db
def test_the_api_never_fails_with_a_server_error(
    case: Any, settings: Any, gateway: RunningGateway
) -> None:
    from tests.web.conftest import node_settings

    settings.NAMESRV = node_settings(gateway)
    if not ApiToken.objects.exists():
        # The first example of this test's transaction: the cast and an operator's token
        # (only its hash is stored, so the key is kept here for the next examples).
        project_cast()
        OPERATOR_KEY[:] = [issue_token(make_user("schema-operator", "operator"))[0]]
    response = case.call(headers={"Authorization": f"Token {OPERATOR_KEY[0]}"})
    assert response.status_code < 500 or response.status_code in (502, 503), (
        case.method,
        case.path,
        response.status_code,
        response.text[:300],
    )
    case.validate_response(response, checks=[status_code_conformance, response_schema_conformance])


def test_a_broken_multipart_body_is_refused_and_415_is_documented(
    operator_api: Any, viewer: Any
) -> None:
    """A write whose multipart body is broken is refused (400 or, when DRF cannot tell the
    media type at all, 415: schemathesis found that one), and every status a write can
    answer is in the schema."""
    answer = operator_api.generic(
        "POST",
        "/api/v1/namesrv-config/",
        b"--x\r\n\xf1garbage--x--\r\n",
        content_type="multipart/form-data; boundary=",
    )
    assert answer.status_code in (400, 415)
    client = Client()
    client.force_login(viewer)
    documented = client.get("/api/v1/schema/?format=json").json()
    for path, verbs in (
        ("/api/v1/namesrv-config/", ("post",)),
        ("/api/v1/topics/", ("post",)),
        ("/api/v1/kv/", ("post", "delete")),
    ):
        for verb in verbs:
            assert "415" in documented["paths"][path][verb]["responses"], (path, verb)
