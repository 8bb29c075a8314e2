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
from gateway.expiry_reports import ExpiryReports
from gateway.scan_fallback import ScanObserver
from gateway.service_checks import (
    BROKER_ID_MAX,
    KV_VALUE_CHARS_MAX,
    QUEUE_NUMS_MAX,
    ServiceError,
    _check_int,
    _check_offset,
    _check_queue_data,
    _check_text,
    _check_text_or_empty,
    _check_unicode,
)
from gateway.service_liveness import LivenessScan
from gateway.service_raft import REMARK_NOT_RAFT, RaftAdmin
from gateway.service_registration import Registrations
from raftstore import commands as cmd
from raftstore.config import NamesrvConfig
from raftstore.liveness import RegistrationDeduper, TouchCoalescer
from raftstore.raft import DEFAULT_SKEW_ALLOWANCE_MS, RaftReplicator
from raftstore.replicator import MODE_RAFT, Replicator
from raftstore.results import (
    ApplyResult,
    ConfigOutcome,
    KvQuotaExceeded,
    MinBrokerIdChange,
    PermOutcome,
    QueryDataVersionOutcome,
    Replication,
)
from remoting.model import DataVersion, QueueData

log = logging.getLogger(__name__)

__all__ = [
    "BROKER_ID_MAX",
    "KV_VALUE_CHARS_MAX",
    "QUEUE_NUMS_MAX",
    "REMARK_NOT_RAFT",
    "NameServerService",
    "Notifier",
    "ServiceError",
]


Notifier = Callable[[tuple[MinBrokerIdChange, ...]], None]
"""Receives the NOTIFY_MIN_BROKER_ID_CHANGE messages a command asks to send."""


class NameServerService(Registrations, LivenessScan, RaftAdmin):
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

    async def unregister_broker(
        self, *, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> ApplyResult:
        """UNREGISTER_BROKER: applied at once (the 4.x synchronous behaviour). The result
        names the log entry that applied it (raft mode; ``log_index`` 0 in eventual
        mode)."""
        request = cmd.UnregisterRequest(
            cluster_name=_check_text("clusterName", cluster_name),
            broker_addr=_check_text("brokerAddr", broker_addr),
            broker_name=_check_text("brokerName", broker_name),
            broker_id=_check_int("brokerId", broker_id, low=0, high=BROKER_ID_MAX),
        )
        return await self._propose(cmd.UnregisterBrokers(requests=(request,)))

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
