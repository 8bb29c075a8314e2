"""Consumer groups as the broker keeps them: their subscription configs and retry/DLQ topics,
their committed offsets, and telling a group's clients when its membership changes.

The client tables themselves (:mod:`broker_app.clients`) say who is connected; this module
reacts to them: a closed connection or a silent client changes a group, and the group's
consumers are told (NOTIFY_CONSUMER_IDS_CHANGED) so they rebalance.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from broker_app.clients import ConsumerManager, ProducerManager, dlq_topic, retry_topic
from broker_app.config import BrokerConfig, BrokerRole
from broker_app.metadata import SUBSCRIPTION_GROUP_DEFAULTS, BrokerMetadata
from broker_app.metadata_saver import MetadataSaver
from broker_app.replication import BrokerReplication
from broker_app.topics import BrokerTopics
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.connection import Connection
from remoting.model import PERM_READ, PERM_WRITE, TopicConfig

log = logging.getLogger(__name__)


class ConsumerGroups:
    """Creates consumer groups on first sight, records their offsets (saved on the flush
    schedule) and pushes membership changes to their clients."""

    def __init__(
        self,
        config: BrokerConfig,
        consumers: ConsumerManager,
        producers: ProducerManager,
        metadata: BrokerMetadata,
        saver: MetadataSaver,
        topics: BrokerTopics,
        replication: BrokerReplication,
        clock_ms: Callable[[], int],
    ) -> None:
        self.config = config
        self.consumers = consumers
        self.producers = producers
        self.metadata = metadata
        self.saver = saver
        self.topics = topics
        self.replication = replication
        self.clock_ms = clock_ms
        self._offsets_dirty = False
        self._pushes: set[asyncio.Task[None]] = set()

    def ensure(self, group: str, *, retry: bool, dead_letter: bool = False) -> None:
        """A master creates a group's subscription config and its retry (and dead-letter)
        topic the first time it sees the group; slaves get them from the master."""
        if self.replication.role is BrokerRole.SLAVE:
            return
        if self.metadata.subscription_group(group) is None:
            self.metadata.upsert_subscription_group(
                group, SUBSCRIPTION_GROUP_DEFAULTS, self.clock_ms()
            )
            self.saver.save_soon()
        if retry and self.metadata.topic(retry_topic(group)) is None:
            self.topics.create(TopicConfig(retry_topic(group), 1, 1, PERM_READ | PERM_WRITE))
        if dead_letter and self.metadata.topic(dlq_topic(group)) is None:
            # upstream's DLQ is write-only: an operator reads it, consumers do not.
            self.topics.create(TopicConfig(dlq_topic(group), 1, 1, PERM_WRITE))

    def commit_offset(self, topic: str, group: str, queue_id: int, offset: int) -> None:
        """Record a group's offset; persisted every ``flushConsumerOffsetInterval``."""
        self.metadata.commit_offset(topic, group, queue_id, offset)
        self._offsets_dirty = True

    async def persist_offsets(self) -> None:
        """Save the snapshot when an offset was committed since the last call."""
        if self._offsets_dirty:
            self._offsets_dirty = False
            self.saver.save_soon()

    def notify_ids_changed(self, group: str) -> None:
        """Push NOTIFY_CONSUMER_IDS_CHANGED (one-way) to every client of ``group``."""
        found = self.consumers.group(group)
        if found is None:
            return
        for channel in list(found.channels.values()):
            push = RemotingCommand.request(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, oneway=True
            )
            task = asyncio.create_task(_push(channel.connection.send, push, channel.client_id))
            self._pushes.add(task)
            task.add_done_callback(self._pushes.discard)

    def connection_closed(self, conn: Connection) -> None:
        """A client's connection closed: its groups lose it and are told."""
        for group in self.consumers.connection_closed(conn):
            log.info(
                "consumer group %s lost the client at %s:%d", group, conn.peer_host, conn.peer_port
            )
            self.notify_ids_changed(group)
        self.producers.connection_closed(conn)

    async def expire_clients(self) -> None:
        """Drop clients silent for ``channelExpiredTimeout`` and tell their groups."""
        now = self.clock_ms()
        for group, channel in self.consumers.expire(now):
            log.warning(
                "consumer %s of group %s silent for %d ms: removed",
                channel.client_id,
                group,
                self.config.channel_expired_ms,
            )
            self.notify_ids_changed(group)
        self.producers.expire(now)


async def _push(
    send: Callable[[RemotingCommand], Awaitable[None]], push: RemotingCommand, client_id: str
) -> None:
    try:
        await send(push)
    except (ConnectionError, OSError) as exc:
        log.info("could not notify consumer %s: %s", client_id, exc)
