"""Ports of upstream ``routeinfo/RouteInfoManagerStaticRegisterTest`` (9 tests).

The cluster is 3 broker names x ids 0-2 x topics topic-0..9, registered as
new-version brokers with the default config, so only id 0 writes topics.
"""

from __future__ import annotations

from raftstore.commands import DeleteTopic
from raftstore.route_table import RouteTable
from remoting.model import BrokerData
from tests.raftstore.cast import (
    STATIC_CLUSTER,
    STATIC_IDS,
    STATIC_NAMES,
    STATIC_TOPICS,
    static_addr,
)

NAMES = [f"broker-{i}" for i in range(STATIC_NAMES)]
TOPICS = sorted(f"topic-{i}" for i in range(STATIC_TOPICS))


def test_get_all_cluster_info_has_one_cluster_of_three_names(static_table: RouteTable) -> None:
    """testGetAllClusterInfo."""
    info = static_table.cluster_info()
    assert info.cluster_addr_table == {STATIC_CLUSTER: NAMES}


def test_get_all_topic_list_is_exactly_the_ten_topics(static_table: RouteTable) -> None:
    """testGetAllTopicList."""
    assert static_table.all_topic_list().topic_list == TOPICS


def test_get_topics_by_cluster_is_exactly_the_ten_topics(static_table: RouteTable) -> None:
    """testGetTopicsByCluster."""
    assert static_table.topics_by_cluster(STATIC_CLUSTER).topic_list == TOPICS


def test_pickup_topic_route_data_lists_all_three_groups(static_table: RouteTable) -> None:
    """testPickupTopicRouteData."""
    route = static_table.pickup_topic_route("topic-0")
    assert route is not None
    expected = [
        BrokerData(STATIC_CLUSTER, f"broker-{i}", {b: static_addr(i, b) for b in range(STATIC_IDS)})
        for i in range(STATIC_NAMES)
    ]
    got = sorted(route.broker_datas, key=lambda bd: bd.broker_name)
    assert [(bd.broker_name, bd.broker_addrs) for bd in got] == [
        (bd.broker_name, bd.broker_addrs) for bd in expected
    ]
    for qd in route.queue_datas:
        assert (qd.write_queue_nums, qd.read_queue_nums, qd.perm, qd.topic_sys_flag) == (8, 8, 6, 0)
    assert sorted(qd.broker_name for qd in route.queue_datas) == NAMES


def test_delete_topic_removes_its_route(static_table: RouteTable) -> None:
    """testDeleteTopic."""
    static_table.apply(DeleteTopic("topic-0"))
    assert static_table.pickup_topic_route("topic-0") is None


def test_get_system_topic_list_names_the_cluster_and_its_brokers(static_table: RouteTable) -> None:
    """testGetSystemTopicList."""
    answer = static_table.system_topic_list()
    assert answer.topic_list == sorted([STATIC_CLUSTER, *NAMES])
    assert answer.broker_addr == static_addr(0, 0)


def test_get_unit_topics_answers_an_empty_list(static_table: RouteTable) -> None:
    """testGetUnitTopics."""
    assert static_table.unit_topic_list().topic_list == []


def test_get_has_unit_sub_topic_list_answers_an_empty_list(static_table: RouteTable) -> None:
    """testGetHasUnitSubTopicList."""
    assert static_table.has_unit_sub_topic_list().topic_list == []


def test_get_has_unit_sub_ununit_topic_list_answers_an_empty_list(static_table: RouteTable) -> None:
    """testGetHasUnitSubUnUnitTopicList."""
    assert static_table.has_unit_sub_ununit_topic_list().topic_list == []
