"""The REGISTER_BROKER half of :class:`gateway.services.NameServerService`: a
registration's command built and checked, and the ways it is answered (whole, as an
elided table, or, in raft mode, known by its digest), decided in one call
(:meth:`Registrations.register_request`) after one quorum check.
:class:`gateway.registration.Registrar` makes that call once per request, after the
checks that are about connections (CRC, holds, split parts); it is its only way to
the table.

A mixin, so every method stays callable on the service.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
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
from remoting.model import RegisterBrokerBody, TopicConfigSerializeWrapper
from remoting.register_body import BodyDigest
from remoting.register_request import BrokerRegistration


class Kind(enum.Enum):
    """What a REGISTER_BROKER turned out to be (:mod:`gateway.registration`)."""

    SEEN = "seen"
    LIVENESS_ONLY = "liveness_only"
    TOPICS_UNCHANGED = "topics_unchanged"
    FULL = "full"
    SPLIT = "split"


@dataclass(frozen=True, slots=True)
class Registered:
    """The decision and the answer it gave."""

    kind: Kind
    outcome: RegisterBrokerOutcome
    log_index: int = 0
    """Raft mode: the index of the log entry that applied this registration, or an
    applied copy of the same request (SEEN); 0 when no entry carried it (answered from
    the applied state, or eventual mode)."""
    applied_version: int = 0
    """With ``log_index``: the table version that command left (``ApplyResult``)."""

    @classmethod
    def of(cls, kind: Kind, outcome: RegisterBrokerOutcome, result: ApplyResult) -> Registered:
        """The decision ``kind`` answered with ``outcome``, placed where ``result`` says
        its command sits in the log (nowhere when no entry carried it)."""
        if not result.log_index:
            return cls(kind, outcome)
        return cls(kind, outcome, result.log_index, result.applied_version)


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
        self._require_quorum(proposing=True)
        result, from_state = await self._answer(command)
        return self._outcome(result), from_state

    async def register_request(
        self,
        broker: BrokerRegistration,
        body: Callable[[], Awaitable[RegisterBrokerBody]],
        *,
        channel: str | None,
        request_digest: bytes | None = None,
        topics: BodyDigest | None = None,
        vet: Callable[[cmd.RegisterBroker], None] | None = None,
        whole: Kind = Kind.FULL,
    ) -> Registered:
        """One REGISTER_BROKER from the wire, decided here once, cheapest kind first
        (:class:`Kind`), after one quorum check: in raft mode, known by its
        ``request_digest`` (SEEN), or its table by ``topics`` (TOPICS_UNCHANGED, never for
        a ``vet``ted one); else ``body()`` decoded and registered whole (``whole``: FULL,
        or SPLIT for a split table's merged parts). ``vet``, a guest's check (rule 3 of
        :mod:`gateway.broker_holds`), sees the whole command first and raises to refuse
        it."""
        self._require_quorum(proposing=True)
        command = functools.partial(
            self.registration_command, broker, channel=channel, request_digest=request_digest
        )
        # A follower waits for the leader's copy in the SEEN check when the request
        # has a digest (the copy is the same request); waited, it waits again when its
        # table is settled only on a busy cluster (RegistrationDeduper.answer_from_state).
        waited = request_digest is not None
        if request_digest is not None:
            seen = await self._seen(request_digest, command())
            if seen is not None:
                return Registered.of(Kind.SEEN, self._outcome(seen), seen)
        if topics is not None and vet is None:
            unchanged = await self._unchanged(
                command(
                    topic_config_wrapper=TopicConfigSerializeWrapper(
                        data_version=topics.data_version
                    ),
                    topics_digest=topics.topics,
                    topics_elided=True,
                ),
                waited=waited,
            )
            if unchanged is not None:
                result, from_state = unchanged
                kind = Kind.LIVENESS_ONLY if from_state else Kind.TOPICS_UNCHANGED
                return Registered.of(kind, self._outcome(result), result)
        decoded = await body()
        wrapper = decoded.topic_config_wrapper
        # The digest names this table only if its DataVersion is the decoded one.
        named = topics is not None and wrapper.data_version == topics.data_version
        full = command(
            topic_config_wrapper=wrapper,
            filter_server_list=decoded.filter_server_list,
            topics_digest=topics.topics if named and topics is not None else None,
        )
        if vet is not None:
            vet(full)
        result, from_state = await self._answer(full, waited=waited)
        kind = Kind.LIVENESS_ONLY if from_state else whole
        return Registered.of(kind, self._outcome(result), result)

    @staticmethod
    def _outcome(result: ApplyResult) -> RegisterBrokerOutcome:
        outcome = result.outcome
        assert isinstance(outcome, RegisterBrokerOutcome)
        return outcome

    async def _answer(
        self, command: cmd.RegisterBroker, *, waited: bool = False
    ) -> tuple[ApplyResult, bool]:
        """:meth:`register` after its quorum check (``waited``: as
        :meth:`~raftstore.liveness.RegistrationDeduper.answer_from_state`)."""
        deduper = self.registrations
        if deduper is None:
            result = await self.replicator.propose(command)
            from_state = None
        else:
            from_state = await deduper.answer_from_state(command, waited=waited)
            if from_state is not None and not self._in_contact():
                # Answered from state only while in contact: the broker is told nothing
                # a cut-off node cannot stand behind. A node cut off (by now: the wait
                # for the applied state may have taken a while) refuses here; one whose
                # Raft tick is only running late proposes it, and the commit decides.
                self._require_quorum(proposing=True)
                from_state = None
            result = from_state if from_state is not None else await deduper.propose(command)
        self._notify(result)
        return result, from_state is not None

    async def _unchanged(
        self, command: cmd.RegisterBroker, *, waited: bool = False
    ) -> tuple[ApplyResult, bool] | None:
        """Raft mode: register ``command``, whose table is elided (``topics_elided``,
        named by ``topics_digest``), as the broker's last applied table with this
        command's DataVersion: the outcome and whether it was answered from the applied
        state (as :meth:`register`). None when that table is not (or, by the time the
        entry applied, no longer) the broker's here: the body is decoded and registered
        whole."""
        deduper = self.registrations
        elided = None if deduper is None else deduper.elided(command)
        if elided is None:
            return None
        result, from_state = await self._answer(elided, waited=waited)
        return None if self._outcome(result).needs_full else (result, from_state)

    @property
    def raft(self) -> bool:
        """True in raft mode: registrations carry digests (:meth:`register_request`)."""
        return self.registrations is not None

    async def _seen(self, digest: bytes, command: cmd.RegisterBroker) -> ApplyResult | None:
        """Raft mode: the outcome of ``command`` known by its request digest (an applied
        copy of the same request changes nothing but liveness, which is touched), or
        None."""
        if self.registrations is None:
            return None
        result = await self.registrations.register_seen(digest, command.heartbeat())
        if result is None:
            return None
        if not self._in_contact():
            # As in :meth:`_answer`: refused when cut off, else decoded and proposed.
            self._require_quorum(proposing=True)
            return None
        self._notify(result)
        return result
