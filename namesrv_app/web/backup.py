"""The Nodes page's backup button: a plain GET link that downloads this node's backup.

The same file as ``GET /api/v1/backup/`` (:func:`namesrv_app.backups.download`), for a
signed-in operator: the console's operator check (``console_view(operator=True)``'s:
the login page for a visitor, 403 for a viewer), and recorded in the audit log the same
way, refused or answered.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.views.decorators.http import require_GET

from namesrv_app import audit, backups
from namesrv_app.gateway_client import GatewayError
from namesrv_app.roles import is_operator


@require_GET
@login_required
def backup(request: HttpRequest) -> HttpResponseBase:
    """This node's backup file (operators); the reason in plain text when there is none."""
    # Before the role check, so that a viewer's refused attempt is recorded too.
    audit.record_read(request, action=backups.AUDIT_ACTION)
    if not is_operator(request.user):
        raise PermissionDenied("this page needs the operator role")
    try:
        return backups.download(request)
    except GatewayError as exc:
        # A download link has no page to show the error on.
        audit.note(request, result=str(exc), action=backups.AUDIT_ACTION, failed=True)
        return HttpResponse(
            f"No backup: {exc}\n", status=exc.http_status, content_type="text/plain"
        )
