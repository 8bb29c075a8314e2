"""A broker's metadata: topics, subscription groups, consumer and delay offsets.

Plays RocketMQ's ``TopicConfigManager``, ``SubscriptionGroupManager``,
``ConsumerOffsetManager`` and ``ScheduleMessageService`` offset table. The
state is one immutable :class:`MetadataSnapshot`; every change builds a new
snapshot (so a persistence thread can save one while the loop makes the
next) and bumps the table's DataVersion. Time is an argument.

The JSON bodies are the ones RocketMQ's AdminBrokerProcessor answers for
SlaveSynchronize (GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET,
GET_ALL_DELAY_OFFSET, GET_ALL_SUBSCRIPTIONGROUP_CONFIG), written in
fastjson's default dialect (unquoted integer keys).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from remoting import body_limits, fastjson
from remoting.bodies import (
    decode_data_version,
    decode_topic_config_serialize_wrapper,
    encode_data_version,
    encode_topic_config_serialize_wrapper,
)
from remoting.errors import BodyDecodeError
from remoting.model import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    DataVersion,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from remoting.topic_rule import is_legal_topic

SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
TOPIC_GROUP_SEPARATOR = "@"
SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
        "CHECKPOINT_TOPIC",
    }
)
"""``TopicValidator.SYSTEM_TOPIC_SET`` (4.9.7 / 5.x)."""
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
SUBSCRIPTION_GROUP_DEFAULTS: dict[str, object] = {
    "consumeEnable": True,
    "consumeFromMinEnable": True,
    "consumeBroadcastEnable": True,
    "retryQueueNums": 1,
    "retryMaxTimes": 16,
    "brokerId": 0,
    "whichBrokerWhenConsumeSlowly": 1,
    "notifyConsumerIdsChangedEnable": True,
}
"""A subscription group created on first sight (``autoCreateSubscriptionGroup``)."""


def is_system_topic(topic: str) -> bool:
    """``TopicValidator.isSystemTopic``: a reserved name or the ``rmq_sys_`` prefix."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def next_version(version: DataVersion, now_ms: int) -> DataVersion:
    """``DataVersion.nextVersion``: counter + 1, timestamp = now."""
    return DataVersion(version.state_version, now_ms, version.counter + 1)


@dataclass(frozen=True, slots=True)
class MetadataSnapshot:
    """Everything a broker persists besides messages."""

    topics: Mapping[str, TopicConfig] = field(default_factory=dict)
    topic_version: DataVersion = field(default_factory=DataVersion)
    subscription_groups: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    subscription_version: DataVersion = field(default_factory=DataVersion)
    consumer_offsets: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    consumer_offset_version: DataVersion = field(default_factory=DataVersion)
    delay_offsets: Mapping[int, int] = field(default_factory=dict)


class MetadataRepository(Protocol):
    """Where a broker's metadata is kept between runs (Django models in production)."""

    def load(self) -> MetadataSnapshot | None:
        """The saved snapshot, or None for a broker that never ran."""
        ...

    def save(self, snapshot: MetadataSnapshot) -> None:
        """Replace the saved snapshot with ``snapshot``."""
        ...


class MemoryRepository:
    """A repository that keeps the snapshot in memory (in-process tests, benchmarks)."""

    def __init__(self, snapshot: MetadataSnapshot | None = None) -> None:
        self.snapshot = snapshot
        self.saves = 0

    def load(self) -> MetadataSnapshot | None:
        """The last saved snapshot."""
        return self.snapshot

    def save(self, snapshot: MetadataSnapshot) -> None:
        """Keep ``snapshot``."""
        self.snapshot = snapshot
        self.saves += 1


def default_topics(
    cluster_name: str, broker_name: str, *, auto_create: bool, queue_nums: int
) -> dict[str, TopicConfig]:
    """The system topics a fresh RocketMQ broker creates (``TopicConfigManager``)."""
    topics: dict[str, TopicConfig] = {}
    if auto_create:
        topics[AUTO_CREATE_TOPIC_KEY_TOPIC] = TopicConfig(
            AUTO_CREATE_TOPIC_KEY_TOPIC,
            queue_nums,
            queue_nums,
            PERM_INHERIT | PERM_READ | PERM_WRITE,
        )
    topics[SELF_TEST_TOPIC] = TopicConfig(SELF_TEST_TOPIC, 1, 1)
    topics[OFFSET_MOVED_EVENT] = TopicConfig(OFFSET_MOVED_EVENT, 1, 1)
    for name in (cluster_name, broker_name):
        if is_legal_topic(name):
            # The cluster and broker-name topics carry no messages: perm INHERIT
            # plus read/write, as BrokerController sets them up.
            topics[name] = TopicConfig(name, 1, 1, PERM_INHERIT | PERM_READ | PERM_WRITE)
    return topics


class BrokerMetadata:
    """The live metadata of one broker; every change returns the new snapshot."""

    def __init__(self, snapshot: MetadataSnapshot) -> None:
        self.snapshot = snapshot

    # -- topics --------------------------------------------------------------

    def topic(self, name: str) -> TopicConfig | None:
        """The config of topic ``name``."""
        return self.snapshot.topics.get(name)

    def upsert_topic(self, config: TopicConfig, now_ms: int) -> MetadataSnapshot:
        """Create or replace one topic and bump the topic DataVersion."""
        assert config.topic_name is not None
        topics = dict(self.snapshot.topics)
        topics[config.topic_name] = config
        return self._replace(
            topics=topics, topic_version=next_version(self.snapshot.topic_version, now_ms)
        )

    def delete_topic(self, name: str, now_ms: int) -> bool:
        """Remove one topic and its consumer offsets; True when the topic existed.

        Upstream's ``deleteTopicConfig`` (a new topic DataVersion only when the
        topic was there) plus ``cleanOffsetByTopic`` (offsets keep their version).
        """
        topics = dict(self.snapshot.topics)
        existed = topics.pop(name, None) is not None
        offsets = {
            key: queues
            for key, queues in self.snapshot.consumer_offsets.items()
            if key.split(TOPIC_GROUP_SEPARATOR)[0] != name
            or len(key.split(TOPIC_GROUP_SEPARATOR)) != 2
        }
        changes: dict[str, object] = {"consumer_offsets": offsets}
        if existed:
            changes.update(
                topics=topics, topic_version=next_version(self.snapshot.topic_version, now_ms)
            )
        self._replace(**changes)
        return existed

    def topic_wrapper(
        self, *, only: str | None = None, broker_permission: int = 6
    ) -> TopicConfigSerializeWrapper:
        """The topic table as registration sends it (one topic for an incremental one).

        A broker whose permission is not read+write masks every topic's perm
        with it, as ``registerBrokerAll`` does.
        """
        table = dict(self.snapshot.topics)
        if only is not None:
            table = {only: table[only]} if only in table else {}
        if broker_permission != PERM_READ | PERM_WRITE:
            table = {
                k: dataclasses.replace(v, perm=v.perm & broker_permission) for k, v in table.items()
            }
        return TopicConfigSerializeWrapper(self.snapshot.topic_version, table)

    # -- offsets and groups --------------------------------------------------

    def commit_offset(self, topic: str, group: str, queue_id: int, offset: int) -> MetadataSnapshot:
        """Record a consumer group's offset for one queue."""
        key = f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"
        # Copy-on-write of the one entry that changes: a snapshot being saved
        # on the persistence thread keeps its own tables.
        offsets = dict(self.snapshot.consumer_offsets)
        queues = dict(offsets.get(key, {}))
        queues[queue_id] = offset
        offsets[key] = queues
        return self._replace(consumer_offsets=offsets)

    def consumer_offset(self, topic: str, group: str, queue_id: int) -> int | None:
        """The offset ``group`` committed for one queue of ``topic``, or None."""
        queues = self.snapshot.consumer_offsets.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}")
        return None if queues is None else queues.get(queue_id)

    def subscription_group(self, name: str) -> Mapping[str, object] | None:
        """The config of subscription group ``name``."""
        return self.snapshot.subscription_groups.get(name)

    def upsert_subscription_group(
        self, name: str, config: Mapping[str, object], now_ms: int
    ) -> MetadataSnapshot:
        """Create or replace a subscription group and bump its DataVersion."""
        groups = dict(self.snapshot.subscription_groups)
        groups[name] = dict(config, groupName=name)
        return self._replace(
            subscription_groups=groups,
            subscription_version=next_version(self.snapshot.subscription_version, now_ms),
        )

    def set_delay_offsets(self, offsets: Mapping[int, int]) -> MetadataSnapshot:
        """Replace the delay-level offsets."""
        return self._replace(delay_offsets=dict(offsets))

    def _replace(self, **changes: object) -> MetadataSnapshot:
        self.snapshot = dataclasses.replace(self.snapshot, **changes)  # type: ignore[arg-type]
        return self.snapshot

    # -- the SlaveSynchronize bodies -----------------------------------------

    def encode_topics(self) -> bytes:
        """GET_ALL_TOPIC_CONFIG body: TopicConfigSerializeWrapper JSON."""
        return encode_topic_config_serialize_wrapper(self.topic_wrapper())

    def encode_consumer_offsets(self) -> bytes:
        """GET_ALL_CONSUMER_OFFSET body: ``{"dataVersion":..,"offsetTable":{"t@g":{0:5}}}``."""
        version = encode_data_version(self.snapshot.consumer_offset_version).decode("ascii")
        table = fastjson.dumps({k: dict(v) for k, v in self.snapshot.consumer_offsets.items()})
        return f'{{"dataVersion":{version},"offsetTable":{table}}}'.encode()

    def encode_delay_offsets(self) -> bytes:
        """GET_ALL_DELAY_OFFSET body: ``{"offsetTable":{1:0,2:5}}``."""
        return f'{{"offsetTable":{fastjson.dumps(dict(self.snapshot.delay_offsets))}}}'.encode()

    def encode_subscription_groups(self) -> bytes:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG body: SubscriptionGroupWrapper JSON."""
        version = encode_data_version(self.snapshot.subscription_version).decode("ascii")
        groups = fastjson.dumps({k: dict(v) for k, v in self.snapshot.subscription_groups.items()})
        return f'{{"dataVersion":{version},"subscriptionGroupTable":{groups}}}'.encode()

    # -- applying what a master answered (SlaveSynchronize) -------------------

    def apply_master_topics(self, body: bytes) -> bool:
        """Take the master's topic table when its DataVersion differs; True if taken."""
        wrapper = decode_topic_config_serialize_wrapper(body)
        if wrapper.data_version == self.snapshot.topic_version:
            return False
        self._replace(topics=dict(wrapper.topic_config_table), topic_version=wrapper.data_version)
        return True

    def apply_master_consumer_offsets(self, body: bytes) -> bool:
        """Merge the master's consumer offsets over ours (``putAll``)."""
        obj = _object(body, "ConsumerOffsetSerializeWrapper")
        table = _object(obj.get("offsetTable", {}), "offsetTable")
        offsets = {k: dict(v) for k, v in self.snapshot.consumer_offsets.items()}
        for key, queues in table.items():
            offsets[str(key)] = _int_map(queues, "offset table")
        version = obj.get("dataVersion")
        self._replace(
            consumer_offsets=offsets,
            consumer_offset_version=self.snapshot.consumer_offset_version
            if version is None
            else _data_version(version),
        )
        return True

    def apply_master_delay_offsets(self, body: bytes) -> bool:
        """Take the master's delay offsets."""
        obj = _object(body, "delay offsets")
        self._replace(delay_offsets=_int_map(obj.get("offsetTable", {}), "delay offsets"))
        return True

    def apply_master_subscription_groups(self, body: bytes) -> bool:
        """Take the master's subscription groups when their DataVersion differs."""
        obj = _object(body, "SubscriptionGroupWrapper")
        version = _data_version(obj.get("dataVersion", {}))
        if version == self.snapshot.subscription_version:
            return False
        groups = _object(obj.get("subscriptionGroupTable", {}), "subscriptionGroupTable")
        self._replace(
            subscription_groups={str(k): _object(v, "group") for k, v in groups.items()},
            subscription_version=version,
        )
        return True


def _object(value: object, what: str) -> dict[str, object]:
    if isinstance(value, bytes | bytearray):
        # A master's answer, through the bounded decoder like every body.
        value = body_limits.read_json(value, body_limits.MASTER_METADATA)
    if not isinstance(value, dict):
        raise BodyDecodeError(f"{what} is not a JSON object")
    return {str(k): v for k, v in value.items()}


def _int_map(value: object, what: str) -> dict[int, int]:
    result: dict[int, int] = {}
    for key, item in _object(value, what).items():
        if not isinstance(item, int) or isinstance(item, bool):
            raise BodyDecodeError(f"{what}: value of {key} is not an integer")
        try:
            result[int(key)] = item
        except ValueError as exc:
            raise BodyDecodeError(f"{what}: key {key!r} is not an integer") from exc
    return result


def _data_version(value: object) -> DataVersion:
    decoded = decode_data_version(fastjson.dumps(value).encode())
    return decoded if decoded is not None else DataVersion()
