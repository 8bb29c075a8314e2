"""``GET /api/v1/routes/<topic>/`` (local consistency), answered beside Django.

Producers and dashboards poll this endpoint. Through Django's ASGI handler, its
middleware stack, the token and role lookups and DRF, almost all of a request's cost is
thread hops and queries that do not depend on the topic (docs/BENCHMARKS.md, "web"):
:class:`RouteReads`, the ASGI application of ``namesrv_site/asgi.py``, answers the
plainest of these reads itself and hands every other request to Django untouched.

What it answers: a GET of exactly ``<route prefix><topic>/`` for a topic following the
topic rule, asking for JSON, with no query but ``consistency=local``, no cookie, no body,
one Host, Accept and Authorization header, a ``Token`` the API grants routes to (or none,
when anonymous route reads are allowed), under settings that make the scheme, host and
path depend on the scope alone. Everything else, and any read it cannot answer (an
unknown topic, a refused token, a failed read), is Django's, which keeps every error
answer and the browsable API as they are.

Its answer equals the DRF view's byte for byte (tested):

* the body is the view's JSON, the route part from the one route-answer store
  (:class:`~gateway.route_answers.RouteAnswers`), keyed by topic and this answer style,
  versioned by the projection's ``(node_id, routes_version)``, which moves on every
  change that may alter a route answer (never on heartbeats);
* that version (:class:`~namesrv_app.web.reads.ProjectionStamp`) is re-read at most
  every ``ROUTE_VERSION_TTL_MS`` (200 ms): an answer may lag the projection by that
  much, and it says exactly which ``applied_version`` it reflects, as every local
  answer does;
* the token is checked by :class:`~namesrv_app.api.authentication.
  RouteReadTokenAuthentication`, whose grants Django's cache holds for
  ``TOKEN_CACHE_TTL_MS`` (5 s);
* the headers are the ones Django answered this read with: the first read from each
  scheme and Host goes through Django, and its 200's headers (security and frame
  headers included) are kept for that scheme and Host. A Host Django refuses never
  gets a 200, so it is never answered here (ALLOWED_HOSTS holds as it does for Django).

Database reads (a grant not yet held, the stamp, a route not yet held) run in asgiref's
shared sync thread, stale connections closed first, as Django's request signals would.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.signals import setting_changed
from django.db import close_old_connections
from django.urls import get_script_prefix, reverse
from rest_framework.exceptions import AuthenticationFailed

from gateway.route_answers import RouteAnswers
from namesrv_app.api.authentication import RouteReadTokenAuthentication
from namesrv_app.gateway_client import web_setting
from namesrv_app.topic_rules import validate_topic
from namesrv_app.web import reads
from remoting.consistency import CONSISTENCY_FIELD, CONSISTENCY_LOCAL

ROUTE_ANSWERS_MAX = 16_384
ROUTE_VERSION_TTL_MS = 200
HOSTS_MAX = 256
"""Scheme and Host pairs whose headers are kept; past that they are learnt again."""
REST_STYLE = "rest"
"""The answer style of this lane's route JSON in the route-answer store."""
TOKEN_KEYWORD = b"token"

_LOCAL_QUERIES = frozenset({b"", f"{CONSISTENCY_FIELD}={CONSISTENCY_LOCAL}".encode()})
_JSON_ACCEPTS = frozenset({b"", b"*/*", b"application/json"})
_READ_HEADERS = frozenset({b"host", b"accept", b"authorization"})
_REFUSED_HEADERS = frozenset({b"cookie", b"content-length", b"transfer-encoding"})

T = TypeVar("T")
Headers = list[tuple[bytes, bytes]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

log = logging.getLogger(__name__)


def _dumps(value: Any) -> bytes:
    """JSON exactly as DRF's JSONRenderer writes it (compact, UTF-8, strict)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


# ------------------------------------------------------------------- what is held


@dataclass(frozen=True, slots=True)
class _Stamp:
    """A projection stamp and when it stops being trusted (monotonic seconds)."""

    stamp: reads.ProjectionStamp
    expires_at: float


_RouteKey = tuple[str, str]
_RouteVersion = tuple[str, int]
"""(node_id, routes_version) of the projection."""


class RouteAnswerCache:
    """What one worker process keeps: its route answers and the projection version it
    last read."""

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
        """Hold ``topic``'s route JSON as read at ``(node_id, routes_version)``."""
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

AUTHENTICATION = RouteReadTokenAuthentication()


# ------------------------------------------------------------------- database reads


def _role(key: str) -> str | None:
    """The role of token ``key`` (a database read when none is held), None when refused:
    Django's view then answers 401 or 403."""
    try:
        role, _ = AUTHENTICATION.authenticate_credentials(key)
    except AuthenticationFailed:
        return None
    return role


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


async def _in_thread(call: Callable[[], T]) -> T:
    """A database read in asgiref's shared sync thread, stale connections closed first
    (no request signal does it for a read answered here)."""

    def run() -> T:
        close_old_connections()
        return call()

    result: T = await sync_to_async(run, thread_sensitive=True)()
    return result


# ------------------------------------------------------------------- the answer


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


@dataclass(frozen=True, slots=True)
class _Template:
    """The headers Django answered a route read with, split where Content-Length goes."""

    before: tuple[tuple[bytes, bytes], ...]
    length_name: bytes
    after: tuple[tuple[bytes, bytes], ...]

    @classmethod
    def of(cls, headers: Headers) -> _Template | None:
        """The template of a 200's headers; None when they hold anything that may
        differ between two reads (a cookie) or no Content-Length."""
        names = [name.lower() for name, _ in headers]
        if b"set-cookie" in names or names.count(b"content-length") != 1:
            return None
        at = names.index(b"content-length")
        return cls(tuple(headers[:at]), headers[at][0], tuple(headers[at + 1 :]))

    def headers(self, length: int) -> Headers:
        return [*self.before, (self.length_name, str(length).encode()), *self.after]


_Read = tuple[str, "str | None", tuple[str, bytes]]
"""A route read this application may answer: (topic, token or None when anonymous,
(scheme, Host) whose headers it is answered with)."""


class RouteReads:
    """The web process's HTTP application: plain local route reads answered here, every
    other request passed to ``django`` (see the module docstring)."""

    def __init__(self, django: Callable[..., Awaitable[None]]) -> None:
        self.django = django
        self._prefix: str | None = None
        self._templates: dict[tuple[str, bytes], _Template] = {}
        self._plain: bool | None = None
        self._stamp_part: tuple[reads.ProjectionStamp, bytes] | None = None
        setting_changed.connect(self._forget)

    def _forget(self, **_: Any) -> None:
        """A setting changed (tests): drop everything derived from settings."""
        self._prefix, self._templates, self._plain = None, {}, None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        read = self._read(scope) if scope["type"] == "http" else None
        if read is None:
            await self.django(scope, receive, send)
            return
        template = self._templates.get(read[2])
        if template is not None:
            # Most reads are held (grant, stamp and route): answered with no await.
            body = self._held(read)
            if body is None:
                try:
                    body = await self._body(read)
                except Exception:
                    log.exception("a route read failed on %s; Django answers it", scope["path"])
            if body is not None:
                start = {"type": "http.response.start", "status": 200}
                await send({**start, "headers": template.headers(len(body))})
                await send({"type": "http.response.body", "body": body})
                return
        await self.django(scope, receive, self._learning(read[2], send))

    # ------------------------------------------------------------- which reads

    def _read(self, scope: dict[str, Any]) -> _Read | None:
        """The read of ``scope`` when it is one this application may answer, else None."""
        path: str = scope["path"]
        prefix = self._route_prefix()
        if (
            scope["method"] != "GET"
            or not path.startswith(prefix)
            or not path.endswith("/")
            or scope.get("query_string", b"") not in _LOCAL_QUERIES
            or scope.get("root_path")
        ):
            return None
        topic = path[len(prefix) : -1]
        seen: dict[bytes, bytes] = {}
        for name, value in scope.get("headers", ()):
            if name in _READ_HEADERS:
                if name in seen:
                    return None  # Django would join repeats; leave them to it
                seen[name] = value
            elif name in _REFUSED_HEADERS:
                return None
        host = seen.get(b"host")
        if (
            host is None
            or seen.get(b"accept", b"").strip() not in _JSON_ACCEPTS
            or not self._plain_settings()
        ):
            return None
        header = seen.get(b"authorization", b"").split()
        if header:
            if len(header) != 2 or header[0].lower() != TOKEN_KEYWORD:
                return None
            token: str | None = header[1].decode("latin-1")
        elif web_setting("ALLOW_ANONYMOUS_ROUTE_READS", False):
            token = None
        else:
            return None
        return topic, token, (scope.get("scheme", "http"), host)

    def _route_prefix(self) -> str:
        """The path before the topic, from the URLconf (a new mount point still matches)."""
        if self._prefix is None:
            marker = "TOPIC"
            path = reverse("api:route", kwargs={"topic": marker})
            script = get_script_prefix()
            path = "/" + path[len(script) :] if path.startswith(script) else path
            assert path.endswith(f"/{marker}/")
            self._prefix = path[: -len(marker) - 1]
        return self._prefix

    def _plain_settings(self) -> bool:
        """No setting that makes scheme, host or path depend on more than the scope, or
        that turns a read into a redirect."""
        if self._plain is None:
            self._plain = not (
                settings.SECURE_SSL_REDIRECT
                or settings.SECURE_PROXY_SSL_HEADER
                or settings.USE_X_FORWARDED_HOST
                or settings.FORCE_SCRIPT_NAME
            )
        return self._plain

    # ------------------------------------------------------------- the answer

    def _held(self, read: _Read) -> bytes | None:
        """The answer to ``read`` from what is held (its grant, a fresh stamp and the
        route at it), or None. Only topics that passed the topic rule are ever held."""
        topic, token, _ = read
        if token is not None and AUTHENTICATION.held_role(token) is None:
            return None
        stamp = CACHE.cached_stamp(time.monotonic())
        route = None if stamp is None else CACHE.route(topic, stamp)
        if stamp is None or route is None:
            return None
        CACHE.hits += 1
        return b"".join(
            (b'{"topic":"', topic.encode(), b'"', self._stamp_bytes(stamp), route, b"}")
        )

    async def _body(self, read: _Read) -> bytes | None:
        """The view's 200 body for ``read``, reading what is not held; None when Django
        must answer."""
        topic, token, _ = read
        if not _follows_topic_rule(topic):
            return None
        if (
            token is not None
            and AUTHENTICATION.held_role(token) is None
            and await _in_thread(lambda: _role(token)) is None
        ):
            return None  # Django's view answers 401 or 403
        now_s = time.monotonic()
        stamp = CACHE.cached_stamp(now_s)
        if stamp is None:
            stamp = await _in_thread(reads.projection_stamp)
            CACHE.keep_stamp(stamp, now_s)
        route = CACHE.route(topic, stamp)
        if route is not None:
            CACHE.hits += 1
            return b"".join(
                (b'{"topic":"', topic.encode(), b'"', self._stamp_bytes(stamp), route, b"}")
            )
        CACHE.misses += 1
        found = await _in_thread(lambda: _read_route(topic))
        if found.body is None:
            return None  # Django's view answers 404 (and logs it)
        # Held under the versions of the read itself: the stamp may be older.
        CACHE.keep_route(topic, found.node_id, found.routes_version, found.body)
        return b"".join(
            (
                b'{"topic":"',
                topic.encode(),
                b'"',
                _stamp_part(found.node_id, found.applied_version),
                found.body,
                b"}",
            )
        )

    def _stamp_bytes(self, stamp: reads.ProjectionStamp) -> bytes:
        """:func:`_stamp_part` of ``stamp``, built once per stamp."""
        held = self._stamp_part
        if held is None or held[0] is not stamp:
            held = self._stamp_part = (stamp, _stamp_part(stamp.node_id, stamp.applied_version))
        return held[1]

    def _learning(self, origin: tuple[str, bytes], send: Send) -> Send:
        """``send``, keeping the headers of Django's 200 to a route read for ``origin``."""

        async def learn(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                template = _Template.of(list(message.get("headers", ())))
                if template is not None:
                    if len(self._templates) >= HOSTS_MAX:
                        self._templates = {}
                    self._templates[origin] = template
            await send(message)

        return learn


def _follows_topic_rule(topic: str) -> bool:
    """Only names following the topic rule: under ``<name:topic>`` those are their own
    path segment (namesrv_app.web.names), so this is the topic Django's route decodes,
    and its JSON needs no escapes. Any other name (~-escaped in the URL) is Django's."""
    try:
        validate_topic(topic)
    except ValidationError:
        return False
    return bool(topic)
