"""What applying a command returns: the answer the caller needs and what changed.

``ApplyResult.changes`` names every key whose stored value may differ after the
command, so the projection writer updates only those rows and the gateway's
route cache knows when to drop entries.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from remoting.model import DataVersion, KVTable


@dataclass(frozen=True, slots=True)
class Replication:
    """What a broker of a raft failover group reports of its HA links, in our brokers'
    header fields ``haClientAddr`` and ``haSlaveAcks`` (:mod:`remoting.ha_report`, which
    bounds them). The election trusts a slave's
    progress only as its master saw it over the authenticated HA stream
    (:mod:`raftstore.failover`): what a slave says of its own offsets may be anyone's."""

    client_addr: str | None = None
    """A slave: the local address (host:port) of its HA connection to its master."""
    slave_acks: tuple[tuple[str, int], ...] | None = None
    """A master: the peer address (host:port) of each HA connection that authenticated,
    with the commit-log offset it acknowledged."""

    def links(self) -> tuple[str | None, frozenset[str]]:
        """The HA connections reported, without their offsets: what changes when a
        slave connects or leaves, not with every write."""
        return self.client_addr, frozenset(addr for addr, _ in self.slave_acks or ())

    @classmethod
    def reported(
        cls, client_addr: str | None, slave_acks: tuple[tuple[str, int], ...] | None
    ) -> Replication | None:
        """What a request reported (:func:`remoting.ha_report.read_ha_report`), None when
        it reported nothing."""
        if client_addr is None and slave_acks is None:
            return None
        return cls(client_addr=client_addr, slave_acks=slave_acks)


@dataclass(frozen=True, slots=True)
class BrokerAddrInfo:
    """Key of the live table in 5.x: the same address may live in two clusters."""

    cluster_name: str
    broker_addr: str


@dataclass(frozen=True, slots=True)
class MinBrokerIdChange:
    """A NOTIFY_MIN_BROKER_ID_CHANGE (905) the caller should send, one-way, to ``targets``."""

    broker_name: str
    min_broker_id: int
    min_broker_addr: str | None
    offline_broker_addr: str | None
    ha_broker_addr: str | None
    targets: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MasterMove:
    """A broker name's master (broker id 0) now at another address than before.

    Recorded by a registration that gives id 0 another address and by a raft-failover
    promotion; a master that merely appears or goes away is not a move.
    """

    cluster_name: str
    broker_name: str
    old_addr: str
    new_addr: str


@dataclass(frozen=True, slots=True)
class Changes:
    """Keys touched by one command (empty sets when nothing changed)."""

    topics: frozenset[str] = frozenset()
    broker_names: frozenset[str] = frozenset()
    clusters: frozenset[str] = frozenset()
    live_brokers: frozenset[BrokerAddrInfo] = frozenset()
    """Keys whose live-table row or filter-server list changed (both keyed alike)."""
    kv: frozenset[tuple[str, str]] = frozenset()
    kv_namespaces: frozenset[str] = frozenset()
    config: bool = False
    master_moves: tuple[MasterMove, ...] = ()
    """Masters that moved, in apply order (their groups are in ``broker_names`` too)."""

    @property
    def empty(self) -> bool:
        """True when the command changed no state at all."""
        return not (
            self.topics
            or self.broker_names
            or self.clusters
            or self.live_brokers
            or self.kv
            or self.kv_namespaces
            or self.config
        )

    @property
    def affects_routes(self) -> bool:
        """True when a GET_ROUTEINFO answer may differ (liveness touches do not count)."""
        return bool(
            self.topics or self.broker_names or self.clusters or self.kv_namespaces or self.config
        )


@dataclass(frozen=True, slots=True)
class RegisterBrokerOutcome:
    """REGISTER_BROKER answer: a slave learns its master here.

    ``failed`` is the 5.x single-topic guard ("register broker failed").
    ``order_topic_config`` is the ORDER_TOPIC_CONFIG namespace, None when absent.
    ``assigned_broker_id`` (raft failover groups only) asks the registrant to take
    this broker id: 0 when it was elected master, a slave id when it registered
    as master but another live broker holds id 0 (a returning old master).
    ``needs_full``: a registration with its topic table elided found the table no
    longer recorded for the broker and changed nothing; the proposer sends it whole
    (never an answer to a broker).
    """

    master_addr: str | None = None
    ha_server_addr: str | None = None
    order_topic_config: KVTable | None = None
    failed: bool = False
    assigned_broker_id: int | None = None
    needs_full: bool = False


@dataclass(frozen=True, slots=True)
class QueryDataVersionOutcome:
    """QUERY_DATA_VERSION answer: ``changed`` and the stored version if live."""

    changed: bool
    data_version: DataVersion | None


@dataclass(frozen=True, slots=True)
class PermOutcome:
    """WIPE/ADD_WRITE_PERM answer: the number of topics touched."""

    topic_count: int


@dataclass(frozen=True, slots=True)
class MasterElection:
    """A raft-failover election: ``new_master_addr`` moved from ``previous_broker_id`` to 0.

    The offsets are the ones the decision was made on (the live entries' last
    reported values), kept for the operator and the benchmarks.
    """

    cluster_name: str
    broker_name: str
    old_master_addr: str
    new_master_addr: str
    new_master_ha_addr: str | None
    previous_broker_id: int
    master_max_offset: int
    new_master_confirm_offset: int


@dataclass(frozen=True, slots=True)
class ExpireOutcome:
    """The scan's answer: the live entries it expired and the masters it elected."""

    expired: tuple[BrokerAddrInfo, ...] = ()
    elections: tuple[MasterElection, ...] = ()


@dataclass(frozen=True, slots=True)
class ConfigOutcome:
    """UPDATE_NAMESRV_CONFIG answer: ``rejected_key`` is a blacklisted key, if any."""

    rejected_key: str | None = None


@dataclass(frozen=True, slots=True)
class KvQuotaExceeded:
    """PUT_KV_CONFIG refused, nothing changed: the KV config would have grown to
    ``bytes_after`` bytes, past ``kvConfigBytesMax`` (``bytes_max``)."""

    bytes_max: int
    bytes_after: int

    @property
    def remark(self) -> str:
        """The SYSTEM_ERROR remark the caller is answered with."""
        return (
            f"KV config quota exceeded: {self.bytes_max} bytes max, "
            f"the put would make {self.bytes_after}"
        )


Outcome = (
    RegisterBrokerOutcome
    | QueryDataVersionOutcome
    | PermOutcome
    | ExpireOutcome
    | ConfigOutcome
    | KvQuotaExceeded
    | None
)


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """The result of ``RouteTable.apply``.

    ``applied_version`` is the table's version after the command; it advances
    exactly when ``changes`` is not empty.
    """

    applied_version: int
    changes: Changes = field(default_factory=Changes)
    outcome: Outcome = None
    notifications: tuple[MinBrokerIdChange, ...] = ()
    log_index: int = field(default=0, compare=False)
    """Raft mode, in the result handed to the proposer: the index of the log entry that
    carried the command (0: eventual mode, or not handed out)."""
    log_term: int = field(default=0, compare=False)
    """The term of that entry."""
