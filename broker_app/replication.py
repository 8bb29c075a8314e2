"""The broker's role and the replication that goes with it.

A master runs the HA service (slaves connect to it); a slave runs the HA client and
SlaveSynchronize and knows its master's address. The role is plain state changed only here:
by the registration answers (:meth:`BrokerReplication.follow_named_master`, and with
``raft_failover`` an assigned broker id) and by NOTIFY_MIN_BROKER_ID_CHANGE
(:meth:`BrokerReplication.on_min_broker_id_change`). With ``raft_failover`` (docs/RAFT.md,
"Failover") a slave the NameServers elected becomes master
(:meth:`BrokerReplication.promote_to_master`), and a master told that another live broker
holds id 0 becomes its slave (:meth:`BrokerReplication.follow_master`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from broker_app.config import BrokerConfig, BrokerRole
from broker_app.ha import links as ha_links
from broker_app.ha.client import HAClient
from broker_app.ha.service import HAService
from broker_app.metadata import BrokerMetadata
from broker_app.metadata_saver import MetadataSaver
from broker_app.periodic import BrokerTasks
from broker_app.slave_sync import SlaveSynchronizer
from broker_app.store.message_store import MessageStore
from remoting.client import RemotingClient
from remoting.codes import ResponseCode

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MinBrokerIdChange:
    """The last NOTIFY_MIN_BROKER_ID_CHANGE this broker received."""

    min_broker_id: int | None
    min_broker_addr: str | None
    offline_broker_addr: str | None
    ha_broker_addr: str | None


RoleHint = Callable[[MinBrokerIdChange], Awaitable[None]]


class BrokerReplication:
    """Owns the role (master or slave, the broker id), the HA service or client and
    SlaveSynchronize, and switches them together when the role changes.

    ``register`` is one forced registration round; ``on_role_changed`` runs after a switch,
    before that registration (the controller rewrites its ready file there).
    """

    def __init__(
        self,
        config: BrokerConfig,
        client: RemotingClient,
        metadata: BrokerMetadata,
        saver: MetadataSaver,
        tasks: BrokerTasks,
        *,
        broker_addr: Callable[[], str],
        register: Callable[[], Awaitable[object]],
        on_role_changed: Callable[[], None],
        on_role_hint: RoleHint | None = None,
    ) -> None:
        self.config = config
        self.client = client
        self.metadata = metadata
        self.saver = saver
        self.tasks = tasks
        self.broker_addr = broker_addr
        self.register = register
        self.on_role_changed = on_role_changed
        self.on_role_hint = on_role_hint
        self.role = config.role
        self.broker_id = config.broker_id
        self.role_changes = 0
        self._role_lock = asyncio.Lock()
        # Read here, so a broker with an unusable haSecretFile does not start.
        self.ha_auth = config.ha_auth()
        self.store: MessageStore | None = None
        self.ha_service: HAService | None = None
        self.ha_client: HAClient | None = None
        self.synchronizer: SlaveSynchronizer | None = None
        self.master_addr: str | None = None
        self.min_broker_change: MinBrokerIdChange | None = None

    @property
    def ha_addr(self) -> str:
        """``host:port`` of the HA server (a slave registers its own HA port too)."""
        port = self.ha_service.port if self.ha_service is not None else self.config.ha_port
        return f"{self.config.host}:{port}"

    async def start(self, store: MessageStore) -> None:
        """Start what the configured role runs: the HA client, or the HA service."""
        self.store = store
        if self.role is BrokerRole.SLAVE:
            self._start_following(self.config.ha_master_address)
        else:
            await self._start_ha_service()

    def start_loops(self) -> None:
        """Start SlaveSynchronize's schedule (a slave's)."""
        if self.synchronizer is not None:
            self._start_slave_sync()

    async def close(self) -> None:
        """Close the HA client and the HA service."""
        if self.ha_client is not None:
            await self.ha_client.close()
        if self.ha_service is not None:
            await self.ha_service.close()

    def _start_following(self, ha_master_address: str | None) -> None:
        assert self.store is not None
        self.ha_client = HAClient(self.store, self.config.ha, auth=self.ha_auth)
        self.ha_client.set_master_address(ha_master_address)
        self.ha_client.start()
        self.synchronizer = SlaveSynchronizer(self.client, self.metadata, self.saver.save_soon)

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

    def _start_slave_sync(self) -> None:
        self.tasks.every(
            self.config.slave_sync_initial_delay_ms,
            self.config.slave_sync_interval_ms,
            self._slave_sync,
        )

    async def _slave_sync(self) -> None:
        # A promoted slave keeps the loop but has nothing left to copy.
        if self.synchronizer is not None:
            await self.synchronizer.sync_all()

    async def wait_for_slaves(self, end_offset: int) -> int:
        """The SYNC_MASTER rule (4.x ``CommitLog.handleHA``): the answer code once a slave
        holds the bytes up to ``end_offset``, or why none does."""
        assert self.ha_service is not None
        if not self.ha_service.is_slave_ok(end_offset):
            return ResponseCode.SLAVE_NOT_AVAILABLE
        acked = await self.ha_service.wait_for_ack(end_offset, self.config.slave_timeout_ms / 1000)
        return ResponseCode.SUCCESS if acked else ResponseCode.FLUSH_SLAVE_TIMEOUT

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

    def follow_named_master(self, master_addr: str | None, ha_server_addr: str | None) -> None:
        """A registration answer named the master: a slave follows it (its HA client too,
        unless ``haMasterAddress`` is configured)."""
        if self.role is not BrokerRole.SLAVE:
            return
        self.master_addr = master_addr
        if self.synchronizer is not None:
            self.synchronizer.master_addr = master_addr
        if self.ha_client is not None and self.config.ha_master_address is None:
            self.ha_client.set_master_address(ha_server_addr)

    async def take_assigned_id(
        self, assigned: int, master_addr: str | None, ha_server_addr: str | None
    ) -> None:
        """Raft failover: take the broker id the NameServers assigned (0 = elected)."""
        if assigned == 0 and self.role is BrokerRole.SLAVE:
            await self.promote_to_master()
        elif assigned > 0 and self.role is not BrokerRole.SLAVE and master_addr:
            await self.follow_master(assigned, master_addr, ha_server_addr)

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
                self.broker_addr(),
                self.role,
            )
        self.on_role_changed()
        await self.register()
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
                self.broker_addr(),
                master_addr,
                broker_id,
            )
        self.on_role_changed()
        await self.register()
        return True

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
        if change.min_broker_addr == self.broker_addr():
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
            await self.register()

    def runtime_fields(self) -> dict[str, str]:
        """The HA part of GET_BROKER_RUNTIME_INFO (:mod:`broker_app.ha.links`)."""
        return ha_links.runtime_fields(self.ha_service, self.ha_client, self.ha_auth)
