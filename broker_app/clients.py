"""The clients a broker knows: consumer groups, producer groups and queue locks.

Plays RocketMQ's ``ConsumerManager`` / ``ConsumerGroupInfo``, ``ProducerManager``
and ``RebalanceLockManager``. Clients announce themselves with HEART_BEAT (34)
on the connection they also pull and send on, so a client is keyed by that
connection: when it closes (``ClientHousekeepingService.onChannelDestroy``) or
stays silent for ``channel_expired_ms`` (the 120 s ``scanNotActiveChannel``) the
client leaves its groups. Every change of a consumer group's membership or
subscriptions is what the broker tells the group's clients with
NOTIFY_CONSUMER_IDS_CHANGED (40), so they rebalance at once.

Sans-IO: times are arguments, connections are opaque keys plus a ``send``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from broker_app.store.record import tag_hash
from remoting import body_limits
from remoting.body_limits import (
    HEART_BEAT,
    HEART_BEAT_GROUPS_MAX,
    HEART_BEAT_SUBSCRIPTIONS_MAX,
    LOCK_QUEUES_MAX,
)
from remoting.command import RemotingCommand
from remoting.errors import BodyDecodeError

SUB_ALL = "*"
TAG_SEPARATOR = "||"
EXPRESSION_TAG = "TAG"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
CHANNEL_EXPIRED_MS = 120_000
REBALANCE_LOCK_MAX_LIVE_MS = 60_000
"""``rocketmq.broker.rebalance.lockMaxLiveTime``: a lock not renewed for this long is free."""


def retry_topic(group: str) -> str:
    """``MixAll.getRetryTopic``."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """``MixAll.getDLQTopic``."""
    return DLQ_GROUP_TOPIC_PREFIX + group


class ClientConnection(Protocol):
    """What the managers need of a connection (``remoting.connection.Connection`` has it)."""

    id: str
    peer_host: str
    peer_port: int

    @property
    def is_closed(self) -> bool:
        """True once the connection is gone."""
        ...

    async def send(self, cmd: RemotingCommand) -> None:
        """Push a request to the client (NOTIFY_CONSUMER_IDS_CHANGED)."""
        ...


class SubscriptionError(ValueError):
    """A subscription expression the broker cannot filter by."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """One topic a consumer group subscribes to (``SubscriptionData``)."""

    topic: str
    sub_string: str = SUB_ALL
    tags: tuple[str, ...] = ()
    sub_version: int = 0
    expression_type: str = EXPRESSION_TAG

    @property
    def takes_all(self) -> bool:
        """True for ``*`` (no filtering)."""
        return not self.tags

    def tag_hashes(self) -> frozenset[int]:
        """The consume-queue tag hashes this subscription accepts."""
        return frozenset(tag_hash(tag) for tag in self.tags)


def build_subscription(
    topic: str, sub_string: str | None, *, sub_version: int = 0, expression_type: str | None = None
) -> Subscription:
    """``FilterAPI.buildSubscriptionData``: ``*`` or ``tagA || tagB``.

    Only TAG expressions are filtered here; SQL92 (``enablePropertyFilter``) is
    refused with :class:`SubscriptionError`, as a broker without it does.
    """
    kind = (expression_type or EXPRESSION_TAG).upper()
    if kind != EXPRESSION_TAG:
        raise SubscriptionError(f"the broker does not support consumer to filter message by {kind}")
    text = (sub_string or "").strip()
    if not text or text == SUB_ALL:
        return Subscription(topic, SUB_ALL, (), sub_version)
    tags = tuple(dict.fromkeys(t.strip() for t in text.split(TAG_SEPARATOR) if t.strip()))
    if not tags:
        raise SubscriptionError(f"subscription expression {text!r} names no tag")
    return Subscription(topic, text, tags, sub_version)


@dataclass(slots=True)
class ClientChannel:
    """One client instance as a group sees it (``ClientChannelInfo``)."""

    client_id: str
    connection: ClientConnection
    language: str
    version: int
    last_update_ms: int

    @property
    def address(self) -> str:
        """The client's ``host:port`` as the broker sees it."""
        return f"{self.connection.peer_host}:{self.connection.peer_port}"


@dataclass(slots=True)
class ConsumerGroup:
    """A consumer group's clients and subscriptions (``ConsumerGroupInfo``)."""

    name: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    channels: dict[str, ClientChannel] = field(default_factory=dict)
    last_update_ms: int = 0

    def client_ids(self) -> list[str]:
        """The ids of the group's clients, in registration order (GET_CONSUMER_LIST_BY_GROUP)."""
        return [channel.client_id for channel in self.channels.values()]


@dataclass(frozen=True, slots=True)
class ConsumerData:
    """One consumer group of a heartbeat."""

    group: str
    consume_type: str
    message_model: str
    consume_from_where: str
    subscriptions: tuple[Subscription, ...]


@dataclass(frozen=True, slots=True)
class HeartbeatData:
    """A HEART_BEAT body: who the client is and which groups it plays in."""

    client_id: str
    consumers: tuple[ConsumerData, ...]
    producer_groups: tuple[str, ...]


def _text(value: object, default: str = "") -> str:
    return default if value is None else str(value)


def _objects(value: object, what: str) -> list[Mapping[str, object]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BodyDecodeError(f"heartbeat {what} is not a list")
    items: list[Mapping[str, object]] = []
    for item in value:
        if not isinstance(item, dict):
            raise BodyDecodeError(f"heartbeat {what} holds a non-object")
        items.append(item)
    return items


def _int(value: object, what: str) -> int:
    if isinstance(value, bool):
        raise BodyDecodeError(f"{what} is not an integer")
    try:
        return int(str(value)) if value is not None else 0
    except ValueError as exc:
        raise BodyDecodeError(f"{what} is not an integer") from exc


def _check_counts(
    body_bytes: int, groups: list[Mapping[str, object]], producers: list[Mapping[str, object]]
) -> None:
    """Refuse a heartbeat of more groups or subscriptions than
    :data:`~remoting.body_limits.HEART_BEAT_GROUPS_MAX` and
    :data:`~remoting.body_limits.HEART_BEAT_SUBSCRIPTIONS_MAX`, before any is read."""
    for what, items in (("consumer groups", groups), ("producer groups", producers)):
        if len(items) > HEART_BEAT_GROUPS_MAX:
            raise HEART_BEAT.refused(
                body_bytes, f"{len(items)} {what}, more than {HEART_BEAT_GROUPS_MAX}"
            )
    subscriptions = 0
    for item in groups:
        value = item.get("subscriptionDataSet")
        subscriptions += len(value) if isinstance(value, list) else 0
    if subscriptions > HEART_BEAT_SUBSCRIPTIONS_MAX:
        raise HEART_BEAT.refused(
            body_bytes,
            f"{subscriptions} subscriptions, more than {HEART_BEAT_SUBSCRIPTIONS_MAX}",
        )


def decode_heartbeat(body: bytes | None) -> HeartbeatData:
    """Parse a HEART_BEAT body (Java, ali-ons and the C++ client all send this JSON).

    :class:`BodyDecodeError` for anything that is not one (its subclass
    :class:`~remoting.errors.BodyRefused` for one past the limits of
    :data:`remoting.body_limits.HEART_BEAT`); :class:`SubscriptionError` for a
    subscription that cannot be served.
    """
    if not body:
        raise BodyDecodeError("a heartbeat needs a body")
    raw = body_limits.read_json(body, HEART_BEAT)
    if not isinstance(raw, dict):
        raise BodyDecodeError("heartbeat body is not a JSON object")
    client_id = _text(raw.get("clientID")).strip()
    if not client_id:
        raise BodyDecodeError("heartbeat without clientID")
    groups = _objects(raw.get("consumerDataSet"), "consumerDataSet")
    _check_counts(len(body), groups, _objects(raw.get("producerDataSet"), "producerDataSet"))
    consumers = []
    for item in groups:
        group = _text(item.get("groupName")).strip()
        if not group:
            raise BodyDecodeError("consumer data without groupName")
        subscriptions = tuple(
            build_subscription(
                _text(sub.get("topic")),
                _text(sub.get("subString"), SUB_ALL),
                sub_version=_int(sub.get("subVersion"), "subVersion"),
                expression_type=_text(sub.get("expressionType"), EXPRESSION_TAG),
            )
            for sub in _objects(item.get("subscriptionDataSet"), "subscriptionDataSet")
            if _text(sub.get("topic")).strip()
        )
        consumers.append(
            ConsumerData(
                group,
                _text(item.get("consumeType"), "CONSUME_PASSIVELY"),
                _text(item.get("messageModel"), "CLUSTERING"),
                _text(item.get("consumeFromWhere"), "CONSUME_FROM_LAST_OFFSET"),
                subscriptions,
            )
        )
    producers = tuple(
        _text(item.get("groupName")).strip()
        for item in _objects(raw.get("producerDataSet"), "producerDataSet")
        if _text(item.get("groupName")).strip()
    )
    return HeartbeatData(client_id, tuple(consumers), producers)


class ConsumerManager:
    """Every consumer group with a live client on this broker."""

    def __init__(self, *, channel_expired_ms: int = CHANNEL_EXPIRED_MS) -> None:
        self.channel_expired_ms = channel_expired_ms
        self._groups: dict[str, ConsumerGroup] = {}

    def group(self, name: str) -> ConsumerGroup | None:
        """The group called ``name``, if it has clients."""
        return self._groups.get(name)

    def groups(self) -> list[ConsumerGroup]:
        """Every group, by name."""
        return [self._groups[name] for name in sorted(self._groups)]

    def subscription(self, group: str, topic: str) -> Subscription | None:
        """What ``group`` subscribed to on ``topic``."""
        found = self._groups.get(group)
        return None if found is None else found.subscriptions.get(topic)

    def register(self, data: ConsumerData, channel: ClientChannel, now_ms: int) -> bool:
        """Record one heartbeat's consumer data; True when the group's clients or
        subscriptions changed (the group must then be notified)."""
        group = self._groups.get(data.group)
        if group is None:
            group = self._groups[data.group] = ConsumerGroup(data.group)
        group.consume_type = data.consume_type
        group.message_model = data.message_model
        group.consume_from_where = data.consume_from_where
        group.last_update_ms = now_ms
        key = channel.connection.id
        known = group.channels.get(key)
        changed = known is None or known.client_id != channel.client_id
        if known is None or changed:
            group.channels[key] = channel
        else:
            known.last_update_ms = now_ms
        subscriptions = {sub.topic: sub for sub in data.subscriptions}
        if _topics_and_filters(subscriptions) != _topics_and_filters(group.subscriptions):
            changed = True
        # The newest subVersion wins, as updateSubscription keeps the newer one.
        merged = {}
        for topic, sub in subscriptions.items():
            old = group.subscriptions.get(topic)
            merged[topic] = sub if old is None or sub.sub_version >= old.sub_version else old
        group.subscriptions = merged
        return changed

    def compensate_subscription(self, group: str, subscription: Subscription) -> None:
        """A pull that carried its own subscription: remember it if the group has none."""
        found = self._groups.get(group)
        if found is not None and subscription.topic not in found.subscriptions:
            found.subscriptions[subscription.topic] = subscription

    def unregister(self, group: str, connection: ClientConnection) -> bool:
        """UNREGISTER_CLIENT for one group; True when a client left."""
        found = self._groups.get(group)
        if found is None or found.channels.pop(connection.id, None) is None:
            return False
        if not found.channels:
            del self._groups[group]
        return True

    def connection_closed(self, connection: ClientConnection) -> list[str]:
        """Drop the connection from every group; the groups that lost a client."""
        affected = []
        for name in list(self._groups):
            if self.unregister(name, connection):
                affected.append(name)
        return affected

    def expire(self, now_ms: int) -> list[tuple[str, ClientChannel]]:
        """Remove clients silent for ``channel_expired_ms``; (group, client) removed."""
        removed = []
        for name, group in list(self._groups.items()):
            for key, channel in list(group.channels.items()):
                if now_ms - channel.last_update_ms > self.channel_expired_ms:
                    del group.channels[key]
                    removed.append((name, channel))
            if not group.channels:
                del self._groups[name]
        return removed

    def groups_of_topic(self, topic: str) -> list[str]:
        """The groups subscribed to ``topic``."""
        return [
            name for name, group in sorted(self._groups.items()) if topic in group.subscriptions
        ]


def _topics_and_filters(subscriptions: Mapping[str, Subscription]) -> set[tuple[str, str]]:
    return {(sub.topic, sub.sub_string) for sub in subscriptions.values()}


class ProducerManager:
    """Producer groups and their live clients (``ProducerManager``)."""

    def __init__(self, *, channel_expired_ms: int = CHANNEL_EXPIRED_MS) -> None:
        self.channel_expired_ms = channel_expired_ms
        self._groups: dict[str, dict[str, ClientChannel]] = {}

    def register(self, group: str, channel: ClientChannel) -> None:
        """Record (or refresh) one producer client."""
        self._groups.setdefault(group, {})[channel.connection.id] = channel

    def unregister(self, group: str, connection: ClientConnection) -> None:
        """UNREGISTER_CLIENT for a producer group."""
        channels = self._groups.get(group)
        if channels is not None:
            channels.pop(connection.id, None)
            if not channels:
                del self._groups[group]

    def connection_closed(self, connection: ClientConnection) -> None:
        """Forget the connection in every group."""
        for group in list(self._groups):
            self.unregister(group, connection)

    def expire(self, now_ms: int) -> None:
        """Forget producers silent for ``channel_expired_ms``."""
        for group, channels in list(self._groups.items()):
            for key, channel in list(channels.items()):
                if now_ms - channel.last_update_ms > self.channel_expired_ms:
                    del channels[key]
            if not channels:
                del self._groups[group]

    def groups(self) -> dict[str, list[str]]:
        """Producer group -> client ids."""
        return {
            group: [c.client_id for c in channels.values()]
            for group, channels in sorted(self._groups.items())
        }


@dataclass(frozen=True, slots=True, order=True)
class QueueKey:
    """A ``MessageQueue``: topic, broker name, queue id."""

    topic: str
    broker_name: str
    queue_id: int


def decode_queue_set(value: object) -> list[QueueKey]:
    """The ``mqSet`` of a LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body."""
    queues = []
    for item in _objects(value, "mqSet"):
        topic = _text(item.get("topic")).strip()
        if not topic:
            raise BodyDecodeError("a message queue without topic")
        queues.append(
            QueueKey(topic, _text(item.get("brokerName")), _int(item.get("queueId"), "queueId"))
        )
    return queues


def decode_lock_body(body: bytes | None) -> tuple[str, str, list[QueueKey]]:
    """The consumer group, client id and queues of a LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body
    (``LockBatchRequestBody``, ``UnlockBatchRequestBody``). :class:`BodyDecodeError`
    for anything that is not one, its subclass :class:`~remoting.errors.BodyRefused`
    for one past :data:`remoting.body_limits.LOCK_BATCH_MQ` or of more queues than
    :data:`~remoting.body_limits.LOCK_QUEUES_MAX`."""
    if not body:
        raise BodyDecodeError("a lock request needs a body")
    raw = body_limits.read_json(body, body_limits.LOCK_BATCH_MQ)
    if not isinstance(raw, dict):
        raise BodyDecodeError("lock body is not a JSON object")
    group = str(raw.get("consumerGroup") or "").strip()
    client_id = str(raw.get("clientId") or "").strip()
    if not group or not client_id:
        raise BodyDecodeError("a lock body needs consumerGroup and clientId")
    queues = raw.get("mqSet")
    if isinstance(queues, list) and len(queues) > LOCK_QUEUES_MAX:
        raise body_limits.LOCK_BATCH_MQ.refused(
            len(body), f"{len(queues)} message queues, more than {LOCK_QUEUES_MAX}"
        )
    return group, client_id, decode_queue_set(queues)


def encode_queue_set(queues: Iterable[QueueKey]) -> list[dict[str, object]]:
    """Message queues as their JSON objects."""
    return [
        {"brokerName": q.broker_name, "queueId": q.queue_id, "topic": q.topic}
        for q in sorted(queues)
    ]


class RebalanceLockManager:
    """Which client holds each queue of an orderly consumer group (LOCK_BATCH_MQ)."""

    def __init__(self, *, max_live_ms: int = REBALANCE_LOCK_MAX_LIVE_MS) -> None:
        self.max_live_ms = max_live_ms
        self._locks: dict[str, dict[QueueKey, tuple[str, int]]] = {}

    def try_lock(
        self, group: str, queues: Iterable[QueueKey], client_id: str, now_ms: int
    ) -> set[QueueKey]:
        """Lock (or renew) every queue that is free, expired or already ``client_id``'s;
        the queues locked by ``client_id`` afterwards."""
        table = self._locks.setdefault(group, {})
        locked = set()
        for queue in queues:
            holder = table.get(queue)
            if holder is None or holder[0] == client_id or now_ms - holder[1] > self.max_live_ms:
                table[queue] = (client_id, now_ms)
                locked.add(queue)
        return locked

    def unlock(self, group: str, queues: Iterable[QueueKey], client_id: str) -> None:
        """Release the queues ``client_id`` holds."""
        table = self._locks.get(group, {})
        for queue in queues:
            holder = table.get(queue)
            if holder is not None and holder[0] == client_id:
                del table[queue]

    def holder(self, group: str, queue: QueueKey, now_ms: int) -> str | None:
        """The client holding ``queue`` now, if any."""
        holder = self._locks.get(group, {}).get(queue)
        if holder is None or now_ms - holder[1] > self.max_live_ms:
            return None
        return holder[0]
