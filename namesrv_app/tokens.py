"""API tokens: a random key shown once, stored only as its SHA-256 digest, with an expiry.

DRF's stock tokens kept the key itself in the shared database, so anyone who read the
database (a backup, a replica, a copied SQLite file) held every account's API access.
Here the database keeps SHA-256 of the key. The key is 160 random bits, so there is
nothing to guess and a fast hash is enough: one indexed lookup authenticates a request,
as before. Keys look as DRF's did (40 hex characters, ``Authorization: Token <key>``),
so clients do not change.

Every token expires (``NAMESRV_WEB['TOKEN_DAYS']``, 90 days unless configured, or
``create_operator --token-days``), and an expired one is refused with a 401 that says so.
:func:`authenticate_token` is the one check: the DRF authentication class, the route
reads answered beside Django and ``/metrics`` all call it.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from rest_framework.exceptions import AuthenticationFailed

from namesrv_app.gateway_client import web_setting
from namesrv_app.models import ApiToken

TOKEN_KEY_BYTES = 20
"""160 random bits, written as 40 hex characters (the length of DRF's keys)."""
TOKEN_DAYS = 90
TOKEN_DAYS_MAX = 3650
INVALID_TOKEN = "Invalid token."
INACTIVE_USER = "User inactive or deleted."


def token_digest(key: str) -> str:
    """What the database keeps of ``key``: its SHA-256, lower-case hex."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def default_token_days() -> int:
    """How long a new token lives unless told otherwise (``NAMESRV_WEB['TOKEN_DAYS']``)."""
    return int(web_setting("TOKEN_DAYS", TOKEN_DAYS))


def check_token_days(days: int) -> None:
    """ValueError unless ``days`` is a lifetime a token may have (1..TOKEN_DAYS_MAX)."""
    if not 1 <= days <= TOKEN_DAYS_MAX:
        raise ValueError(f"a token lives 1 to {TOKEN_DAYS_MAX} days, not {days}")


def issue_token(user: Any, days: int | None = None) -> tuple[str, ApiToken]:
    """A new key for ``user`` and its stored row, replacing the user's previous token.

    The key is returned here and nowhere else: only its digest is stored.
    """
    lifetime = default_token_days() if days is None else days
    check_token_days(lifetime)
    key = secrets.token_hex(TOKEN_KEY_BYTES)
    now = timezone.now()
    with transaction.atomic(using=ApiToken.objects.db):
        ApiToken.objects.filter(user=user).delete()
        token = ApiToken.objects.create(
            user=user, digest=token_digest(key), created=now, expires=now + timedelta(days=lifetime)
        )
    return key, token


def expired_message(expires: datetime) -> str:
    """The 401 detail of an expired token: when it ended and how to get another."""
    return (
        f"API token expired on {expires:%Y-%m-%d %H:%M} UTC; ask an administrator for a "
        "new one (manage.py create_operator USERNAME --token)"
    )


def authenticate_token(key: str, now: datetime | None = None) -> tuple[Any, ApiToken]:
    """(user, token) for a valid ``key``; AuthenticationFailed (a 401) for an unknown or
    expired key or an inactive user."""
    try:
        token = ApiToken.objects.select_related("user").get(digest=token_digest(key))
    except ApiToken.DoesNotExist:
        raise AuthenticationFailed(INVALID_TOKEN) from None
    if (now or timezone.now()) >= token.expires:
        raise AuthenticationFailed(expired_message(token.expires))
    if not token.user.is_active:
        raise AuthenticationFailed(INACTIVE_USER)
    return token.user, token
