"""The only write path of the NameServer.

Every caller that changes state (gateway request handlers, Celery scan tasks,
DRF views, admin actions) calls one method here. A method validates its input,
stamps ``now_ms`` from the injected clock, builds one command and hands it to
the replicator; the route table applies it (at once in eventual mode, through
the Raft log in raft mode). No method here carries a routing rule: those live
in ``raftstore``.

Raft mode differs in four places, each a rule of docs/RAFT.md: liveness
touches (BROKER_HEARTBEAT, QUERY_DATA_VERSION) go through a
:class:`~raftstore.liveness.TouchCoalescer`; a closed broker connection is only
logged; the liveness scan is one ExpireBrokers proposed by the leader; and that
scan elects new masters for groups that opted into raft failover (the flag is
dropped in eventual mode, which keeps the original behaviour). And a raft node
without contact with a quorum refuses every write, those answered from the applied
state included (NoQuorumError: SYSTEM_ERROR "no raft quorum: ...").

``holds`` (:mod:`gateway.broker_holds`) knows which connection holds which broker
entry on this node; the dispatcher asks it before a registration or an
unregistration, and a closed connection's entries pass through it here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping

from gateway.broker_holds import BrokerHolds
from gateway.clock import Clock, SystemClock
from gateway.expiry_reports import KIND_CHANNEL_CLOSE, ExpiryReports, RaftPosition
from gateway.scan_fallback import (
    ROLE_FOLLOWER,
    ROLE_LEADER,
    ROLE_STANDALONE,
    ScanObserver,
    ScanOutcome,
)
from raftstore import commands as cmd
from raftstore.config import NamesrvConfig, clamp_heartbeat_timeout_ms
from raftstore.liveness import RegistrationDeduper, TouchCoalescer
from raftstore.raft import DEFAULT_SKEW_ALLOWANCE_MS, RaftReplicator
from raftstore.replicator import MODE_RAFT, Replicator
from raftstore.results import (
    ApplyResult,
    ConfigOutcome,
    ExpireOutcome,
    KvQuotaExceeded,
    MinBrokerIdChange,
    PermOutcome,
    QueryDataVersionOutcome,
    RegisterBrokerOutcome,
    Replication,
)
from remoting.body_limits import NAME_CHARS_MAX
from remoting.model import (
    DataVersion,
    QueueData,
    TopicConfigSerializeWrapper,
    has_control_characters,
    has_lone_surrogate,
)

log = logging.getLogger(__name__)

BROKER_ID_MAX = 2**63 - 1
"""Broker ids are Java longs."""
QUEUE_NUMS_MAX = 2**31 - 1
"""Queue counts, perm and flags are Java ints."""
KV_VALUE_CHARS_MAX = 1_048_576
"""A KV value bigger than 1 MiB is a mistake, not a config item."""

Notifier = Callable[[tuple[MinBrokerIdChange, ...]], None]
"""Receives the NOTIFY_MIN_BROKER_ID_CHANGE messages a command asks to send."""


REMARK_NOT_RAFT = "not in raft mode"


class ServiceError(ValueError):
    """Input a service refuses; the message is fit to show the caller (a wire remark)."""


def _check_text(label: str, value: object, *, chars_max: int = NAME_CHARS_MAX) -> str:
    """A non-empty string without control characters, at most ``chars_max`` long."""
    if not isinstance(value, str) or not value:
        raise ServiceError(f"{label} is missing")
    if len(value) > chars_max:
        raise ServiceError(f"{label} is longer than {chars_max} characters")
    if has_control_characters(value):
        raise ServiceError(f"{label} contains control characters")
    return _check_unicode(label, value)


def _check_unicode(label: str, value: str) -> str:
    """``value`` unless it holds a lone surrogate (:func:`has_lone_surrogate`)."""
    if has_lone_surrogate(value):
        raise ServiceError(f"{label} holds a lone surrogate: not Unicode text")
    return value


def _check_topic_names(names: Iterable[str]) -> None:
    """Every registered topic name is Unicode text. One encode of them all (the common
    case costs microseconds for thousands of topics), then the culprit is named."""
    names = list(names)
    try:
        "".join(names).encode("utf-8")
    except UnicodeEncodeError:
        bad = next(n for n in names if has_lone_surrogate(n))
        raise ServiceError(
            f"topic {bad.encode('utf-8', 'backslashreplace').decode()} holds a lone "
            "surrogate: not Unicode text"
        ) from None


def _check_offset(label: str, value: int | None) -> int | None:
    """An optional commit-log offset (a Java long, never negative)."""
    return None if value is None else _check_int(label, value, low=0, high=BROKER_ID_MAX)


def _check_int(label: str, value: object, *, low: int, high: int) -> int:
    """An int (not a bool) within ``low..high``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ServiceError(f"{label} must be an integer")
    if not low <= value <= high:
        raise ServiceError(f"{label} must be within {low}..{high}, got {value}")
    return value


def _check_queue_data(queue: QueueData) -> QueueData:
    _check_text("brokerName", queue.broker_name)
    for label, number in (
        ("readQueueNums", queue.read_queue_nums),
        ("writeQueueNums", queue.write_queue_nums),
        ("perm", queue.perm),
        ("topicSysFlag", queue.topic_sys_flag),
    ):
        _check_int(label, number, low=0, high=QUEUE_NUMS_MAX)
    return queue


class NameServerService:
    """Validates, stamps and proposes every NameServer write.

    ``notifier`` receives the min-broker-id notifications a registration or an
    unregistration produced (sending them is the gateway's business).
    """

    def __init__(
        self,
        replicator: Replicator,
        clock: Clock | None = None,
        notifier: Notifier | None = None,
        *,
        skew_allowance_ms: int = DEFAULT_SKEW_ALLOWANCE_MS,
        failover_lag_bytes_max: int | None = None,
    ) -> None:
        self.replicator = replicator
        # Raft failover runs only in raft mode: eventual mode keeps the original.
        self.failover_lag_bytes_max = (
            failover_lag_bytes_max if replicator.mode == MODE_RAFT else None
        )
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._notifier = notifier
        self.skew_allowance_ms = _check_int(
            "skew_allowance_ms", skew_allowance_ms, low=0, high=BROKER_ID_MAX
        )
        # Eventual mode: the coalescer proposes every touch (the original behaviour).
        self.touches = TouchCoalescer(replicator)
        self.expiry_reports = ExpiryReports()
        # Raft mode: one log entry per registration, and none for an unchanged one.
        self.registrations = (
            RegistrationDeduper(replicator, self.touches)
            if isinstance(replicator, RaftReplicator)
            else None
        )
        self.holds = BrokerHolds(replicator, failover=self.failover_lag_bytes_max is not None)
        replicator.subscribe(self.holds.on_applied)
        self.before_scan: Callable[[], Awaitable[None]] | None = None
        """Awaited before a scan proposes its expiry (a restored node stamps the restored
        brokers there first: gateway/restore.py)."""
        self.scan_observers: list[ScanObserver] = []
        """Told the result of every :meth:`scan` (the internal port's, Celery's, and the
        gateway's own loops' alike), in order; one that raises is logged and skipped
        (the metrics count scans here: gateway/parts.py)."""

    def _require_quorum(self, *, proposing: bool = False) -> None:
        """Raft mode: raise NoQuorumError while this node has no contact with a quorum
        (docs/RAFT.md, "A node without a quorum says so"); a clock read and a comparison.
        ``proposing``: before a proposal, whose commit decides (a node that never had
        contact lets it wait for one, and so does one whose Raft tick is running late)."""
        if isinstance(self.replicator, RaftReplicator):
            refusal = self.replicator.quorum_refusal(proposing=proposing)
            if refusal is not None:
                raise refusal

    def _in_contact(self) -> bool:
        """True unless raft mode and this node has had no contact with a quorum for the
        window, by the clock: what an answer from the applied state needs."""
        return (
            not isinstance(self.replicator, RaftReplicator)
            or self.replicator.quorum_refusal() is None
        )

    async def _propose(self, command: cmd.Command) -> ApplyResult:
        self._require_quorum(proposing=True)
        result = await self.replicator.propose(command)
        self._notify(result)
        return result

    def _notify(self, result: ApplyResult) -> None:
        if result.notifications and self._notifier is not None:
            try:
                self._notifier(result.notifications)
            except Exception:
                # A failed notification must not fail the write that caused it.
                log.exception("min-broker-id notification failed")

    async def register_broker(
        self,
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str | None = None,
        topic_config_wrapper: TopicConfigSerializeWrapper | None = None,
        filter_server_list: Iterable[str] | None = None,
        zone_name: str | None = None,
        heartbeat_timeout_ms: int | None = None,
        enable_acting_master: bool | None = None,
        channel: str | None = None,
        max_offset: int | None = None,
        confirm_offset: int | None = None,
        enable_raft_failover: bool | None = None,
    ) -> RegisterBrokerOutcome:
        """REGISTER_BROKER of a decoded table (the console, tests): add or refresh a broker
        and its topics, as :meth:`register` registers it. The gateway's requests go
        through :class:`gateway.registration.Registrar`."""
        outcome, _ = await self.register(
            self.registration_command(
                cluster_name=cluster_name,
                broker_addr=broker_addr,
                broker_name=broker_name,
                broker_id=broker_id,
                ha_server_addr=ha_server_addr,
                topic_config_wrapper=topic_config_wrapper,
                filter_server_list=filter_server_list,
                zone_name=zone_name,
                heartbeat_timeout_ms=heartbeat_timeout_ms,
                enable_acting_master=enable_acting_master,
                channel=channel,
                max_offset=max_offset,
                confirm_offset=confirm_offset,
                enable_raft_failover=enable_raft_failover,
            )
        )
        return outcome

    def registration_command(
        self,
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str | None = None,
        topic_config_wrapper: TopicConfigSerializeWrapper | None = None,
        filter_server_list: Iterable[str] | None = None,
        zone_name: str | None = None,
        heartbeat_timeout_ms: int | None = None,
        enable_acting_master: bool | None = None,
        channel: str | None = None,
        max_offset: int | None = None,
        confirm_offset: int | None = None,
        enable_raft_failover: bool | None = None,
        request_digest: bytes | None = None,
        topics_digest: bytes | None = None,
        topics_elided: bool = False,
        replication: Replication | None = None,
    ) -> cmd.RegisterBroker:
        """A validated REGISTER_BROKER command stamped now, its ``heartbeat_timeout_ms``
        clamped to a sane range (:func:`raftstore.config.clamp_heartbeat_timeout_ms`).

        ``enable_raft_failover`` is honoured only where failover runs, the digests
        (:class:`~raftstore.commands.RegisterBroker`) only in raft mode.
        """
        raft = self.registrations is not None
        if topic_config_wrapper is not None and topic_config_wrapper.topic_config_table:
            _check_topic_names(topic_config_wrapper.topic_config_table)
        return cmd.RegisterBroker(
            cluster_name=_check_text("clusterName", cluster_name),
            broker_addr=_check_text("brokerAddr", broker_addr),
            broker_name=_check_text("brokerName", broker_name),
            broker_id=_check_int("brokerId", broker_id, low=0, high=BROKER_ID_MAX),
            ha_server_addr=_check_unicode("haServerAddr", ha_server_addr or ""),
            now_ms=self.clock.now_ms(),
            topic_config_wrapper=topic_config_wrapper,
            filter_server_list=(
                None
                if filter_server_list is None
                else tuple(_check_unicode("filterServer", f) for f in filter_server_list)
            ),
            zone_name=_check_unicode("zoneName", zone_name) if zone_name else None,
            heartbeat_timeout_ms=(
                None
                if heartbeat_timeout_ms is None
                else clamp_heartbeat_timeout_ms(
                    _check_int(
                        "heartbeatTimeoutMillis", heartbeat_timeout_ms, low=1, high=BROKER_ID_MAX
                    )
                )
            ),
            enable_acting_master=enable_acting_master,
            channel=channel,
            max_offset=_check_offset("maxOffset", max_offset),
            confirm_offset=_check_offset("confirmOffset", confirm_offset),
            enable_raft_failover=(
                enable_raft_failover if self.failover_lag_bytes_max is not None else None
            ),
            request_digest=request_digest if raft else None,
            topics_digest=topics_digest if raft else None,
            topics_elided=topics_elided and raft,
            replication=replication,
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

    async def register_seen(
        self,
        digest: bytes,
        *,
        cluster_name: str,
        broker_addr: str,
        max_offset: int | None = None,
        confirm_offset: int | None = None,
        replication: Replication | None = None,
    ) -> RegisterBrokerOutcome | None:
        """Raft mode: the outcome of a REGISTER_BROKER known by its request digest
        (an applied copy of the same request changes nothing but liveness, which is
        touched), or None (see :class:`gateway.registration.Registrar`)."""
        if self.registrations is None:
            return None
        self._require_quorum(proposing=True)
        heartbeat = cmd.BrokerHeartbeat(
            cluster_name=_check_text("clusterName", cluster_name),
            broker_addr=_check_text("brokerAddr", broker_addr),
            now_ms=self.clock.now_ms(),
            max_offset=_check_offset("maxOffset", max_offset),
            confirm_offset=_check_offset("confirmOffset", confirm_offset),
            replication=replication,
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

    async def unregister_broker(
        self, *, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        """UNREGISTER_BROKER: applied at once (the 4.x synchronous behaviour)."""
        request = cmd.UnregisterRequest(
            cluster_name=_check_text("clusterName", cluster_name),
            broker_addr=_check_text("brokerAddr", broker_addr),
            broker_name=_check_text("brokerName", broker_name),
            broker_id=_check_int("brokerId", broker_id, low=0, high=BROKER_ID_MAX),
        )
        await self._propose(cmd.UnregisterBrokers(requests=(request,)))

    async def broker_heartbeat(
        self,
        *,
        cluster_name: str,
        broker_addr: str,
        max_offset: int | None = None,
        confirm_offset: int | None = None,
        replication: Replication | None = None,
    ) -> None:
        """BROKER_HEARTBEAT: refresh the broker's last-heard time (and offsets) if live;
        raft mode refuses it (NoQuorumError) while this node has no contact with a quorum."""
        self._require_quorum()
        await self.touches.refresh(
            cmd.BrokerHeartbeat(
                cluster_name=_check_text("clusterName", cluster_name),
                broker_addr=_check_text("brokerAddr", broker_addr),
                now_ms=self.clock.now_ms(),
                max_offset=_check_offset("maxOffset", max_offset),
                confirm_offset=_check_offset("confirmOffset", confirm_offset),
                replication=replication,
            )
        )

    async def query_data_version(
        self,
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        data_version: DataVersion | None,
        max_offset: int | None = None,
        confirm_offset: int | None = None,
        replication: Replication | None = None,
    ) -> QueryDataVersionOutcome:
        """QUERY_DATA_VERSION: compare the broker's version and refresh its liveness;
        raft mode refuses it (NoQuorumError) while this node has no contact with a quorum,
        as it does a heartbeat: the touch is a write even when it is answered from state."""
        self._require_quorum()
        command = cmd.QueryDataVersion(
            cluster_name=_check_text("clusterName", cluster_name),
            broker_addr=_check_text("brokerAddr", broker_addr),
            broker_name=_check_text("brokerName", broker_name),
            broker_id=_check_int("brokerId", broker_id, low=0, high=BROKER_ID_MAX),
            data_version=data_version,
            now_ms=self.clock.now_ms(),
            max_offset=_check_offset("maxOffset", max_offset),
            confirm_offset=_check_offset("confirmOffset", confirm_offset),
            replication=replication,
        )
        # A skipped touch (raft: fresh enough) still answers from the applied state.
        outcome = (await self.touches.touch(command)).outcome
        assert isinstance(outcome, QueryDataVersionOutcome)
        return outcome

    async def expire_brokers(
        self, now_ms: int | None = None, *, skew_allowance_ms: int = 0
    ) -> ExpireOutcome:
        """The liveness scan: drop brokers silent longer than their timeout."""
        stamp = self.clock.now_ms() if now_ms is None else now_ms
        command = cmd.ExpireBrokers(
            now_ms=_check_int("now_ms", stamp, low=0, high=BROKER_ID_MAX),
            skew_allowance_ms=_check_int(
                "skew_allowance_ms", skew_allowance_ms, low=0, high=BROKER_ID_MAX
            ),
        )
        outcome = (await self._propose(command)).outcome
        return outcome if isinstance(outcome, ExpireOutcome) else ExpireOutcome()

    async def scan(self, now_ms: int | None = None) -> ScanOutcome:
        """The periodic liveness scan in this node's mode.

        Eventual: expire this node's own table. Raft: only the node that believes
        it leads proposes one ExpireBrokers with the skew allowance; a follower
        answers nothing expired (role ``follower``). Every :attr:`scan_observers` is
        told the outcome, or the exception, which is raised again.
        """
        try:
            outcome = await self._scan(now_ms)
        except Exception as exc:
            self._tell_scan_observers(exc)
            raise
        self._tell_scan_observers(outcome)
        return outcome

    def _tell_scan_observers(self, result: ScanOutcome | Exception) -> None:
        for observer in self.scan_observers:
            try:
                observer(result)
            except Exception:
                # Watching a scan must not change what the scan answers.
                log.exception("scan observer failed")

    async def _scan(self, now_ms: int | None) -> ScanOutcome:
        stamp = _check_int(
            "now_ms", self.clock.now_ms() if now_ms is None else now_ms, low=0, high=BROKER_ID_MAX
        )
        if isinstance(self.replicator, RaftReplicator) and not self.replicator.is_leader():
            return ScanOutcome(expired=(), role=ROLE_FOLLOWER)
        if self.before_scan is not None:
            await self.before_scan()
        started_us = self.expiry_reports.clock_us()
        # Proposed through _propose, so only the leader, which proposed the scan,
        # sends the elected groups their NOTIFY_MIN_BROKER_ID_CHANGE.
        result = await self._propose(
            cmd.ExpireBrokers(
                now_ms=stamp,
                skew_allowance_ms=(
                    self.skew_allowance_ms if self.replicator.mode == MODE_RAFT else 0
                ),
                failover_lag_bytes_max=self.failover_lag_bytes_max,
            )
        )
        role = ROLE_LEADER if self.replicator.mode == MODE_RAFT else ROLE_STANDALONE
        outcome = result.outcome
        if not isinstance(outcome, ExpireOutcome):
            return ScanOutcome(expired=(), role=role)
        if outcome.expired or outcome.elections:
            # Only a scan that changed something is journaled: only it reads the index.
            self.expiry_reports.record(
                started_us,
                outcome.expired,
                elections=outcome.elections,
                raft=self._raft_position(result),
            )
        for election in outcome.elections:
            log.warning(
                "raft failover: %s elected %s (was id %d) to replace %s",
                election.broker_name,
                election.new_master_addr,
                election.previous_broker_id,
                election.old_master_addr,
            )
        return ScanOutcome(expired=outcome.expired, role=role, elections=outcome.elections)

    async def channel_destroyed(self, channel: str | None) -> None:
        """A connection closed: unregister what was registered over it (eventual mode).

        A None channel is tolerated and does nothing (BrokerHousekeepingService).
        The connection's holds end first; an entry another open connection registered
        at the same address passes to that connection and stays (broker_holds rule 3),
        the other entries it held are unregistered. A connection that held nothing
        unregisters the entry whose channel it is, as upstream's onChannelDestroy.
        In raft mode the close is this node's local observation only: nothing is
        proposed, the replicated timeout decides (docs/RAFT.md, Liveness rule 1).
        """
        if not channel:
            return
        released = self.holds.release(channel)
        if released.handed_over:
            entries = ", ".join(f"{name} id {bid}" for name, bid in released.handed_over)
            log.info(
                "broker channel %s closed: %s now held by a newer connection of the same address",
                channel,
                entries,
            )
        if self.replicator.mode == MODE_RAFT:
            log.info("broker channel %s closed: local observation, nothing replicated", channel)
            return
        started_us = self.expiry_reports.clock_us()
        if released.dropped:
            # What it held, by name: the table may name another channel for an entry
            # this connection took over from an older one.
            result = await self._propose(cmd.UnregisterBrokers(requests=released.dropped))
        elif not released.handed_over:
            result = await self._propose(cmd.ChannelDestroyed(channel=channel))
        else:
            return
        # No client asked for it: the node's journal keeps it (gateway.expiry_reports).
        self.expiry_reports.record(
            started_us,
            sorted(result.changes.live_brokers, key=lambda i: (i.cluster_name, i.broker_addr)),
            kind=KIND_CHANNEL_CLOSE,
        )

    def _raft_position(self, result: ApplyResult) -> RaftPosition | None:
        """Raft mode: the index and term of the log entry that carried a command this
        node just committed, as the apply thread handed them out with the result, and
        the table version the command left (``gateway.expiry_reports``); None in
        eventual mode."""
        if not result.log_index:
            return None
        return RaftPosition(result.log_index, result.log_term, result.applied_version)

    def _raft(self) -> RaftReplicator:
        if not isinstance(self.replicator, RaftReplicator):
            raise ServiceError(REMARK_NOT_RAFT)
        return self.replicator

    async def add_raft_member(self, addr: str) -> None:
        """Add a Raft member (start it first with the current members as peers).

        ServiceError outside raft mode or for a malformed address; MembershipError
        when the change is refused (pending change, no quorum, already a member).
        """
        await self._raft().add_node(_check_addr(addr))

    async def remove_raft_member(self, addr: str) -> None:
        """Remove a Raft member (ask another member to remove this one)."""
        await self._raft().remove_node(_check_addr(addr))

    def compact_raft_log(self) -> None:
        """Raft mode: snapshot the table and compact the journal at the next tick."""
        self._raft().force_snapshot()

    def digest_checkpoints(self) -> dict[int, str]:
        """Raft mode: the state digest every 128th log index (divergence checks)."""
        return self._raft().digest_checkpoints()

    async def put_kv(self, *, namespace: str | None, key: str | None, value: str | None) -> None:
        """PUT_KV_CONFIG; ServiceError when the route table refused it over the KV quota.

        The quota is decided by apply (every node refuses the same put), not here.
        """
        if not namespace or not key:
            raise ServiceError("namespace or key is null")
        result = await self._propose(
            cmd.PutKV(
                namespace=_check_text("namespace", namespace),
                key=_check_text("key", key),
                value=_check_text_or_empty("value", value),
            )
        )
        if isinstance(result.outcome, KvQuotaExceeded):
            raise ServiceError(result.outcome.remark)

    async def delete_kv(self, *, namespace: str, key: str) -> None:
        """DELETE_KV_CONFIG; the namespace itself stays."""
        await self._propose(
            cmd.DeleteKV(namespace=_check_text("namespace", namespace), key=_check_text("key", key))
        )

    async def wipe_write_perm(self, broker_name: str) -> int:
        """WIPE_WRITE_PERM_OF_BROKER: the number of topics touched."""
        result = await self._propose(
            cmd.WipeWritePerm(broker_name=_check_text("brokerName", broker_name))
        )
        return result.outcome.topic_count if isinstance(result.outcome, PermOutcome) else 0

    async def add_write_perm(self, broker_name: str) -> int:
        """ADD_WRITE_PERM_OF_BROKER: the number of topics touched."""
        result = await self._propose(
            cmd.AddWritePerm(broker_name=_check_text("brokerName", broker_name))
        )
        return result.outcome.topic_count if isinstance(result.outcome, PermOutcome) else 0

    async def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV; a cluster name limits it to that cluster's brokers."""
        await self._propose(
            cmd.DeleteTopic(
                topic=_check_text("topic", topic, chars_max=KV_VALUE_CHARS_MAX),
                cluster_name=cluster_name or None,
            )
        )

    async def register_topic(self, topic: str, queue_datas: Iterable[QueueData]) -> None:
        """REGISTER_TOPIC_IN_NAMESRV; an empty list does nothing."""
        queues = tuple(_check_queue_data(q) for q in queue_datas)
        checked_topic = _check_text("topic", topic, chars_max=KV_VALUE_CHARS_MAX)
        if not queues:
            return
        await self._propose(cmd.RegisterTopic(topic=checked_topic, queue_datas=queues))

    async def update_namesrv_config(self, properties: Mapping[str, str]) -> str | None:
        """UPDATE_NAMESRV_CONFIG: the blacklisted key that refused it, or None when applied."""
        if not properties:
            return None
        pairs = tuple(
            (_check_unicode("key", str(k)), _check_unicode(str(k), str(v)))
            for k, v in properties.items()
        )
        blacklist = self.replicator.read(lambda table: table.config.blacklisted_keys())
        for key, _ in pairs:
            if key in blacklist:
                # Refused before anything is proposed, as DefaultRequestProcessor checks first.
                return key
        try:
            # Parse the values here, before the command is logged: apply must not fail.
            self.replicator.read(lambda table: table.config.updated(dict(pairs)))
            NamesrvConfig().updated(dict(pairs)).check_honoured()
        except ValueError as exc:
            raise ServiceError(str(exc)) from exc
        result = await self._propose(cmd.UpdateNamesrvConfig(properties=pairs))
        outcome = result.outcome
        return outcome.rejected_key if isinstance(outcome, ConfigOutcome) else None


def _check_addr(addr: object) -> str:
    """A ``host:port`` Raft address."""
    text = _check_text("addr", addr)
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ServiceError(f"addr {text!r} is not host:port")
    return text


def _check_text_or_empty(label: str, value: str | None) -> str:
    """A KV value may be empty but not missing, control characters allowed (it is data)."""
    if value is None:
        raise ServiceError(f"{label} is missing")
    if len(value) > KV_VALUE_CHARS_MAX:
        raise ServiceError(f"{label} is longer than {KV_VALUE_CHARS_MAX} characters")
    return _check_unicode(label, value)
