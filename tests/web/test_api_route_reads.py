"""GET /api/v1/routes/<topic>/ answered beside Django (namesrv_app.api.route_reads): the
DRF view's answer byte for byte, bounded staleness, and every other request Django's.

The application is driven as uvicorn drives it, one ASGI call per request. Its database
reads run in asgiref's shared thread, which does not see a test's open transaction, so
these tests commit (``transactional_db``)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.asgi import get_asgi_application
from django.core.cache import caches

from gateway.clock import ManualClock
from gateway.services import NameServerService
from namesrv_app import models
from namesrv_app.api import route_reads
from namesrv_app.api.authentication import TOKEN_GRANTS_CACHE
from namesrv_app.api.route_reads import CACHE, RouteReads
from namesrv_app.models import ApiToken
from namesrv_app.projection.delta import read_full_state
from namesrv_app.projection.rows import write_full_state
from namesrv_app.tokens import issue_token, token_digest
from raftstore.replicator import LocalReplicator
from tests.waiting import wait_until
from tests.web.asgi import Answer, Headers, asgi_answer, asgi_scope
from tests.web.conftest import START_MS, make_user, project_cast

ROUTE = "/api/v1/routes/TopicTest/"
BOUND_SLACK_S = 0.5
POLL_S = 0.02


@dataclass
class Served:
    """The site's HTTP application over the cast, and what reached Django."""

    app: RouteReads
    django: Callable[..., Any]
    token: bytes
    to_django: list[str]
    replicator: LocalReplicator

    def auth(self, token: bytes | None = None) -> Headers:
        return [
            (b"authorization", b"Token " + (token or self.token)),
            (b"accept", b"application/json"),
        ]

    def get(self, scope: dict[str, Any]) -> Answer:
        return asyncio.run(asgi_answer(self.app, scope))

    def read(self, path: str = ROUTE, headers: Headers | None = None, **kw: Any) -> Answer:
        return self.get(asgi_scope(path, self.auth() if headers is None else headers, **kw))

    def view(self, scope: dict[str, Any]) -> Answer:
        """Django's own answer (the DRF view), nothing in front of it."""
        return asyncio.run(asgi_answer(self.django, scope))


@pytest.fixture
def served(transactional_db: Any) -> Served:
    replicator = project_cast()
    viewer = make_user("vera", "viewer")
    django = get_asgi_application()
    to_django: list[str] = []

    async def recording(scope: dict[str, Any], receive: Any, send: Any) -> None:
        to_django.append(scope["path"])
        await django(scope, receive, send)

    token = issue_token(viewer)[0].encode()
    return Served(RouteReads(recording), django, token, to_django, replicator)


def _sorted(headers: Headers) -> list[tuple[bytes, bytes]]:
    return sorted((k.lower(), v) for k, v in headers)


def test_its_answers_are_the_drf_views_bytes_and_headers(served: Served) -> None:
    learnt = served.read()  # the first read from this Host: Django's, its headers kept
    assert served.to_django == [ROUTE] and (CACHE.misses, CACHE.hits) == (0, 0)
    miss = served.read(query=b"consistency=local")
    hit = served.read()
    assert served.to_django == [ROUTE] and (CACHE.misses, CACHE.hits) == (1, 1)
    view = served.view(asgi_scope(ROUTE, served.auth()))
    assert view[0] == 200 and b'"topic":"TopicTest"' in view[2]
    for answer in (learnt, miss, hit):
        assert answer[0] == view[0] and answer[2] == view[2]
        assert _sorted(answer[1]) == _sorted(view[1])


def test_a_cached_route_follows_the_projection_within_the_version_bound(
    served: Served, settings: Any
) -> None:
    settings.NAMESRV_WEB = {"ROUTE_VERSION_TTL_MS": 200}
    before = [served.read() for _ in range(3)]  # Django's, then held, then a hit
    assert CACHE.hits == 1 and _perm_of_broker_a(before[-1][2]) == 6
    _wipe_broker_a(served.replicator)
    changed_at = time.monotonic()
    state = models.NodeState.objects.get()
    while True:
        body = served.read()[2]
        if _perm_of_broker_a(body) != 6:
            break
        # A stale answer says so: it reports the version it reflects.
        assert f'"applied_version":{state.applied_version}'.encode() not in body
        assert time.monotonic() - changed_at < 0.2 + BOUND_SLACK_S, "stale beyond the bound"
        time.sleep(POLL_S)
    assert _perm_of_broker_a(body) == 4  # write permission wiped: read only
    assert f'"applied_version":{state.applied_version}'.encode() in body


@pytest.mark.parametrize(
    ("revoke", "status"),
    [
        (lambda user: ApiToken.objects.filter(user=user).delete(), 401),
        (lambda user: user.groups.remove(Group.objects.get(name="viewer")), 403),
    ],
    ids=["a revoked token", "a lost role"],
)
def test_a_revoked_grant_stops_reading_routes_within_the_token_bound(
    served: Served, settings: Any, revoke: Callable[[User], object], status: int
) -> None:
    settings.NAMESRV_WEB = {"TOKEN_CACHE_TTL_MS": 300}
    assert served.read()[0] == served.read()[0] == 200
    assert CACHE.hits + CACHE.misses == 1, "the second read is answered beside Django"
    revoke(User.objects.get(username="vera"))
    wait_until(
        lambda: served.read()[0] != 200,
        what="the revocation in force",
        timeout_s=0.3 + BOUND_SLACK_S,
        interval_s=POLL_S,
    )
    assert served.read()[0] == status


def test_every_other_request_is_djangos(served: Served, settings: Any) -> None:
    # Held long enough that a slow machine cannot expire the warmed grant and stamp
    # between the warming reads and the ones below.
    settings.NAMESRV_WEB = {"ROUTE_VERSION_TTL_MS": 60_000, "TOKEN_CACHE_TTL_MS": 60_000}
    auth = served.auth()
    served.read()
    served.read()  # Host learnt, grant, stamp and route held
    answered = CACHE.hits + CACHE.misses
    unusual = {
        "a second Accept": asgi_scope(ROUTE, [*auth, (b"accept", b"text/html")]),
        "an HTML Accept": asgi_scope(ROUTE, [auth[0], (b"accept", b"text/html")]),
        "another query": asgi_scope(ROUTE, auth, b"consistency=linearizable"),
        "a body": asgi_scope(ROUTE, [*auth, (b"content-length", b"0")]),
        "a cookie": asgi_scope(ROUTE, [*auth, (b"cookie", b"theme=dark")]),
        "a foreign host": asgi_scope(ROUTE, auth, host=b"evil.example"),
        "an unknown token": asgi_scope(ROUTE, [(b"authorization", b"Token nope"), auth[1]]),
        "a basic header": asgi_scope(ROUTE, [(b"authorization", b"Basic eDp5"), auth[1]]),
        "no credentials": asgi_scope(ROUTE, [auth[1]]),
        "an unknown topic": asgi_scope("/api/v1/routes/NoSuchTopic/", auth),
        "a name off the topic rule": asgi_scope("/api/v1/routes/bad$topic/", auth),
        "an escaped name": asgi_scope("/api/v1/routes/~bad~2/", auth),
        "a sub-path": asgi_scope("/api/v1/routes/TopicTest/compare/", auth),
        "a root path": {**asgi_scope(ROUTE, auth), "root_path": "/ns"},
        "a POST": {**asgi_scope(ROUTE, auth), "method": "POST"},
    }
    answers = {}
    for why, scope in unusual.items():
        served.to_django.clear()
        answers[why] = served.get(scope)[0]
        assert served.to_django == [scope["path"]], why
    assert CACHE.hits + CACHE.misses == answered + 1  # only the unknown topic was looked up
    assert answers["an HTML Accept"] == 200  # the browsable API
    assert answers["a foreign host"] == 400
    assert answers["an unknown token"] == 401 and answers["no credentials"] == 401
    assert answers["an unknown topic"] == answers["a name off the topic rule"] == 404
    served.to_django.clear()
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    served.read()
    assert served.to_django == [ROUTE], "a setting that moves the scheme: Django's"


def test_a_host_django_refuses_is_never_answered(served: Served) -> None:
    for _ in range(3):
        assert served.read(host=b"evil.example")[0] == 400
    assert len(served.to_django) == 3 and CACHE.hits + CACHE.misses == 0


def test_a_user_without_a_role_is_answered_by_django(served: Served) -> None:
    served.read()
    nobody = make_user("nobody", None)
    assert served.read(headers=served.auth(issue_token(nobody)[0].encode()))[0] == 403


def test_a_route_answer_is_held_in_the_one_route_answer_store(served: Served) -> None:
    """The route JSON is kept by topic and style, versioned by the projection."""
    served.read()
    answer = served.read()
    stamp = models.NodeState.objects.get()
    held = CACHE.routes.get(
        ("TopicTest", route_reads.REST_STYLE), (stamp.node_id, stamp.routes_version)
    )
    assert held is not None and held in answer[2]
    assert CACHE.routes.entries_max == route_reads.ROUTE_ANSWERS_MAX


def test_a_token_grant_is_held_in_django_s_cache_under_the_token_s_digest(served: Served) -> None:
    served.read()
    assert served.read()[0] == 200
    grants = caches[TOKEN_GRANTS_CACHE]
    key = served.token.decode()
    assert grants.get(token_digest(key)) == "viewer"
    assert grants.get(key) is None  # the cache never holds the key itself


def test_a_route_read_whose_database_fails_is_answered_by_django_in_json(served: Served) -> None:
    """The read fails beside Django, and Django's own error answer is JSON."""
    from django.db import connections

    from namesrv_app.db_router import PROJECTION_DB

    served.read()  # the Host learnt
    CACHE.clear()
    table = models.NodeState._meta.db_table
    with connections[PROJECTION_DB].cursor() as cursor:
        cursor.execute(f'ALTER TABLE "{table}" RENAME TO "{table}_gone"')
    try:
        status, headers, body = served.read()
    finally:
        with connections[PROJECTION_DB].cursor() as cursor:
            cursor.execute(f'ALTER TABLE "{table}_gone" RENAME TO "{table}"')
    assert status == 500 and b'"detail"' in body
    assert dict(_sorted(headers))[b"content-type"].startswith(b"application/json")
    assert served.to_django == [ROUTE, ROUTE]


# ------------------------------------------------------------------- helpers


def _wipe_broker_a(replicator: LocalReplicator) -> None:
    """A route change through the real service, projected as the gateway would."""
    service = NameServerService(replicator, ManualClock(START_MS))
    asyncio.run(service.wipe_write_perm("broker-a"))
    write_full_state(replicator.read(read_full_state), "n1", "eventual")


def _perm_of_broker_a(body: bytes) -> int:
    queues = {q["brokerName"]: q for q in json.loads(body)["route"]["queueDatas"]}
    return int(queues["broker-a"]["perm"])
