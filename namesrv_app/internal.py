"""Internal request codes, served on the gateway's loopback-only second port.

Other processes of the same node (the Celery scan task, the web process) reach
the gateway through these. Every request must come from a loopback peer and
carry the node's secret in ext ``secret``; anything else gets NO_PERMISSION.
The codes sit far above RocketMQ's so a misdirected client cannot hit them by
accident.
"""

from __future__ import annotations

import hmac
import json
from enum import IntEnum
from typing import TYPE_CHECKING

from namesrv_app import selectors
from namesrv_app.services import NameServerService, ServiceError
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, make_response
from remoting.errors import HeaderFieldError
from remoting.headers import header_int, header_str

if TYPE_CHECKING:
    from remoting.server import Connection

SECRET_FIELD = "secret"
REMARK_FORBIDDEN = "internal request refused"


class InternalCode(IntEnum):
    """Requests only the node's own processes send."""

    SCAN_NOT_ACTIVE_BROKER = 40001
    """ExpireBrokers(now_ms); ext ``now_ms`` optional (default: the gateway's clock).
    Answers the number of expired live entries in ext ``expired``."""
    NODE_STATUS = 40002
    """Answers a JSON body: ReplicatorStatus fields plus ``routes_version``."""


def secret_matches(request: RemotingCommand, secret: str) -> bool:
    """True when ext ``secret`` equals ``secret`` (constant time); never for an empty secret."""
    given = header_str(request, SECRET_FIELD)
    if not secret or given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8"), secret.encode("utf-8"))


class InternalDispatcher:
    """The handler of the internal port."""

    def __init__(self, service: NameServerService, secret: str) -> None:
        self.service = service
        self.secret = secret

    async def handle(
        self, request: RemotingCommand, conn: Connection | None
    ) -> RemotingCommand | None:
        """Answer an internal request; refuse non-loopback peers and wrong secrets."""
        if conn is None or not conn.is_loopback or not secret_matches(request, self.secret):
            return make_response(request, ResponseCode.NO_PERMISSION, remark=REMARK_FORBIDDEN)
        try:
            if request.code == InternalCode.SCAN_NOT_ACTIVE_BROKER:
                response = await self._scan(request)
            elif request.code == InternalCode.NODE_STATUS:
                response = self._status(request)
            else:
                response = make_response(
                    request,
                    ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                    remark=f" request type {request.code} not supported",
                )
        except (HeaderFieldError, ServiceError) as exc:
            response = make_response(request, ResponseCode.SYSTEM_ERROR, remark=str(exc))
        return None if request.is_oneway else response

    async def _scan(self, request: RemotingCommand) -> RemotingCommand:
        outcome = await self.service.expire_brokers(header_int(request, "now_ms"))
        return make_response(
            request, ResponseCode.SUCCESS, ext_fields={"expired": str(len(outcome.expired))}
        )

    def _status(self, request: RemotingCommand) -> RemotingCommand:
        status = selectors.node_status(self.service.replicator)
        body = json.dumps(status, sort_keys=True, separators=(",", ":")).encode("utf-8")
        return make_response(request, ResponseCode.SUCCESS, body=body)
