"""API tokens are stored hashed and expire (namesrv_app.tokens).

The key is shown once by ``create_operator --token``; the shared database keeps its
SHA-256 and an expiry. Every door that takes a token (the DRF views, the route reads
answered beside Django, ``/metrics``) goes through the one check, so an expired token is
refused with the same 401 everywhere, also by the route reads that hold grants.
"""

from __future__ import annotations

import hashlib
import io
import time
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from namesrv_app.models import ApiToken
from namesrv_app.tokens import TOKEN_DAYS, TOKEN_DAYS_MAX, issue_token
from tests.web.conftest import make_user

ROUTE = "/api/v1/routes/TopicTest/"
TOPICS = "/api/v1/topics/"
EXPIRED = "API token expired on "
DAY_S = 24 * 3600
SLACK_S = 0.5
POLL_S = 0.02


def create_operator(*args: str) -> list[str]:
    """``manage.py create_operator ARGS`` in this process (the test database); its lines."""
    out = io.StringIO()
    call_command("create_operator", *args, stdout=out)
    return out.getvalue().strip().splitlines()


def get(path: str, key: str, **extra: Any) -> Any:
    """GET ``path`` with ``Authorization: Token <key>``, asking for JSON."""
    headers = {"Authorization": f"Token {key}", "Accept": "application/json"}
    return Client().get(path, headers=headers, **extra)


def expire(user: User, in_s: float = -1.0) -> None:
    """Move the user's token's expiry to ``in_s`` seconds from now (past when negative)."""
    ApiToken.objects.filter(user=user).update(expires=timezone.now() + timedelta(seconds=in_s))


def test_the_database_keeps_only_the_hash_of_the_key_it_showed_once(cast: Any) -> None:
    lines = create_operator("robot", "--role", "viewer", "--token")
    key = lines[-1]
    stored = ApiToken.objects.get(user__username="robot")
    assert stored.digest == hashlib.sha256(key.encode()).hexdigest()
    assert key not in {stored.digest, str(stored.pk), str(stored.created), str(stored.expires)}
    lifetime_s = (stored.expires - stored.created).total_seconds()
    assert lifetime_s == TOKEN_DAYS * DAY_S
    assert get(TOPICS, key).status_code == 200
    assert get(TOPICS, stored.digest).status_code == 401  # the hash is not a key


def test_token_days_sets_the_lifetime(db: Any) -> None:
    create_operator("robot", "--token", "--token-days", "7")
    stored = ApiToken.objects.get(user__username="robot")
    assert (stored.expires - stored.created).total_seconds() == 7 * DAY_S


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--token", "--token-days", "0"), f"--token-days: a token lives 1 to {TOKEN_DAYS_MAX}"),
        (("--token", "--token-days", str(TOKEN_DAYS_MAX + 1)), "--token-days: a token lives"),
        (("--token-days", "7"), "--token-days needs --token"),
    ],
)
def test_a_lifetime_out_of_range_is_refused_before_anything_is_made(
    db: Any, args: tuple[str, ...], message: str
) -> None:
    with pytest.raises(CommandError, match=message):
        create_operator("robot", *args)
    assert not User.objects.filter(username="robot").exists()


def test_a_new_token_replaces_the_old_one_which_stops_working(cast: Any) -> None:
    first = create_operator("robot", "--role", "viewer", "--token")[-1]
    lines = create_operator("robot", "--role", "viewer", "--token")
    assert "the previous API token of robot no longer works" in lines
    assert get(TOPICS, first).status_code == 401
    assert get(TOPICS, lines[-1]).status_code == 200
    assert ApiToken.objects.filter(user__username="robot").count() == 1


def test_an_expired_token_is_refused_with_a_401_that_says_so_at_every_door(
    cast: Any, viewer: User
) -> None:
    key, _ = issue_token(viewer)
    assert get(TOPICS, key).status_code == 200
    expire(viewer)
    for path in (TOPICS, ROUTE):
        refused = get(path, key)
        assert refused.status_code == 401, path
        assert refused.json()["detail"].startswith(EXPIRED), path
        assert "create_operator USERNAME --token" in refused.json()["detail"]
        assert refused["WWW-Authenticate"] == "Token"
    metrics = get("/metrics", key, REMOTE_ADDR="192.0.2.10")
    assert metrics.status_code == 401
    assert metrics.content.decode().startswith(f"invalid token: {EXPIRED}")


def test_the_route_lane_stops_trusting_a_cached_grant_when_the_token_expires(
    cast: Any, viewer: User, settings: Any
) -> None:
    # Grants are cached for a minute here: only the token's own expiry may end this one.
    settings.NAMESRV_WEB = {"TOKEN_CACHE_TTL_MS": 60_000}
    key, _ = issue_token(viewer)
    expire(viewer, in_s=1.0)
    assert get(ROUTE, key).status_code == 200
    started = time.monotonic()
    while (answer := get(ROUTE, key)).status_code == 200:
        assert time.monotonic() - started < 1.0 + SLACK_S, "served past the token's expiry"
        time.sleep(POLL_S)
    assert answer.status_code == 401 and answer.json()["detail"].startswith(EXPIRED)


def test_an_inactive_users_token_is_refused(cast: Any) -> None:
    user = make_user("gone", "viewer")
    key, _ = issue_token(user)
    User.objects.filter(pk=user.pk).update(is_active=False)
    assert get(TOPICS, key).status_code == 401
    assert get(ROUTE, key).status_code == 401


def test_a_bearer_header_is_told_which_scheme_the_api_takes(viewer: User) -> None:
    key, _ = issue_token(viewer)
    for path in (ROUTE, TOPICS):
        answer = Client().get(path, headers={"Authorization": f"Bearer {key}"})
        assert answer.status_code == 401
        assert answer.json()["detail"] == (
            "The API takes 'Authorization: Token <key>'; the Bearer scheme is not used here."
        )
