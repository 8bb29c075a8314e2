"""The broker process core (RocketMQ's ``BrokerController``), one asyncio loop.

It wires the store, the metadata, the remoting server, HA (service on a
master, client on a slave), registration with the NameServers, the optional
fast heartbeat, SlaveSynchronize and the flusher, and owns their lifecycles.
``run_broker`` is a thin management command around :func:`run_broker`.

The role is plain state changed only through
:meth:`BrokerController.on_min_broker_id_change` (NOTIFY_MIN_BROKER_ID_CHANGE)
and the registration answers. With ``raft_failover`` (docs/RAFT.md,
"Failover") a slave the NameServers elected becomes master
(:meth:`BrokerController.promote_to_master`), and a master told that another
live broker holds id 0 becomes its slave (:meth:`BrokerController.follow_master`).
:meth:`BrokerController.runtime_info` exposes everything a status page needs.

Why one module: the controller owns the lifecycles of every part
listed above, and RocketMQ's own ``BrokerController`` keeps them together for the
same reason: start, role change and shutdown must touch them in one order.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from broker_app.address_server import NamesrvAddrFollower
from broker_app.clients import (
    ConsumerManager,
    ProducerManager,
    RebalanceLockManager,
    dlq_topic,
    retry_topic,
)
from broker_app.config import BrokerConfig, BrokerRole
from broker_app.core import PutOutcome
from broker_app.ha import links as ha_links
from broker_app.ha.client import HAClient
from broker_app.ha.service import HAService
from broker_app.long_polling import PullHold
from broker_app.metadata import (
    SUBSCRIPTION_GROUP_DEFAULTS,
    BrokerMetadata,
    MetadataRepository,
    MetadataSnapshot,
    default_topics,
)
from broker_app.processor import BrokerProcessor
from broker_app.redelivery import SCHEDULE_TOPIC, ScheduleService, parse_delay_levels, schedule
from broker_app.registration import (
    BrokerIdentity,
    RegisterResult,
    Registrar,
    first_assignment,
    first_master,
)
from broker_app.slave_sync import SlaveSynchronizer
from broker_app.store.message_store import (
    MessageInput,
    MessageRejected,
    MessageStore,
    PutResult,
    validate_topic,
)
from broker_app.store.record import wait_store_ok
from remoting.client import RemotingClient
from remoting.codes import CURRENT_VERSION, RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.connection import Connection
from remoting.model import (
    PERM_READ,
    PERM_WRITE,
    TopicConfig,
    TopicConfigSerializeWrapper,
    is_writeable,
)
from remoting.server import RemotingServer

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 5.0
CLIENT_SCAN_INTERVAL_MS = 10_000
"""How often silent clients are looked for (``ClientHousekeepingService``: every 10 s)."""
SCHEDULE_TICK_MS = 100
"""How often due delayed messages (and retries) are moved to their real queues."""
DELETE_REGISTER_WAIT_S = 2.0
"""How long DELETE_TOPIC_IN_BROKER waits for the re-registration before it answers (the
registration goes on after that, bounded by the register timeout)."""


def wall_clock_ms() -> int:
    """Milliseconds since the epoch (DataVersion timestamps, store timestamps)."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class MinBrokerIdChange:
    """The last NOTIFY_MIN_BROKER_ID_CHANGE this broker received."""

    min_broker_id: int | None
    min_broker_addr: str | None
    offline_broker_addr: str | None
    ha_broker_addr: str | None


RoleHint = Callable[[MinBrokerIdChange], Awaitable[None]]


class BrokerController:
    """One running broker."""

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
        self.role = config.role
        self.broker_id = config.broker_id
        self.role_changes = 0
        self._role_lock = asyncio.Lock()
        self.repository = repository
        self.clock_ms = clock_ms
        self.on_role_hint = on_role_hint
        self.store: MessageStore | None = None
        self.metadata = BrokerMetadata(MetadataSnapshot())
        self.consumers = ConsumerManager(channel_expired_ms=config.channel_expired_ms)
        self.producers = ProducerManager(channel_expired_ms=config.channel_expired_ms)
        self.locks = RebalanceLockManager()
        self.pull_hold = PullHold()
        self.scheduler = ScheduleService(parse_delay_levels(config.message_delay_level))
        self._offsets_dirty = False
        self._memory_bytes: int | None = None
        self._pushes: set[asyncio.Task[None]] = set()
        self.processor = BrokerProcessor(self)
        self.acl = config.remoting_acl()
        # Read here, so a broker with an unusable haSecretFile does not start.
        self.ha_auth = config.ha_auth()
        server_tls, client_tls = config.tls()
        self.server = RemotingServer(
            self._serve,
            host=config.host,
            port=config.port,
            on_connection_closed=self._connection_closed,
            prepare=None if server_tls is None else server_tls.prepare,
        )
        self.client = RemotingClient(
            on_request=self.processor.handle,
            credentials=config.namesrv_credentials(),
            tls=client_tls,
        )
        self.ha_service: HAService | None = None
        self.ha_client: HAClient | None = None
        self.master_addr: str | None = None
        self.min_broker_change: MinBrokerIdChange | None = None
        self.registrar: Registrar | None = None
        self.synchronizer: SlaveSynchronizer | None = None
        self._persist_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="persist")
        self._persist_queued = False
        self._tasks: list[asyncio.Task[None]] = []
        self._round_robin = 0
        where = config.address_server()  # fetchNamesrvAddrByAddressServer
        self.namesrv_follower = None if where is None else NamesrvAddrFollower(where)

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
    def ha_addr(self) -> str:
        """``host:port`` of the HA server (a slave registers its own HA port too)."""
        port = self.ha_service.port if self.ha_service is not None else self.config.ha_port
        return f"{self.config.host}:{port}"

    def identity(self) -> BrokerIdentity:
        """What this broker sends in NameServer requests."""
        return BrokerIdentity(
            self.config.cluster_name,
            self.config.broker_name,
            self.broker_id,
            self.broker_addr,
            self.ha_addr,
        )

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> None:
        """Recover the store, load metadata, bind ports, register, start the loops."""
        loop = asyncio.get_running_loop()
        self.store = await loop.run_in_executor(None, MessageStore, self.config.store_config())
        self.store.on_arrival = self.pull_hold.notify
        await self._load_metadata()
        await self.server.start()
        if self.role is BrokerRole.SLAVE:
            self._start_following(self.config.ha_master_address)
        else:
            await self._start_ha_service()
        self.registrar = Registrar(
            self.client,
            self.config.namesrv_addrs,
            self.identity,
            self._topic_wrapper,
            timeout_s=self.config.register_timeout_ms / 1000,
            compress_over_bytes=self.config.compress_register_bytes,
            split_size=self.config.split_registration_size
            if self.config.split_registration
            else None,
            heartbeat_timeout_ms=self.config.heartbeat_timeout_ms
            if self.config.fast_heartbeat
            else None,
            failover_fields=self.failover_fields if self.config.raft_failover else None,
        )
        if self.namesrv_follower is not None:  # the list before the first registration
            await self.namesrv_follower.update(self.registrar)
        await self.register(force=True)
        self._start_loops()
        log.info(
            "broker %s (%s) serving at %s, HA %s",
            self.config.broker_name,
            self.role,
            self.broker_addr,
            self.ha_addr,
        )

    def _start_following(self, ha_master_address: str | None) -> None:
        assert self.store is not None
        self.ha_client = HAClient(self.store, self.config.ha, auth=self.ha_auth)
        self.ha_client.set_master_address(ha_master_address)
        self.ha_client.start()
        self.synchronizer = SlaveSynchronizer(self.client, self.metadata, self._persist)

    async def _start_ha_service(self) -> None:
        assert self.store is not None
        self.ha_service = HAService(
            self.store,
            self.config.ha,
            auth=self.ha_auth,
            host=self.config.host,
            port=self.config.ha_port,
        )
        await self.ha_service.start()

    def failover_fields(self) -> dict[str, str]:
        """The raft-failover header fields of BROKER_HEARTBEAT, QUERY_DATA_VERSION and
        REGISTER_BROKER: the commit log's max and confirm offsets (a classic slave
        appends only whole, checked records it received, so what it holds is confirmed;
        a master confirms what it stored), and this broker's HA links
        (:mod:`remoting.ha_report`): a master's slaves with the offsets they acknowledged,
        or a slave's own connection to its master. The NameServer elects a slave only as
        its master vouched for it."""
        offset = str(self.store.max_offset if self.store is not None else 0)
        fields = {"maxOffset": offset, "confirmOffset": offset}
        fields.update(ha_links.report_fields(self.ha_service, self.ha_client))
        return fields

    async def _load_metadata(self) -> None:
        loop = asyncio.get_running_loop()
        snapshot = await loop.run_in_executor(self._persist_executor, self.repository.load)
        if snapshot is None:
            topics = default_topics(
                self.config.cluster_name,
                self.config.broker_name,
                auto_create=self.config.auto_create_topic,
                queue_nums=self.config.default_topic_queue_nums,
            )
            snapshot = MetadataSnapshot(topics=topics)
            self.metadata.snapshot = snapshot
            self._persist()
        self.metadata.snapshot = snapshot

    def _start_loops(self) -> None:
        config = self.config
        self._every(
            config.register_initial_delay_ms,
            config.effective_register_period_ms,
            lambda: self.register(force=config.force_register),
        )
        if config.fast_heartbeat:
            self._every(config.heartbeat_interval_ms, config.heartbeat_interval_ms, self._heartbeat)
        if self.synchronizer is not None:
            self._start_slave_sync()
        self._every(config.flush_interval_ms, config.flush_interval_ms, self._flush)
        self._every(CLIENT_SCAN_INTERVAL_MS, CLIENT_SCAN_INTERVAL_MS, self._expire_clients)
        self._every(
            config.consumer_offset_flush_interval_ms,
            config.consumer_offset_flush_interval_ms,
            self._persist_offsets,
        )
        self._every(SCHEDULE_TICK_MS, SCHEDULE_TICK_MS, self._deliver_due)
        follower, registrar = self.namesrv_follower, self.registrar
        if follower is not None and registrar is not None:
            period_ms = config.fetch_namesrv_addr_interval_ms
            self._every(period_ms, period_ms, lambda: follower.update(registrar))

    def _start_slave_sync(self) -> None:
        self._every(
            self.config.slave_sync_initial_delay_ms,
            self.config.slave_sync_interval_ms,
            self._slave_sync,
        )

    def _every(self, delay_ms: int, period_ms: int, step: Callable[[], Awaitable[object]]) -> None:
        async def loop() -> None:
            await asyncio.sleep(delay_ms / 1000)
            while True:
                try:
                    await step()
                except Exception:
                    # A failed round must not end the schedule (ScheduledExecutor
                    # tasks in BrokerController catch everything too).
                    log.exception("periodic broker task failed")
                await asyncio.sleep(period_ms / 1000)

        self._tasks.append(asyncio.create_task(loop()))

    async def stop(self, *, unregister: bool = True) -> None:
        """Graceful shutdown: UNREGISTER_BROKER, close ports, flush and persist."""
        self.pull_hold.wake_all()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if unregister and self.registrar is not None:
            await self.registrar.unregister_all()
        if self.ha_client is not None:
            await self.ha_client.close()
        if self.ha_service is not None:
            await self.ha_service.close()
        await self.server.close(drain_timeout_s=STOP_TIMEOUT_S)
        await self.client.close()
        if self.store is not None:
            self.store.close()
        self._persist_executor.submit(self.repository.save, self.metadata.snapshot)
        self._persist_executor.shutdown(wait=True)

    # -- registration, heartbeats, sync, flush -------------------------------

    def _topic_wrapper(self) -> TopicConfigSerializeWrapper:
        return self.metadata.topic_wrapper(broker_permission=self.config.broker_permission)

    async def register(self, *, force: bool) -> list[RegisterResult]:
        """One registration round; a slave learns its master from the answers."""
        assert self.registrar is not None
        results = await self.registrar.register_all(force=force)
        self._learn_master(results)
        await self._apply_assignment(results)
        return results

    async def _apply_assignment(self, results: list[RegisterResult]) -> None:
        """Raft failover: take the broker id the NameServers assigned (0 = elected)."""
        found = first_assignment(results)
        if found is None or not self.config.raft_failover:
            return
        assigned = found.assigned_broker_id
        assert assigned is not None
        if assigned == 0 and self.role is BrokerRole.SLAVE:
            await self.promote_to_master()
        elif assigned > 0 and self.role is not BrokerRole.SLAVE and found.master_addr:
            await self.follow_master(assigned, found.master_addr, found.ha_server_addr)

    async def promote_to_master(self) -> bool:
        """Elected: stop following, serve writes, become master per config, register as id 0.

        False when this broker already is a master (a repeated notification).
        """
        async with self._role_lock:
            if self.role is not BrokerRole.SLAVE:
                return False
            if self.ha_client is not None:
                await self.ha_client.close()
                self.ha_client = None
            self.synchronizer = None
            self.master_addr = None
            await self._start_ha_service()
            self.role = self.config.failover_master_role
            self.broker_id = 0
            self.role_changes += 1
            log.warning(
                "broker %s at %s elected master: now %s, broker id 0",
                self.config.broker_name,
                self.broker_addr,
                self.role,
            )
        self._rewrite_ready_file()
        await self.register(force=True)
        return True

    async def follow_master(
        self, broker_id: int, master_addr: str, ha_master_addr: str | None
    ) -> bool:
        """Another live broker holds id 0: become its slave under ``broker_id`` and register.

        False when this broker already is a slave.
        """
        async with self._role_lock:
            if self.role is BrokerRole.SLAVE:
                return False
            if self.ha_service is not None:
                await self.ha_service.close()
                self.ha_service = None
            self.role = BrokerRole.SLAVE
            self.broker_id = broker_id
            self.master_addr = master_addr
            self._start_following(ha_master_addr)
            assert self.synchronizer is not None
            self.synchronizer.master_addr = master_addr
            self._start_slave_sync()
            self.role_changes += 1
            log.warning(
                "broker %s at %s follows %s as slave id %d",
                self.config.broker_name,
                self.broker_addr,
                master_addr,
                broker_id,
            )
        self._rewrite_ready_file()
        await self.register(force=True)
        return True

    def _rewrite_ready_file(self) -> None:
        if self.config.ready_file is not None and self.config.ready_file.exists():
            write_ready_file(self.config.ready_file, self)

    def _learn_master(self, results: list[RegisterResult]) -> None:
        found = first_master(results)
        if found is None or self.role is not BrokerRole.SLAVE:
            return
        self.master_addr = found.master_addr
        if self.synchronizer is not None:
            self.synchronizer.master_addr = found.master_addr
        if self.ha_client is not None and self.config.ha_master_address is None:
            self.ha_client.set_master_address(found.ha_server_addr)

    async def _register_topic(self, topic: str) -> None:
        assert self.registrar is not None
        wrapper = self.metadata.topic_wrapper(
            only=topic, broker_permission=self.config.broker_permission
        )
        self._learn_master(await self.registrar.register_with(wrapper))

    async def _heartbeat(self) -> None:
        assert self.registrar is not None
        await self.registrar.heartbeat_all(self.config.heartbeat_timeout_ms)

    async def _slave_sync(self) -> None:
        # A promoted slave keeps the loop but has nothing left to copy.
        if self.synchronizer is not None:
            await self.synchronizer.sync_all()

    async def _flush(self) -> None:
        assert self.store is not None
        await asyncio.get_running_loop().run_in_executor(None, self.store.flush)

    def _persist(self) -> None:
        """Save the latest snapshot on the persistence thread (coalescing bursts)."""
        if self._persist_queued:
            return
        self._persist_queued = True

        def save() -> None:
            self._persist_queued = False
            self.repository.save(self.metadata.snapshot)

        self._persist_executor.submit(save)

    # -- topics and messages -------------------------------------------------

    def create_topic(self, config: TopicConfig) -> None:
        """UPDATE_AND_CREATE_TOPIC: store it, bump the DataVersion, register it."""
        assert config.topic_name is not None
        validate_topic(config.topic_name)
        self.metadata.upsert_topic(config, self.clock_ms())
        self._persist()
        self._tasks.append(asyncio.create_task(self._register_topic(config.topic_name)))
        self._tasks[:] = [task for task in self._tasks if not task.done()]

    async def delete_topic(self, topic: str) -> bool:
        """DELETE_TOPIC_IN_BROKER: drop the topic, its offsets and consume queues, persist,
        and register again so the NameServers get the new DataVersion and topic table.

        True when the topic existed (deleting an unknown topic is not an error, as
        upstream). The answer waits a little for the registration: a registration
        already under way then reaches the NameServers before the caller's
        DELETE_TOPIC_IN_NAMESRV does, so it cannot bring the topic back.
        """
        validate_topic(topic)
        existed = self.metadata.delete_topic(topic, self.clock_ms())
        if self.store is not None:
            self.store.delete_topic(topic)
        self._persist()
        log.info(
            "topic %s deleted on %s (%s)",
            topic,
            self.broker_addr,
            "existed" if existed else "was not there",
        )
        if existed and self.registrar is not None:
            task = asyncio.create_task(self._register_after_delete())
            self._tasks[:] = [t for t in self._tasks if not t.done()]
            self._tasks.append(task)
            await asyncio.wait({task}, timeout=DELETE_REGISTER_WAIT_S)
        return existed

    async def _register_after_delete(self) -> None:
        try:
            await self.register(force=True)
        except Exception:
            # The next periodic round registers the new DataVersion anyway.
            log.exception("registration after a topic deletion failed")

    def check_writable(self, topic: str, default_queue_nums: int | None) -> tuple[int, str] | None:
        """``msgCheck``: None when a message for ``topic`` may be stored here."""
        if self.role is BrokerRole.SLAVE:
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
            self.create_topic(TopicConfig(topic, nums, nums))
        config = self.metadata.topic(topic)
        if config is None or config.perm & PERM_WRITE == 0:
            return (ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        return None

    async def put_message(self, message: MessageInput) -> PutOutcome:
        """Store one message and apply the SYNC_MASTER rule (4.x ``CommitLog.handleHA``:
        a SYNC_MASTER answers only once a slave has the bytes)."""
        assert self.store is not None
        message = schedule(self._with_queue_id(message), self.scheduler.levels)
        result = self.store.put_message(message, self.clock_ms())
        if self.ha_service is not None:
            self.ha_service.notify_new_data()
        if self.role is not BrokerRole.SYNC_MASTER or not wait_store_ok(message.properties):
            return PutOutcome(result, ResponseCode.SUCCESS)
        return await self._wait_for_slave(result)

    def _with_queue_id(self, message: MessageInput) -> MessageInput:
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

    async def _wait_for_slave(self, result: PutResult) -> PutOutcome:
        assert self.ha_service is not None
        if not self.ha_service.is_slave_ok(result.end_offset):
            return PutOutcome(result, ResponseCode.SLAVE_NOT_AVAILABLE)
        acked = await self.ha_service.wait_for_ack(
            result.end_offset, self.config.slave_timeout_ms / 1000
        )
        code = ResponseCode.SUCCESS if acked else ResponseCode.FLUSH_SLAVE_TIMEOUT
        return PutOutcome(result, code)

    # -- consumers ------------------------------------------------------------

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

    def ensure_consumer_group(self, group: str, *, retry: bool, dead_letter: bool = False) -> None:
        """A master creates a group's subscription config and its retry (and dead-letter)
        topic the first time it sees the group; slaves get them from the master."""
        if self.role is BrokerRole.SLAVE:
            return
        if self.metadata.subscription_group(group) is None:
            self.metadata.upsert_subscription_group(
                group, SUBSCRIPTION_GROUP_DEFAULTS, self.clock_ms()
            )
            self._persist()
        if retry and self.metadata.topic(retry_topic(group)) is None:
            self.create_topic(TopicConfig(retry_topic(group), 1, 1, PERM_READ | PERM_WRITE))
        if dead_letter and self.metadata.topic(dlq_topic(group)) is None:
            # upstream's DLQ is write-only: an operator reads it, consumers do not.
            self.create_topic(TopicConfig(dlq_topic(group), 1, 1, PERM_WRITE))

    def commit_consumer_offset(self, topic: str, group: str, queue_id: int, offset: int) -> None:
        """Record a group's offset; persisted every ``flushConsumerOffsetInterval``."""
        self.metadata.commit_offset(topic, group, queue_id, offset)
        self._offsets_dirty = True

    async def _persist_offsets(self) -> None:
        if self._offsets_dirty:
            self._offsets_dirty = False
            self._persist()

    def notify_consumer_ids_changed(self, group: str) -> None:
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

    def _connection_closed(self, conn: Connection) -> None:
        for group in self.consumers.connection_closed(conn):
            log.info(
                "consumer group %s lost the client at %s:%d", group, conn.peer_host, conn.peer_port
            )
            self.notify_consumer_ids_changed(group)
        self.producers.connection_closed(conn)

    async def _expire_clients(self) -> None:
        now = self.clock_ms()
        for group, channel in self.consumers.expire(now):
            log.warning(
                "consumer %s of group %s silent for %d ms: removed",
                channel.client_id,
                group,
                self.config.channel_expired_ms,
            )
            self.notify_consumer_ids_changed(group)
        self.producers.expire(now)

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
            self._persist()

    # -- notifications, status ----------------------------------------------

    async def on_min_broker_id_change(
        self,
        *,
        min_broker_id: int | None,
        min_broker_addr: str | None,
        offline_broker_addr: str | None,
        ha_broker_addr: str | None,
    ) -> None:
        """Record a NOTIFY_MIN_BROKER_ID_CHANGE and hand it to the role-change seam."""
        change = MinBrokerIdChange(
            min_broker_id, min_broker_addr, offline_broker_addr, ha_broker_addr
        )
        self.min_broker_change = change
        log.info("min broker id of %s changed: %s", self.config.broker_name, change)
        if self.on_role_hint is not None:
            await self.on_role_hint(change)
        if self.config.raft_failover:
            await self._failover_hint(change)

    async def _failover_hint(self, change: MinBrokerIdChange) -> None:
        """Raft failover: the NameServers elected ``min_broker_addr`` as id 0."""
        if change.min_broker_id != 0 or not change.min_broker_addr:
            return
        if change.min_broker_addr == self.broker_addr:
            await self.promote_to_master()
        elif self.role is BrokerRole.SLAVE:
            self.master_addr = change.min_broker_addr
            if self.synchronizer is not None:
                self.synchronizer.master_addr = change.min_broker_addr
            if self.ha_client is not None and change.ha_broker_addr:
                self.ha_client.set_master_address(change.ha_broker_addr)
        else:
            # A master that hears of another master was expired while it was cut
            # off: registering again makes the NameServers assign it a slave id.
            await self.register(force=True)

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO table (upstream key names where they exist)."""
        store = self.store
        info = {
            "brokerVersion": str(int(CURRENT_VERSION)),
            "brokerRole": str(self.role),
            "brokerId": str(self.broker_id),
            "commitLogMinOffset": str(store.min_offset if store else 0),
            "commitLogMaxOffset": str(store.max_offset if store else 0),
            "haServerAddr": self.ha_addr,
            "masterAddr": self.master_addr or "",
        }
        info.update(ha_links.runtime_fields(self.ha_service, self.ha_client, self.ha_auth))
        if self.registrar is not None:  # the NameServers this broker registers with now
            info["namesrvAddr"] = ";".join(self.registrar.namesrv_addrs)
        if self.min_broker_change is not None:
            info["minBrokerId"] = str(self.min_broker_change.min_broker_id)
            info["minBrokerAddr"] = self.min_broker_change.min_broker_addr or ""
        return info


async def _push(
    send: Callable[[RemotingCommand], Awaitable[None]], push: RemotingCommand, client_id: str
) -> None:
    try:
        await send(push)
    except (ConnectionError, OSError) as exc:
        log.info("could not notify consumer %s: %s", client_id, exc)


def write_ready_file(path: Path, controller: BrokerController) -> None:
    """Atomically write the ready file: bound ports and addresses as JSON."""
    payload = {
        "pid": os.getpid(),
        "port": controller.port,
        "ha_port": int(controller.ha_addr.rpartition(":")[2]),
        "addr": controller.broker_addr,
        "ha_addr": controller.ha_addr,
        "role": str(controller.role),
        "broker_id": controller.broker_id,
    }
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(payload), encoding="utf-8")
    temporary.replace(path)
