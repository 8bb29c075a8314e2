"""The shared named cast of the route-table tests and small command builders.

broker-a and broker-b live in DefaultCluster; broker-a has a master and a slave.
Builders return the ``ApplyResult`` so a test can look at outcome and changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from raftstore.commands import RegisterBroker, RegisterTopic, UnregisterBrokers, UnregisterRequest
from raftstore.results import ApplyResult, RegisterBrokerOutcome
from raftstore.route_table import RouteTable
from remoting.model import (
    PERM_READ,
    PERM_WRITE,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicQueueMappingInfo,
    TopicRouteData,
)

DEFAULT_CLUSTER = "DefaultCluster"
OTHER_CLUSTER = "OtherCluster"
BROKER_A = "broker-a"
BROKER_B = "broker-b"
ADDR_A0 = "127.0.0.1:10911"
ADDR_A1 = "127.0.0.1:10921"
ADDR_B0 = "127.0.0.1:10931"
HA_A0 = "127.0.0.1:10912"
HA_A1 = "127.0.0.1:10922"
HA_B0 = "127.0.0.1:10932"
NOW_MS = 1_700_000_000_000
PERM_RW = PERM_READ | PERM_WRITE
DV1 = DataVersion(state_version=0, timestamp=NOW_MS, counter=1)


def topics(
    *names: str, queues: int = 8, perm: int = PERM_RW, order: bool = False
) -> dict[str, TopicConfig]:
    """A topic table with every topic at ``queues`` read/write queues."""
    return {
        n: TopicConfig(
            topic_name=n, read_queue_nums=queues, write_queue_nums=queues, perm=perm, order=order
        )
        for n in names
    }


def wrapper(
    table: Mapping[str, TopicConfig],
    dv: DataVersion = DV1,
    mappings: Mapping[str, TopicQueueMappingInfo] | None = None,
) -> TopicConfigSerializeWrapper:
    """A registration body's topic wrapper."""
    return TopicConfigSerializeWrapper(
        data_version=dv,
        topic_config_table=dict(table),
        topic_queue_mapping_info_map=dict(mappings or {}),
    )


def register(
    table: RouteTable,
    *,
    addr: str,
    name: str,
    broker_id: int,
    cluster: str = DEFAULT_CLUSTER,
    ha: str = "",
    topic_table: Mapping[str, TopicConfig] | None = None,
    dv: DataVersion = DV1,
    acting: bool | None = False,
    timeout_ms: int | None = None,
    channel: str | None = None,
    now_ms: int = NOW_MS,
    filter_servers: Iterable[str] | None = (),
    zone: str | None = "",
    mappings: Mapping[str, TopicQueueMappingInfo] | None = None,
) -> ApplyResult:
    """REGISTER_BROKER as upstream tests call it (zone "", filter list [])."""
    return table.apply(
        RegisterBroker(
            cluster_name=cluster,
            broker_addr=addr,
            broker_name=name,
            broker_id=broker_id,
            ha_server_addr=ha,
            now_ms=now_ms,
            topic_config_wrapper=wrapper(topic_table or {}, dv, mappings),
            filter_server_list=None if filter_servers is None else tuple(filter_servers),
            zone_name=zone,
            heartbeat_timeout_ms=timeout_ms,
            enable_acting_master=acting,
            channel=channel,
        )
    )


def register_outcome(table: RouteTable, **kwargs: object) -> RegisterBrokerOutcome:
    """The outcome of :func:`register`, checked to be a registration outcome."""
    result = register(table, **kwargs)  # type: ignore[arg-type]
    assert isinstance(result.outcome, RegisterBrokerOutcome)
    return result.outcome


def unregister(table: RouteTable, *requests: tuple[str, str, str, int]) -> ApplyResult:
    """One UNREGISTER_BROKER batch of (cluster, addr, name, id) requests."""
    return table.apply(UnregisterBrokers(tuple(UnregisterRequest(*r) for r in requests)))


def register_topic(table: RouteTable, topic: str, *queues: QueueData) -> ApplyResult:
    """REGISTER_TOPIC_IN_NAMESRV."""
    return table.apply(RegisterTopic(topic, tuple(queues)))


def queue(broker_name: str, perm: int = PERM_RW, queues: int = 8) -> QueueData:
    """A QueueData of ``queues`` read/write queues."""
    return QueueData(broker_name, queues, queues, perm)


def addrs_of(route: TopicRouteData | None, broker_name: str) -> dict[int, str]:
    """The broker addresses a route shows for one broker name."""
    assert route is not None
    for bd in route.broker_datas:
        if bd.broker_name == broker_name:
            return bd.broker_addrs
    raise AssertionError(f"{broker_name} not in the route")


def perm_of(route: TopicRouteData | None, broker_name: str) -> int:
    """The permission a route shows for one broker name."""
    assert route is not None
    for qd in route.queue_datas:
        if qd.broker_name == broker_name:
            return qd.perm
    raise AssertionError(f"{broker_name} not in the route")


# The 3 names x 3 ids x 10 topics cluster of upstream RouteInfoManagerTestBase.
STATIC_CLUSTER = "cluster"
STATIC_BROKER_PREFIX = "broker"
STATIC_TOPIC_PREFIX = "topic"
STATIC_NAMES = 3
STATIC_IDS = 3
STATIC_TOPICS = 10


def static_addr(name_index: int, broker_id: int) -> str:
    """``cluster-broker-<i>:<id>`` as the upstream test base names them."""
    return f"{STATIC_CLUSTER}-{STATIC_BROKER_PREFIX}-{name_index}:{broker_id}"


def static_topic_table() -> dict[str, TopicConfig]:
    """topic-0..topic-9, 8 read/write queues, perm 6."""
    return topics(*(f"{STATIC_TOPIC_PREFIX}-{i}" for i in range(STATIC_TOPICS)))


def register_static_cluster(table: RouteTable) -> None:
    """``registerCluster(rim, "cluster", "broker", 3, 3, "topic", 10)`` with new-version brokers."""
    for i in range(STATIC_NAMES):
        for broker_id in range(STATIC_IDS):
            addr = static_addr(i, broker_id)
            result = register(
                table,
                cluster=STATIC_CLUSTER,
                addr=addr,
                name=f"{STATIC_BROKER_PREFIX}-{i}",
                broker_id=broker_id,
                ha=addr,
                topic_table=static_topic_table(),
            )
            assert isinstance(result.outcome, RegisterBrokerOutcome)
            assert not result.outcome.failed
