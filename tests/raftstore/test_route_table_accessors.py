"""Per-key reads of the route table: equal to the matching entry of the whole-table reads.

The projection reads only the keys a command changed through these accessors,
so each must give exactly what the whole-table copy holds for that key, and an
empty or None answer for a key the table does not hold.
"""

from __future__ import annotations

from raftstore.commands import DeleteTopic, UnregisterBrokers, UnregisterRequest
from raftstore.results import BrokerAddrInfo
from raftstore.route_table import RouteTable
from tests.raftstore.cast import ADDR_A0, ADDR_A1, BROKER_A, DEFAULT_CLUSTER, register, topics
from tests.raftstore.test_snapshot_and_digest import populated

ADDR_B0 = "127.0.0.1:10931"
BROKER_B = "broker-b"


def table_with_two_groups() -> RouteTable:
    """The snapshot tests' populated table plus a second group sharing topic T."""
    table = populated(RouteTable())
    register(table, addr=ADDR_B0, name=BROKER_B, broker_id=0, topic_table=topics("T", "W"))
    return table


def assert_accessors_match_whole_table(table: RouteTable) -> None:
    """Every key of every whole-table read, through its per-key accessor."""
    queues = table.topic_queue_table()
    mappings = table.topic_queue_mapping_infos()
    info = table.cluster_info()
    filters = table.filter_servers()
    for topic in set(queues) | set(mappings) | {"no-such-topic"}:
        assert table.topic_queues(topic) == queues.get(topic, {})
        assert list(table.topic_queues(topic)) == sorted(queues.get(topic, {}))
        assert table.topic_queue_mapping(topic) == mappings.get(topic, {})
    for name in set(info.broker_addr_table) | {"no-such-broker"}:
        assert table.broker_data(name) == info.broker_addr_table.get(name)
    for cluster in set(info.cluster_addr_table) | {"no-such-cluster"}:
        assert table.cluster_members(cluster) == info.cluster_addr_table.get(cluster)
    live_keys = {BrokerAddrInfo(v.cluster_name, v.broker_addr) for v in table.live_brokers()}
    for key in live_keys | set(filters) | {BrokerAddrInfo("nowhere", "0.0.0.0:1")}:
        assert table.broker_filter_servers(key.cluster_name, key.broker_addr) == filters.get(key)


def test_per_key_reads_equal_the_whole_table_reads() -> None:
    table = table_with_two_groups()
    assert table.topic_queues("T").keys() == {BROKER_A, BROKER_B}
    assert table.topic_queue_mapping("T")  # the populated table maps T
    assert table.broker_filter_servers(DEFAULT_CLUSTER, ADDR_A0) == ("f:1", "f:2")
    assert_accessors_match_whole_table(table)


def test_per_key_reads_follow_deletes_and_unregistrations() -> None:
    table = table_with_two_groups()
    table.apply(DeleteTopic("T", None))
    table.apply(
        UnregisterBrokers(
            (
                UnregisterRequest(DEFAULT_CLUSTER, ADDR_A0, BROKER_A, 0),
                UnregisterRequest("Other", ADDR_A1, BROKER_A, 1),
            )
        )
    )
    assert table.topic_queues("T") == {}
    assert table.broker_data(BROKER_A) is None
    assert table.broker_filter_servers(DEFAULT_CLUSTER, ADDR_A0) is None
    assert_accessors_match_whole_table(table)


def test_per_key_reads_are_copies() -> None:
    """Changing what an accessor returned leaves the table alone."""
    table = table_with_two_groups()
    digest = table.digest()
    table.topic_queues("T").clear()
    table.topic_queue_mapping("T").clear()
    data = table.broker_data(BROKER_A)
    assert data is not None
    data.broker_addrs.clear()
    members = table.cluster_members(DEFAULT_CLUSTER)
    assert members is not None
    members.clear()
    assert table.digest() == digest
    assert_accessors_match_whole_table(table)
