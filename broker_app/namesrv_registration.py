"""The broker's side of registration: when it registers, with what, and what it learns.

:class:`~broker_app.registration.Registrar` speaks the NameServer requests; this module
decides when to send them (the first forced round at start, the periodic round, the fast
heartbeat, one topic after UPDATE_AND_CREATE_TOPIC, a forced round after a deletion),
keeps the NameServer list fresh from an address server (``fetchNamesrvAddrByAddressServer``)
and reads the answers into the role: a slave learns its master, and with ``raft_failover``
the broker takes the id the NameServers assigned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker_app.address_server import NamesrvAddrFollower
from broker_app.config import BrokerConfig
from broker_app.metadata import BrokerMetadata
from broker_app.periodic import BrokerTasks
from broker_app.registration import (
    BrokerIdentity,
    RegisterResult,
    Registrar,
    first_assignment,
    first_master,
)
from broker_app.replication import BrokerReplication
from remoting.client import RemotingClient
from remoting.model import TopicConfigSerializeWrapper

log = logging.getLogger(__name__)


class NameServerRegistration:
    """Registers this broker with the NameServers on schedule and applies what they answer
    to ``replication``. ``broker_addr`` is the bound remoting address (known after bind)."""

    def __init__(
        self,
        config: BrokerConfig,
        client: RemotingClient,
        metadata: BrokerMetadata,
        replication: BrokerReplication,
        tasks: BrokerTasks,
        broker_addr: Callable[[], str],
    ) -> None:
        self.config = config
        self.client = client
        self.metadata = metadata
        self.replication = replication
        self.tasks = tasks
        self.broker_addr = broker_addr
        self.registrar: Registrar | None = None
        where = config.address_server()  # fetchNamesrvAddrByAddressServer
        self.namesrv_follower = None if where is None else NamesrvAddrFollower(where)

    def identity(self) -> BrokerIdentity:
        """What this broker sends in NameServer requests."""
        return BrokerIdentity(
            self.config.cluster_name,
            self.config.broker_name,
            self.replication.broker_id,
            self.broker_addr(),
            self.replication.ha_addr,
        )

    @property
    def namesrv_addrs(self) -> tuple[str, ...] | None:
        """The NameServers this broker registers with now (None before start)."""
        return None if self.registrar is None else self.registrar.namesrv_addrs

    async def start(self) -> None:
        """Build the Registrar, fetch the NameServer list if it comes from an address
        server, and register with every NameServer (forced)."""
        config = self.config
        self.registrar = Registrar(
            self.client,
            config.namesrv_addrs,
            self.identity,
            self._topic_wrapper,
            timeout_s=config.register_timeout_ms / 1000,
            compress_over_bytes=config.compress_register_bytes,
            split_size=config.split_registration_size if config.split_registration else None,
            heartbeat_timeout_ms=config.heartbeat_timeout_ms if config.fast_heartbeat else None,
            failover_fields=self.replication.failover_fields if config.raft_failover else None,
        )
        if self.namesrv_follower is not None:  # the list before the first registration
            await self.namesrv_follower.update(self.registrar)
        await self.register(force=True)

    def start_loops(self) -> None:
        """The periodic registration, the fast heartbeat and the address-server refresh."""
        config = self.config
        self.tasks.every(
            config.register_initial_delay_ms,
            config.effective_register_period_ms,
            lambda: self.register(force=config.force_register),
        )
        if config.fast_heartbeat:
            self.tasks.every(
                config.heartbeat_interval_ms, config.heartbeat_interval_ms, self._heartbeat
            )
        follower, registrar = self.namesrv_follower, self.registrar
        if follower is not None and registrar is not None:
            period_ms = config.fetch_namesrv_addr_interval_ms
            self.tasks.every(period_ms, period_ms, lambda: follower.update(registrar))

    async def unregister_all(self) -> None:
        """UNREGISTER_BROKER with every NameServer (nothing before start)."""
        if self.registrar is not None:
            await self.registrar.unregister_all()

    def _topic_wrapper(self) -> TopicConfigSerializeWrapper:
        return self.metadata.topic_wrapper(broker_permission=self.config.broker_permission)

    async def register(self, *, force: bool) -> list[RegisterResult]:
        """One registration round; a slave learns its master from the answers."""
        assert self.registrar is not None
        results = await self.registrar.register_all(force=force)
        self._learn_master(results)
        await self._apply_assignment(results)
        return results

    async def register_topic(self, topic: str) -> None:
        """Register only ``topic`` (after UPDATE_AND_CREATE_TOPIC)."""
        assert self.registrar is not None
        wrapper = self.metadata.topic_wrapper(
            only=topic, broker_permission=self.config.broker_permission
        )
        self._learn_master(await self.registrar.register_with(wrapper))

    async def register_after_delete(self) -> None:
        """A forced round after a topic deletion; a failure waits for the next round."""
        try:
            await self.register(force=True)
        except Exception:
            # The next periodic round registers the new DataVersion anyway.
            log.exception("registration after a topic deletion failed")

    async def _heartbeat(self) -> None:
        assert self.registrar is not None
        await self.registrar.heartbeat_all(self.config.heartbeat_timeout_ms)

    def _learn_master(self, results: list[RegisterResult]) -> None:
        found = first_master(results)
        if found is not None:
            self.replication.follow_named_master(found.master_addr, found.ha_server_addr)

    async def _apply_assignment(self, results: list[RegisterResult]) -> None:
        """Raft failover: take the broker id the NameServers assigned (0 = elected)."""
        found = first_assignment(results)
        if found is None or not self.config.raft_failover:
            return
        assert found.assigned_broker_id is not None
        await self.replication.take_assigned_id(
            found.assigned_broker_id, found.master_addr, found.ha_server_addr
        )
