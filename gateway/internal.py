"""Internal requests, served on the gateway's loopback-only second port.

Other processes of the same node (the Celery scan task, the web process, the
launcher) reach the gateway through these (the codes: :class:`InternalCode` in
:mod:`gateway.private_codes`). Every request must come from a loopback peer and carry
the node's secret in ext ``secret``; anything else gets NO_PERMISSION.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from gateway import selectors
from gateway.backups import BackupTooLarge, take_backup
from gateway.dispatch import replication_remark
from gateway.member_addrs import member_addrs
from gateway.private_codes import STATUS_BROKERS_FIELD, STATUS_BROKERS_WANTED, InternalCode
from gateway.scan_fallback import ROLE_STANDALONE, ScanFallback, ScanOutcome
from gateway.services import NameServerService, ServiceError
from raftstore.backup import DEFAULT_CLUSTER_NAME, BackupError
from raftstore.raft import MembershipError
from raftstore.replicator import ReplicationError
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, make_response
from remoting.consistency import (
    CONSISTENCY_FIELD,
    CONSISTENCY_LEVELS,
    CONSISTENCY_LINEARIZABLE,
    CONSISTENCY_LOCAL,
)
from remoting.errors import HeaderFieldError
from remoting.headers import header_int, header_str

if TYPE_CHECKING:
    from remoting.connection import Connection

SECRET_FIELD = "secret"
ADDR_FIELDS = ("addr", "address")
"""The member address of RAFT_ADD_NODE / RAFT_REMOVE_NODE (``address`` is accepted too)."""
REMARK_FORBIDDEN = "internal request refused"
REMARK_ADDR_MISSING = "ext addr (host:port of the Raft member) is missing"
JOURNAL_FIELD = "journal"
JOURNAL_ONLY = "only"
"""NODE_STATUS with ext ``journal=only`` answers ``{"expiries": [...], "started_us": N,
"now_us": N}`` alone: this node's journal of its own changes, when it began and the
node's wall clock as it answered (``gateway.expiry_reports``), without the digests the
full status computes, for a reader that asks often (the consistency experiments)."""
BACKUP_CLUSTER_FIELD = "cluster"
"""BACKUP: the cluster's name, written into the backup's header and file name."""


InternalHandler = Callable[[RemotingCommand], Awaitable[RemotingCommand]]


def secret_matches(request: RemotingCommand, secret: str) -> bool:
    """True when ext ``secret`` equals ``secret`` (constant time); never for an empty secret."""
    given = header_str(request, SECRET_FIELD)
    if not secret or given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8"), secret.encode("utf-8"))


def _json_response(request: RemotingCommand, value: Any) -> RemotingCommand:
    body = json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return make_response(request, ResponseCode.SUCCESS, body=body)


class InternalDispatcher:
    """The handler of the internal port."""

    def __init__(
        self,
        service: NameServerService,
        secret: str,
        scan_fallback: ScanFallback | None = None,
    ) -> None:
        self.service = service
        self.secret = secret
        self.scan_fallback = scan_fallback if scan_fallback is not None else ScanFallback()
        self.last_scan: dict[str, object] | None = None
        """This node's last liveness scan (NODE_STATUS ``last_scan``): when it ended
        (``at_ms``, this node's clock), its role and how many brokers it expired."""
        service.scan_observers.append(self._note_scan)
        self.handlers: dict[int, InternalHandler] = {
            InternalCode.SCAN_NOT_ACTIVE_BROKER: self._scan,
            InternalCode.NODE_STATUS: self._status,
            InternalCode.RAFT_ADD_NODE: self._add_node,
            InternalCode.RAFT_REMOVE_NODE: self._remove_node,
            InternalCode.DIGEST_CHECKPOINTS: self._checkpoints,
            InternalCode.RAFT_COMPACT_LOG: self._compact,
            InternalCode.BACKUP: self._backup,
            InternalCode.MEMBER_ADDRS: self._member_addrs,
        }

    def _note_scan(self, result: ScanOutcome | Exception) -> None:
        if not isinstance(result, Exception):
            at_ms = self.service.clock.now_ms()
            self.last_scan = {"at_ms": at_ms, "role": result.role, "expired": len(result.expired)}

    async def handle(
        self, request: RemotingCommand, conn: Connection | None
    ) -> RemotingCommand | None:
        """Answer an internal request; refuse non-loopback peers and wrong secrets."""
        if conn is None or not conn.is_loopback or not secret_matches(request, self.secret):
            return make_response(request, ResponseCode.NO_PERMISSION, remark=REMARK_FORBIDDEN)
        handler = self.handlers.get(request.code)
        try:
            if handler is None:
                response = make_response(
                    request,
                    ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                    remark=f" request type {request.code} not supported",
                )
            else:
                response = await handler(request)
        except (HeaderFieldError, ServiceError, MembershipError) as exc:
            response = make_response(request, ResponseCode.SYSTEM_ERROR, remark=str(exc))
        except ReplicationError as exc:
            response = make_response(
                request, ResponseCode.SYSTEM_ERROR, remark=replication_remark(exc)
            )
        return None if request.is_oneway else response

    async def _scan(self, request: RemotingCommand) -> RemotingCommand:
        now_ms = header_int(request, "now_ms")
        # Before the scan itself: its arrival is what proves the external scans work.
        self.scan_fallback.external_scan()
        outcome = await self.service.scan(now_ms)
        ext = {"expired": str(len(outcome.expired))}
        if outcome.role != ROLE_STANDALONE:
            ext["role"] = outcome.role
        return make_response(request, ResponseCode.SUCCESS, ext_fields=ext)

    async def _status(self, request: RemotingCommand) -> RemotingCommand:
        if header_str(request, JOURNAL_FIELD) == JOURNAL_ONLY:
            # The journal alone: no digest, cheap enough to ask before every write.
            journal = self.service.expiry_reports
            return _json_response(
                request,
                {
                    "expiries": journal.snapshot(),
                    "started_us": journal.started_us,
                    "now_us": journal.clock_us(),
                },
            )
        if header_str(request, CONSISTENCY_FIELD) == CONSISTENCY_LINEARIZABLE:
            await self.service.replicator.barrier()
        status = selectors.node_status(self.service.replicator)
        fallback = self.scan_fallback
        status["alarms"] = [*status.get("alarms", ()), *fallback.alarms()]
        status["scan_fallback"] = fallback.status()
        status["last_scan"] = self.last_scan
        status["expiries"] = self.service.expiry_reports.snapshot()
        if header_str(request, STATUS_BROKERS_FIELD) == STATUS_BROKERS_WANTED:
            now_ms = self.service.clock.now_ms()
            status["brokers"] = selectors.broker_views(self.service.replicator, now_ms)
        return _json_response(request, status)

    async def _add_node(self, request: RemotingCommand) -> RemotingCommand:
        await self.service.add_raft_member(_member_addr(request))
        return make_response(request, ResponseCode.SUCCESS)

    async def _remove_node(self, request: RemotingCommand) -> RemotingCommand:
        await self.service.remove_raft_member(_member_addr(request))
        return make_response(request, ResponseCode.SUCCESS)

    async def _checkpoints(self, request: RemotingCommand) -> RemotingCommand:
        points = self.service.digest_checkpoints()
        return _json_response(request, {str(index): digest for index, digest in points.items()})

    async def _compact(self, request: RemotingCommand) -> RemotingCommand:
        self.service.compact_raft_log()
        return make_response(request, ResponseCode.SUCCESS)

    async def _backup(self, request: RemotingCommand) -> RemotingCommand:
        cluster = header_str(request, BACKUP_CLUSTER_FIELD) or DEFAULT_CLUSTER_NAME
        # Linearizable unless asked otherwise: only recovery after quorum loss reads locally.
        consistency = header_str(request, CONSISTENCY_FIELD) or CONSISTENCY_LINEARIZABLE
        if consistency not in CONSISTENCY_LEVELS:
            raise ServiceError(
                f"ext {CONSISTENCY_FIELD}={consistency!r}: a backup is read "
                f"{CONSISTENCY_LINEARIZABLE} (the default) or {CONSISTENCY_LOCAL}"
            )
        try:
            data = await take_backup(
                self.service.replicator,
                cluster,
                self.service.clock.now_ms(),
                linearizable=consistency == CONSISTENCY_LINEARIZABLE,
            )
        except (BackupError, BackupTooLarge) as exc:
            raise ServiceError(str(exc)) from exc
        return make_response(request, ResponseCode.SUCCESS, body=data)

    async def _member_addrs(self, request: RemotingCommand) -> RemotingCommand:
        # A few keys read, no digest: the address server asks up to once a second.
        return _json_response(request, member_addrs(self.service.replicator))


def _member_addr(request: RemotingCommand) -> str:
    for name in ADDR_FIELDS:
        value = header_str(request, name)
        if value:
            return value
    raise ServiceError(REMARK_ADDR_MISSING)
