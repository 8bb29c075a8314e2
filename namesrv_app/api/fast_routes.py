"""The fast path of ``GET /api/v1/routes/<topic>/`` (local consistency).

Producers and dashboards poll this endpoint, and through Django's full middleware
stack, token and role lookups and DRF almost all of a request's cost is thread hops
and queries that do not depend on the topic (figures: docs/BENCHMARKS.md, "Why route
reads skip Django's handler"). This module answers the common request, a token- (or
anonymously-, when allowed) authorised GET asking for JSON, without a thread hop when
it can:

* the route JSON comes from the one route-answer store
  (:class:`~gateway.route_answers.RouteAnswers`), keyed by topic and this answer
  style, versioned by the projection's ``(node_id, routes_version)``, which moves on
  every change that may alter a route answer (never on heartbeats);
* that version (:class:`~namesrv_app.web.reads.ProjectionStamp`) is re-read at most
  every ``ROUTE_VERSION_TTL_MS`` (200 ms). An answer may thus lag the projection by
  that much, and it says exactly which ``applied_version`` it reflects, as every local
  answer does;
* the token is checked by a DRF authentication class
  (:class:`~namesrv_app.api.authentication.RouteReadTokenAuthentication`) whose grants
  Django's cache holds for ``TOKEN_CACHE_TTL_MS`` (5 s);
* the Host header is checked by Django's ``HttpRequest.get_host`` (ALLOWED_HOSTS), and
  the security and frame headers are set by Django's own middlewares.

Anything else (another method, query, Accept, a session cookie, an invalid
topic, a refused token, an unknown topic) falls through to the DRF view, which
keeps every error answer and the browsable API exactly as they were. The
answer bytes and headers equal the DRF view's (tested).

Why one module: the request lane and the ASGI scope lane must answer
byte for byte what the DRF view answers; they share the route answers, the header
template and the candidate test, and are tested against the view together.
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.core.exceptions import DisallowedHost, ValidationError
from django.core.signals import setting_changed
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.security import SecurityMiddleware
from django.urls import get_script_prefix, reverse
from rest_framework.exceptions import AuthenticationFailed

from gateway.route_answers import RouteAnswers
from namesrv_app.api.authentication import RouteReadTokenAuthentication
from namesrv_app.gateway_client import web_setting
from namesrv_app.web import reads
from namesrv_app.web.forms import validate_topic
from remoting.consistency import CONSISTENCY_FIELD, CONSISTENCY_LOCAL

ROUTE_ANSWERS_MAX = 16_384
ROUTE_VERSION_TTL_MS = 200
HOSTS_MAX = 256
JSON_ACCEPTS = frozenset({"", "*/*", "application/json"})
TOKEN_KEYWORD = b"token"
ALLOW_HEADER = "GET, HEAD, OPTIONS"
REST_STYLE = "rest"
"""The answer style of this lane's route JSON in the route-answer store."""

T = TypeVar("T")

log = logging.getLogger(__name__)


def _dumps(value: Any) -> bytes:
    """JSON exactly as DRF's JSONRenderer writes it (compact, UTF-8, strict)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


@dataclass(frozen=True, slots=True)
class _Stamp:
    """A projection stamp and when it stops being trusted (monotonic seconds)."""

    stamp: reads.ProjectionStamp
    expires_at: float


_RouteKey = tuple[str, str]
_RouteVersion = tuple[str, int]
"""(node_id, routes_version) of the projection."""


class RouteAnswerCache:
    """What the lane keeps in one worker process: its route answers and the projection
    version it last read (see the module docstring for the bounds)."""

    def __init__(self) -> None:
        self.routes: RouteAnswers[_RouteKey, _RouteVersion, bytes] = RouteAnswers(ROUTE_ANSWERS_MAX)
        self._stamp: _Stamp | None = None
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        """Forget everything, token grants included, and zero the counters (tests)."""
        self.routes.clear()
        AUTHENTICATION.grants.clear()
        self._stamp = None
        self.hits = self.misses = 0

    def cached_stamp(self, now_s: float) -> reads.ProjectionStamp | None:
        """The projection stamp while it is fresh enough, else None."""
        held = self._stamp
        return held.stamp if held is not None and now_s < held.expires_at else None

    def keep_stamp(self, stamp: reads.ProjectionStamp, now_s: float) -> None:
        """Trust ``stamp`` for ROUTE_VERSION_TTL_MS."""
        ttl_s = web_setting("ROUTE_VERSION_TTL_MS", ROUTE_VERSION_TTL_MS) / 1000
        held = self._stamp
        if held is not None and _rewound(held.stamp, stamp):
            # A restarted eventual-mode gateway counts from 0 again: the same
            # routes_version may now name different routes.
            self.routes.clear()
        self._stamp = _Stamp(stamp, now_s + ttl_s)

    def route(self, topic: str, stamp: reads.ProjectionStamp) -> bytes | None:
        """The route JSON of ``topic`` held at the stamp's routes version, else None."""
        return self.routes.get((topic, REST_STYLE), (stamp.node_id, stamp.routes_version))

    def keep_route(self, topic: str, node_id: str, routes_version: int, body: bytes) -> None:
        """Hold the route JSON of ``topic`` read at ``routes_version``."""
        self.routes.put((topic, REST_STYLE), (node_id, routes_version), body)


def _rewound(before: reads.ProjectionStamp, after: reads.ProjectionStamp) -> bool:
    """True when the projection now holds another history than the one cached."""
    return (
        after.node_id != before.node_id
        or after.applied_version < before.applied_version
        or after.routes_version < before.routes_version
    )


CACHE = RouteAnswerCache()
"""This worker's caches (each uvicorn worker process has its own)."""


# ------------------------------------------------------------------- DB reads (sync)


AUTHENTICATION = RouteReadTokenAuthentication()


def _role(key: str) -> str | None:
    """The role of token ``key`` (a database read when none is held), None when refused:
    the DRF view then answers 401 or 403."""
    try:
        role, _ = AUTHENTICATION.authenticate_credentials(key)
    except AuthenticationFailed:
        return None
    return role


async def _granted(key: str, run: Runner[Any]) -> bool:
    """True when token ``key`` may read routes (checked in a thread when no grant is held)."""
    if AUTHENTICATION.held_role(key) is not None:
        return True
    return await run(lambda: _role(key)) is not None


@dataclass(frozen=True, slots=True)
class _Route:
    """An encoded route with the versions it was read at (None: no route)."""

    node_id: str
    applied_version: int
    routes_version: int
    body: bytes | None


def _read_route(topic: str) -> _Route:
    projected = reads.projected_route(topic)
    body = None if projected.route is None else _dumps(reads.route_json(projected.route))
    return _Route(projected.node_id, projected.applied_version, projected.routes_version, body)


# ------------------------------------------------------------------- the answer


def _route_body(topic: str, node_id: str, applied_version: int, route: bytes) -> bytes:
    """The DRF view's 200 body, assembled around the cached route bytes."""
    return b"".join(
        (b'{"topic":', _dumps(topic), _stamp_part(node_id, applied_version), route, b"}")
    )


def _stamp_part(node_id: str, applied_version: int) -> bytes:
    """The body between the topic and the route: the same for every topic of a stamp."""
    return b"".join(
        (
            b',"consistency":',
            _dumps(CONSISTENCY_LOCAL),
            b',"node_id":',
            _dumps(node_id),
            b',"applied_version":',
            str(applied_version).encode(),
            b',"route":',
        )
    )


def _route_prefix() -> str:
    """The path_info before the topic, from the URLconf (so a new mount point still matches)."""
    marker = "TOPIC"
    path = reverse("api:route", kwargs={"topic": marker})
    script = get_script_prefix()
    path = "/" + path[len(script) :] if path.startswith(script) else path
    assert path.endswith(f"/{marker}/")
    return path[: -len(marker) - 1]


@dataclass(frozen=True, slots=True)
class _Candidate:
    """What the fast path needs from a request: the topic and the token (None: anonymous)."""

    topic: str
    token: str | None


def _candidate(request: HttpRequest, prefix: str) -> _Candidate | None:
    """The topic and token of a request the fast path may answer; None to fall through."""
    path = request.path_info
    if request.method != "GET" or not path.startswith(prefix) or not path.endswith("/"):
        return None
    topic = path[len(prefix) : -1]
    if not topic or "/" in topic:
        return None
    query = request.GET
    if query and (len(query) != 1 or query.getlist(CONSISTENCY_FIELD) != [CONSISTENCY_LOCAL]):
        return None
    if request.META.get("HTTP_ACCEPT", "").strip() not in JSON_ACCEPTS:
        return None
    try:
        # Only names following the topic rule: under <name:topic> those are their own
        # path segment (namesrv_app.web.names), so this is the topic the DRF route
        # decodes. Any other name (~-escaped in the URL) falls through to the view.
        validate_topic(topic)
        request.get_host()  # ALLOWED_HOSTS, as CommonMiddleware checks it
    except (ValidationError, DisallowedHost):
        return None
    header = request.META.get("HTTP_AUTHORIZATION", "").encode("latin-1").split()
    if header:
        if len(header) != 2 or header[0].lower() != TOKEN_KEYWORD:
            return None
        return _Candidate(topic, header[1].decode("latin-1"))
    anonymous = web_setting("ALLOW_ANONYMOUS_ROUTE_READS", False)
    if not anonymous or settings.SESSION_COOKIE_NAME in request.COOKIES:
        return None
    return _Candidate(topic, None)


DECLINED_SCOPE_KEY = "namesrv.route_fast_path_declined"
"""Set in the ASGI scope when :class:`RouteReadAsgi` passed a request on, so the
middleware does not repeat the same lookups."""

Runner = Callable[[Callable[[], T]], Awaitable[T]]


class _FastPath:
    """The steps shared by the ASGI wrapper and the middleware."""

    def __init__(self) -> None:
        self._security = SecurityMiddleware(_never_called)
        self._frames = XFrameOptionsMiddleware(_never_called)
        self._prefix: str | None = None

    @property
    def prefix(self) -> str:
        """The route path before the topic (computed once the URLconf is loaded)."""
        if self._prefix is None:
            self._prefix = _route_prefix()
        return self._prefix

    @property
    def redirects(self) -> bool:
        """True when SECURE_SSL_REDIRECT may turn a plain-HTTP read into a redirect."""
        return bool(self._security.redirect)

    async def answer(self, request: HttpRequest, run: Runner[Any]) -> HttpResponse | None:
        """The cached answer, or None when the DRF view must answer.

        A lane that fails (its database read, say) declines: the view then answers the
        same request with the API's own error handling, so the caller still gets JSON.
        """
        try:
            return await self._answer(request, run)
        except Exception:
            log.exception("the route read lane failed on %s; the API view answers", request.path)
            return None

    async def _answer(self, request: HttpRequest, run: Runner[Any]) -> HttpResponse | None:
        candidate = _candidate(request, self.prefix)
        if candidate is None or self._security.process_request(request) is not None:
            return None
        now_s = time.monotonic()
        if candidate.token is not None and not await _granted(candidate.token, run):
            return None  # the DRF view answers 401 or 403
        stamp = CACHE.cached_stamp(now_s)
        if stamp is None:
            stamp = await run(reads.projection_stamp)
            CACHE.keep_stamp(stamp, now_s)
        topic = candidate.topic
        route = CACHE.route(topic, stamp)
        if route is not None:
            CACHE.hits += 1
            return self.finish(
                request, _route_body(topic, stamp.node_id, stamp.applied_version, route)
            )
        CACHE.misses += 1
        read = await run(lambda: _read_route(topic))
        if read.body is None:
            return None  # the DRF view answers 404 (and logs it)
        # Keyed by the versions of the read itself: the stamp may be older.
        CACHE.keep_route(topic, read.node_id, read.routes_version, read.body)
        return self.finish(
            request, _route_body(topic, read.node_id, read.applied_version, read.body)
        )

    def answer_sync(self, request: HttpRequest) -> HttpResponse | None:
        """:meth:`answer` with inline DB reads (WSGI and the test client)."""
        coroutine = self.answer(request, _inline)
        try:
            coroutine.send(None)
        except StopIteration as done:
            result: HttpResponse | None = done.value
            return result
        raise AssertionError("the inline fast path never suspends")

    def finish(self, request: HttpRequest, body: bytes) -> HttpResponse:
        """The headers the DRF view and the header-only middlewares would set."""
        response = HttpResponse(body, content_type="application/json")
        response["Vary"] = "Accept"
        response["Allow"] = ALLOW_HEADER
        response = self._frames.process_response(request, response)
        response["Content-Length"] = str(len(body))
        result: HttpResponse = self._security.process_response(request, response)
        return result


Headers = list[tuple[bytes, bytes]]

_LOCAL_QUERIES = frozenset({b"", f"{CONSISTENCY_FIELD}={CONSISTENCY_LOCAL}".encode()})
_JSON_ACCEPTS_RAW = frozenset(a.encode() for a in JSON_ACCEPTS)
_READ_HEADERS = frozenset({b"host", b"accept", b"authorization"})
_LANE_REFUSED = frozenset({b"cookie", b"content-length", b"transfer-encoding"})


@dataclass(frozen=True, slots=True)
class _Template:
    """The fixed headers of a 200 answer, split where Content-Length goes."""

    before: tuple[tuple[bytes, bytes], ...]
    length_name: bytes
    after: tuple[tuple[bytes, bytes], ...]

    def headers(self, length: int) -> Headers:
        return [*self.before, (self.length_name, str(length).encode()), *self.after]


class _HitLane:
    """Held answers given from the ASGI scope alone, without building a request.

    A strict subset of what :meth:`_FastPath.answer` answers: the plainest request
    (no cookie, body, root path, proxy-set scheme or forwarded host; a single
    Host, Accept and Authorization; no query but ``consistency=local``) whose
    grant, stamp and route are all cached. Anything else returns None and takes
    the request path, which answers or declines exactly as before. The headers
    are those :meth:`_FastPath.finish` builds (Django's security and frame
    middlewares), taken once per scheme from a real request; they depend on settings
    only, as the middlewares' own do. Those headers, Django's Host verdicts and the
    settings test are remembered until a setting changes (Django's ``setting_changed``
    signal).
    """

    def __init__(self, path: _FastPath) -> None:
        self._path = path
        self._templates: dict[str, _Template] = {}
        self._hosts: dict[bytes, bool] = {}
        self._plain: bool | None = None
        self._stamp_part: tuple[reads.ProjectionStamp, bytes] | None = None
        setting_changed.connect(self._forget)

    def _forget(self, **_: Any) -> None:
        """A setting changed (tests): drop everything derived from settings."""
        self._templates, self._hosts, self._plain = {}, {}, None

    def answer(self, scope: dict[str, Any]) -> tuple[bytes, Headers] | None:
        """The body and headers of a cached hit, or None."""
        path: str = scope["path"]
        prefix = self._path.prefix
        if (
            not path.startswith(prefix)
            or not path.endswith("/")
            or scope.get("query_string", b"") not in _LOCAL_QUERIES
            or scope.get("root_path")
        ):
            return None
        topic = path[len(prefix) : -1]
        if not topic or "/" in topic:
            return None
        seen: dict[bytes, bytes] = {}
        for name, value in scope.get("headers", ()):
            if name in _READ_HEADERS:
                if name in seen:
                    return None  # Django would join repeats; leave them to it
                seen[name] = value
            elif name in _LANE_REFUSED:
                return None
        if seen.get(b"accept", b"").strip() not in _JSON_ACCEPTS_RAW:
            return None
        host = seen.get(b"host")
        if host is None or not self._plain_settings() or not self._host_allowed(host):
            return None
        now_s = time.monotonic()
        header = seen.get(b"authorization", b"").split()
        if header:
            if len(header) != 2 or header[0].lower() != TOKEN_KEYWORD:
                return None
            if AUTHENTICATION.held_role(header[1].decode("latin-1")) is None:
                return None
        elif not web_setting("ALLOW_ANONYMOUS_ROUTE_READS", False):
            return None
        stamp = CACHE.cached_stamp(now_s)
        if stamp is None:
            return None
        # Only topics that passed validate_topic on their miss are ever cached, and
        # such a segment decodes to itself in the DRF route too (see _candidate).
        route = CACHE.route(topic, stamp)
        if route is None:
            return None
        CACHE.hits += 1
        held = self._stamp_part
        if held is None or held[0] is not stamp:
            held = self._stamp_part = (stamp, _stamp_part(stamp.node_id, stamp.applied_version))
        # A cached topic matches TOPIC_PATTERN: JSON needs no escapes for it.
        body = b"".join((b'{"topic":"', topic.encode(), b'"', held[1], route, b"}"))
        return body, self._template(scope).headers(len(body))

    def _plain_settings(self) -> bool:
        """No setting that makes scheme, host or path depend on more than the scope."""
        if self._plain is None:
            self._plain = not (
                self._path.redirects
                or settings.SECURE_PROXY_SSL_HEADER
                or settings.USE_X_FORWARDED_HOST
                or settings.FORCE_SCRIPT_NAME
            )
        return self._plain

    def _host_allowed(self, raw: bytes) -> bool:
        """Django's verdict on a Host value, remembered: building the request that asks
        it costs more than the rest of a hit."""
        allowed = self._hosts.get(raw)
        if allowed is None:
            if len(self._hosts) >= HOSTS_MAX:
                self._hosts = {}
            allowed = self._hosts[raw] = _host_allowed(raw)
        return allowed

    def _template(self, scope: dict[str, Any]) -> _Template:
        scheme = scope.get("scheme", "http")
        template = self._templates.get(scheme)
        if template is None:
            from django.core.handlers.asgi import ASGIRequest

            response = self._path.finish(ASGIRequest(scope, io.BytesIO()), b"")
            headers = [(k.encode("ascii"), v.encode("latin-1")) for k, v in response.items()]
            at = next(i for i, (k, _) in enumerate(headers) if k.lower() == b"content-length")
            template = _Template(tuple(headers[:at]), headers[at][0], tuple(headers[at + 1 :]))
            self._templates[scheme] = template
        return template


def _host_allowed(raw: bytes) -> bool:
    """Django's own ``HttpRequest.get_host`` check of a Host header (ALLOWED_HOSTS)."""
    request = HttpRequest()
    request.META["HTTP_HOST"] = raw.decode("latin-1")
    try:
        request.get_host()
    except DisallowedHost:
        return False
    return True


class RouteReadAsgi:
    """ASGI wrapper answering cached route reads before Django's handler.

    Django's ASGI handler starts a sync thread per request and hops threads for the
    request signals before any view runs, more than a cached answer itself costs
    (docs/BENCHMARKS.md, "Why route reads skip Django's handler"); on a hit this
    wrapper answers with no thread hop at all. A hit needs no DB connection; misses
    read in asgiref's shared sync thread, and Django's ``close_old_connections`` runs
    before each such read since no request signal does it here. Wrap the HTTP app in
    ``namesrv_site/asgi.py``.
    """

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app
        self._path = _FastPath()
        self._hits = _HitLane(self._path)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Answer a cached route read, or pass the request on (marked as declined)."""
        if scope["type"] == "http" and scope["method"] == "GET" and DECLINED_SCOPE_KEY not in scope:
            hit = self._hits.answer(scope)
            if hit is not None:
                await _send_raw(hit, send)
                return
            if self._may_answer(scope):
                from django.core.handlers.asgi import ASGIRequest

                request = ASGIRequest(scope, io.BytesIO())
                response = await self._path.answer(request, _in_shared_thread)
                if response is not None:
                    await _send(response, send)
                    return
                scope = {**scope, DECLINED_SCOPE_KEY: True}
        await self.app(scope, receive, send)

    def _may_answer(self, scope: dict[str, Any]) -> bool:
        """A cheap look at the path and headers before a request object is built."""
        if self._path.prefix not in scope["path"]:
            return False
        return not any(name in _BODY_HEADERS for name, _ in scope.get("headers", ()))


class RouteReadFastPath:
    """Middleware answering local route reads from :data:`CACHE` (first in MIDDLEWARE).

    It runs before the rest of the stack, so it applies the header-only
    middlewares (security headers, X-Frame-Options) itself and checks the host
    as CommonMiddleware would; everything it does not answer goes down the
    stack untouched.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)
        self._path = _FastPath()

    def __call__(self, request: HttpRequest) -> Any:
        """Answer from the cache when possible, else pass the request on."""
        if self.is_async:
            return self._acall(request)
        response = self._path.answer_sync(request)
        return response if response is not None else self.get_response(request)

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        response = None
        if not getattr(request, "scope", {}).get(DECLINED_SCOPE_KEY):
            response = await self._path.answer(request, _in_request_thread)
        if response is None:
            response = await self.get_response(request)
        return response


_BODY_HEADERS = frozenset({b"content-length", b"transfer-encoding"})


def _never_called(request: HttpRequest) -> HttpResponse:
    """The header-only middlewares are used for their process_* hooks alone."""
    raise AssertionError("not a middleware chain")


async def _send(response: HttpResponse, send: Any) -> None:
    """One complete ASGI response (the fast path never sets cookies or streams)."""
    headers = [(k.encode("ascii"), v.encode("latin-1")) for k, v in response.items()]
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": response.content})


async def _send_raw(answer: tuple[bytes, Headers], send: Any) -> None:
    """One complete ASGI 200 answer from :class:`_HitLane`."""
    body, headers = answer
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _in_request_thread(call: Callable[[], T]) -> T:
    """A DB read from the middleware: in Django's per-request sync thread."""
    result: T = await sync_to_async(call, thread_sensitive=True)()
    return result


def _fresh(call: Callable[[], T]) -> Callable[[], T]:
    def run() -> T:
        close_old_connections()
        return call()

    return run


async def _in_shared_thread(call: Callable[[], T]) -> T:
    """A DB read from the ASGI wrapper: asgiref's shared sync thread, stale links dropped."""
    result: T = await sync_to_async(_fresh(call), thread_sensitive=True)()
    return result


async def _inline(call: Callable[[], T]) -> T:
    """A DB read in sync mode: just call it."""
    return call()
