"""The API's token authentication: DRF's header handling over hashed, expiring tokens."""

from __future__ import annotations

from typing import Any

from rest_framework.authentication import TokenAuthentication

from namesrv_app.models import ApiToken
from namesrv_app.tokens import authenticate_token


class HashedTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>``, checked by :func:`namesrv_app.tokens.authenticate_token`.

    A subclass of DRF's class, so the header parsing, the ``WWW-Authenticate: Token``
    of a 401 and the OpenAPI ``tokenAuth`` scheme stay exactly as they were.
    """

    model = ApiToken

    def authenticate_credentials(self, key: str) -> tuple[Any, ApiToken]:
        """The user of a valid, unexpired key; AuthenticationFailed otherwise."""
        return authenticate_token(key)
