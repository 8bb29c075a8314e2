"""/healthz and /readyz against a real gateway, and with none."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.web.conftest import RunningGateway

UNREACHABLE = {"NODE_ID": "n1", "PORT": 1, "INTERNAL_PORT": 1, "INTERNAL_SECRET": "x"}


@pytest.mark.django_db
def test_healthz_answers_anyone_even_without_a_gateway(settings: Any) -> None:
    settings.NAMESRV = UNREACHABLE
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.content == b"ok\n"
    assert "no-cache" in response["Cache-Control"]


@pytest.mark.django_db
def test_readyz_is_503_with_the_reason_when_the_gateway_is_gone(settings: Any) -> None:
    settings.NAMESRV = UNREACHABLE
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.content == b"not ready: the gateway does not answer\n"


@pytest.mark.django_db
def test_readyz_is_200_when_the_eventual_gateway_answers(wired: RunningGateway) -> None:
    response = Client().get("/readyz")
    assert response.status_code == 200
    assert response.content == b"ready\n"


@pytest.mark.django_db
def test_probes_take_no_writes(settings: Any) -> None:
    settings.NAMESRV = UNREACHABLE
    assert Client().post("/healthz").status_code == 405
