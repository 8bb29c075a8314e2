"""The cached fast path of GET /api/v1/routes/<topic>/: same answer, bounded staleness."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from django.contrib.auth.models import Group, User
from django.core.asgi import get_asgi_application
from django.core.cache import caches
from django.test import Client

from gateway.clock import ManualClock
from gateway.services import NameServerService
from namesrv_app import models
from namesrv_app.api import fast_routes
from namesrv_app.api.authentication import TOKEN_GRANTS_CACHE
from namesrv_app.api.fast_routes import CACHE, RouteReadAsgi
from namesrv_app.models import ApiToken
from namesrv_app.projection.delta import read_full_state
from namesrv_app.projection.rows import write_full_state
from namesrv_app.tokens import issue_token, token_digest
from raftstore.replicator import LocalReplicator
from tests.waiting import wait_until
from tests.web.conftest import START_MS, make_user, project_cast

ROUTE = "/api/v1/routes/TopicTest/"
FAST_PATH = "namesrv_app.api.fast_routes.RouteReadFastPath"
BOUND_SLACK_S = 0.5
POLL_S = 0.02


def _token_headers(user: User) -> dict[str, str]:
    key, _ = issue_token(user)
    return {"Authorization": f"Token {key}", "Accept": "application/json"}


def _wipe_broker_a(replicator: LocalReplicator) -> None:
    """A route change through the real service, projected as the gateway would."""
    service = NameServerService(replicator, ManualClock(START_MS))
    asyncio.run(service.wipe_write_perm("broker-a"))
    write_full_state(replicator.read(read_full_state), "n1", "eventual")


def _perm_of_broker_a(body: dict[str, Any]) -> int:
    queues = {q["brokerName"]: q for q in body["route"]["queueDatas"]}
    return int(queues["broker-a"]["perm"])


def test_the_fast_path_answers_exactly_what_the_drf_view_answers(
    cast: Any, viewer: User, settings: Any
) -> None:
    headers = _token_headers(viewer)
    fast = Client().get(ROUTE, headers=headers)
    assert CACHE.misses == 1
    again = Client().get(ROUTE, headers=headers)
    assert CACHE.hits == 1
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != FAST_PATH]
    slow = Client().get(ROUTE, headers=headers)
    assert CACHE.hits == 1 and CACHE.misses == 1
    assert fast.status_code == again.status_code == slow.status_code == 200
    assert fast.content == again.content == slow.content
    assert dict(fast.items()) == dict(slow.items())


def test_a_cached_route_follows_the_projection_within_the_version_bound(
    cast: LocalReplicator, viewer: User, settings: Any
) -> None:
    settings.NAMESRV_WEB = {"ROUTE_VERSION_TTL_MS": 200}
    headers = _token_headers(viewer)
    before = Client().get(ROUTE, headers=headers).json()
    assert _perm_of_broker_a(before) == 6
    _wipe_broker_a(cast)
    changed_at = time.monotonic()
    state = models.NodeState.objects.get()
    while True:
        body = Client().get(ROUTE, headers=headers).json()
        if _perm_of_broker_a(body) != 6:
            break
        # A stale answer says so: it reports the version it reflects.
        assert body["applied_version"] == before["applied_version"] < state.applied_version
        assert time.monotonic() - changed_at < 0.2 + BOUND_SLACK_S, "stale beyond the bound"
        time.sleep(POLL_S)
    assert _perm_of_broker_a(body) == 4  # write permission wiped: read only
    assert body["applied_version"] == state.applied_version


def test_a_revoked_token_stops_reading_routes_within_the_token_bound(
    cast: Any, viewer: User, settings: Any
) -> None:
    settings.NAMESRV_WEB = {"TOKEN_CACHE_TTL_MS": 300}
    headers = _token_headers(viewer)
    assert Client().get(ROUTE, headers=headers).status_code == 200
    ApiToken.objects.filter(user=viewer).delete()
    wait_until(
        lambda: Client().get(ROUTE, headers=headers).status_code != 200,
        what="the revocation in force",
        timeout_s=0.3 + BOUND_SLACK_S,
        interval_s=POLL_S,
    )
    assert Client().get(ROUTE, headers=headers).status_code == 401


def test_a_lost_role_stops_reading_routes_within_the_token_bound(
    cast: Any, viewer: User, settings: Any
) -> None:
    settings.NAMESRV_WEB = {"TOKEN_CACHE_TTL_MS": 300}
    headers = _token_headers(viewer)
    assert Client().get(ROUTE, headers=headers).status_code == 200
    viewer.groups.remove(Group.objects.get(name="viewer"))
    wait_until(
        lambda: Client().get(ROUTE, headers=headers).status_code != 200,
        what="the role removal in force",
        timeout_s=0.3 + BOUND_SLACK_S,
        interval_s=POLL_S,
    )
    assert Client().get(ROUTE, headers=headers).status_code == 403


def test_requests_it_does_not_answer_reach_the_drf_view(cast: Any, viewer: User) -> None:
    headers = _token_headers(viewer)
    browsable = Client().get(ROUTE, headers={**headers, "Accept": "text/html"})
    assert browsable.status_code == 200 and b"<html" in browsable.content.lower()
    assert Client().get("/api/v1/routes/NoSuchTopic/", headers=headers).status_code == 404
    assert Client().get("/api/v1/routes/bad$topic/", headers=headers).status_code == 404
    assert Client().get("/api/v1/routes/~bad~2/", headers=headers).status_code == 404
    assert Client().get(ROUTE, headers={"Authorization": "Token not-a-token"}).status_code == 401
    nobody = make_user("nobody", None)
    assert Client().get(ROUTE, headers=_token_headers(nobody)).status_code == 403
    assert CACHE.hits == 0


def test_a_route_answer_is_held_in_the_one_route_answer_store(cast: Any, viewer: User) -> None:
    """The lane keeps the route JSON by topic and style, versioned by the projection."""
    headers = _token_headers(viewer)
    assert Client().get(ROUTE, headers=headers).status_code == 200
    stamp = models.NodeState.objects.get()
    version = (stamp.node_id, stamp.routes_version)
    held = CACHE.routes.get(("TopicTest", fast_routes.REST_STYLE), version)
    assert held is not None and held in Client().get(ROUTE, headers=headers).content
    assert CACHE.routes.entries_max == fast_routes.ROUTE_ANSWERS_MAX


def test_a_token_grant_is_held_in_django_s_cache_under_the_token_s_digest(
    cast: Any, viewer: User
) -> None:
    key, _ = issue_token(viewer)
    headers = {"Authorization": f"Token {key}", "Accept": "application/json"}
    assert Client().get(ROUTE, headers=headers).status_code == 200
    grants = caches[TOKEN_GRANTS_CACHE]
    assert grants.get(token_digest(key)) == "viewer"
    assert grants.get(key) is None  # the cache never holds the key itself


Answer = tuple[int, list[tuple[bytes, bytes]], bytes]


async def _asgi_get(app: Any, path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    status, _, body = await _asgi_answer(app, _scope(path, headers))
    return status, body


def _scope(path: str, headers: list[tuple[bytes, bytes]], query: bytes = b"") -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 80),
    }


async def _asgi_answer(app: Any, scope: dict[str, Any]) -> Answer:
    sent: list[dict[str, Any]] = []
    finished = asyncio.Event()
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    finished.set()
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return int(sent[0]["status"]), list(sent[0]["headers"]), body


def test_the_asgi_wrapper_answers_hits_itself_and_passes_the_rest_to_django(
    transactional_db: Any,
) -> None:
    project_cast()
    viewer = make_user("vera", "viewer")
    token = issue_token(viewer)[0].encode()
    app = RouteReadAsgi(get_asgi_application())
    auth = [(b"authorization", b"Token " + token), (b"accept", b"application/json")]

    async def run() -> list[tuple[int, bytes]]:
        return [
            await _asgi_get(app, ROUTE, auth),
            await _asgi_get(app, ROUTE, auth),
            await _asgi_get(app, ROUTE, [(b"authorization", b"Token nope")]),
        ]

    first, second, refused = asyncio.run(run())
    assert first == second and first[0] == 200 and b'"topic":"TopicTest"' in first[1]
    assert (CACHE.misses, CACHE.hits) == (1, 1)
    assert refused[0] == 401


def test_the_asgi_hit_lane_answers_the_drf_views_bytes_and_headers(transactional_db: Any) -> None:
    project_cast()
    viewer = make_user("vera", "viewer")
    token = issue_token(viewer)[0].encode()
    django_app = get_asgi_application()
    app = RouteReadAsgi(django_app)
    auth = [(b"authorization", b"Token " + token), (b"accept", b"application/json")]
    lane = fast_routes._HitLane(fast_routes._FastPath())
    plain = _scope(ROUTE, auth, b"consistency=local")
    with_cookie = _scope(ROUTE, [*auth, (b"cookie", b"theme=dark")])

    async def run() -> list[Answer]:
        answers = [await _asgi_answer(app, _scope(ROUTE, auth))]  # a miss fills the caches
        assert lane.answer(plain) is not None and lane.answer(with_cookie) is None
        answers.append(await _asgi_answer(app, plain))  # answered by the lane
        answers.append(await _asgi_answer(app, with_cookie))  # a hit through the request path
        # The DRF view itself, through Django's ASGI handler and every middleware:
        # a request already marked as declined passes the wrapper untouched.
        view = {**_scope(ROUTE, auth), fast_routes.DECLINED_SCOPE_KEY: True}
        answers.append(await _asgi_answer(app, view))
        return answers

    miss, lane_hit, request_hit, view = asyncio.run(run())
    assert (CACHE.misses, CACHE.hits) == (1, 3)
    assert view[0] == 200 and b'"topic":"TopicTest"' in view[2]
    for answer in (miss, lane_hit, request_hit):
        assert answer[0] == view[0] and answer[2] == view[2]
        assert sorted((k.lower(), v) for k, v in answer[1]) == sorted(
            (k.lower(), v) for k, v in view[1]
        )


def test_the_asgi_hit_lane_leaves_everything_unusual_to_the_request_path(
    transactional_db: Any, settings: Any
) -> None:
    # Held long enough that a slow machine cannot expire the warmed grant and stamp
    # between the warming request and the lane's answers.
    settings.NAMESRV_WEB = {"ROUTE_VERSION_TTL_MS": 60_000, "TOKEN_CACHE_TTL_MS": 60_000}
    project_cast()
    viewer = make_user("vera", "viewer")
    token = issue_token(viewer)[0].encode()
    auth = [(b"authorization", b"Token " + token), (b"accept", b"application/json")]
    app = RouteReadAsgi(get_asgi_application())
    lane = fast_routes._HitLane(fast_routes._FastPath())
    asyncio.run(_asgi_answer(app, _scope(ROUTE, auth)))  # cached grant, stamp and route
    assert lane.answer(_scope(ROUTE, auth)) is not None
    unusual = {
        "a second Accept": _scope(ROUTE, [*auth, (b"accept", b"text/html")]),
        "an HTML Accept": _scope(ROUTE, [auth[0], (b"accept", b"text/html")]),
        "another query": _scope(ROUTE, auth, b"consistency=linearizable"),
        "a body": _scope(ROUTE, [*auth, (b"content-length", b"0")]),
        "a foreign host": {**_scope(ROUTE, auth), "headers": [(b"host", b"evil.example"), *auth]},
        "an unknown token": _scope(ROUTE, [(b"authorization", b"Token nope"), auth[1]]),
        "a basic header": _scope(ROUTE, [(b"authorization", b"Basic eDp5"), auth[1]]),
        "no credentials": _scope(ROUTE, [auth[1]]),
        "an uncached topic": _scope("/api/v1/routes/DemoOrders/", auth),
        "a sub-path": _scope("/api/v1/routes/TopicTest/compare/", auth),
        "a root path": {**_scope(ROUTE, auth), "root_path": "/ns"},
    }
    assert {why: lane.answer(scope) for why, scope in unusual.items()} == dict.fromkeys(unusual)
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert lane.answer(_scope(ROUTE, auth)) is None


def test_a_route_read_whose_database_fails_answers_json(cast: Any, viewer: User) -> None:
    """The lane declines on a failed read, and the view's own error answer is JSON."""
    from django.db import connections

    from namesrv_app.db_router import PROJECTION_DB

    table = models.NodeState._meta.db_table
    with connections[PROJECTION_DB].cursor() as cursor:
        # Rolled back with the test's transaction.
        cursor.execute(f'ALTER TABLE "{table}" RENAME TO "{table}_gone"')
    answer = Client(raise_request_exception=False).get(ROUTE, headers=_token_headers(viewer))
    assert answer.status_code == 500
    assert answer["Content-Type"].startswith("application/json")
    assert "detail" in answer.json()
