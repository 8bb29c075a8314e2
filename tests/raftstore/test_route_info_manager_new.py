"""Ports of upstream ``routeinfo/RouteInfoManagerNewTest`` (29 tests, RocketMQ 5.x).

Upstream shares one spied NamesrvConfig across tests; each port here gets a
fresh config with ``supportActingMaster`` on. Asynchronous unregistration
(``submitUnRegisterBrokerRequest`` + wait) is one UnregisterBrokers command:
in this table the batch is applied when committed. Sleeps become ``now_ms``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from raftstore.commands import ChannelDestroyed, DeleteTopic, ExpireBrokers, WipeWritePerm
from raftstore.config import NamesrvConfig
from raftstore.results import BrokerAddrInfo, ExpireOutcome, RegisterBrokerOutcome
from raftstore.route_table import RouteTable
from remoting.model import DataVersion, TopicConfig, is_writeable
from tests.raftstore.cast import (
    NOW_MS,
    PERM_RW,
    addrs_of,
    perm_of,
    queue,
    register,
    register_topic,
    topics,
    unregister,
)

DEFAULT_CLUSTER = "Default_Cluster"
DEFAULT_BROKER = "Default_Broker"
DEFAULT_ADDR = "127.0.0.1:10911"
SLAVE_ADDR = "127.0.0.1:30911"
BROKER1 = "Default_Broker1"
BROKER1_ADDR = "127.0.0.1:109119"
ANOTHER_CLUSTER = "AnotherCluster"
ANOTHER_BROKER = "AnotherBroker"
BASE_TOPIC = "baseTopic"
EXPIRED_TIMEOUT_MS = 30_000
ORDER_QUEUES = 8


@dataclass(frozen=True)
class BrokerInfo:
    """The upstream test's BrokerBasicInfo."""

    cluster: str
    name: str
    addr: str
    broker_id: int
    ha: str
    acting: bool
    dv: DataVersion


def default_broker(acting: bool = True) -> BrokerInfo:
    """``defaultBroker()``: id 0, acting master enabled, DataVersion counter 1."""
    dv = DataVersion(timestamp=NOW_MS, counter=1)
    return BrokerInfo(
        DEFAULT_CLUSTER, DEFAULT_BROKER, DEFAULT_ADDR, 0, "127.0.0.1:20911", acting, dv
    )


def slave_broker(acting: bool = True) -> BrokerInfo:
    """``slaveBroker()``: id 1 at 127.0.0.1:30911."""
    return dataclasses.replace(
        default_broker(acting), broker_id=1, addr=SLAVE_ADDR, ha="127.0.0.1:40911"
    )


def next_version(dv: DataVersion) -> DataVersion:
    """``DataVersion.nextVersion()``: a later timestamp and the next counter."""
    return DataVersion(dv.state_version, dv.timestamp + 1, dv.counter + 1)


def register_with_topics(
    table: RouteTable,
    info: BrokerInfo,
    table_of_topics: dict[str, TopicConfig],
    *,
    channel: str | None = None,
    timeout_ms: int | None = None,
    now_ms: int = NOW_MS,
) -> RegisterBrokerOutcome:
    """The 11-argument registerBroker with baseTopic added (it avoids the one-topic guard)."""
    full = {BASE_TOPIC: TopicConfig(topic_name=BASE_TOPIC), **table_of_topics}
    result = register(
        table,
        cluster=info.cluster,
        addr=info.addr,
        name=info.name,
        broker_id=info.broker_id,
        ha=info.ha,
        topic_table=full,
        dv=info.dv,
        acting=info.acting,
        channel=channel,
        timeout_ms=timeout_ms,
        now_ms=now_ms,
    )
    assert isinstance(result.outcome, RegisterBrokerOutcome)
    return result.outcome


def register_normal(
    table: RouteTable, info: BrokerInfo, *names: str, **kw: object
) -> RegisterBrokerOutcome:
    """``registerBrokerWithNormalTopic``."""
    return register_with_topics(table, info, topics(*names), **kw)  # type: ignore[arg-type]


def register_order(table: RouteTable, info: BrokerInfo, *names: str) -> RegisterBrokerOutcome:
    """``registerBrokerWithOrderTopic``: order topics of 8 queues."""
    return register_with_topics(table, info, topics(*names, queues=ORDER_QUEUES, order=True))


def register_global_order(
    table: RouteTable, info: BrokerInfo, *names: str
) -> RegisterBrokerOutcome:
    """``registerBrokerWithGlobalOrderTopic``: one queue everywhere, baseTopic included."""
    table_of_topics = {
        BASE_TOPIC: TopicConfig(BASE_TOPIC, 1, 1),
        **topics(*names, queues=1, order=True),
    }
    result = register(
        table,
        cluster=info.cluster,
        addr=info.addr,
        name=info.name,
        broker_id=info.broker_id,
        ha=info.ha,
        topic_table=table_of_topics,
        dv=info.dv,
        acting=info.acting,
    )
    assert isinstance(result.outcome, RegisterBrokerOutcome)
    return result.outcome


def unregister_info(table: RouteTable, *infos: BrokerInfo) -> None:
    """One unregister batch for the given brokers."""
    unregister(table, *((i.cluster, i.addr, i.name, i.broker_id) for i in infos))


@pytest.fixture
def delete_with_registration() -> RouteTable:
    """A table with deleteTopicWithBrokerRegistration on."""
    return RouteTable(
        NamesrvConfig(support_acting_master=True, delete_topic_with_broker_registration=True)
    )


def test_get_all_cluster_info_lists_both_clusters_and_their_masters(
    acting_table: RouteTable,
) -> None:
    """getAllClusterInfo (the JSON round trip is the codec's test)."""
    register_normal(acting_table, default_broker(), "TestTopic")
    another = dataclasses.replace(
        default_broker(), cluster=ANOTHER_CLUSTER, name=ANOTHER_BROKER, addr=SLAVE_ADDR
    )
    register_normal(acting_table, another, "TestTopic1")
    info = acting_table.cluster_info()
    assert set(info.cluster_addr_table) == {DEFAULT_CLUSTER, ANOTHER_CLUSTER}
    assert set(info.broker_addr_table) == {DEFAULT_BROKER, ANOTHER_BROKER}
    assert info.broker_addr_table[DEFAULT_BROKER].broker_addrs[0] == DEFAULT_ADDR
    assert info.broker_addr_table[ANOTHER_BROKER].broker_addrs[0] == SLAVE_ADDR


def test_delete_topic_removes_it_everywhere_or_in_one_cluster(acting_table: RouteTable) -> None:
    """deleteTopic: whole topic, recreation with an unchanged DataVersion, per-cluster delete."""
    register_normal(acting_table, default_broker(), "TestTopic")
    acting_table.apply(DeleteTopic("TestTopic"))
    assert acting_table.pickup_topic_route("TestTopic") is None
    register_normal(acting_table, default_broker(), "TestTopic")
    another = dataclasses.replace(default_broker(), cluster=ANOTHER_CLUSTER, name=ANOTHER_BROKER)
    register_normal(acting_table, another, "TestTopic")
    route = acting_table.pickup_topic_route("TestTopic")
    assert route is not None and len(route.broker_datas) == 2
    acting_table.apply(DeleteTopic("TestTopic", DEFAULT_CLUSTER))
    route = acting_table.pickup_topic_route("TestTopic")
    assert route is not None
    assert [bd.broker_name for bd in route.broker_datas] == [ANOTHER_BROKER]


def test_get_all_topic_list_grows_with_registrations(acting_table: RouteTable) -> None:
    """getAllTopicList."""
    assert acting_table.all_topic_list().topic_list == []
    register_normal(acting_table, default_broker(), "TestTopic", "TestTopic1", "TestTopic2")
    assert {"TestTopic", "TestTopic1", "TestTopic2"} <= set(
        acting_table.all_topic_list().topic_list
    )


def test_register_broker_tells_a_slave_its_master(acting_table: RouteTable) -> None:
    """registerBroker: the master gets no addresses; the slave gets the master's."""
    master = register_normal(acting_table, default_broker(), "TestTopic")
    assert master.master_addr is None and master.ha_server_addr is None
    slave = register_normal(acting_table, slave_broker(), "TestTopic")
    assert slave.ha_server_addr == "127.0.0.1:20911"
    assert slave.master_addr == DEFAULT_ADDR


def test_unregister_broker_drops_all_its_routes(acting_table: RouteTable) -> None:
    """unregisterBroker, both the synchronous and the submitted form."""
    names = ("TestTopic", "TestTopic1", "TestTopic2")
    for _ in range(2):
        register_normal(acting_table, default_broker(), *names)
        unregister(acting_table, (DEFAULT_CLUSTER, DEFAULT_ADDR, DEFAULT_BROKER, 0))
        assert all(acting_table.pickup_topic_route(n) is None for n in names)


def test_register_slave_broker_adds_id_one(acting_table: RouteTable) -> None:
    """registerSlaveBroker."""
    register_normal(acting_table, default_broker(), "TestTopic")
    assert set(addrs_of(acting_table.pickup_topic_route("TestTopic"), DEFAULT_BROKER)) == {0}
    register_normal(acting_table, slave_broker(), "TestTopic")
    addrs = addrs_of(acting_table.pickup_topic_route("TestTopic"), DEFAULT_BROKER)
    assert addrs == {0: DEFAULT_ADDR, 1: SLAVE_ADDR}


def test_create_new_topic_with_an_unchanged_data_version(acting_table: RouteTable) -> None:
    """createNewTopic: a new topic in a re-registration appears though the version is the same."""
    register_normal(acting_table, default_broker(), "TestTopic")
    register_normal(acting_table, slave_broker(), "TestTopic")
    register_normal(acting_table, default_broker(), "TestTopic", "TestTopic1")
    addrs = addrs_of(acting_table.pickup_topic_route("TestTopic1"), DEFAULT_BROKER)
    assert addrs == {0: DEFAULT_ADDR, 1: SLAVE_ADDR}


def _switch_roles(table: RouteTable, take_master_down: object) -> None:
    master, slave = default_broker(acting=False), slave_broker(acting=False)
    register_normal(table, master, "TestTopic", channel="master-channel")
    register_normal(table, slave, "TestTopic", channel="slave-channel")
    assert callable(take_master_down)
    take_master_down()
    assert addrs_of(table.pickup_topic_route("TestTopic"), DEFAULT_BROKER) == {1: SLAVE_ADDR}
    promoted = dataclasses.replace(slave, broker_id=0, dv=next_version(slave.dv))
    register_normal(table, promoted, "TestTopic")
    assert addrs_of(table.pickup_topic_route("TestTopic"), DEFAULT_BROKER) == {0: SLAVE_ADDR}
    demoted = dataclasses.replace(master, broker_id=1, dv=next_version(master.dv))
    register_normal(table, demoted, "TestTopic")
    addrs = addrs_of(table.pickup_topic_route("TestTopic"), DEFAULT_BROKER)
    assert addrs == {0: SLAVE_ADDR, 1: DEFAULT_ADDR}


def test_switch_broker_role_moves_an_address_between_ids(acting_table: RouteTable) -> None:
    """switchBrokerRole."""
    _switch_roles(
        acting_table,
        lambda: unregister(acting_table, (DEFAULT_CLUSTER, DEFAULT_ADDR, DEFAULT_BROKER, 0)),
    )


def test_unregister_slave_broker_keeps_the_master(acting_table: RouteTable) -> None:
    """unRegisterSlaveBroker, synchronous and submitted."""
    for _ in range(2):
        register_normal(acting_table, default_broker(), "TestTopic")
        register_normal(acting_table, slave_broker(), "TestTopic")
        unregister_info(acting_table, slave_broker())
        route = acting_table.pickup_topic_route("TestTopic")
        assert route is not None and len(route.broker_datas) == 1
        assert route.broker_datas[0].broker_addrs == {0: DEFAULT_ADDR}


def test_unregister_master_broker_makes_the_slave_a_read_only_acting_master(
    acting_table: RouteTable,
) -> None:
    """unRegisterMasterBroker."""
    register_normal(acting_table, default_broker(), "TestTopic")
    register_normal(acting_table, slave_broker(), "TestTopic")
    unregister_info(acting_table, default_broker())
    route = acting_table.pickup_topic_route("TestTopic")
    assert route is not None and len(route.broker_datas) == 1 and len(route.queue_datas) == 1
    assert route.broker_datas[0].broker_addrs[0] == SLAVE_ADDR
    assert route.queue_datas[0].perm == 4


def test_unregister_master_broker_of_an_old_style_group_leaves_no_master(
    acting_table: RouteTable,
) -> None:
    """unRegisterMasterBrokerOldVersion."""
    register_normal(acting_table, default_broker(acting=False), "TestTopic")
    register_normal(acting_table, slave_broker(acting=False), "TestTopic")
    unregister_info(acting_table, default_broker(acting=False))
    route = acting_table.pickup_topic_route("TestTopic")
    assert route is not None
    assert route.broker_datas[0].broker_addrs.get(0) is None
    assert route.queue_datas[0].perm == PERM_RW


def test_submit_multi_unregister_requests_drops_both_brokers(acting_table: RouteTable) -> None:
    """submitMultiUnRegisterRequests."""
    master2 = dataclasses.replace(default_broker(), name=BROKER1, addr=BROKER1_ADDR)
    register_normal(acting_table, default_broker(), "TestTopic1")
    register_normal(acting_table, master2, "TestTopic2")
    unregister_info(acting_table, default_broker(), master2)
    assert acting_table.pickup_topic_route("TestTopic1") is None
    assert acting_table.pickup_topic_route("TestTopic2") is None


def test_is_broker_topic_config_changed_compares_every_version_field(
    acting_table: RouteTable,
) -> None:
    """isBrokerTopicConfigChanged."""
    info = default_broker()
    register_normal(acting_table, info, "TestTopic")
    stored = acting_table.query_broker_data_version(DEFAULT_CLUSTER, DEFAULT_ADDR)
    assert not acting_table.is_broker_topic_config_changed(DEFAULT_CLUSTER, DEFAULT_ADDR, stored)
    later = dataclasses.replace(info.dv, timestamp=info.dv.timestamp + 1000)
    assert acting_table.is_broker_topic_config_changed(DEFAULT_CLUSTER, DEFAULT_ADDR, later)
    counted = dataclasses.replace(info.dv, counter=info.dv.counter + 1)
    assert acting_table.is_broker_topic_config_changed(DEFAULT_CLUSTER, DEFAULT_ADDR, counted)


def test_is_topic_config_changed_for_unknown_brokers_and_topics(acting_table: RouteTable) -> None:
    """isTopicConfigChanged."""
    info = default_broker()
    args = (DEFAULT_CLUSTER, DEFAULT_ADDR, info.dv, DEFAULT_BROKER)
    assert acting_table.is_topic_config_changed(*args, "TestTopic")
    register_normal(acting_table, info, "TestTopic")
    assert not acting_table.is_topic_config_changed(*args, "TestTopic")
    assert acting_table.is_topic_config_changed(*args, "TestTopic1")


def test_query_broker_topic_config_returns_the_registered_version(acting_table: RouteTable) -> None:
    """queryBrokerTopicConfig."""
    info = default_broker()
    register_normal(acting_table, info, "TestTopic")
    assert acting_table.query_broker_data_version(DEFAULT_CLUSTER, DEFAULT_ADDR) == info.dv


def test_wipe_write_perm_of_broker_makes_its_queues_read_only(acting_table: RouteTable) -> None:
    """wipeWritePermOfBrokerByLock."""
    register_normal(acting_table, default_broker(), "TestTopic")
    assert perm_of(acting_table.pickup_topic_route("TestTopic"), DEFAULT_BROKER) == 6
    acting_table.apply(WipeWritePerm(DEFAULT_BROKER))
    assert perm_of(acting_table.pickup_topic_route("TestTopic"), DEFAULT_BROKER) == 4


def test_pickup_topic_route_data_lists_every_broker_of_the_topic(acting_table: RouteTable) -> None:
    """pickupTopicRouteData."""
    register_normal(acting_table, default_broker(), "TestTopic")
    route = acting_table.pickup_topic_route("TestTopic")
    assert route is not None
    assert [(bd.broker_name, bd.broker_addrs) for bd in route.broker_datas] == [
        (DEFAULT_BROKER, {0: DEFAULT_ADDR})
    ]
    assert route.queue_datas == [queue(DEFAULT_BROKER)]
    register_normal(
        acting_table, dataclasses.replace(default_broker(), name=ANOTHER_BROKER), "TestTopic"
    )
    route = acting_table.pickup_topic_route("TestTopic")
    assert route is not None and len(route.broker_datas) == 2 and len(route.queue_datas) == 2
    assert {bd.broker_name for bd in route.broker_datas} == {DEFAULT_BROKER, ANOTHER_BROKER}


def _writable(table: RouteTable, topic: str) -> bool:
    return is_writeable(perm_of(table.pickup_topic_route(topic), DEFAULT_BROKER))


def test_pickup_topic_route_data_with_slave_follows_the_master(acting_table: RouteTable) -> None:
    """pickupTopicRouteDataWithSlave."""
    register_normal(acting_table, default_broker(), "TestTopic")
    register_normal(acting_table, slave_broker(), "TestTopic")
    assert len(addrs_of(acting_table.pickup_topic_route("TestTopic"), DEFAULT_BROKER)) == 2
    assert _writable(acting_table, "TestTopic")
    unregister_info(acting_table, default_broker())
    assert len(addrs_of(acting_table.pickup_topic_route("TestTopic"), DEFAULT_BROKER)) == 1
    assert not _writable(acting_table, "TestTopic")
    register_normal(acting_table, default_broker(), "TestTopic")
    assert len(addrs_of(acting_table.pickup_topic_route("TestTopic"), DEFAULT_BROKER)) == 2
    assert _writable(acting_table, "TestTopic")


def test_scan_not_active_broker_expires_only_after_the_broker_timeout(
    acting_table: RouteTable,
) -> None:
    """scanNotActiveBroker: upstream sleeps 30 s and asserts nothing; here time is an argument."""
    register_normal(acting_table, default_broker(), "TestTopic")
    assert acting_table.apply(ExpireBrokers(now_ms=NOW_MS)).outcome == ExpireOutcome()
    register_normal(acting_table, default_broker(), "TestTopic", timeout_ms=EXPIRED_TIMEOUT_MS)
    result = acting_table.apply(ExpireBrokers(now_ms=NOW_MS + EXPIRED_TIMEOUT_MS + 1))
    assert result.outcome == ExpireOutcome(expired=(BrokerAddrInfo(DEFAULT_CLUSTER, DEFAULT_ADDR),))
    assert acting_table.pickup_topic_route("TestTopic") is None


def test_pickup_partition_order_topic_route_data_with_acting_masters(
    acting_table: RouteTable,
) -> None:
    """pickupPartitionOrderTopicRouteData, cases 1-3."""
    topic = "PartitionOrderTopicTest"
    # Case 1: a lone prime slave registers read-only and shows as id 0.
    register_order(acting_table, slave_broker(), topic)
    assert addrs_of(acting_table.pickup_topic_route(topic), DEFAULT_BROKER) == {0: SLAVE_ADDR}
    assert not _writable(acting_table, topic)
    unregister_info(acting_table, slave_broker())
    # Case 2: the master leaves; the slave acts read-only.
    register_order(acting_table, slave_broker(), topic)
    register_order(acting_table, default_broker(), topic)
    unregister_info(acting_table, default_broker())
    assert addrs_of(acting_table.pickup_topic_route(topic), DEFAULT_BROKER) == {0: SLAVE_ADDR}
    assert not _writable(acting_table, topic)
    unregister_info(acting_table, slave_broker())
    # Case 3: a second group on the same addresses keeps its master.
    another = "Default_Broker_ANOTHER"
    register_order(acting_table, slave_broker(), topic)
    register_order(acting_table, default_broker(), topic)
    register_order(acting_table, dataclasses.replace(default_broker(), name=another), topic)
    register_order(acting_table, dataclasses.replace(slave_broker(), name=another), topic)
    route = acting_table.pickup_topic_route(topic)
    assert route is not None and len(route.broker_datas) == 2 and len(route.queue_datas) == 2
    unregister_info(acting_table, default_broker())
    route = acting_table.pickup_topic_route(topic)
    assert route is not None and len(route.broker_datas) == 2 and len(route.queue_datas) == 2
    assert addrs_of(route, DEFAULT_BROKER) == {0: SLAVE_ADDR}
    assert addrs_of(route, another) == {0: DEFAULT_ADDR, 1: SLAVE_ADDR}


def test_pickup_global_order_topic_route_data_with_acting_masters(
    acting_table: RouteTable,
) -> None:
    """pickupGlobalOrderTopicRouteData (case 2 re-checked against a fresh route here)."""
    topic = "GlobalOrderTopicTest"
    register_global_order(acting_table, slave_broker(), topic)
    route = acting_table.pickup_topic_route(topic)
    assert addrs_of(route, DEFAULT_BROKER) == {0: SLAVE_ADDR}
    assert not _writable(acting_table, topic)
    unregister_info(acting_table, slave_broker())
    register_global_order(acting_table, slave_broker(), topic)
    register_global_order(acting_table, default_broker(), topic)
    unregister_info(acting_table, default_broker())
    assert addrs_of(acting_table.pickup_topic_route(topic), DEFAULT_BROKER) == {0: SLAVE_ADDR}
    assert not _writable(acting_table, topic)


def test_register_only_slave_broker_serves_read_only(acting_table: RouteTable) -> None:
    """registerOnlySlaveBroker."""
    register_normal(acting_table, slave_broker(), "TestTopic")
    assert acting_table.pickup_topic_route("TestTopic") is not None
    assert not _writable(acting_table, "TestTopic")
    unregister_info(acting_table, slave_broker())
    register_normal(acting_table, default_broker(), "TestTopic")
    register_normal(acting_table, slave_broker(), "TestTopic")
    assert _writable(acting_table, "TestTopic")
    unregister_info(acting_table, default_broker())
    assert not _writable(acting_table, "TestTopic")
    register_normal(acting_table, default_broker(), "TestTopic")
    assert _writable(acting_table, "TestTopic")


def test_on_channel_destroy_unregisters_the_broker_of_that_channel(
    acting_table: RouteTable,
) -> None:
    """onChannelDestroy."""
    register_normal(acting_table, default_broker(), "TestTopic", "TestTopic1", channel="c")
    acting_table.apply(ChannelDestroyed("c"))
    assert acting_table.pickup_topic_route("TestTopic") is None
    assert acting_table.pickup_topic_route("TestTopic1") is None
    register_normal(acting_table, default_broker(acting=False), "TestTopic", channel="m")
    register_normal(acting_table, slave_broker(acting=False), "TestTopic", channel="s")
    assert set(addrs_of(acting_table.pickup_topic_route("TestTopic"), DEFAULT_BROKER)) == {0, 1}
    acting_table.apply(ChannelDestroyed("m"))
    assert addrs_of(acting_table.pickup_topic_route("TestTopic"), DEFAULT_BROKER) == {1: SLAVE_ADDR}
    acting_table.apply(ChannelDestroyed("s"))
    assert acting_table.pickup_topic_route("TestTopic") is None


def test_on_channel_destroy_by_broker_info_unregisters_that_broker(
    acting_table: RouteTable,
) -> None:
    """onChannelDestroyByBrokerInfo: the (cluster, addr) form is what expiry uses."""
    register_normal(acting_table, default_broker(), "TestTopic", "TestTopic1")
    acting_table.apply(ExpireBrokers(now_ms=NOW_MS + 120_001))
    assert acting_table.pickup_topic_route("TestTopic") is None
    assert acting_table.pickup_topic_route("TestTopic1") is None


def test_switch_broker_role_after_the_master_channel_closes(acting_table: RouteTable) -> None:
    """switchBrokerRole_ChannelDestroy."""
    _switch_roles(acting_table, lambda: acting_table.apply(ChannelDestroyed("master-channel")))


def test_keep_topic_with_broker_registration_by_default(acting_table: RouteTable) -> None:
    """keepTopicWithBrokerRegistration."""
    register_normal(acting_table, default_broker(), "TestTopic", "TestTopic1")
    register_normal(acting_table, default_broker(), "TestTopic1")
    assert acting_table.pickup_topic_route("TestTopic") is not None
    assert acting_table.pickup_topic_route("TestTopic1") is not None


def test_delete_topic_with_broker_registration_drops_unlisted_topics(
    delete_with_registration: RouteTable,
) -> None:
    """deleteTopicWithBrokerRegistration."""
    table = delete_with_registration
    register_normal(table, default_broker(), "TestTopic", "TestTopic1")
    register_normal(table, default_broker(), "TestTopic1")
    assert table.pickup_topic_route("TestTopic") is None
    assert table.pickup_topic_route("TestTopic1") is not None


def test_delete_topic_with_broker_registration_only_drops_that_brokers_queues(
    delete_with_registration: RouteTable,
) -> None:
    """deleteTopicWithBrokerRegistration2."""
    table = delete_with_registration
    master2 = dataclasses.replace(default_broker(), name=BROKER1, addr=BROKER1_ADDR)
    register_normal(table, default_broker(), "TestTopic", "TestTopic1")
    register_normal(table, master2, "TestTopic", "TestTopic1")
    for topic in ("TestTopic", "TestTopic1"):
        route = table.pickup_topic_route(topic)
        assert route is not None and len(route.broker_datas) == 2
    register_normal(table, default_broker(), "TestTopic1")
    route = table.pickup_topic_route("TestTopic")
    assert route is not None and [bd.broker_name for bd in route.broker_datas] == [BROKER1]
    route1 = table.pickup_topic_route("TestTopic1")
    assert route1 is not None and len(route1.broker_datas) == 2
    register_normal(table, master2, "TestTopic1")
    assert table.pickup_topic_route("TestTopic") is None
    route1 = table.pickup_topic_route("TestTopic1")
    assert route1 is not None and len(route1.broker_datas) == 2


def test_register_single_topic_with_broker_registration(
    delete_with_registration: RouteTable,
) -> None:
    """registerSingleTopicWithBrokerRegistration, steps 1-7."""
    table = delete_with_registration
    register_topic(table, "TestTopic", queue(DEFAULT_BROKER))
    assert table.pickup_topic_route("TestTopic") is None
    register_normal(table, default_broker(), "TestTopic")
    assert table.pickup_topic_route("TestTopic") is not None
    register_topic(table, "TestTopic1", queue(DEFAULT_BROKER))
    assert table.pickup_topic_route("TestTopic1") is not None
    register_normal(table, default_broker(), "TestTopic", "TestTopic1")
    assert table.pickup_topic_route("TestTopic") is not None
    assert table.pickup_topic_route("TestTopic1") is not None
    register_normal(table, default_broker(), "TestTopic")
    assert table.pickup_topic_route("TestTopic1") is None
    register_topic(table, "TestTopic1", queue(DEFAULT_BROKER))
    assert table.pickup_topic_route("TestTopic1") is not None
    unregister_info(table, default_broker())
    assert table.pickup_topic_route("TestTopic") is None
    assert table.pickup_topic_route("TestTopic1") is None
