"""The REGISTER_BROKER half of :class:`gateway.services.NameServerService`: a
registration's command built and checked, and the ways it is answered (whole, as an
elided table, or, in raft mode, known by its digest). :class:`gateway.registration.
Registrar` decides which; this is its only way to the table.

A mixin, so every method stays callable on the service.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from gateway.clock import Clock
from gateway.service_checks import (
    BROKER_ID_MAX,
    _check_int,
    _check_offset,
    _check_text,
    _check_topic_names,
    _check_unicode,
)
from raftstore import commands as cmd
from raftstore.config import clamp_heartbeat_timeout_ms
from raftstore.liveness import RegistrationDeduper
from raftstore.replicator import Replicator
from raftstore.results import ApplyResult, RegisterBrokerOutcome, Replication
from remoting.model import TopicConfigSerializeWrapper
from remoting.register_request import BrokerRegistration


class Registrations:
    """Builds, checks and registers REGISTER_BROKER commands (docs/RAFT.md, "Proposals")."""

    replicator: Replicator
    clock: Clock
    registrations: RegistrationDeduper | None
    failover_lag_bytes_max: int | None

    if TYPE_CHECKING:

        def _require_quorum(self, *, proposing: bool = False) -> None: ...

        def _in_contact(self) -> bool: ...

        def _notify(self, result: ApplyResult) -> None: ...

    async def register_broker(
        self,
        broker: BrokerRegistration,
        topic_config_wrapper: TopicConfigSerializeWrapper | None = None,
        *,
        filter_server_list: Iterable[str] | None = None,
        channel: str | None = None,
    ) -> RegisterBrokerOutcome:
        """REGISTER_BROKER of a decoded table (the console, tests): add or refresh
        ``broker`` and its topics, as :meth:`register` registers it. The gateway's
        requests go through :class:`gateway.registration.Registrar`."""
        outcome, _ = await self.register(
            self.registration_command(
                broker,
                channel=channel,
                topic_config_wrapper=topic_config_wrapper,
                filter_server_list=filter_server_list,
            )
        )
        return outcome

    def registration_command(
        self,
        broker: BrokerRegistration,
        *,
        channel: str | None,
        topic_config_wrapper: TopicConfigSerializeWrapper | None = None,
        filter_server_list: Iterable[str] | None = None,
        request_digest: bytes | None = None,
        topics_digest: bytes | None = None,
        topics_elided: bool = False,
    ) -> cmd.RegisterBroker:
        """A validated REGISTER_BROKER command stamped now, its ``heartbeat_timeout_ms``
        clamped to a sane range (:func:`raftstore.config.clamp_heartbeat_timeout_ms`).

        ``enable_raft_failover`` is honoured only where failover runs, the digests
        (:class:`~raftstore.commands.RegisterBroker`) only in raft mode.
        """
        raft = self.raft
        if topic_config_wrapper is not None and topic_config_wrapper.topic_config_table:
            _check_topic_names(topic_config_wrapper.topic_config_table)
        timeout_ms = broker.heartbeat_timeout_ms
        return cmd.RegisterBroker(
            cluster_name=_check_text("clusterName", broker.cluster_name),
            broker_addr=_check_text("brokerAddr", broker.broker_addr),
            broker_name=_check_text("brokerName", broker.broker_name),
            broker_id=_check_int("brokerId", broker.broker_id, low=0, high=BROKER_ID_MAX),
            ha_server_addr=_check_unicode("haServerAddr", broker.ha_server_addr or ""),
            now_ms=self.clock.now_ms(),
            topic_config_wrapper=topic_config_wrapper,
            filter_server_list=(
                None
                if filter_server_list is None
                else tuple(_check_unicode("filterServer", f) for f in filter_server_list)
            ),
            zone_name=_check_unicode("zoneName", broker.zone_name) if broker.zone_name else None,
            heartbeat_timeout_ms=(
                None
                if timeout_ms is None
                else clamp_heartbeat_timeout_ms(
                    _check_int("heartbeatTimeoutMillis", timeout_ms, low=1, high=BROKER_ID_MAX)
                )
            ),
            enable_acting_master=broker.enable_acting_master,
            channel=channel,
            max_offset=_check_offset("maxOffset", broker.max_offset),
            confirm_offset=_check_offset("confirmOffset", broker.confirm_offset),
            enable_raft_failover=(
                broker.enable_raft_failover if self.failover_lag_bytes_max is not None else None
            ),
            request_digest=request_digest if raft else None,
            topics_digest=topics_digest if raft else None,
            topics_elided=topics_elided and raft,
            replication=Replication.reported(broker.ha_client_addr, broker.slave_acks),
        )

    def registration_changes(self, command: cmd.RegisterBroker) -> list[str]:
        """What ``command`` would change besides its broker's liveness, named for its
        operator (empty: liveness only), read on the applied state; nothing is proposed."""
        return self.replicator.read(lambda table: table.registration_changes(command))

    async def register(self, command: cmd.RegisterBroker) -> tuple[RegisterBrokerOutcome, bool]:
        """Register ``command``: its outcome, and True when raft mode answered it from the
        applied state (its plan held only liveness edits) instead of proposing it."""
        deduper = self.registrations
        if deduper is None:
            result = await self.replicator.propose(command)
            from_state = None
        else:
            self._require_quorum(proposing=True)
            from_state = await deduper.answer_from_state(command)
            if from_state is not None and not self._in_contact():
                # Answered from state only while in contact: the broker is told nothing
                # a cut-off node cannot stand behind. A node cut off refuses here; one
                # whose Raft tick is only running late proposes it, and the commit
                # decides.
                self._require_quorum(proposing=True)
                from_state = None
            result = from_state if from_state is not None else await deduper.propose(command)
        self._notify(result)
        outcome = result.outcome
        assert isinstance(outcome, RegisterBrokerOutcome)
        return outcome, from_state is not None

    async def register_unchanged(
        self, command: cmd.RegisterBroker
    ) -> tuple[RegisterBrokerOutcome, bool] | None:
        """Raft mode: register ``command``, whose table is elided (``topics_elided``,
        named by ``topics_digest``), as the broker's last applied table with this
        command's DataVersion: the outcome and whether it was answered from the applied
        state (as :meth:`register`). None when that table is not (or, by the time the
        entry applied, no longer) the broker's here: decode the body and :meth:`register`
        it whole."""
        deduper = self.registrations
        elided = None if deduper is None else deduper.elided(command)
        if elided is None:
            return None
        outcome, from_state = await self.register(elided)
        return None if outcome.needs_full else (outcome, from_state)

    @property
    def raft(self) -> bool:
        """True in raft mode: registrations carry digests (:meth:`register_seen`,
        :meth:`register_unchanged`)."""
        return self.registrations is not None

    async def register_seen(
        self, digest: bytes, command: cmd.RegisterBroker
    ) -> RegisterBrokerOutcome | None:
        """Raft mode: the outcome of ``command`` known by its request digest (an applied
        copy of the same request changes nothing but liveness, which is touched), or
        None (see :class:`gateway.registration.Registrar`)."""
        if self.registrations is None:
            return None
        self._require_quorum(proposing=True)
        heartbeat = cmd.BrokerHeartbeat(
            cluster_name=command.cluster_name,
            broker_addr=command.broker_addr,
            now_ms=command.now_ms,
            max_offset=command.max_offset,
            confirm_offset=command.confirm_offset,
            replication=command.replication,
        )
        result = await self.registrations.register_seen(digest, heartbeat)
        if result is None:
            return None
        if not self._in_contact():
            # As in :meth:`register`: refused when cut off, else decoded and proposed.
            self._require_quorum(proposing=True)
            return None
        self._notify(result)
        outcome = result.outcome
        assert isinstance(outcome, RegisterBrokerOutcome)
        return outcome
