"""The broker process core (RocketMQ's ``BrokerController``), one asyncio loop.

:class:`BrokerController` is the composition root: it builds the store, the metadata, the
remoting server and client and the parts that each do one job, wires them together, and
owns their lifecycles (start, stop) and the message path (put, delayed delivery, flush):

* :class:`~broker_app.replication.BrokerReplication` (replication.py): the role, the HA
  service or client, SlaveSynchronize, and the role changes of raft failover;
* :class:`~broker_app.namesrv_registration.NameServerRegistration`: when to register with
  the NameServers and what their answers mean for the role;
* :class:`~broker_app.topics.BrokerTopics`: the topic table (create, delete, may a message
  be written, which queue);
* :class:`~broker_app.consumer_groups.ConsumerGroups`: groups, offsets, membership pushes;
* :class:`~broker_app.metadata_saver.MetadataSaver` and
  :class:`~broker_app.periodic.BrokerTasks`: saving the metadata, the background tasks.

``run_broker`` is a thin management command around :func:`run_broker`.
:meth:`BrokerController.runtime_info` exposes everything a status page needs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from broker_app.clients import ConsumerManager, ProducerManager, RebalanceLockManager
from broker_app.config import BrokerConfig, BrokerRole
from broker_app.consumer_groups import ConsumerGroups
from broker_app.core import PutOutcome
from broker_app.long_polling import PullHold
from broker_app.metadata import (
    BrokerMetadata,
    MetadataRepository,
    MetadataSnapshot,
    default_topics,
)
from broker_app.metadata_saver import MetadataSaver
from broker_app.namesrv_registration import NameServerRegistration
from broker_app.periodic import BrokerTasks
from broker_app.processor import BrokerProcessor
from broker_app.redelivery import SCHEDULE_TOPIC, ScheduleService, parse_delay_levels, schedule
from broker_app.replication import BrokerReplication, RoleHint
from broker_app.store.message_store import MessageInput, MessageRejected, MessageStore
from broker_app.store.record import wait_store_ok
from broker_app.topics import BrokerTopics
from remoting.client import RemotingClient
from remoting.codes import CURRENT_VERSION, ResponseCode
from remoting.command import RemotingCommand
from remoting.connection import Connection
from remoting.server import RemotingServer

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 5.0
CLIENT_SCAN_INTERVAL_MS = 10_000
"""How often silent clients are looked for (``ClientHousekeepingService``: every 10 s)."""
SCHEDULE_TICK_MS = 100
"""How often due delayed messages (and retries) are moved to their real queues."""


def wall_clock_ms() -> int:
    """Milliseconds since the epoch (DataVersion timestamps, store timestamps)."""
    return time.time_ns() // 1_000_000


class BrokerController:
    """One running broker: wires its parts, starts and stops them, stores messages."""

    registration: NameServerRegistration
    """Built after :attr:`replication`, which registers through it after a role change."""

    def __init__(
        self,
        config: BrokerConfig,
        repository: MetadataRepository,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
        on_role_hint: RoleHint | None = None,
    ) -> None:
        config.validate()
        self.config = config
        self.clock_ms = clock_ms
        self.store: MessageStore | None = None
        self.metadata = BrokerMetadata(MetadataSnapshot())
        self.saver = MetadataSaver(repository, self.metadata)
        self.tasks = BrokerTasks()
        self.consumers = ConsumerManager(channel_expired_ms=config.channel_expired_ms)
        self.producers = ProducerManager(channel_expired_ms=config.channel_expired_ms)
        self.locks = RebalanceLockManager()
        self.pull_hold = PullHold()
        self.scheduler = ScheduleService(parse_delay_levels(config.message_delay_level))
        self._memory_bytes: int | None = None
        self.processor = BrokerProcessor(self)  # reads only the metadata while built
        self.acl = config.remoting_acl()
        server_tls, client_tls = config.tls()
        self.client = RemotingClient(
            on_request=self.processor.handle,
            credentials=config.namesrv_credentials(),
            tls=client_tls,
        )
        self.replication = BrokerReplication(
            config,
            self.client,
            self.metadata,
            self.saver,
            self.tasks,
            broker_addr=lambda: self.broker_addr,
            register=lambda: self.registration.register(force=True),
            on_role_changed=self._rewrite_ready_file,
            on_role_hint=on_role_hint,
        )
        self.registration = NameServerRegistration(
            config,
            self.client,
            self.metadata,
            self.replication,
            self.tasks,
            lambda: self.broker_addr,
        )
        self.topics = BrokerTopics(
            config,
            self.metadata,
            self.saver,
            self.replication,
            self.registration,
            self.tasks,
            clock_ms=clock_ms,
            store=lambda: self.store,
        )
        self.groups = ConsumerGroups(
            config,
            self.consumers,
            self.producers,
            self.metadata,
            self.saver,
            self.topics,
            self.replication,
            clock_ms,
        )
        self.server = RemotingServer(
            self._serve,
            host=config.host,
            port=config.port,
            on_connection_closed=self.groups.connection_closed,
            prepare=None if server_tls is None else server_tls.prepare,
        )

    async def _serve(self, request: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        """The remoting port's handler: the ACL first, then the processor. (Requests the
        NameServers push on our own outbound connections go to the processor directly:
        we dialled those peers.)"""
        acl = self.acl
        if acl is not None and acl.guards(request.code):
            refusal = acl.check(request, conn.peer_host, conn.peer_subject)
            if refusal is not None:
                return acl.refuse(request, refusal)
        return await self.processor.handle(request, conn)

    # -- identity ------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound remoting port."""
        return self.server.port

    @property
    def broker_addr(self) -> str:
        """``host:port`` of the remoting server, as registered."""
        return f"{self.config.host}:{self.port}"

    @property
    def role(self) -> BrokerRole:
        """The role of this moment (read by every request handler; changed only by
        :attr:`replication`)."""
        return self.replication.role

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> None:
        """Recover the store, load metadata, bind ports, register, start the loops."""
        loop = asyncio.get_running_loop()
        self.store = await loop.run_in_executor(None, MessageStore, self.config.store_config())
        self.store.on_arrival = self.pull_hold.notify
        await self._load_metadata()
        await self.server.start()
        await self.replication.start(self.store)
        await self.registration.start()
        self._start_loops()
        log.info(
            "broker %s (%s) serving at %s, HA %s",
            self.config.broker_name,
            self.role,
            self.broker_addr,
            self.replication.ha_addr,
        )

    async def _load_metadata(self) -> None:
        snapshot = await self.saver.load()
        if snapshot is None:
            topics = default_topics(
                self.config.cluster_name,
                self.config.broker_name,
                auto_create=self.config.auto_create_topic,
                queue_nums=self.config.default_topic_queue_nums,
            )
            snapshot = MetadataSnapshot(topics=topics)
            self.metadata.snapshot = snapshot
            self.saver.save_soon()
        self.metadata.snapshot = snapshot

    def _start_loops(self) -> None:
        config, every = self.config, self.tasks.every
        self.registration.start_loops()
        self.replication.start_loops()
        every(config.flush_interval_ms, config.flush_interval_ms, self._flush)
        every(CLIENT_SCAN_INTERVAL_MS, CLIENT_SCAN_INTERVAL_MS, self.groups.expire_clients)
        every(
            config.consumer_offset_flush_interval_ms,
            config.consumer_offset_flush_interval_ms,
            self.groups.persist_offsets,
        )
        every(SCHEDULE_TICK_MS, SCHEDULE_TICK_MS, self._deliver_due)

    async def stop(self, *, unregister: bool = True) -> None:
        """Graceful shutdown: UNREGISTER_BROKER, close ports, flush and persist."""
        self.pull_hold.wake_all()
        await self.tasks.stop()
        if unregister:
            await self.registration.unregister_all()
        await self.replication.close()
        await self.server.close(drain_timeout_s=STOP_TIMEOUT_S)
        await self.client.close()
        if self.store is not None:
            self.store.close()
        self.saver.close()

    def _rewrite_ready_file(self) -> None:
        if self.config.ready_file is not None and self.config.ready_file.exists():
            write_ready_file(self.config.ready_file, self)

    async def _flush(self) -> None:
        assert self.store is not None
        await asyncio.get_running_loop().run_in_executor(None, self.store.flush)

    # -- messages -------------------------------------------------------------

    async def put_message(self, message: MessageInput) -> PutOutcome:
        """Store one message and apply the SYNC_MASTER rule (4.x ``CommitLog.handleHA``:
        a SYNC_MASTER answers only once a slave has the bytes)."""
        assert self.store is not None
        message = schedule(self.topics.with_queue_id(message), self.scheduler.levels)
        result = self.store.put_message(message, self.clock_ms())
        ha_service = self.replication.ha_service
        if ha_service is not None:
            ha_service.notify_new_data()
        if self.role is not BrokerRole.SYNC_MASTER or not wait_store_ok(message.properties):
            return PutOutcome(result, ResponseCode.SUCCESS)
        return PutOutcome(result, await self.replication.wait_for_slaves(result.end_offset))

    def require_store(self) -> MessageStore:
        """The message store (the broker is started)."""
        assert self.store is not None, "the broker is not started"
        return self.store

    def memory_bytes(self) -> int:
        """How much of the commit log's tail counts as in memory (suggestWhichBrokerId)."""
        if self._memory_bytes is None:
            total = self.config.memory_bytes
            if total == 0:
                total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            self._memory_bytes = total * self.config.access_message_in_memory_max_ratio // 100
        return self._memory_bytes

    async def _deliver_due(self) -> None:
        """Move due delayed messages (and retries) to their real queues (masters only)."""
        store = self.store
        if store is None or self.role is BrokerRole.SLAVE or not store.queues_of(SCHEDULE_TOPIC):
            return
        offsets = self.metadata.snapshot.delay_offsets
        ready, after = self.scheduler.due(
            offsets,
            lambda queue_id: store.queue_max_offset(SCHEDULE_TOPIC, queue_id),
            lambda queue_id, offset: store.get_message(SCHEDULE_TOPIC, queue_id, offset),
            self.clock_ms(),
        )
        for message in ready:
            try:
                await self.put_message(message)
            except MessageRejected as exc:
                log.warning(
                    "a delayed message for %s could not be delivered: %s", message.topic, exc
                )
        if after != dict(offsets):
            self.metadata.set_delay_offsets(after)
            self.saver.save_soon()

    # -- status ----------------------------------------------------------------

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO table (upstream key names where they exist)."""
        store, replication = self.store, self.replication
        info = {
            "brokerVersion": str(int(CURRENT_VERSION)),
            "brokerRole": str(replication.role),
            "brokerId": str(replication.broker_id),
            "commitLogMinOffset": str(store.min_offset if store else 0),
            "commitLogMaxOffset": str(store.max_offset if store else 0),
            "haServerAddr": replication.ha_addr,
            "masterAddr": replication.master_addr or "",
        }
        info.update(replication.runtime_fields())
        namesrv_addrs = self.registration.namesrv_addrs
        if namesrv_addrs is not None:  # the NameServers this broker registers with now
            info["namesrvAddr"] = ";".join(namesrv_addrs)
        change = replication.min_broker_change
        if change is not None:
            info["minBrokerId"] = str(change.min_broker_id)
            info["minBrokerAddr"] = change.min_broker_addr or ""
        return info


def write_ready_file(path: Path, controller: BrokerController) -> None:
    """Atomically write the ready file: bound ports and addresses as JSON."""
    ha_addr = controller.replication.ha_addr
    payload = {
        "pid": os.getpid(),
        "port": controller.port,
        "ha_port": int(ha_addr.rpartition(":")[2]),
        "addr": controller.broker_addr,
        "ha_addr": ha_addr,
        "role": str(controller.role),
        "broker_id": controller.replication.broker_id,
    }
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(payload), encoding="utf-8")
    temporary.replace(path)
