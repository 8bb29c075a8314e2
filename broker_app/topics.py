"""The broker's topic table as requests change it: create, delete, may-I-write, which queue.

UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER, a send to an unknown topic with
``autoCreateTopicEnable`` and a consumer group's retry and dead-letter topics all come here;
every change bumps the topic DataVersion, is saved, and is registered with the NameServers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from broker_app.config import BrokerConfig, BrokerRole
from broker_app.metadata import BrokerMetadata
from broker_app.metadata_saver import MetadataSaver
from broker_app.namesrv_registration import NameServerRegistration
from broker_app.periodic import BrokerTasks
from broker_app.replication import BrokerReplication
from broker_app.store.message_store import (
    MessageInput,
    MessageRejected,
    MessageStore,
    validate_topic,
)
from remoting.codes import ResponseCode
from remoting.model import PERM_WRITE, TopicConfig, is_writeable

log = logging.getLogger(__name__)

DELETE_REGISTER_WAIT_S = 2.0
"""How long DELETE_TOPIC_IN_BROKER waits for the re-registration before it answers (the
registration goes on after that, bounded by the register timeout)."""


class BrokerTopics:
    """Changes the topic table of ``metadata``, saves it, registers the change, and says
    whether and where a message for a topic may be written here."""

    def __init__(
        self,
        config: BrokerConfig,
        metadata: BrokerMetadata,
        saver: MetadataSaver,
        replication: BrokerReplication,
        registration: NameServerRegistration,
        tasks: BrokerTasks,
        *,
        clock_ms: Callable[[], int],
        store: Callable[[], MessageStore | None],
    ) -> None:
        self.config = config
        self.metadata = metadata
        self.saver = saver
        self.replication = replication
        self.registration = registration
        self.tasks = tasks
        self.clock_ms = clock_ms
        self.store = store
        self._round_robin = 0

    def create(self, config: TopicConfig) -> None:
        """UPDATE_AND_CREATE_TOPIC: store it, bump the DataVersion, register it."""
        assert config.topic_name is not None
        validate_topic(config.topic_name)
        self.metadata.upsert_topic(config, self.clock_ms())
        self.saver.save_soon()
        self.tasks.spawn(self.registration.register_topic(config.topic_name))

    async def delete(self, topic: str) -> bool:
        """DELETE_TOPIC_IN_BROKER: drop the topic, its offsets and consume queues, persist,
        and register again so the NameServers get the new DataVersion and topic table.

        True when the topic existed (deleting an unknown topic is not an error, as
        upstream). The answer waits a little for the registration: a registration
        already under way then reaches the NameServers before the caller's
        DELETE_TOPIC_IN_NAMESRV does, so it cannot bring the topic back.
        """
        validate_topic(topic)
        existed = self.metadata.delete_topic(topic, self.clock_ms())
        store = self.store()
        if store is not None:
            store.delete_topic(topic)
        self.saver.save_soon()
        log.info(
            "topic %s deleted on %s (%s)",
            topic,
            self.registration.broker_addr(),
            "existed" if existed else "was not there",
        )
        if existed and self.registration.registrar is not None:
            task = self.tasks.spawn(self.registration.register_after_delete())
            await asyncio.wait({task}, timeout=DELETE_REGISTER_WAIT_S)
        return existed

    def check_writable(self, topic: str, default_queue_nums: int | None) -> tuple[int, str] | None:
        """``msgCheck``: None when a message for ``topic`` may be stored here."""
        if self.replication.role is BrokerRole.SLAVE:
            return (
                ResponseCode.SERVICE_NOT_AVAILABLE,
                "message store is slave mode, so putMessage is forbidden",
            )
        if not is_writeable(self.config.broker_permission):
            return (
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_name}] sending message is forbidden",
            )
        validate_topic(topic)
        if self.metadata.topic(topic) is None:
            if not self.config.auto_create_topic:
                return (
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{topic}] not exist, apply first please!",
                )
            nums = min(
                default_queue_nums or self.config.default_topic_queue_nums,
                self.config.default_topic_queue_nums,
            )
            self.create(TopicConfig(topic, nums, nums))
        config = self.metadata.topic(topic)
        if config is None or config.perm & PERM_WRITE == 0:
            return (ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        return None

    def with_queue_id(self, message: MessageInput) -> MessageInput:
        """``message`` with its queue chosen: round robin over the write queues when the
        sender left it to the broker (-1); a queue past them is refused."""
        config = self.metadata.topic(message.topic)
        write_queues = max(1, config.write_queue_nums if config is not None else 1)
        if message.queue_id < 0:
            self._round_robin += 1
            queue_id = self._round_robin % write_queues
        elif message.queue_id >= write_queues:
            raise MessageRejected(
                f"queueId[{message.queue_id}] is illegal, topic has {write_queues} write queues"
            )
        else:
            return message
        return MessageInput(
            message.topic,
            queue_id,
            message.body,
            message.properties,
            message.flag,
            message.sys_flag,
            message.born_timestamp_ms,
        )
