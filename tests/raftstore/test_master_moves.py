"""The change set names a master that moved: the console and the gateway log say so."""

from __future__ import annotations

from raftstore.commands import BrokerHeartbeat, ExpireBrokers, RegisterBroker
from raftstore.results import MasterMove, Replication
from raftstore.route_table import RouteTable
from tests.raftstore.cast import (
    ADDR_A0,
    ADDR_A1,
    BROKER_A,
    DEFAULT_CLUSTER,
    NOW_MS,
    register,
    topics,
    unregister,
    wrapper,
)

NEW_HOME = "127.0.0.1:10951"
TABLE = topics("TopicTest", "Other")


def test_a_master_registered_at_another_address_is_a_move() -> None:
    table = RouteTable()
    first = register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=TABLE)

    moved = register(table, addr=NEW_HOME, name=BROKER_A, broker_id=0, topic_table=TABLE)

    assert first.changes.master_moves == ()
    assert moved.changes.master_moves == (MasterMove(DEFAULT_CLUSTER, BROKER_A, ADDR_A0, NEW_HOME),)
    assert BROKER_A in moved.changes.broker_names


def test_a_master_appearing_going_or_staying_is_no_move() -> None:
    table = RouteTable()
    register(table, addr=ADDR_A1, name=BROKER_A, broker_id=1, topic_table=TABLE)

    appeared = register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=TABLE)
    again = register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=TABLE)
    slave_moved = register(table, addr=NEW_HOME, name=BROKER_A, broker_id=1, topic_table=TABLE)
    gone = unregister(table, (DEFAULT_CLUSTER, ADDR_A0, BROKER_A, 0))

    for result in (appeared, again, slave_moved, gone):
        assert result.changes.master_moves == ()


def test_a_raft_failover_promotion_is_a_move() -> None:
    table = RouteTable()
    # The master reports slave 1's HA link (127.0.0.1:51001) at 4,900; slave 1 its link.
    reports = (
        Replication(slave_acks=(("127.0.0.1:51001", 4_900),)),
        Replication(client_addr="127.0.0.1:51001"),
    )
    for addr, broker_id, offset, report in (
        (ADDR_A0, 0, 5_000, reports[0]),
        (ADDR_A1, 1, 4_900, reports[1]),
    ):
        table.apply(
            RegisterBroker(
                cluster_name=DEFAULT_CLUSTER,
                broker_addr=addr,
                broker_name=BROKER_A,
                broker_id=broker_id,
                ha_server_addr="",
                now_ms=NOW_MS,
                topic_config_wrapper=wrapper(TABLE),
                heartbeat_timeout_ms=3_000,
                max_offset=offset,
                enable_raft_failover=True,
                replication=report,
            )
        )
    later_ms = NOW_MS + 3_001
    table.apply(BrokerHeartbeat(DEFAULT_CLUSTER, ADDR_A1, later_ms, 4_900, 4_900))

    result = table.apply(ExpireBrokers(later_ms + 1, 0, 1_000))

    assert result.changes.master_moves == (MasterMove(DEFAULT_CLUSTER, BROKER_A, ADDR_A0, ADDR_A1),)
