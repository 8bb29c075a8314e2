"""API permissions: viewers read, operators write, anonymous route reads only when enabled."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from namesrv_app.gateway_client import web_setting
from namesrv_app.roles import is_operator, is_viewer


class IsViewer(BasePermission):
    """Safe methods for viewers (and operators); anything else for operators only."""

    message = "A viewer or operator role is required."

    def has_permission(self, request: Request, view: Any) -> bool:
        """Reads need a role; writes need the operator role."""
        if request.method in SAFE_METHODS:
            return is_viewer(request.user)
        return is_operator(request.user)


class IsOperator(BasePermission):
    """Every method needs the operator role (superusers count)."""

    message = "The operator role is required."

    def has_permission(self, request: Request, view: Any) -> bool:
        """Only operators."""
        return is_operator(request.user)


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
