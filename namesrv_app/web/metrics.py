"""Prometheus metrics of the web process: ``/metrics`` and the request-counting middleware.

* :class:`RequestMetricsMiddleware` counts every request Django handles by view
  name (the URL pattern's name, so the label set is bounded by the URL conf;
  ``unresolved`` for 404s and answers middleware gave before URL resolution) and
  status, and times it per view. It belongs first in the settings' base
  MIDDLEWARE. The route reads ``namesrv_app/api/route_reads.py`` answers beside
  Django never reach it and are not counted here.
* :func:`metrics_view` renders the metrics. With ``PROMETHEUS_MULTIPROC_DIR`` set
  (several uvicorn workers), it merges every worker's files through
  ``MultiProcessCollector`` (prometheus_client's multiprocess mode: the directory
  must exist and be emptied before the workers start); otherwise it renders this
  process's default registry (with the process and GC collectors).

``/metrics`` is not for anyone who reaches the web port (docs/SECURITY.md): it
answers a peer on loopback that came directly (no ``Forwarded``/``X-Forwarded-For``
/``X-Real-IP`` header, so a proxy on the same host does not make the world
local), or a user with a session or an API token who is active and staff, a
superuser, or holds a console role. Anyone else gets 401 (no credentials) or 403.
"""

from __future__ import annotations

import ipaddress
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, multiprocess
from prometheus_client.exposition import choose_encoder
from rest_framework.exceptions import AuthenticationFailed

from gateway.metric_families import LATENCY_BUCKETS_S
from namesrv_app.roles import is_viewer
from namesrv_app.tokens import authenticate_token

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
UNRESOLVED_VIEW = "unresolved"
FORWARDING_HEADERS = ("HTTP_FORWARDED", "HTTP_X_FORWARDED_FOR", "HTTP_X_REAL_IP")
TOKEN_KEYWORD = "token"
# The gateway's bounds from a millisecond up: a request through Django's middleware
# takes at least that, so the finer bounds would only be empty buckets.
WEB_LATENCY_BUCKETS_S = tuple(bound for bound in LATENCY_BUCKETS_S if bound >= 0.001)

WEB_REQUESTS = Counter(
    "namesrv_web_requests",
    "Requests the web process handled, by view name and status.",
    ["view", "status"],
)
WEB_REQUEST_SECONDS = Histogram(
    "namesrv_web_request_seconds",
    "Time Django took to answer, by view name.",
    ["view"],
    buckets=WEB_LATENCY_BUCKETS_S,
)


def view_name(request: HttpRequest) -> str:
    """The resolved view's name (``namespace:name``; Django puts the view's dotted path
    there when the pattern has no name)."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return UNRESOLVED_VIEW
    return str(match.view_name)


def record(request: HttpRequest, response: HttpResponseBase, started: float) -> None:
    """Count and time one answered request."""
    view = view_name(request)
    WEB_REQUESTS.labels(view, str(response.status_code)).inc()
    WEB_REQUEST_SECONDS.labels(view).observe(time.perf_counter() - started)


class RequestMetricsMiddleware:
    """Counts requests by view and status (sync and async: no thread hop under ASGI)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self._is_async = iscoroutinefunction(get_response)
        if self._is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self._is_async:
            return self._acall(request)
        started = time.perf_counter()
        response: HttpResponseBase = self.get_response(request)
        record(request, response, started)
        return response

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        pending: Awaitable[HttpResponseBase] = self.get_response(request)
        response = await pending
        record(request, response, started)
        return response


def registry() -> CollectorRegistry:
    """What ``/metrics`` renders: every worker's files in multiprocess mode, else this
    process's default registry."""
    if os.environ.get(MULTIPROC_ENV):
        merged = CollectorRegistry()
        multiprocess.MultiProcessCollector(merged)  # type: ignore[no-untyped-call]
        return merged
    return REGISTRY


def is_direct_loopback(request: HttpRequest) -> bool:
    """True when the peer is on loopback and no proxy forwarded the request."""
    if any(request.META.get(header) for header in FORWARDING_HEADERS):
        return False
    try:
        return ipaddress.ip_address(str(request.META.get("REMOTE_ADDR", ""))).is_loopback
    except ValueError:
        return False


def may_read_metrics(user: Any) -> bool:
    """An active user who is staff, a superuser or holds a console role."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    return bool(user.is_staff) or is_viewer(user)


def _token_user(request: HttpRequest) -> Any:
    """The user of an ``Authorization: Token <key>`` header (None without one);
    AuthenticationFailed for a malformed, unknown or expired token or an inactive user."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    keyword, _, key = header.partition(" ")
    if keyword.lower() != TOKEN_KEYWORD:
        return None
    if not key.strip() or " " in key.strip():
        raise AuthenticationFailed("malformed token header")
    user, _token = authenticate_token(key.strip())
    return user


def _plain(text: str, status: int) -> HttpResponse:
    return HttpResponse(f"{text}\n", status=status, content_type="text/plain; charset=utf-8")


@never_cache
@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus exposition, for loopback peers and permitted users (see above)."""
    if not is_direct_loopback(request):
        try:
            user = _token_user(request)
        except AuthenticationFailed as exc:
            # The reason, as the API gives it: unknown, expired, or an inactive user.
            return _plain(f"invalid token: {exc.detail}", 401)
        if user is None:
            user = getattr(request, "user", None)
        if not may_read_metrics(user):
            if user is None or not user.is_authenticated:
                response = _plain("metrics need a loopback peer, a session or a token", 401)
                response["WWW-Authenticate"] = "Token"
                return response
            return _plain("metrics need a staff user or a console role", 403)
    encoder, content_type = choose_encoder(request.META.get("HTTP_ACCEPT", ""))
    return HttpResponse(encoder(registry()), content_type=content_type)
