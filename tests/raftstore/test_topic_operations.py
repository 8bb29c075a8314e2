"""DELETE_TOPIC, REGISTER_TOPIC and the write-permission commands.

Upstream: the topic and permission operations of ``RouteInfoManager``."""

from __future__ import annotations

from raftstore.commands import (
    AddWritePerm,
    DeleteTopic,
    UnregisterBrokers,
    UnregisterRequest,
    WipeWritePerm,
)
from raftstore.results import PermOutcome
from raftstore.route_table import RouteTable
from remoting.model import (
    TOPIC_SYS_FLAG_UNIT,
    TOPIC_SYS_FLAG_UNIT_SUB,
    QueueData,
    TopicQueueMappingInfo,
)
from tests.raftstore.cast import (
    ADDR_A0,
    ADDR_B0,
    BROKER_A,
    BROKER_B,
    OTHER_CLUSTER,
    queue,
    register,
    register_topic,
    topics,
)


def two_clusters(table: RouteTable) -> RouteTable:
    register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=topics("T", "U"))
    register(
        table,
        addr=ADDR_B0,
        name=BROKER_B,
        broker_id=0,
        topic_table=topics("T", "U"),
        cluster=OTHER_CLUSTER,
    )
    return table


def test_deleting_a_topic_in_an_unknown_cluster_changes_nothing(table: RouteTable) -> None:
    two_clusters(table)
    assert table.apply(DeleteTopic("T", "NoSuchCluster")).changes.empty
    route = table.pickup_topic_route("T")
    assert route is not None and len(route.queue_datas) == 2


def test_a_blank_cluster_name_deletes_the_whole_topic(table: RouteTable) -> None:
    two_clusters(table)
    result = table.apply(DeleteTopic("T", "  "))
    assert result.changes.topics == {"T"} and table.pickup_topic_route("T") is None


def test_deleting_a_topic_keeps_its_static_mapping(table: RouteTable) -> None:
    info = TopicQueueMappingInfo(topic="T", bname=BROKER_A)
    register(
        table,
        addr=ADDR_A0,
        name=BROKER_A,
        broker_id=0,
        topic_table=topics("T", "U"),
        mappings={"T": info},
    )
    table.apply(DeleteTopic("T"))
    assert table.topic_queue_mapping_infos() == {"T": {BROKER_A: info}}


def test_register_topic_of_an_unknown_broker_stores_nothing_for_a_new_topic(
    table: RouteTable,
) -> None:
    two_clusters(table)
    result = register_topic(table, "New", queue(BROKER_A), queue("ghost"), queue(BROKER_B))
    assert result.changes.empty and table.pickup_topic_route("New") is None


def test_register_topic_keeps_queues_before_an_unknown_broker_of_an_existing_topic(
    table: RouteTable,
) -> None:
    two_clusters(table)
    register_topic(table, "T", queue(BROKER_A, perm=4), queue("ghost"), queue(BROKER_B, perm=4))
    queues = table.topic_queue_table()["T"]
    assert (queues[BROKER_A].perm, queues[BROKER_B].perm) == (4, 6)


def test_register_topic_with_no_queues_is_a_no_op(table: RouteTable) -> None:
    two_clusters(table)
    assert register_topic(table, "T").changes.empty


def test_a_route_needs_a_known_broker(table: RouteTable) -> None:
    register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=topics("T", "U"))
    table.apply(UnregisterBrokers((UnregisterRequest("DefaultCluster", ADDR_A0, BROKER_A, 0),)))
    assert table.all_topic_list().topic_list == []


def test_add_write_perm_sets_exactly_read_and_write(table: RouteTable) -> None:
    register(
        table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=topics("T", "U", perm=4 | 8)
    )
    result = table.apply(AddWritePerm(BROKER_A))
    assert result.outcome == PermOutcome(topic_count=2)
    assert {q[BROKER_A].perm for q in table.topic_queue_table().values()} == {6}


def test_perm_commands_on_an_unknown_broker_count_zero(table: RouteTable) -> None:
    for command in (WipeWritePerm("nobody"), AddWritePerm("nobody")):
        result = table.apply(command)
        assert result.outcome == PermOutcome(topic_count=0) and result.changes.empty


def test_unit_flags_select_topics_by_their_first_queue(table: RouteTable) -> None:
    register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=topics("T", "U"))
    register_topic(table, "T", QueueData(BROKER_A, 8, 8, 6, topic_sys_flag=TOPIC_SYS_FLAG_UNIT))
    register_topic(table, "U", QueueData(BROKER_A, 8, 8, 6, topic_sys_flag=TOPIC_SYS_FLAG_UNIT_SUB))
    assert table.unit_topic_list().topic_list == ["T"]
    assert table.has_unit_sub_topic_list().topic_list == ["U"]
    assert table.has_unit_sub_ununit_topic_list().topic_list == ["U"]
