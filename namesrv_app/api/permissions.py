"""API permissions: viewers read, operators write, anonymous route reads only when enabled."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from namesrv_app.gateway_client import web_setting
from namesrv_app.roles import OPERATOR_GROUP, VIEWER_GROUP, denial, is_operator, is_viewer

# What a read needs, as a denial names it: operators read too.
READ_ROLE = f"{VIEWER_GROUP} (or {OPERATOR_GROUP})"


class IsViewer(BasePermission):
    """Safe methods for viewers (and operators); anything else for operators only.

    A refusal names the role the request needs and the one the caller has (DRF makes a
    permission object per request, so the message is this request's own)."""

    message = denial(READ_ROLE, None)

    def has_permission(self, request: Request, view: Any) -> bool:
        """Reads need a role; writes need the operator role."""
        if request.method in SAFE_METHODS:
            allowed, needed = is_viewer(request.user), READ_ROLE
        else:
            allowed, needed = is_operator(request.user), OPERATOR_GROUP
        if not allowed:
            self.message = denial(needed, request.user)
        return allowed


class IsOperator(BasePermission):
    """Every method needs the operator role (superusers count)."""

    message = denial(OPERATOR_GROUP, None)

    def has_permission(self, request: Request, view: Any) -> bool:
        """Only operators."""
        allowed = is_operator(request.user)
        if not allowed:
            self.message = denial(OPERATOR_GROUP, request.user)
        return allowed


class RouteReadPermission(IsViewer):
    """Route reads: anyone when NAMESRV_WEB['ALLOW_ANONYMOUS_ROUTE_READS'] is on."""

    def has_permission(self, request: Request, view: Any) -> bool:
        """Anonymous GETs pass only with the setting on."""
        if request.method in SAFE_METHODS and web_setting("ALLOW_ANONYMOUS_ROUTE_READS", False):
            return True
        return super().has_permission(request, view)


class ApiDocsPermission(IsViewer):
    """The OpenAPI schema and its docs: a console role, or anyone when
    NAMESRV_WEB['PUBLIC_API_DOCS'] is on (the schema maps every endpoint an
    attacker would probe, so it is not public by default)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        """Anyone with the setting on; otherwise viewers and operators."""
        if web_setting("PUBLIC_API_DOCS", False):
            return True
        return super().has_permission(request, view)
