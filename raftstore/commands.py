"""Commands: every change to the route table is one of these frozen values.

A command is what goes into the Raft log (raft mode) or is applied at once
(eventual mode). It carries everything apply needs, including the time: the
proposer stamps ``now_ms`` so that apply never reads a clock and every node
replaying the same log reaches the same state.
"""

from __future__ import annotations

from dataclasses import dataclass

from raftstore.results import Replication
from remoting.model import DataVersion, QueueData, TopicConfigSerializeWrapper


@dataclass(frozen=True, slots=True)
class RegisterBroker:
    """REGISTER_BROKER (103): a broker announces itself and its topic table.

    ``enable_acting_master`` None marks an old-version broker (4.x header).
    ``heartbeat_timeout_ms`` None means the default 120 s.
    ``filter_server_list`` None leaves the filter table alone, empty removes it.
    ``channel`` names the connection it arrived on (eventual mode's
    channel-destroy hook); None when the command did not come over a socket.
    ``max_offset`` / ``confirm_offset`` are the broker's commit-log offsets (5.x
    BROKER_HEARTBEAT names), None when not reported; ``replication`` its report of its
    HA links (raft failover), None when not reported.
    ``enable_raft_failover`` opts the broker group into raft-mode master election
    (the last registrant wins, like ``enableActingMaster``); None means off.
    ``request_digest`` is a digest of the REGISTER_BROKER request it was decoded from
    (header fields and body): a member that gets the same request from the broker
    knows the leader's copy by it without decoding its own. Apply never reads it.
    ``topics_digest`` is a digest of the body besides its DataVersion (topic table,
    mappings, filter servers: :func:`remoting.register_body.topics_digest`), None
    when the body's layout was not recognised. A master's registration that rewrote
    its whole table records it (``Tables.registered``).
    ``topics_elided``: the topic table is left out because it is the one the broker
    registered last (same ``topics_digest``); ``topic_config_wrapper`` then carries
    only the new DataVersion. Apply checks that the recorded table is still what the
    state holds for the broker (see :func:`raftstore.registration.elided_topics_hold`) and
    otherwise changes nothing and answers ``needs_full``, so the proposer sends the
    whole table.
    """

    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int
    ha_server_addr: str
    now_ms: int
    topic_config_wrapper: TopicConfigSerializeWrapper | None = None
    filter_server_list: tuple[str, ...] | None = None
    zone_name: str | None = None
    heartbeat_timeout_ms: int | None = None
    enable_acting_master: bool | None = None
    channel: str | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    enable_raft_failover: bool | None = None
    request_digest: bytes | None = None
    topics_digest: bytes | None = None
    topics_elided: bool = False
    replication: Replication | None = None

    def heartbeat(self) -> BrokerHeartbeat:
        """The liveness half of this registration: what refreshing the broker takes
        when its copy is answered from the applied state."""
        return BrokerHeartbeat(
            cluster_name=self.cluster_name,
            broker_addr=self.broker_addr,
            now_ms=self.now_ms,
            max_offset=self.max_offset,
            confirm_offset=self.confirm_offset,
            replication=self.replication,
        )


@dataclass(frozen=True, slots=True)
class UnregisterRequest:
    """One entry of an UNREGISTER_BROKER batch."""

    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int


@dataclass(frozen=True, slots=True)
class UnregisterBrokers:
    """UNREGISTER_BROKER (104), applied as one batch (5.x BatchUnregistrationService)."""

    requests: tuple[UnregisterRequest, ...]


@dataclass(frozen=True, slots=True)
class BrokerHeartbeat:
    """BROKER_HEARTBEAT (904): refresh the live entry of (cluster, addr) if present.

    ``max_offset`` / ``confirm_offset`` (5.x header fields) and ``replication`` update
    the live entry.
    """

    cluster_name: str
    broker_addr: str
    now_ms: int
    max_offset: int | None = None
    confirm_offset: int | None = None
    replication: Replication | None = None


@dataclass(frozen=True, slots=True)
class QueryDataVersion:
    """QUERY_DATA_VERSION (322): compare DataVersions and touch the live entry.

    ``max_offset`` / ``confirm_offset`` and ``replication`` are optional extra header
    fields our brokers send; they update the live entry like a heartbeat's.
    """

    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int
    data_version: DataVersion | None
    now_ms: int
    max_offset: int | None = None
    confirm_offset: int | None = None
    replication: Replication | None = None


@dataclass(frozen=True, slots=True)
class ExpireBrokers:
    """The liveness scan: unregister every broker silent for longer than its timeout.

    A broker expires when ``last_update_ms + timeout_ms + skew_allowance_ms < now_ms``.
    ``failover_lag_bytes_max`` None keeps the original behaviour; a number makes
    the same apply elect a new master for every expired master of a group that
    opted into raft failover, among slaves at most that many bytes behind
    (see :mod:`raftstore.failover`).
    """

    now_ms: int
    skew_allowance_ms: int = 0
    failover_lag_bytes_max: int | None = None


@dataclass(frozen=True, slots=True)
class ChannelDestroyed:
    """A broker connection closed (eventual mode): unregister what it registered."""

    channel: str


@dataclass(frozen=True, slots=True)
class PutKV:
    """PUT_KV_CONFIG (100)."""

    namespace: str
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class DeleteKV:
    """DELETE_KV_CONFIG (102). The namespace stays, possibly empty."""

    namespace: str
    key: str


@dataclass(frozen=True, slots=True)
class WipeWritePerm:
    """WIPE_WRITE_PERM_OF_BROKER (205)."""

    broker_name: str


@dataclass(frozen=True, slots=True)
class AddWritePerm:
    """ADD_WRITE_PERM_OF_BROKER (327)."""

    broker_name: str


@dataclass(frozen=True, slots=True)
class DeleteTopic:
    """DELETE_TOPIC_IN_NAMESRV (216); a cluster name limits it to that cluster."""

    topic: str
    cluster_name: str | None = None


@dataclass(frozen=True, slots=True)
class RegisterTopic:
    """REGISTER_TOPIC_IN_NAMESRV (217)."""

    topic: str
    queue_datas: tuple[QueueData, ...]


@dataclass(frozen=True, slots=True)
class UpdateNamesrvConfig:
    """UPDATE_NAMESRV_CONFIG (318): (key, value) pairs parsed from the properties body."""

    properties: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Barrier:
    """A no-op that changes nothing; committing it proves leadership for a read."""


Command = (
    RegisterBroker
    | UnregisterBrokers
    | BrokerHeartbeat
    | QueryDataVersion
    | ExpireBrokers
    | ChannelDestroyed
    | PutKV
    | DeleteKV
    | WipeWritePerm
    | AddWritePerm
    | DeleteTopic
    | RegisterTopic
    | UpdateNamesrvConfig
    | Barrier
)
