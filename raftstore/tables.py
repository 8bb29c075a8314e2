"""The mutable tables behind ``RouteTable`` (RocketMQ 5.x ``RouteInfoManager`` fields).

Only the rules in :mod:`raftstore.rules` mutate these, and only through the few
helpers here that keep the per-broker-name topic index in step with the topic
table. Queries never hand these objects out: they copy into frozen values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raftstore.results import BrokerAddrInfo, Replication
from remoting.model import BrokerData, DataVersion, QueueData, TopicQueueMappingInfo


@dataclass(frozen=True, slots=True)
class BrokerLiveView:
    """One entry of the live table (``BrokerLiveInfo`` keyed by (cluster, addr)).

    ``last_update_ms`` is the latest proposer timestamp heard for the broker; it
    never moves backwards, since different nodes' clocks stamp the touches.
    ``max_offset`` / ``confirm_offset`` are the broker's last reported commit-log
    offsets (None until it reports them); ``replication`` its last report of its HA
    links (None until it reports one), on which raft failover elects.
    """

    cluster_name: str
    broker_addr: str
    last_update_ms: int
    heartbeat_timeout_ms: int
    data_version: DataVersion
    ha_server_addr: str | None
    channel: str | None
    max_offset: int | None = None
    confirm_offset: int | None = None
    replication: Replication | None = None

    @property
    def key(self) -> BrokerAddrInfo:
        """The live table key of this entry."""
        return BrokerAddrInfo(self.cluster_name, self.broker_addr)


@dataclass(slots=True)
class BrokerGroup:
    """A mutable ``BrokerData``: one broker name's members by broker id.

    ``raft_failover`` marks a group whose brokers opted into raft-mode master
    election; it is not part of the wire ``BrokerData``.
    """

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    zone_name: str | None = None
    enable_acting_master: bool = False
    raft_failover: bool = False

    def min_broker_id(self) -> int | None:
        """The smallest registered broker id, None when the group is empty."""
        return min(self.broker_addrs) if self.broker_addrs else None

    def to_data(self) -> BrokerData:
        """A frozen copy with the addresses ordered by broker id."""
        return BrokerData(
            cluster=self.cluster,
            broker_name=self.broker_name,
            broker_addrs=dict(sorted(self.broker_addrs.items())),
            zone_name=self.zone_name,
            enable_acting_master=self.enable_acting_master,
        )


@dataclass(frozen=True, slots=True)
class RegisteredTopics:
    """The topic table a broker's master registered last (``Tables.registered``).

    ``topics_digest`` names the table (``RegisterBroker.topics_digest``); the broker's
    queues are exactly what registering it wrote, under the then
    ``deleteTopicWithBrokerRegistration`` (``delete_dropped``). A registration that
    repeats the table with a new DataVersion may leave it out of the log.
    """

    cluster_name: str
    broker_addr: str
    topics_digest: bytes
    delete_dropped: bool


@dataclass(slots=True)
class Tables:
    """Every replicated table. Dict order never leaks into answers: readers sort."""

    topic_queue: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    broker_addr: dict[str, BrokerGroup] = field(default_factory=dict)
    cluster_addr: dict[str, set[str]] = field(default_factory=dict)
    live: dict[BrokerAddrInfo, BrokerLiveView] = field(default_factory=dict)
    filter_servers: dict[BrokerAddrInfo, tuple[str, ...]] = field(default_factory=dict)
    mapping_infos: dict[str, dict[str, TopicQueueMappingInfo]] = field(default_factory=dict)
    kv: dict[str, dict[str, str]] = field(default_factory=dict)
    # broker name -> topics holding a QueueData of it; lets apply touch only the
    # topics of one broker instead of walking the whole topic table.
    topics_of_broker: dict[str, set[str]] = field(default_factory=dict)
    # broker name -> the topic table its master registered last, while the queues
    # of that broker are exactly what that registration wrote. Every change to one
    # of its queues goes through the three methods below, which drop the record.
    registered: dict[str, RegisteredTopics] = field(default_factory=dict)

    def put_queue(self, topic: str, queue: QueueData) -> bool:
        """Store ``queue`` for ``topic``; True when the stored value changed."""
        queues = self.topic_queue.setdefault(topic, {})
        if queues.get(queue.broker_name) == queue:
            return False
        queues[queue.broker_name] = queue
        self.topics_of_broker.setdefault(queue.broker_name, set()).add(topic)
        self.registered.pop(queue.broker_name, None)
        return True

    def remove_queue(self, topic: str, broker_name: str) -> bool:
        """Drop the broker's QueueData of ``topic`` (and the topic once empty)."""
        queues = self.topic_queue.get(topic)
        if queues is None or queues.pop(broker_name, None) is None:
            return False
        if not queues:
            del self.topic_queue[topic]
        self._unindex(broker_name, topic)
        self.registered.pop(broker_name, None)
        return True

    def remove_topic(self, topic: str) -> bool:
        """Drop a whole topic; True when it existed."""
        queues = self.topic_queue.pop(topic, None)
        if queues is None:
            return False
        for broker_name in queues:
            self._unindex(broker_name, topic)
            self.registered.pop(broker_name, None)
        return True

    def topics_of(self, broker_name: str) -> set[str]:
        """The topics that hold a QueueData of ``broker_name`` (a copy)."""
        return set(self.topics_of_broker.get(broker_name, ()))

    def _unindex(self, broker_name: str, topic: str) -> None:
        topics = self.topics_of_broker.get(broker_name)
        if topics is None:
            return
        topics.discard(topic)
        if not topics:
            del self.topics_of_broker[broker_name]
