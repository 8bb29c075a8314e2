"""Request handling of the broker's remoting port.

Upstream's ``SendMessageProcessor`` and ``AdminBrokerProcessor`` in one module.

Thin by design: each handler reads its header, calls the broker core
(:class:`~broker_app.core.BrokerCore`) and writes the answer. The
domain rules (SYNC_MASTER waiting, topic creation, metadata versions) live in
the core, so the same calls serve tests and other front ends.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from broker_app.config import DELETE_TOPIC_IN_BROKER
from broker_app.consume_processor import ConsumeProcessor
from broker_app.core import BrokerCore
from broker_app.metadata import is_system_topic
from broker_app.store.message_store import MessageInput, MessageRejected
from remoting.bodies import encode_kv_table
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.connection import Connection
from remoting.errors import BodyDecodeError, HeaderFieldError
from remoting.headers import header_bool, header_int, header_str, require_str
from remoting.model import DEFAULT_TOPIC_FILTER_TYPE, PERM_READ, PERM_WRITE, KVTable, TopicConfig
from remoting.topic_rule import topic_refusal

log = logging.getLogger(__name__)

# SEND_MESSAGE_V2 (310) carries SendMessageRequestHeaderV2 with one-letter names.
V2_NAMES = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
}
MSG_REGION = "DefaultRegion"


@dataclass(frozen=True, slots=True)
class SendRequest:
    """The fields of a SendMessageRequestHeader the broker uses."""

    producer_group: str
    topic: str
    queue_id: int
    sys_flag: int
    born_timestamp_ms: int
    flag: int
    properties: str
    default_topic_queue_nums: int | None


def parse_send_header(request: RemotingCommand) -> SendRequest:
    """Read a SEND_MESSAGE (10) or SEND_MESSAGE_V2 (310) header."""
    if request.code == RequestCode.SEND_MESSAGE_V2 and request.ext_fields is not None:
        request = RemotingCommand(
            code=request.code,
            ext_fields={V2_NAMES.get(k, k): v for k, v in request.ext_fields.items()},
        )
    return SendRequest(
        producer_group=header_str(request, "producerGroup") or "",
        topic=require_str(request, "topic"),
        queue_id=header_int(request, "queueId", bits=32) or 0,
        sys_flag=header_int(request, "sysFlag", bits=32) or 0,
        born_timestamp_ms=header_int(request, "bornTimestamp") or 0,
        flag=header_int(request, "flag", bits=32) or 0,
        properties=header_str(request, "properties") or "",
        default_topic_queue_nums=header_int(request, "defaultTopicQueueNums", bits=32),
    )


def offset_msg_id(host: str, port: int, physical_offset: int) -> str:
    """``MessageDecoder.createMessageId``: store IPv4 + port + commit-log offset, upper hex."""
    try:
        packed = ipaddress.IPv4Address(host).packed
    except ValueError:
        packed = bytes(4)
    return (packed + port.to_bytes(4, "big") + physical_offset.to_bytes(8, "big")).hex().upper()


def parse_create_topic(request: RemotingCommand) -> TopicConfig:
    """A TopicConfig from a CreateTopicRequestHeader (UPDATE_AND_CREATE_TOPIC)."""
    return TopicConfig(
        topic_name=require_str(request, "topic"),
        read_queue_nums=header_int(request, "readQueueNums", bits=32) or 16,
        write_queue_nums=header_int(request, "writeQueueNums", bits=32) or 16,
        perm=header_int(request, "perm", bits=32) or PERM_READ | PERM_WRITE,
        topic_filter_type=header_str(request, "topicFilterType") or DEFAULT_TOPIC_FILTER_TYPE,
        topic_sys_flag=header_int(request, "topicSysFlag", bits=32) or 0,
        order=bool(header_bool(request, "order")),
    )


Route = Callable[[RemotingCommand], Awaitable[RemotingCommand | None]]
ClientRoute = Callable[[RemotingCommand, "Connection"], Awaitable[RemotingCommand | None]]


class BrokerProcessor:
    """Dispatches requests by code to the broker core.

    ``_routes`` are the producer and admin codes (handled in this module);
    ``_client_routes`` the consumer-side codes, which need the client's connection
    (:mod:`broker_app.consume_processor`). Together they are every code the broker
    port answers; anything else gets REQUEST_CODE_NOT_SUPPORTED (3), as upstream.
    """

    def __init__(self, broker: BrokerCore) -> None:
        self.broker = broker
        self._unsupported_seen: set[int] = set()
        consume = ConsumeProcessor(broker)
        metadata = broker.metadata  # the controller's one BrokerMetadata, never replaced
        self._routes: dict[int, Route] = {
            RequestCode.SEND_MESSAGE: self.send_message,
            RequestCode.SEND_MESSAGE_V2: self.send_message,
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self._body(metadata.encode_topics),
            RequestCode.GET_ALL_CONSUMER_OFFSET: self._body(metadata.encode_consumer_offsets),
            RequestCode.GET_ALL_DELAY_OFFSET: self._body(metadata.encode_delay_offsets),
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self._body(
                metadata.encode_subscription_groups
            ),
            RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE: self.notify_min_broker_id_change,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.runtime_info,
        }
        self._client_routes: dict[int, ClientRoute] = {
            RequestCode.HEART_BEAT: consume.heart_beat,
            RequestCode.UNREGISTER_CLIENT: consume.unregister_client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: consume.consumer_list,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: consume.connection_list,
            RequestCode.QUERY_CONSUMER_OFFSET: consume.offsets.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: consume.offsets.update_consumer_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: consume.offsets.search_offset,
            RequestCode.GET_MAX_OFFSET: consume.offsets.max_offset,
            RequestCode.GET_MIN_OFFSET: consume.offsets.min_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: consume.offsets.earliest_store_time,
            RequestCode.PULL_MESSAGE: consume.pull_message,
            RequestCode.CONSUMER_SEND_MSG_BACK: consume.send_back,
            RequestCode.LOCK_BATCH_MQ: consume.lock_batch,
            RequestCode.UNLOCK_BATCH_MQ: consume.unlock_batch,
        }

    async def handle(self, request: RemotingCommand, peer: object) -> RemotingCommand | None:
        """Serve one request (the RemotingServer handler and the client's push hook)."""
        route = self._routes.get(request.code)
        client_route = self._client_routes.get(request.code) if route is None else None
        if route is None and (client_route is None or not isinstance(peer, Connection)):
            if request.code not in self._unsupported_seen:
                # Once per code: which requests clients send that we do not serve.
                self._unsupported_seen.add(request.code)
                log.info(
                    "request code %d not supported (first seen from %s)",
                    request.code,
                    getattr(peer, "id", peer),
                )
            return request.make_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f" request type {request.code} not supported",
            )
        try:
            if route is not None:
                return await route(request)
            assert client_route is not None and isinstance(peer, Connection)
            return await client_route(request, peer)
        except BodyDecodeError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad body: {exc}")
        except (HeaderFieldError, MessageRejected) as exc:
            code = (
                ResponseCode.MESSAGE_ILLEGAL
                if isinstance(exc, MessageRejected)
                else ResponseCode.SYSTEM_ERROR
            )
            return request.make_response(code, str(exc))

    def _body(self, encode: Callable[[], bytes]) -> Route:
        async def answer(request: RemotingCommand) -> RemotingCommand:
            return request.make_response(ResponseCode.SUCCESS, body=encode())

        return answer

    async def send_message(self, request: RemotingCommand) -> RemotingCommand:
        """SEND_MESSAGE: store, maybe wait for the slave, answer SendMessageResponseHeader."""
        header = parse_send_header(request)
        refusal = self.broker.topics.check_writable(header.topic, header.default_topic_queue_nums)
        if refusal is not None:
            code, remark = refusal
            return request.make_response(code, remark)
        message = MessageInput(
            topic=header.topic,
            queue_id=header.queue_id,
            body=request.body or b"",
            properties=header.properties,
            flag=header.flag,
            sys_flag=header.sys_flag,
            born_timestamp_ms=header.born_timestamp_ms,
        )
        outcome = await self.broker.put_message(message)
        ext = {
            "msgId": offset_msg_id(
                self.broker.config.host, self.broker.port, outcome.result.physical_offset
            ),
            "queueId": str(header.queue_id),
            "queueOffset": str(outcome.result.queue_offset),
            "MSG_REGION": MSG_REGION,
            "TRACE_ON": "true",
        }
        return request.make_response(outcome.code, outcome.remark, ext)

    async def update_and_create_topic(self, request: RemotingCommand) -> RemotingCommand:
        """UPDATE_AND_CREATE_TOPIC: update the table, bump DataVersion, register."""
        config = parse_create_topic(request)
        self.broker.topics.create(config)
        return request.make_response(ResponseCode.SUCCESS)

    async def delete_topic(self, request: RemotingCommand) -> RemotingCommand:
        """DELETE_TOPIC_IN_BROKER (215), ``AdminBrokerProcessor.deleteTopic``: refuse an
        illegal name or a system topic (SYSTEM_ERROR), else delete it and answer SUCCESS,
        whether or not this broker had it. Masters and slaves alike (tools send it to
        every broker of the cluster)."""
        topic = require_str(request, "topic")
        refusal = topic_refusal(topic)
        if refusal is None and is_system_topic(topic):
            refusal = f"The topic[{topic}] is conflict with system topic."
        if refusal is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, refusal)
        await self.broker.topics.delete(topic)
        return request.make_response(ResponseCode.SUCCESS)

    async def notify_min_broker_id_change(self, request: RemotingCommand) -> RemotingCommand | None:
        """NOTIFY_MIN_BROKER_ID_CHANGE (one-way): record it and call the role-change seam."""
        await self.broker.replication.on_min_broker_id_change(
            min_broker_id=header_int(request, "minBrokerId"),
            min_broker_addr=header_str(request, "minBrokerAddr"),
            offline_broker_addr=header_str(request, "offlineBrokerAddr"),
            ha_broker_addr=header_str(request, "haBrokerAddr"),
        )
        if request.is_oneway:
            return None
        return request.make_response(ResponseCode.SUCCESS)

    async def runtime_info(self, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_RUNTIME_INFO: a KVTable of offsets, role and HA state."""
        body = encode_kv_table(KVTable(self.broker.runtime_info()))
        return request.make_response(ResponseCode.SUCCESS, body=body)
