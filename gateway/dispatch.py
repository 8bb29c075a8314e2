"""Request-code dispatch: every NameServer request code to its handler.

Answers follow RocketMQ 5.x ``DefaultRequestProcessor`` and
``ClientRequestProcessor`` code for code and remark for remark, with two
deliberate 4.x-style choices:

* UNREGISTER_BROKER is applied before the answer (4.x is synchronous; 5.x
  only queues it). The broker cannot tell the difference, and the answer then
  means the unregistration really happened.
* An unknown code is answered with 3 (5.x), not left unanswered (4.x).

One addition: a REGISTER_BROKER or UNREGISTER_BROKER that would move a broker entry
another open connection holds is answered 16 (NO_PERMISSION) before anything is
proposed (:mod:`gateway.broker_holds`, docs/SECURITY.md "Who may move a broker").

Handlers only parse headers and bodies, call one service or selector and shape
the answer; every rule lives in ``raftstore`` and every write goes through
:class:`~gateway.services.NameServerService`.

Where each code is handled: both tables in :meth:`RequestDispatcher.__init__` name
every code. Writes and reads that may wait (a linearizable route query's barrier) are
methods here; reads answered at once (route queries without a barrier, cluster info,
topic lists, KV reads, the namesrv config, broker member groups) are methods of
:class:`gateway.dispatch_reads.ImmediateReads`, reached as ``dispatcher.reads``.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.broker_holds import HoldRefusal, Touch
from gateway.clock import Clock
from gateway.dispatch_reads import (
    REMARK_DISABLE as REMARK_DISABLE,
    REMARK_NOT_READY,
    ROUTE_FAQ_URL as ROUTE_FAQ_URL,
    ImmediateReads,
    need_wait_for_service,
    route_not_found_remark as route_not_found_remark,
)
from gateway.registration import Refused, Registrar, replication_of
from gateway.route_cache import RouteCache
from gateway.route_request import is_linearizable, wants_standard_json as wants_standard_json
from gateway.services import NameServerService, ServiceError
from gateway.split_registration import PartHeld
from raftstore.config import NamesrvConfig, blacklist_reason
from raftstore.replicator import NoQuorumError, ReplicationError
from raftstore.results import RegisterBrokerOutcome
from remoting import bodies
from remoting.codes import FLAG_ONEWAY, RequestCode, ResponseCode
from remoting.command import RemotingCommand, make_response
from remoting.consistency import CONSISTENCY_FIELD, CONSISTENCY_LINEARIZABLE
from remoting.errors import BodyDecodeError, HeaderFieldError
from remoting.headers import header_int, header_str, require_int, require_str
from remoting.register_request import (
    APPLIED_VERSION_FIELD,
    ASSIGNED_BROKER_ID_FIELD,
    CONFIRM_OFFSET_FIELD,
    MAX_OFFSET_FIELD,
    RAFT_LOG_INDEX_FIELD,
    RegisterBrokerRequest,
)

if TYPE_CHECKING:
    from remoting.connection import Connection

log = logging.getLogger(__name__)

Handler = Callable[[RemotingCommand, "Connection | None"], Awaitable[RemotingCommand]]


class Pending(enum.Enum):
    """The type of :data:`PENDING`."""

    PENDING = "pending"


PENDING = Pending.PENDING
"""What :meth:`RequestDispatcher.answer_now` returns for a request that must wait."""

SyncHandler = Callable[[RemotingCommand], "RemotingCommand | Pending"]

REMARK_REGISTER_FAILED = "register broker failed"
REMARK_BLACKLISTED = "Can not update config in black list."


def blacklisted_remark(key: str) -> str:
    """Upstream's remark, then which key refused the update and why."""
    return f"{REMARK_BLACKLISTED} {key} is {blacklist_reason(key)}."


def replication_remark(exc: ReplicationError) -> str:
    """The SYSTEM_ERROR remark for a write (or barrier) raft could not apply in time.

    Says plainly that quorum was missing, so an operator reading a broker's log
    does not hunt for a crash; a NoQuorumError write is indeterminate (it may still
    commit), which the message itself states.
    """
    text = str(exc)
    if isinstance(exc, NoQuorumError):
        return "no raft quorum: " + text.removeprefix("no quorum: ")
    return f"raft replication failed: {text}"


def _log_place(log_index: int, applied_version: int) -> dict[str, str]:
    """The answer fields that say where a raft write's command sits in the log: the
    entry's index (``raftLogIndex``) and the table version the command left
    (``appliedVersion``, which orders the commands of one entry too); none when no entry
    carried it (answered from the applied state, or eventual mode)."""
    if not log_index:
        return {}
    return {RAFT_LOG_INDEX_FIELD: str(log_index), APPLIED_VERSION_FIELD: str(applied_version)}


def _peer_host(conn: Connection | None) -> str:
    return "" if conn is None else conn.peer_host


@dataclass(frozen=True, slots=True)
class _Touching:
    """A heartbeat-like request's broker, and the offsets it may report: the sender's
    own when it holds the entry, none when it only refreshes liveness."""

    cluster: str
    addr: str
    name: str
    offsets: dict[str, Any]


class RequestDispatcher:
    """Answers NameServer requests; ``handle`` is the remoting server's handler."""

    def __init__(
        self,
        service: NameServerService,
        *,
        clock: Clock | None = None,
        route_cache: RouteCache | None = None,
        node_properties: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        self.service = service
        # The per-process keys (raftstore.config.NODE_KEYS) as this process runs them.
        self.node_properties = node_properties
        self.replicator = service.replicator
        self.clock: Clock = clock if clock is not None else service.clock
        # The readiness window is measured from here, as upstream measures it
        # from the processor's construction.
        self.started_ms = self.clock.now_ms()
        self.route_cache = route_cache if route_cache is not None else RouteCache(self.replicator)
        self.registrar = Registrar(service)
        self.reads = reads = ImmediateReads(
            self.replicator, self.route_cache, self.clock, self.started_ms, node_properties
        )
        # Requests answered without waiting for anything: the remoting server
        # writes their answer from answer_now without creating a Task. All but
        # 105 (kept here for its barrier twin below) live in gateway.dispatch_reads.
        self.sync_handlers: dict[int, SyncHandler] = {
            RequestCode.GET_KV_CONFIG: reads.get_kv_config,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.route_answer_now,
            RequestCode.GET_BROKER_CLUSTER_INFO: reads.get_broker_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: reads.get_all_topic_list,
            RequestCode.GET_KVLIST_BY_NAMESPACE: reads.get_kv_list_by_namespace,
            RequestCode.GET_TOPICS_BY_CLUSTER: reads.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: reads.get_system_topic_list,
            RequestCode.GET_UNIT_TOPIC_LIST: reads.get_unit_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: reads.get_has_unit_sub_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: reads.get_has_unit_sub_ununit_list,
            RequestCode.GET_NAMESRV_CONFIG: reads.get_namesrv_config,
            RequestCode.GET_BROKER_MEMBER_GROUP: reads.get_broker_member_group,
        }
        # Writes, and reads that may wait (a linearizable route query's barrier).
        self.handlers: dict[int, Handler] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            RequestCode.REGISTER_TOPIC_IN_NAMESRV: self.register_topic_in_namesrv,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_namesrv_config,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
        }

    def answer_now(self, request: RemotingCommand) -> RemotingCommand | Pending | None:
        """The answer to ``request`` if it needs no waiting, else :data:`PENDING`.

        None for one-way requests, which are never answered. Codes nobody
        handles are answered here too (3). A :data:`PENDING` request goes to
        :meth:`handle_async`.
        """
        code = request.code
        handler = self.sync_handlers.get(code)
        if handler is None:
            if code in self.handlers:
                return PENDING
            handler = self.unsupported
        try:
            response = handler(request)
        except (HeaderFieldError, ServiceError, BodyDecodeError) as exc:
            response = make_response(request, ResponseCode.SYSTEM_ERROR, remark=str(exc))
        if response is PENDING:
            return PENDING
        return None if request.flag & FLAG_ONEWAY else response

    async def handle(
        self, request: RemotingCommand, conn: Connection | None = None
    ) -> RemotingCommand | None:
        """Answer ``request``; None for one-way requests, which are never answered."""
        response = self.answer_now(request)
        if response is PENDING:
            return await self.handle_async(request, conn)
        return response

    async def handle_async(
        self, request: RemotingCommand, conn: Connection | None = None
    ) -> RemotingCommand | None:
        """Answer a request :meth:`answer_now` left :data:`PENDING` (writes, waiting reads)."""
        handler = self.handlers.get(request.code)
        try:
            if handler is None:
                response = self.unsupported(request)
            else:
                response = await handler(request, conn)
        except (HeaderFieldError, ServiceError, BodyDecodeError) as exc:
            response = make_response(request, ResponseCode.SYSTEM_ERROR, remark=str(exc))
        except ReplicationError as exc:
            log.info("request %d not applied: %s", request.code, exc)
            response = make_response(
                request, ResponseCode.SYSTEM_ERROR, remark=replication_remark(exc)
            )
        return None if request.is_oneway else response

    def _config(self) -> NamesrvConfig:
        # Kept current by the route cache's apply listener: no lock on the hot path.
        return self.route_cache.config

    # ---------------------------------------------------------------- KV config

    async def put_kv_config(
        self, request: RemotingCommand, conn: Connection | None
    ) -> RemotingCommand:
        """100: 1 "namespace or key is null" when either is missing; 1 "KV config quota
        exceeded: ..." when the put would grow the KV config past ``kvConfigBytesMax``."""
        await self.service.put_kv(
            namespace=header_str(request, "namespace"),
            key=header_str(request, "key"),
            value=header_str(request, "value"),
        )
        return make_response(request, ResponseCode.SUCCESS)

    async def delete_kv_config(
        self, request: RemotingCommand, conn: Connection | None
    ) -> RemotingCommand:
        """102: always 0 for a well-formed request."""
        await self.service.delete_kv(
            namespace=require_str(request, "namespace"), key=require_str(request, "key")
        )
        return make_response(request, ResponseCode.SUCCESS)

    # ---------------------------------------------------------------- brokers

    async def register_broker(
        self, request: RemotingCommand, conn: Connection | None
    ) -> RemotingCommand:
        """103: one decision (:class:`gateway.registration.Registrar`), then its answer:
        1 "crc32 not match", 16 when it would move an entry another connection holds,
        1 "register broker failed", else the master/HA address for slaves. A part of
        a split table before its last is answered 0 with a remark saying it is held."""
        decided = await self.registrar.register(
            RegisterBrokerRequest.read(request),
            channel=None if conn is None else conn.id,
            peer_host=_peer_host(conn),
            peer_subject=None if conn is None else conn.peer_subject,
        )
        if isinstance(decided, Refused):
            return make_response(request, decided.code, remark=decided.remark)
        if isinstance(decided, PartHeld):
            return make_response(request, ResponseCode.SUCCESS, remark=decided.remark)
        if decided.outcome.failed:
            return make_response(request, ResponseCode.SYSTEM_ERROR, remark=REMARK_REGISTER_FAILED)
        return self._registered(
            request, decided.outcome, _log_place(decided.log_index, decided.applied_version)
        )

    def _registered(
        self, request: RemotingCommand, outcome: RegisterBrokerOutcome, place: dict[str, str]
    ) -> RemotingCommand:
        """The answer to a REGISTER_BROKER accepted with ``outcome``; in raft mode it
        names where its command sits in the log (``place``: :func:`_log_place`) when an
        entry carried it, for whoever orders registrations against other writes (the
        consistency experiments)."""
        ext = {
            name: value
            for name, value in (
                ("haServerAddr", outcome.ha_server_addr),
                ("masterAddr", outcome.master_addr),
                (
                    ASSIGNED_BROKER_ID_FIELD,
                    None if outcome.assigned_broker_id is None else str(outcome.assigned_broker_id),
                ),
            )
            if value is not None
        } | place
        order_body = None
        if outcome.order_topic_config is not None and (
            self._config().return_order_topic_config_to_broker
        ):
            order_body = bodies.encode_kv_table(outcome.order_topic_config)
        return make_response(request, ResponseCode.SUCCESS, ext_fields=ext, body=order_body)

    async def unregister_broker(
        self, request: RemotingCommand, conn: Connection | None
    ) -> RemotingCommand:
        """104: applied before answering (see the module docstring); 16 when another
        connection holds an entry at that address."""
        cluster_name = require_str(request, "clusterName")
        broker_addr = require_str(request, "brokerAddr")
        broker_name = require_str(request, "brokerName")
        refusal = self.service.holds.check_unregister(
            request,
            channel=None if conn is None else conn.id,
            peer_host=_peer_host(conn),
            cluster=cluster_name,
            name=broker_name,
            addr=broker_addr,
            peer_subject=None if conn is None else conn.peer_subject,
        )
        if refusal is not None:
            return make_response(request, ResponseCode.NO_PERMISSION, remark=refusal.remark)
        result = await self.service.unregister_broker(
            cluster_name=cluster_name,
            broker_addr=broker_addr,
            broker_name=broker_name,
            broker_id=require_int(request, "brokerId"),
        )
        self.service.holds.unregistered(cluster=cluster_name, name=broker_name, addr=broker_addr)
        place = _log_place(result.log_index, result.applied_version)
        return make_response(request, ResponseCode.SUCCESS, ext_fields=place or None)

    async def broker_heartbeat(
        self, request: RemotingCommand, conn: Connection | None
    ) -> RemotingCommand:
        """904: refresh liveness; brokers send it one-way, so usually nobody reads the 0.
        Over another connection than the entry's holder's it is refused or refreshes
        liveness only (``broker_holds`` rule 5)."""
        touch = self._touch(request, conn)
        if isinstance(touch, RemotingCommand):
            return touch
        await self.service.broker_heartbeat(
            cluster_name=touch.cluster, broker_addr=touch.addr, **touch.offsets
        )
        return make_response(request, ResponseCode.SUCCESS)

    async def query_data_version(
        self, request: RemotingCommand, conn: Connection | None
    ) -> RemotingCommand:
        """322: ``changed`` plus the stored DataVersion body when the broker is live; its
        touch is checked as a heartbeat's (``broker_holds`` rule 5)."""
        touch = self._touch(request, conn)
        if isinstance(touch, RemotingCommand):
            return touch
        outcome = await self.service.query_data_version(
            cluster_name=touch.cluster,
            broker_addr=touch.addr,
            broker_name=touch.name,
            broker_id=require_int(request, "brokerId"),
            data_version=bodies.decode_data_version(request.body),
            **touch.offsets,
        )
        stored = outcome.data_version
        return make_response(
            request,
            ResponseCode.SUCCESS,
            ext_fields={"changed": "true" if outcome.changed else "false"},
            body=None if stored is None else bodies.encode_data_version(stored),
        )

    def _touch(
        self, request: RemotingCommand, conn: Connection | None
    ) -> _Touching | RemotingCommand:
        """The broker a heartbeat-like request touches and what it may report, or the
        NO_PERMISSION answer (``broker_holds`` rule 5). brokerName is required: 5.x sends
        it (@CFNotNull), and the ACL's brokerNames rule checks it."""
        cluster = require_str(request, "clusterName")
        addr = require_str(request, "brokerAddr")
        name = require_str(request, "brokerName")
        touch = self.service.holds.check_touch(
            request,
            channel=None if conn is None else conn.id,
            peer_host=_peer_host(conn),
            cluster=cluster,
            addr=addr,
            name=name,
            peer_subject=None if conn is None else conn.peer_subject,
        )
        if isinstance(touch, HoldRefusal):
            return make_response(request, ResponseCode.NO_PERMISSION, remark=touch.remark)
        full = touch is Touch.FULL
        return _Touching(
            cluster,
            addr,
            name,
            {
                "max_offset": header_int(request, MAX_OFFSET_FIELD) if full else None,
                "confirm_offset": header_int(request, CONFIRM_OFFSET_FIELD) if full else None,
                "replication": replication_of(request) if full else None,
            },
        )

    async def wipe_write_perm_of_broker(
        self, request: RemotingCommand, conn: Connection | None
    ) -> RemotingCommand:
        """205: ext ``wipeTopicCount``."""
        count = await self.service.wipe_write_perm(require_str(request, "brokerName"))
        return make_response(
            request, ResponseCode.SUCCESS, ext_fields={"wipeTopicCount": str(count)}
        )

    async def add_write_perm_of_broker(
        self, request: RemotingCommand, conn: Connection | None
    ) -> RemotingCommand:
        """327: ext ``addTopicCount``."""
        count = await self.service.add_write_perm(require_str(request, "brokerName"))
        return make_response(
            request, ResponseCode.SUCCESS, ext_fields={"addTopicCount": str(count)}
        )

    # ---------------------------------------------------------------- routes

    async def get_route_info_by_topic(
        self, request: RemotingCommand, conn: Connection | None
    ) -> RemotingCommand:
        """105 with consistency=linearizable: a barrier first, then :meth:`route_answer`."""
        config = self._config()
        if need_wait_for_service(config, self.started_ms, self.clock.now_ms()):
            return make_response(request, ResponseCode.SYSTEM_ERROR, remark=REMARK_NOT_READY)
        if header_str(request, CONSISTENCY_FIELD) == CONSISTENCY_LINEARIZABLE:
            await self.replicator.barrier()
        return self.route_answer(request)

    def route_answer_now(self, request: RemotingCommand) -> RemotingCommand | Pending:
        """105 without waiting; :data:`PENDING` for a linearizable read (it needs a barrier)."""
        if is_linearizable(request):
            return PENDING
        return self.route_answer(request)

    def route_answer(self, request: RemotingCommand) -> RemotingCommand:
        """105: :meth:`ImmediateReads.route_answer` (kept here: tests and the route
        fast path's patches call it on the dispatcher)."""
        return self.reads.route_answer(request)

    async def delete_topic_in_namesrv(
        self, request: RemotingCommand, conn: Connection | None
    ) -> RemotingCommand:
        """216: a non-empty clusterName limits the delete to that cluster."""
        await self.service.delete_topic(
            require_str(request, "topic"), header_str(request, "clusterName") or None
        )
        return make_response(request, ResponseCode.SUCCESS)

    async def register_topic_in_namesrv(
        self, request: RemotingCommand, conn: Connection | None
    ) -> RemotingCommand:
        """217: only the body's queueDatas matter; no body does nothing."""
        if request.body:
            route = bodies.decode_topic_route_data(request.body)
            await self.service.register_topic(require_str(request, "topic"), route.queue_datas)
        return make_response(request, ResponseCode.SUCCESS)

    # ---------------------------------------------------------------- topic lists

    # ---------------------------------------------------------------- config

    async def update_namesrv_config(
        self, request: RemotingCommand, conn: Connection | None
    ) -> RemotingCommand:
        """318: merge known keys; 16 when any key is blacklisted; no body does nothing."""
        if request.body:
            rejected = await self.service.update_namesrv_config(
                bodies.decode_properties(request.body)
            )
            if rejected is not None:
                return make_response(
                    request, ResponseCode.NO_PERMISSION, remark=blacklisted_remark(rejected)
                )
        return make_response(request, ResponseCode.SUCCESS)

    # ---------------------------------------------------------------- fallback

    def unsupported(self, request: RemotingCommand) -> RemotingCommand:
        """Any other code: 3 with upstream's remark (leading space included)."""
        return make_response(
            request,
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            remark=f" request type {request.code} not supported",
        )
