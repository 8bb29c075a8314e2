"""``GET /api/v1/backup/``: this node's backup file, for an operator's token or session.

The answer is the file itself (``application/octet-stream``, an attachment named for the
cluster, the log index and the UTC time), whatever the client's ``Accept`` says; a
refusal or a gateway failure is JSON like every other API answer. Each request by a
signed-in user is in the audit log, answered or refused (a viewer's 403 too).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from namesrv_app import audit, backups
from namesrv_app.api import serializers as s
from namesrv_app.api.permissions import IsOperator

BACKUP_RESPONSES = {
    (200, backups.CONTENT_TYPE): OpenApiResponse(
        OpenApiTypes.BINARY,
        description="the backup file (docs/RAFT.md, Backup and restore): raft mode reads the "
        "replicated state after a barrier committed through the log (a linearizable point)",
    ),
    401: OpenApiResponse(s.ErrorSerializer, description="not authenticated"),
    403: OpenApiResponse(s.ErrorSerializer, description="not an operator"),
    502: OpenApiResponse(s.ErrorSerializer, description="the gateway refused"),
    503: OpenApiResponse(
        s.ErrorSerializer, description="the gateway is unreachable, or raft mode has no quorum"
    ),
}


class BackupView(APIView):
    """A consistent copy of the replicated state: routes, brokers, KV and config."""

    permission_classes = [IsOperator]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        """Ask the audit log to record this read before the checks run, so that a refused
        one is recorded too (once the caller is signed in)."""
        audit.record_read(request._request, action=backups.AUDIT_ACTION)
        super().initial(request, *args, **kwargs)

    def perform_content_negotiation(
        self, request: Request, force: bool = False
    ) -> tuple[BaseRenderer, str]:
        """Never 406: the file answers any ``Accept``, and errors are JSON."""
        negotiated: tuple[BaseRenderer, str] = super().perform_content_negotiation(
            request, force=True
        )
        return negotiated

    @extend_schema(operation_id="v1_backup_retrieve", responses=BACKUP_RESPONSES)
    def get(self, request: Request) -> HttpResponseBase:
        """This node's backup file (operators)."""
        return backups.download(request._request)
