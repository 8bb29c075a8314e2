"""The API's token authentication: DRF's header handling over hashed, expiring tokens,
and the route reads' grants held in Django's cache."""

from __future__ import annotations

from typing import Any

from django.core.cache import BaseCache, caches
from django.utils import timezone
from django.utils.functional import cached_property
from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from namesrv_app.gateway_client import web_setting
from namesrv_app.models import ApiToken
from namesrv_app.roles import role_of
from namesrv_app.tokens import authenticate_token, token_digest

TOKEN_GRANTS_CACHE = "api_tokens"
"""The Django cache (settings.CACHES) holding route-read grants, per process."""
TOKEN_CACHE_TTL_MS = 5_000
GRANTED_ROLES = frozenset({"viewer", "operator"})
BEARER_KEYWORD = b"bearer"
BEARER_REFUSED = "The API takes 'Authorization: Token <key>'; the Bearer scheme is not used here."


class HashedTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>``, checked by :func:`namesrv_app.tokens.authenticate_token`.

    A subclass of DRF's class, so the header parsing, the ``WWW-Authenticate: Token``
    of a 401 and the OpenAPI ``tokenAuth`` scheme stay exactly as they were.
    """

    model = ApiToken

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        """DRF's check, but a ``Bearer`` header (what OAuth clients send) is told which
        scheme to use instead of "credentials were not provided"."""
        scheme = get_authorization_header(request).split()[:1]
        if scheme and scheme[0].lower() == BEARER_KEYWORD:
            raise AuthenticationFailed(BEARER_REFUSED)
        answer: tuple[Any, ApiToken] | None = super().authenticate(request)
        return answer

    def authenticate_credentials(self, key: str) -> tuple[Any, ApiToken]:
        """The user of a valid, unexpired key; AuthenticationFailed otherwise."""
        return authenticate_token(key)


class RouteReadTokenAuthentication(TokenAuthentication):
    """The REST route reads' token check (namesrv_app.api.route_reads): the same check
    as the API's, its grants held in Django's cache.

    A grant is held for ``NAMESRV_WEB['TOKEN_CACHE_TTL_MS']`` (5 s), never past the
    token's expiry, keyed by the token's digest (the cache never holds a key). Only
    grants are held: an unknown or expired token, an inactive user or one without a
    console role is checked again at every request (and answered by the DRF view), and
    a deleted token, a deactivated user or a lost role stops reading routes within
    the bound.
    """

    model = ApiToken

    def authenticate_credentials(self, key: str) -> tuple[str, str]:
        """The console role ``key`` reads routes with (held, or checked and held);
        AuthenticationFailed when the token is refused or its user has no console role."""
        role = self.held_role(key)
        if role is not None:
            return role, key
        now = timezone.now()
        user, token = authenticate_token(key, now)
        role = role_of(user)
        if role not in GRANTED_ROLES:
            raise AuthenticationFailed("no console role")
        ttl_s = web_setting("TOKEN_CACHE_TTL_MS", TOKEN_CACHE_TTL_MS) / 1000
        valid_s = (token.expires - now).total_seconds()
        # A plain string: Django's local-memory cache pickles every value it holds.
        self.grants.set(token_digest(key), role, min(ttl_s, valid_s))
        return role, key

    def held_role(self, key: str) -> str | None:
        """The role held for ``key``, None when none is (no database read)."""
        role: str | None = self.grants.get(token_digest(key))
        return role

    @cached_property
    def grants(self) -> BaseCache:
        """The grants cache, looked up once: ``caches[...]`` costs as much as the lane's
        own hit, and the local-memory backend is safe to share between threads."""
        return caches[TOKEN_GRANTS_CACHE]
