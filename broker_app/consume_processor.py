"""The consumer side of the broker port: heartbeats, pulls, offsets, retries, locks.

Upstream's ``ClientManageProcessor`` (HEART_BEAT 34, UNREGISTER_CLIENT 35),
``ConsumerManageProcessor`` (GET_CONSUMER_LIST_BY_GROUP 38, QUERY/UPDATE_CONSUMER_OFFSET
14/15), ``PullMessageProcessor`` (PULL_MESSAGE 11 with long polling), the offset
queries of ``AdminBrokerProcessor`` (29-32, LOCK/UNLOCK_BATCH_MQ 41/42) and
``consumerSendMsgBack`` (36) in one module. :class:`~broker_app.processor.BrokerProcessor`
routes the codes here; the rules of each answer are in the handlers' docstrings. The
offset codes (14/15, 29-32) are answered by :mod:`broker_app.offset_handlers`, which the
processor owns and names under the same method names.

The state lives in the broker core: its :class:`~broker_app.clients.ConsumerManager`,
its metadata (consumer offsets, subscription groups) and its message store.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker_app.clients import (
    ClientChannel,
    ConsumerGroup,
    QueueKey,
    Subscription,
    SubscriptionError,
    build_subscription,
    decode_heartbeat,
    decode_lock_body,
    encode_queue_set,
)
from broker_app.config import BrokerRole
from broker_app.core import BrokerCore
from broker_app.offset_handlers import (
    QUERY_NOT_FOUND_REMARK as QUERY_NOT_FOUND_REMARK,
    OffsetHandlers,
)
from broker_app.redelivery import DEFAULT_MAX_RECONSUME_TIMES, reconsume_times, send_back
from broker_app.store.message_store import GetResult, GetStatus
from broker_app.store.record import MessageRecord, parse_properties
from remoting import fastjson
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import BodyDecodeError
from remoting.headers import header_int, header_str, require_int, require_str
from remoting.message_codec import MessageExt, encode_message_ext, message_id
from remoting.model import PERM_READ, TopicConfig, is_readable

if TYPE_CHECKING:
    from remoting.connection import Connection

log = logging.getLogger(__name__)

# PullSysFlag bits.
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
MASTER_ID = 0
SLAVE_ID_WHEN_CONSUME_SLOWLY = 1
"""``SubscriptionGroupConfig.whichBrokerWhenConsumeSlowly``."""
PULL_BATCH_MAX = 32
"""``maxTransferCountOnMessageInMemory``."""
PULL_BYTES_MAX = 256 * 1024
"""``maxTransferBytesOnMessageInMemory``."""
SUSPEND_MAX_S = 60.0
"""The longest a pull is held, whatever the client asks for."""
Refusal = tuple[int, str]
"""A response code and its remark."""


@dataclass(frozen=True, slots=True)
class PullHeader:
    """The PullMessageRequestHeader fields the broker reads."""

    group: str
    topic: str
    queue_id: int
    offset: int
    max_count: int
    sys_flag: int
    commit_offset: int
    suspend_ms: int
    subscription: str | None
    sub_version: int
    expression_type: str | None

    @classmethod
    def parse(cls, request: RemotingCommand) -> PullHeader:
        """Read the header; HeaderFieldError names a missing or malformed field."""
        return cls(
            group=require_str(request, "consumerGroup"),
            topic=require_str(request, "topic"),
            queue_id=require_int(request, "queueId", bits=32),
            offset=require_int(request, "queueOffset"),
            max_count=header_int(request, "maxMsgNums", bits=32) or PULL_BATCH_MAX,
            sys_flag=header_int(request, "sysFlag", bits=32) or 0,
            commit_offset=header_int(request, "commitOffset") or 0,
            suspend_ms=header_int(request, "suspendTimeoutMillis") or 0,
            subscription=header_str(request, "subscription"),
            sub_version=header_int(request, "subVersion") or 0,
            expression_type=header_str(request, "expressionType"),
        )


class ConsumeProcessor:
    """Handlers of the consumer-side codes; each takes the request and its connection."""

    def __init__(self, broker: BrokerCore) -> None:
        self.broker = broker
        # The offset codes' handlers (broker_app/offset_handlers.py); the code table in
        # broker_app/processor.py names them through this attribute.
        self.offsets = OffsetHandlers(broker)

    # -- clients ---------------------------------------------------------------

    async def heart_beat(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        """HEART_BEAT: register the client's consumer and producer groups on this
        connection; a consumer group whose members or subscriptions changed is told
        with NOTIFY_CONSUMER_IDS_CHANGED. A master creates each group's subscription
        config and its retry topic (``%RETRY%group``, 1 queue) on first sight."""
        try:
            data = decode_heartbeat(request.body)
        except (BodyDecodeError, SubscriptionError) as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad heartbeat: {exc}")
        broker = self.broker
        now = broker.clock_ms()
        language = request.language.name if request.language is not None else "OTHER"
        version = request.version
        for consumer in data.consumers:
            broker.groups.ensure(consumer.group, retry=consumer.message_model != "BROADCASTING")
            channel = ClientChannel(data.client_id, conn, language, version, now)
            if broker.consumers.register(consumer, channel, now):
                log.info(
                    "consumer group %s changed (client %s at %s)",
                    consumer.group,
                    data.client_id,
                    channel.address,
                )
                broker.groups.notify_ids_changed(consumer.group)
        for group in data.producer_groups:
            broker.producers.register(
                group, ClientChannel(data.client_id, conn, language, version, now)
            )
        return request.make_response(ResponseCode.SUCCESS)

    async def unregister_client(
        self, request: RemotingCommand, conn: Connection
    ) -> RemotingCommand | None:
        """UNREGISTER_CLIENT: the client leaves its producer and consumer group."""
        broker = self.broker
        producer_group = header_str(request, "producerGroup")
        consumer_group = header_str(request, "consumerGroup")
        if producer_group:
            broker.producers.unregister(producer_group, conn)
        if consumer_group and broker.consumers.unregister(consumer_group, conn):
            broker.groups.notify_ids_changed(consumer_group)
        if request.is_oneway:
            return None
        return request.make_response(ResponseCode.SUCCESS)

    async def consumer_list(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """GET_CONSUMER_LIST_BY_GROUP: the client ids of the group, or SYSTEM_ERROR."""
        group_name = require_str(request, "consumerGroup")
        group = self.broker.consumers.group(group_name)
        if group is None or not group.channels:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group_name}"
            )
        body = fastjson.dumps({"consumerIdList": group.client_ids()}).encode()
        return request.make_response(ResponseCode.SUCCESS, body=body)

    async def connection_list(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """GET_CONSUMER_CONNECTION_LIST (203): the group's clients and subscriptions
        (``ConsumerConnection``), or CONSUMER_NOT_ONLINE."""
        group_name = require_str(request, "consumerGroup")
        group = self.broker.consumers.group(group_name)
        if group is None or not group.channels:
            return request.make_response(
                ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group_name}] not online"
            )
        body = fastjson.dumps(consumer_connection(group)).encode()
        return request.make_response(ResponseCode.SUCCESS, body=body)

    # -- pulling ---------------------------------------------------------------

    async def pull_message(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """PULL_MESSAGE, ``PullMessageProcessor.processRequest`` with long polling.

        Checks (in upstream's order): the broker and topic are readable, the queue
        exists, the group's subscription is known (from its heartbeat, or carried by
        the pull) and not older than the pull's. Then the commit offset the pull
        carries is stored (masters only), the queue is read with the subscription's
        tag filter, and a pull that found nothing new is held until a message arrives
        or its suspend timeout passes.
        """
        header = PullHeader.parse(request)
        found = self._pull_refusal(header) or self._subscription(header)
        if isinstance(found, tuple):
            return request.make_response(*found)
        broker = self.broker
        if header.sys_flag & FLAG_COMMIT_OFFSET and broker.role is not BrokerRole.SLAVE:
            broker.groups.commit_offset(
                header.topic, header.group, header.queue_id, header.commit_offset
            )
        hashes = None if found.takes_all else found.tag_hashes()
        response = self._read(request, header, hashes)
        suspend = header.sys_flag & FLAG_SUSPEND and header.suspend_ms > 0
        if response.code != ResponseCode.PULL_NOT_FOUND or not suspend:
            return response
        timeout_s = (
            min(header.suspend_ms / 1000, SUSPEND_MAX_S)
            if broker.config.long_polling_enable
            else broker.config.short_polling_ms / 1000
        )
        await broker.pull_hold.wait(header.topic, header.queue_id, header.offset, timeout_s)
        return self._read(request, header, hashes)

    def _pull_refusal(self, header: PullHeader) -> Refusal | None:
        """Why the broker or topic cannot serve this pull (code, remark), or None."""
        broker = self.broker
        topic = broker.metadata.topic(header.topic) or self._replicated_only(header.topic)
        if not is_readable(broker.config.broker_permission):
            return (
                ResponseCode.NO_PERMISSION,
                f"the broker[{broker.config.broker_name}] pulling message is forbidden",
            )
        if topic is None:
            return (
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{header.topic}] not exist, apply first please!",
            )
        if not is_readable(topic.perm):
            return (
                ResponseCode.NO_PERMISSION,
                f"the topic[{header.topic}] pulling message is forbidden",
            )
        if not 0 <= header.queue_id < topic.read_queue_nums:
            return (
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                f"topicConfig.readQueueNums:[{topic.read_queue_nums}]",
            )
        if header.max_count <= 0 or header.offset < 0:
            return (
                ResponseCode.SYSTEM_ERROR,
                "maxMsgNums must be positive and queueOffset not negative",
            )
        return None

    def _replicated_only(self, topic: str) -> TopicConfig | None:
        """A slave whose master died before SlaveSynchronize copied a new topic's config
        still holds the topic's replicated messages: it serves them, with as many read
        queues as its store has (upstream refuses: TOPIC_NOT_EXIST, and the messages
        stay unread until the master returns)."""
        broker = self.broker
        if broker.role is not BrokerRole.SLAVE or broker.store is None:
            return None
        queues = broker.store.queues_of(topic)
        if not queues:
            return None
        return TopicConfig(topic, max(queues) + 1, max(queues) + 1, PERM_READ)

    def _subscription(self, header: PullHeader) -> Subscription | Refusal:
        """The subscription to filter by: carried by the pull (subscription flag) or
        the group's from its heartbeat; (code, remark) when there is none to use."""
        consumers = self.broker.consumers
        if header.sys_flag & FLAG_SUBSCRIPTION:
            try:
                carried = build_subscription(
                    header.topic,
                    header.subscription,
                    sub_version=header.sub_version,
                    expression_type=header.expression_type,
                )
            except SubscriptionError as exc:
                return ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc)
            consumers.compensate_subscription(header.group, carried)
            return carried
        group = consumers.group(header.group)
        if group is None:
            return (
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's group info not exist: {header.group}",
            )
        known = group.subscriptions.get(header.topic)
        if known is None:
            return (
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's subscription not exist: {header.topic}",
            )
        if known.sub_version < header.sub_version:
            return ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
        return known

    def _read(
        self, request: RemotingCommand, header: PullHeader, hashes: frozenset[int] | None
    ) -> RemotingCommand:
        broker = self.broker
        store = broker.require_store()
        result = store.get_messages(
            header.topic,
            header.queue_id,
            header.offset,
            max_count=min(header.max_count, PULL_BATCH_MAX),
            max_bytes=PULL_BYTES_MAX,
            accept=None if hashes is None else hashes.__contains__,
            memory_bytes=broker.memory_bytes(),
        )
        code, next_offset = self._code_and_next(header, result)
        is_slave = broker.role is BrokerRole.SLAVE
        if broker.config.slave_read_enable:
            suggest = SLAVE_ID_WHEN_CONSUME_SLOWLY if result.suggest_slave else MASTER_ID
        else:
            suggest = MASTER_ID
            if is_slave:
                code, next_offset = ResponseCode.PULL_RETRY_IMMEDIATELY, header.offset
        ext = {
            "suggestWhichBrokerId": str(suggest),
            "nextBeginOffset": str(next_offset),
            "minOffset": str(result.min_offset),
            "maxOffset": str(result.max_offset),
        }
        body = None
        if code == ResponseCode.SUCCESS:
            body = b"".join(self._wire(message) for message in result.messages)
        return request.make_response(code, _remark(result.status), ext, body=body)

    def _code_and_next(self, header: PullHeader, result: GetResult) -> tuple[int, int]:
        """``PullMessageProcessor``'s status table; a slave never moves a consumer's
        offset on its own (``nextOffsetCorrection`` without ``offsetCheckInSlave``)."""
        status = result.status
        slave = self.broker.role is BrokerRole.SLAVE
        corrected = header.offset if slave else result.next_begin_offset
        if status is GetStatus.FOUND:
            return ResponseCode.SUCCESS, result.next_begin_offset
        if status in (GetStatus.NO_MATCHED_MESSAGE, GetStatus.OFFSET_FOUND_NULL):
            return ResponseCode.PULL_RETRY_IMMEDIATELY, result.next_begin_offset
        if status in (GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.NO_MATCHED_LOGIC_QUEUE):
            if header.offset == 0:
                return ResponseCode.PULL_NOT_FOUND, 0
            return self._moved(header, corrected)
        if status is GetStatus.OFFSET_OVERFLOW_ONE:
            return ResponseCode.PULL_NOT_FOUND, header.offset
        return self._moved(header, corrected)

    def _moved(self, header: PullHeader, corrected: int) -> tuple[int, int]:
        if self.broker.role is BrokerRole.SLAVE:
            return ResponseCode.PULL_RETRY_IMMEDIATELY, header.offset
        log.info(
            "pull offset moved: group %s topic %s queue %d offset %d -> %d",
            header.group,
            header.topic,
            header.queue_id,
            header.offset,
            corrected,
        )
        return ResponseCode.PULL_OFFSET_MOVED, corrected

    def _wire(self, message: MessageRecord) -> bytes:
        reconsumed = reconsume_times(parse_properties(message.properties))
        return encode_message_ext(
            MessageExt(
                topic=message.topic,
                queue_id=message.queue_id,
                queue_offset=message.queue_offset,
                commit_log_offset=message.physical_offset,
                body=message.body,
                properties=message.properties,
                flag=message.flag,
                sys_flag=message.sys_flag,
                born_timestamp_ms=message.born_timestamp_ms,
                store_timestamp_ms=message.store_timestamp_ms,
                store_host=self.broker.broker_addr,
                reconsume_times=reconsumed,
            )
        )

    # -- retries ---------------------------------------------------------------

    async def send_back(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """CONSUMER_SEND_MSG_BACK: store the message at commit-log ``offset`` again, in
        ``%RETRY%group`` with the next delay level, or in ``%DLQ%group`` after
        ``maxReconsumeTimes`` (or a negative delay level). Masters only."""
        broker = self.broker
        if broker.role is BrokerRole.SLAVE:
            return request.make_response(
                ResponseCode.SERVICE_NOT_AVAILABLE,
                "message store is slave mode, so send back is forbidden",
            )
        group = require_str(request, "group")
        offset = require_int(request, "offset")
        original = broker.require_store().message_at(offset)
        if original is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}"
            )
        max_times = header_int(request, "maxReconsumeTimes", bits=32)
        decision = send_back(
            original,
            group=group,
            delay_level=header_int(request, "delayLevel", bits=32) or 0,
            max_reconsume_times=DEFAULT_MAX_RECONSUME_TIMES if max_times is None else max_times,
            origin_msg_id=header_str(request, "originMsgId") or "",
            original_msg_id=message_id(broker.broker_addr, original.physical_offset),
        )
        broker.groups.ensure(group, retry=True, dead_letter=decision.dead_letter)
        await broker.put_message(decision.message)
        if decision.dead_letter:
            log.warning(
                "message %d of %s moved to %s after %s reconsumes",
                offset,
                original.topic,
                decision.message.topic,
                max_times,
            )
        return request.make_response(ResponseCode.SUCCESS)

    # -- orderly consumers -----------------------------------------------------

    async def lock_batch(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """LOCK_BATCH_MQ: lock the queues that are free (or this client's) for it;
        the answer lists the queues the client now holds (``lockOKMQSet``)."""
        group, client_id, queues = _lock_body(request)
        locked = self.broker.locks.try_lock(group, queues, client_id, self.broker.clock_ms())
        log.debug(
            "group %s: client %s holds %d of the %d queues it asked to lock",
            group,
            client_id,
            len(locked),
            len(queues),
        )
        body = fastjson.dumps({"lockOKMQSet": encode_queue_set(locked)}).encode()
        return request.make_response(ResponseCode.SUCCESS, body=body)

    async def unlock_batch(
        self, request: RemotingCommand, _conn: Connection
    ) -> RemotingCommand | None:
        """UNLOCK_BATCH_MQ: release the client's locks on the queues."""
        group, client_id, queues = _lock_body(request)
        self.broker.locks.unlock(group, queues, client_id)
        if request.is_oneway:
            return None
        return request.make_response(ResponseCode.SUCCESS)


def consumer_connection(group: ConsumerGroup) -> dict[str, object]:
    """A group as the ``ConsumerConnection`` body (and the console) show it."""
    return {
        "connectionSet": [
            {
                "clientId": c.client_id,
                "clientAddr": c.address,
                "language": c.language,
                "version": c.version,
            }
            for c in group.channels.values()
        ],
        "consumeFromWhere": group.consume_from_where,
        "consumeType": group.consume_type,
        "messageModel": group.message_model,
        "subscriptionTable": {
            topic: {
                "classFilterMode": False,
                "codeSet": [],
                "expressionType": sub.expression_type,
                "subString": sub.sub_string,
                "subVersion": sub.sub_version,
                "tagsSet": list(sub.tags),
                "topic": topic,
            }
            for topic, sub in sorted(group.subscriptions.items())
        },
    }


def _lock_body(request: RemotingCommand) -> tuple[str, str, list[QueueKey]]:
    # Through the bounded decoder: the body comes from anyone the ACL lets read.
    return decode_lock_body(request.body)


def _remark(status: GetStatus) -> str | None:
    return None if status is GetStatus.FOUND else str(status)


CONSUME_CODES = (
    RequestCode.HEART_BEAT,
    RequestCode.UNREGISTER_CLIENT,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP,
    RequestCode.GET_CONSUMER_CONNECTION_LIST,
    RequestCode.QUERY_CONSUMER_OFFSET,
    RequestCode.UPDATE_CONSUMER_OFFSET,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
    RequestCode.GET_MAX_OFFSET,
    RequestCode.GET_MIN_OFFSET,
    RequestCode.GET_EARLIEST_MSG_STORETIME,
    RequestCode.PULL_MESSAGE,
    RequestCode.CONSUMER_SEND_MSG_BACK,
    RequestCode.LOCK_BATCH_MQ,
    RequestCode.UNLOCK_BATCH_MQ,
)
"""Every code this module answers."""
