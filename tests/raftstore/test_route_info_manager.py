"""Ports of upstream ``routeinfo/RouteInfoManagerTest`` (12 tests, RocketMQ 5.x).

The upstream ``@Before`` registers default-broker as id 1234 of default-cluster
through the 10-argument overload (a new-version broker, so id 1234 is a prime
slave and its topics are routed). Tests that replace the topic table by
reflection build the same state through commands instead.
"""

from __future__ import annotations

import pytest

from raftstore.commands import AddWritePerm, WipeWritePerm
from raftstore.results import PermOutcome, RegisterBrokerOutcome
from raftstore.route_table import RouteTable
from remoting.model import DataVersion, TopicConfig
from tests.raftstore.cast import perm_of, queue, register, register_topic, unregister

CLUSTER = "default-cluster"
BROKER = "default-broker"
ADDR = "127.0.0.1:10911"
BROKER_ID = 1234
DV_10_100 = DataVersion(timestamp=100, counter=10)
DV_20_200 = DataVersion(timestamp=200, counter=20)


def register_default(table: RouteTable) -> RegisterBrokerOutcome:
    """``testRegisterBroker`` as the upstream @Before runs it."""
    result = register(
        table,
        cluster=CLUSTER,
        addr=ADDR,
        name=BROKER,
        broker_id=BROKER_ID,
        ha="127.0.0.1:1001",
        topic_table={n: TopicConfig(topic_name=n) for n in ("unit-test0", "unit-test1")},
        dv=DV_10_100,
    )
    assert isinstance(result.outcome, RegisterBrokerOutcome)
    return result.outcome


@pytest.fixture
def rim(table: RouteTable) -> RouteTable:
    """The table after the upstream @Before."""
    register_default(table)
    return table


def single_topic_table(table: RouteTable, perm: int) -> RouteTable:
    """``{topic-a: {broker-a: perm}}`` built through commands (upstream uses reflection)."""
    register(table, cluster=CLUSTER, addr="127.0.0.1:10999", name="broker-a", broker_id=0)
    register_topic(table, "topic-a", queue("broker-a", perm=perm))
    return table


def test_get_all_cluster_info_holds_the_registered_broker(rim: RouteTable) -> None:
    """testGetAllClusterInfo."""
    info = rim.cluster_info()
    assert info.cluster_addr_table == {CLUSTER: [BROKER]}
    assert info.broker_addr_table[BROKER].broker_addrs == {BROKER_ID: ADDR}


def test_query_broker_topic_config_is_keyed_by_cluster_and_address(rim: RouteTable) -> None:
    """testQueryBrokerTopicConfig: the same address in two clusters has two live entries."""
    assert rim.query_broker_data_version(CLUSTER, ADDR) == DV_10_100
    result = register(
        rim,
        cluster="default-cluster-1",
        addr=ADDR,
        name="default-broker-1",
        broker_id=BROKER_ID,
        ha="127.0.0.1:1001",
        topic_table={n: TopicConfig(topic_name=n) for n in ("unit-test-0", "unit-test-1")},
        dv=DV_20_200,
    )
    assert isinstance(result.outcome, RegisterBrokerOutcome) and not result.outcome.failed
    assert rim.query_broker_data_version(CLUSTER, ADDR) != DV_20_200
    assert rim.query_broker_data_version("default-cluster-1", ADDR) == DV_20_200
    unregister(rim, ("default-cluster-1", ADDR, "default-broker-1", BROKER_ID))
    assert rim.query_broker_data_version(CLUSTER, ADDR) is not None
    assert rim.query_broker_data_version("default-cluster-1", ADDR) is None


def test_get_all_topic_list_holds_the_prime_slaves_topics(rim: RouteTable) -> None:
    """testGetAllTopicList."""
    assert rim.all_topic_list().topic_list == ["unit-test0", "unit-test1"]


def test_register_broker_succeeds(table: RouteTable) -> None:
    """testRegisterBroker: a non-null result (here: not the failed outcome)."""
    assert register_default(table) == RegisterBrokerOutcome()


def test_wipe_write_perm_of_broker_by_lock_counts_and_wipes(table: RouteTable) -> None:
    """testWipeWritePermOfBrokerByLock: perm 6 -> 4, one topic."""
    single_topic_table(table, perm=6)
    assert table.apply(WipeWritePerm("broker-a")).outcome == PermOutcome(topic_count=1)
    assert perm_of(table.pickup_topic_route("topic-a"), "broker-a") == 4


def test_pickup_topic_route_data_of_an_unknown_topic_is_none(rim: RouteTable) -> None:
    """testPickupTopicRouteData."""
    assert rim.pickup_topic_route("unit_test") is None


def test_get_system_topic_list_names_clusters_and_brokers(rim: RouteTable) -> None:
    """testGetSystemTopicList."""
    answer = rim.system_topic_list()
    assert answer.topic_list == [BROKER, CLUSTER]
    assert answer.broker_addr == ADDR


def test_get_topics_by_cluster_lists_the_clusters_topics(rim: RouteTable) -> None:
    """testGetTopicsByCluster."""
    assert rim.topics_by_cluster(CLUSTER).topic_list == ["unit-test0", "unit-test1"]


def test_get_unit_topics_is_empty_without_unit_flags(rim: RouteTable) -> None:
    """testGetUnitTopics."""
    assert rim.unit_topic_list().topic_list == []


def test_get_has_unit_sub_topic_list_is_empty_without_unit_flags(rim: RouteTable) -> None:
    """testGetHasUnitSubTopicList."""
    assert rim.has_unit_sub_topic_list().topic_list == []


def test_get_has_unit_sub_ununit_topic_list_is_empty_without_unit_flags(rim: RouteTable) -> None:
    """testGetHasUnitSubUnUnitTopicList."""
    assert rim.has_unit_sub_ununit_topic_list().topic_list == []


def test_add_write_perm_of_broker_by_lock_restores_read_write(table: RouteTable) -> None:
    """testAddWritePermOfBrokerByLock: perm 4 -> 6, one topic."""
    single_topic_table(table, perm=4)
    assert table.apply(AddWritePerm("broker-a")).outcome == PermOutcome(topic_count=1)
    assert perm_of(table.pickup_topic_route("topic-a"), "broker-a") == 6
