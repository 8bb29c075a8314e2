"""REGISTER_BROKER rules of RocketMQ 5.x beyond the ported upstream tests.

Upstream: ``RouteInfoManager.registerBroker``."""

from __future__ import annotations

import pytest

from raftstore.config import NamesrvConfig
from raftstore.results import BrokerAddrInfo, MinBrokerIdChange, RegisterBrokerOutcome
from raftstore.route_table import RouteTable
from raftstore.tables import Tables
from remoting.model import DataVersion, TopicQueueMappingInfo
from tests.raftstore.cast import (
    ADDR_A0,
    ADDR_A1,
    ADDR_B0,
    BROKER_A,
    BROKER_B,
    DEFAULT_CLUSTER,
    DV1,
    HA_A0,
    HA_A1,
    NOW_MS,
    register,
    register_outcome,
    topics,
    unregister,
)

KEY_A0 = BrokerAddrInfo(DEFAULT_CLUSTER, ADDR_A0)
KEY_A1 = BrokerAddrInfo(DEFAULT_CLUSTER, ADDR_A1)


def test_a_new_broker_with_exactly_one_topic_fails_but_keeps_its_cluster_entry(
    table: RouteTable,
) -> None:
    outcome = register_outcome(
        table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=topics("T")
    )
    assert outcome == RegisterBrokerOutcome(failed=True)
    assert table.cluster_info().cluster_addr_table == {DEFAULT_CLUSTER: [BROKER_A]}
    assert table.broker_datas()[BROKER_A].broker_addrs == {}
    assert table.live_brokers() == [] and table.pickup_topic_route("T") is None


def test_a_known_broker_may_register_a_single_topic(table: RouteTable) -> None:
    register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=topics("T", "U"))
    outcome = register_outcome(
        table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=topics("V")
    )
    assert not outcome.failed and table.pickup_topic_route("V") is not None


def test_a_stale_state_version_is_rejected_and_loses_its_live_entry(table: RouteTable) -> None:
    newer = DataVersion(state_version=5, timestamp=NOW_MS, counter=1)
    register(
        table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=topics("T", "U"), dv=newer
    )
    register(table, addr=ADDR_A1, name=BROKER_A, broker_id=1, topic_table=topics("T", "U"))
    outcome = register_outcome(
        table, addr=ADDR_A1, name=BROKER_A, broker_id=0, topic_table=topics("T", "U"), ha=HA_A1
    )
    assert outcome == RegisterBrokerOutcome()
    assert table.live_broker(DEFAULT_CLUSTER, ADDR_A1) is None
    # Step 5 ran before the rejection: the address left id 1 and id 0 is unchanged.
    assert table.broker_datas()[BROKER_A].broker_addrs == {0: ADDR_A0}


def test_a_slave_learns_its_masters_addresses_when_the_master_is_live(table: RouteTable) -> None:
    register(
        table, addr=ADDR_A0, name=BROKER_A, broker_id=0, ha=HA_A0, topic_table=topics("T", "U")
    )
    outcome = register_outcome(table, addr=ADDR_A1, name=BROKER_A, broker_id=1, ha=HA_A1)
    assert (outcome.master_addr, outcome.ha_server_addr) == (ADDR_A0, HA_A0)


def test_a_slave_gets_no_master_when_the_master_is_live_only_in_another_cluster(
    table: RouteTable,
) -> None:
    register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, ha=HA_A0, cluster="Elsewhere")
    outcome = register_outcome(table, addr=ADDR_A1, name=BROKER_A, broker_id=1, ha=HA_A1)
    assert (outcome.master_addr, outcome.ha_server_addr) == (None, None)


def test_an_old_version_slave_never_writes_topics(table: RouteTable) -> None:
    register(
        table, addr=ADDR_A1, name=BROKER_A, broker_id=1, topic_table=topics("T", "U"), acting=None
    )
    assert table.pickup_topic_route("T") is None
    register(
        table, addr=ADDR_B0, name=BROKER_B, broker_id=1, topic_table=topics("T", "U"), acting=False
    )
    route = table.pickup_topic_route("T")
    assert route is not None and [qd.broker_name for qd in route.queue_datas] == [BROKER_B]


def test_an_unchanged_registration_rewrites_no_topic(
    table: RouteTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    many = topics(*(f"T{i}" for i in range(500)))
    register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=many)
    calls: list[str] = []
    original = Tables.put_queue

    def counting(self: Tables, topic: str, queue: object) -> bool:
        calls.append(topic)
        return original(self, topic, queue)  # type: ignore[arg-type]

    monkeypatch.setattr(Tables, "put_queue", counting)
    result = register(
        table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=many, now_ms=NOW_MS + 1
    )
    assert calls == []
    assert result.changes.topics == frozenset() and result.changes.live_brokers == {KEY_A0}
    assert not result.changes.affects_routes


def test_a_changed_data_version_rewrites_changed_topics_only(table: RouteTable) -> None:
    register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=topics("T", "U"))
    bumped = DataVersion(timestamp=NOW_MS + 1, counter=2)
    table_now = {**topics("T"), **topics("U", queues=4)}
    result = register(
        table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=table_now, dv=bumped
    )
    assert result.changes.topics == frozenset({"U"})


def test_filter_servers_are_stored_kept_and_removed(table: RouteTable) -> None:
    register(
        table,
        addr=ADDR_A0,
        name=BROKER_A,
        broker_id=0,
        topic_table=topics("T", "U"),
        filter_servers=["f:1"],
    )
    route = table.pickup_topic_route("T")
    assert route is not None and route.filter_server_table == {ADDR_A0: ["f:1"]}
    register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, filter_servers=None)
    assert table.filter_servers() == {KEY_A0: ("f:1",)}
    register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, filter_servers=[])
    assert table.filter_servers() == {}


def test_static_topic_mappings_appear_in_the_route(table: RouteTable) -> None:
    info = TopicQueueMappingInfo(
        topic="T", total_queues=4, bname=BROKER_A, epoch=1, curr_id_map={0: 0}
    )
    register(
        table,
        addr=ADDR_A0,
        name=BROKER_A,
        broker_id=0,
        topic_table=topics("T", "U"),
        mappings={"T": info},
    )
    route = table.pickup_topic_route("T")
    assert route is not None and route.topic_queue_mapping_by_broker == {BROKER_A: info}
    assert table.topic_queue_mapping_infos() == {"T": {BROKER_A: info}}


def test_a_lower_broker_id_notifies_the_other_members_when_enabled() -> None:
    table = RouteTable(NamesrvConfig(notify_min_broker_id_changed=True))
    register(
        table, addr=ADDR_A1, name=BROKER_A, broker_id=1, topic_table=topics("T", "U"), acting=True
    )
    result = register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, ha=HA_A0, acting=True)
    assert result.notifications == (
        MinBrokerIdChange(BROKER_A, 0, ADDR_A0, None, HA_A0, targets=(ADDR_A1,)),
    )


def test_losing_the_minimum_id_notifies_acting_groups_only() -> None:
    for acting in (False, True):
        table = RouteTable(NamesrvConfig(notify_min_broker_id_changed=True))
        register(
            table,
            addr=ADDR_A0,
            name=BROKER_A,
            broker_id=0,
            topic_table=topics("T", "U"),
            acting=acting,
        )
        register(table, addr=ADDR_A1, name=BROKER_A, broker_id=1, acting=acting)
        result = unregister(table, (DEFAULT_CLUSTER, ADDR_A0, BROKER_A, 0))
        expected = (MinBrokerIdChange(BROKER_A, 1, ADDR_A1, ADDR_A0, None, targets=(ADDR_A1,)),)
        assert result.notifications == (expected if acting else ())


def test_no_notification_without_the_config_switch(acting_table: RouteTable) -> None:
    register(
        acting_table,
        addr=ADDR_A1,
        name=BROKER_A,
        broker_id=1,
        topic_table=topics("T", "U"),
        acting=True,
    )
    result = register(acting_table, addr=ADDR_A0, name=BROKER_A, broker_id=0, acting=True)
    assert result.notifications == ()


def test_the_live_entry_records_timeout_version_channel_and_ha_address(table: RouteTable) -> None:
    register(
        table, addr=ADDR_A0, name=BROKER_A, broker_id=0, ha=HA_A0, timeout_ms=10_000, channel="c"
    )
    live = table.live_broker(DEFAULT_CLUSTER, ADDR_A0)
    assert live is not None
    assert (live.heartbeat_timeout_ms, live.data_version, live.channel, live.ha_server_addr) == (
        10_000,
        DV1,
        "c",
        HA_A0,
    )
    register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, now_ms=NOW_MS - 5_000)
    live = table.live_broker(DEFAULT_CLUSTER, ADDR_A0)
    assert live is not None and live.last_update_ms == NOW_MS
    assert live.heartbeat_timeout_ms == 120_000


def test_the_same_address_in_two_clusters_has_two_live_entries(table: RouteTable) -> None:
    register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0)
    register(table, addr=ADDR_A0, name=BROKER_B, broker_id=0, cluster="Other")
    assert [(v.cluster_name, v.broker_addr) for v in table.live_brokers()] == [
        (DEFAULT_CLUSTER, ADDR_A0),
        ("Other", ADDR_A0),
    ]
    assert KEY_A1 not in {v.key for v in table.live_brokers()}


def test_topics_of_one_shape_share_one_queue_data(table: RouteTable) -> None:
    """A broker's thousands of topics mostly have a handful of queue shapes: the table
    keeps one frozen QueueData per shape and registration, not one per topic."""
    table_of = {
        **topics(*(f"T{i}" for i in range(1000))),
        **topics(*(f"R{i}" for i in range(500)), queues=4, perm=4),
    }
    register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=table_of)
    queues = [table.topic_queues(t)[BROKER_A] for t in table_of]
    assert len({id(q) for q in queues}) == 2
    assert table.topic_queues("T7")[BROKER_A].write_queue_nums == 8
    assert table.topic_queues("R7")[BROKER_A].perm == 4
