"""``/metrics`` of the web process: who may read it, what it counts, multiprocess mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import iscoroutinefunction
from django.contrib.auth.models import User
from django.test import AsyncClient, Client
from prometheus_client import Counter, values
from prometheus_client.parser import text_string_to_metric_families

from namesrv_app.web import metrics
from tests.web.conftest import log_in, make_user, token_client

MIDDLEWARE_PATH = "namesrv_app.web.metrics.RequestMetricsMiddleware"
REMOTE = "10.1.2.3"


@pytest.fixture
def counting(settings: Any) -> None:
    """The request-counting middleware is installed outermost, as settings have it."""
    assert settings.MIDDLEWARE[0] == MIDDLEWARE_PATH  # first: it times everything below


def samples(body: bytes) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The exposition parsed: (sample name, labels) -> value."""
    parsed = {}
    for family in text_string_to_metric_families(body.decode("utf-8")):
        for sample in family.samples:
            parsed[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return parsed


def web_requests(body: bytes, view: str, status: str) -> float:
    """``namesrv_web_requests_total{view,status}`` in an exposition (0 when absent)."""
    key = ("namesrv_web_requests_total", frozenset({("view", view), ("status", status)}))
    return samples(body).get(key, 0.0)


# ------------------------------------------------------------------ who may read


@pytest.mark.django_db
def test_a_loopback_peer_reads_metrics_without_a_login() -> None:
    response = Client().get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert "no-cache" in response["Cache-Control"]
    assert b"python_gc_objects_collected_total" in response.content


@pytest.mark.django_db
def test_an_anonymous_remote_peer_is_refused() -> None:
    response = Client(REMOTE_ADDR=REMOTE).get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert b"namesrv" not in response.content


@pytest.mark.django_db
@pytest.mark.parametrize("header", ["HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP"])
def test_a_request_a_proxy_forwarded_from_loopback_is_not_local(header: str) -> None:
    response = Client(**{header: "203.0.113.9"}).get("/metrics")
    assert response.status_code == 401


@pytest.mark.django_db
def test_remote_users_need_staff_or_a_console_role(viewer: User, nobody: User) -> None:
    assert token_client(viewer).get("/metrics", REMOTE_ADDR=REMOTE).status_code == 200
    assert token_client(nobody).get("/metrics", REMOTE_ADDR=REMOTE).status_code == 403
    staff = make_user("stella", None)
    staff.is_staff = True
    staff.save()
    assert token_client(staff).get("/metrics", REMOTE_ADDR=REMOTE).status_code == 200
    viewer.is_active = False
    viewer.save()
    assert token_client(viewer).get("/metrics", REMOTE_ADDR=REMOTE).status_code == 401


@pytest.mark.django_db
def test_a_bad_token_is_refused_even_with_a_session(viewer: User) -> None:
    client = Client(REMOTE_ADDR=REMOTE)
    assert log_in(client, viewer.username)
    assert client.get("/metrics").status_code == 200
    refused = client.get("/metrics", HTTP_AUTHORIZATION="Token not-a-real-token")
    assert refused.status_code == 401


@pytest.mark.django_db
def test_a_logged_in_user_without_a_role_is_forbidden(nobody: User) -> None:
    client = Client(REMOTE_ADDR=REMOTE)
    assert log_in(client, nobody.username)
    assert client.get("/metrics").status_code == 403


@pytest.mark.django_db
def test_metrics_take_no_writes() -> None:
    assert Client().post("/metrics").status_code == 405


@pytest.mark.django_db
def test_openmetrics_is_served_when_asked_for() -> None:
    response = Client().get("/metrics", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.endswith(b"# EOF\n")


# ------------------------------------------------------------------ counting


@pytest.mark.django_db
def test_the_middleware_counts_requests_by_view_and_status(counting: None) -> None:
    client = Client()
    before = client.get("/metrics").content
    client.get("/healthz")
    client.get("/healthz")
    client.post("/healthz")
    client.get("/no/such/page/")
    after = client.get("/metrics").content

    assert web_requests(after, "healthz", "200") - web_requests(before, "healthz", "200") == 2
    assert web_requests(after, "healthz", "405") - web_requests(before, "healthz", "405") == 1
    unresolved = web_requests(after, metrics.UNRESOLVED_VIEW, "404")
    assert unresolved - web_requests(before, metrics.UNRESOLVED_VIEW, "404") == 1
    assert web_requests(after, "metrics", "200") - web_requests(before, "metrics", "200") == 1
    timed = samples(after)[("namesrv_web_request_seconds_count", frozenset({("view", "healthz")}))]
    assert timed >= 3


async def test_the_middleware_counts_on_the_async_path_too(counting: None) -> None:
    client = AsyncClient()
    before = (await client.get("/metrics")).content
    assert (await client.get("/healthz")).status_code == 200
    after = (await client.get("/metrics")).content
    assert web_requests(after, "healthz", "200") - web_requests(before, "healthz", "200") == 1


def test_the_middleware_is_async_capable_so_asgi_needs_no_thread_hop() -> None:
    async def endpoint(request: Any) -> Any:
        return None

    middleware = metrics.RequestMetricsMiddleware(endpoint)
    assert metrics.RequestMetricsMiddleware.async_capable
    assert iscoroutinefunction(middleware)


# ------------------------------------------------------------------ multiprocess mode


@pytest.mark.django_db
def test_multiprocess_mode_merges_the_workers_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(metrics.MULTIPROC_ENV, str(tmp_path))
    # A metric made as a worker makes it in multiprocess mode: its value lives in a file.
    monkeypatch.setattr(values, "ValueClass", values.MultiProcessValue(lambda: 4242))
    worker_counter = Counter("namesrv_multiprocess_probe", "A worker's counter.", registry=None)
    worker_counter.inc(3)

    assert metrics.registry() is not metrics.REGISTRY
    response = Client().get("/metrics")

    assert response.status_code == 200
    parsed = samples(response.content)
    assert parsed[("namesrv_multiprocess_probe_total", frozenset())] == 3
    # Only the files: this process's default registry (GC, process) is not rendered.
    assert not any(name.startswith("python_gc") for name, _labels in parsed)
    assert list(tmp_path.iterdir())
