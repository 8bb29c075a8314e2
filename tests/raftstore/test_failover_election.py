"""Raft failover: ExpireBrokers elects the best in-sync slave of an opted-in group.

The cast: broker-a in DefaultCluster with a master (id 0) and two slaves (ids 1
and 2), all registered with ``enable_raft_failover``, 3 s heartbeat timeouts. The
master reports each slave's HA connection and the offset it acknowledged; each slave
reports its own HA connection's address (``Replication``).
"""

from __future__ import annotations

from raftstore.commands import BrokerHeartbeat, ExpireBrokers, RegisterBroker
from raftstore.failover import DEFAULT_FAILOVER_LAG_BYTES_MAX
from raftstore.results import ExpireOutcome, RegisterBrokerOutcome, Replication
from raftstore.route_table import RouteTable
from raftstore.snapshot import MAGIC
from tests.raftstore.cast import (
    ADDR_A0,
    ADDR_A1,
    BROKER_A,
    DEFAULT_CLUSTER,
    HA_A0,
    HA_A1,
    NOW_MS,
    addrs_of,
    perm_of,
    topics,
    wrapper,
)

ADDR_A2 = "127.0.0.1:10941"
HA_A2 = "127.0.0.1:10942"
LINK_A1 = "127.0.0.1:51001"
"""The local address of slave 1's HA connection, as the master sees its peer."""
LINK_A2 = "127.0.0.1:51002"
FORGER = "127.0.0.1:1"
TIMEOUT_MS = 3_000
LAG_MAX_BYTES = 1_000
AFTER_TIMEOUT_MS = NOW_MS + TIMEOUT_MS + 1
TOPIC = "TopicTest"


def join(
    table: RouteTable,
    addr: str,
    broker_id: int,
    ha: str,
    *,
    max_offset: int | None,
    confirm_offset: int | None = None,
    failover: bool | None = True,
    now_ms: int = NOW_MS,
    replication: Replication | None = None,
) -> RegisterBrokerOutcome:
    """Register one member of broker-a with its offsets."""
    result = table.apply(
        RegisterBroker(
            cluster_name=DEFAULT_CLUSTER,
            broker_addr=addr,
            broker_name=BROKER_A,
            broker_id=broker_id,
            ha_server_addr=ha,
            now_ms=now_ms,
            topic_config_wrapper=wrapper(topics(TOPIC, "Other")),
            heartbeat_timeout_ms=TIMEOUT_MS,
            enable_acting_master=False,
            max_offset=max_offset,
            confirm_offset=confirm_offset,
            enable_raft_failover=failover,
            replication=replication,
        )
    )
    assert isinstance(result.outcome, RegisterBrokerOutcome)
    return result.outcome


def heartbeat(table: RouteTable, addr: str, now_ms: int, max_offset: int | None = None) -> None:
    """A BROKER_HEARTBEAT carrying the broker's offset."""
    table.apply(BrokerHeartbeat(DEFAULT_CLUSTER, addr, now_ms, max_offset, max_offset))


def master_report(*acks: tuple[str, int]) -> Replication:
    return Replication(slave_acks=acks)


def link(addr: str) -> Replication:
    return Replication(client_addr=addr)


def group_of_three(
    slave1_offset: int, slave2_offset: int, master_offset: int = 5_000
) -> RouteTable:
    """broker-a: master plus two slaves, each acknowledged at the given offset."""
    table = RouteTable()
    report = master_report((LINK_A1, slave1_offset), (LINK_A2, slave2_offset))
    join(table, ADDR_A0, 0, HA_A0, max_offset=master_offset, replication=report)
    join(table, ADDR_A1, 1, HA_A1, max_offset=slave1_offset, replication=link(LINK_A1))
    join(table, ADDR_A2, 2, HA_A2, max_offset=slave2_offset, replication=link(LINK_A2))
    return table


def kill_master(table: RouteTable, lag_max: int | None = LAG_MAX_BYTES) -> ExpireOutcome:
    """The master falls silent: the slaves keep heartbeating, then the scan runs."""
    for addr in (ADDR_A1, ADDR_A2):
        heartbeat(table, addr, AFTER_TIMEOUT_MS)
    result = table.apply(ExpireBrokers(AFTER_TIMEOUT_MS + 1, 0, lag_max))
    assert isinstance(result.outcome, ExpireOutcome)
    return result.outcome


def test_it_elects_the_in_sync_slave_with_the_highest_acknowledged_offset() -> None:
    table = group_of_three(slave1_offset=4_500, slave2_offset=4_900)
    outcome = kill_master(table)
    assert [e.new_master_addr for e in outcome.elections] == [ADDR_A2]
    election = outcome.elections[0]
    assert (election.old_master_addr, election.previous_broker_id) == (ADDR_A0, 2)
    assert addrs_of(table.pickup_topic_route(TOPIC), BROKER_A) == {0: ADDR_A2, 1: ADDR_A1}


def test_a_forged_slave_reporting_any_offset_is_no_candidate() -> None:
    """Anyone white-listed can register a slave id with a huge confirmOffset; the master
    never saw it on its HA port, so it is not elected."""
    table = group_of_three(slave1_offset=4_500, slave2_offset=4_900)
    huge = 2**62
    join(table, FORGER, 7, FORGER, max_offset=huge, confirm_offset=huge, replication=link(FORGER))
    heartbeat(table, FORGER, AFTER_TIMEOUT_MS, max_offset=huge)
    assert [e.new_master_addr for e in kill_master(table).elections] == [ADDR_A2]


def test_a_forger_claiming_a_real_slaves_link_makes_neither_a_candidate() -> None:
    table = group_of_three(slave1_offset=4_500, slave2_offset=4_900)
    join(table, FORGER, 7, FORGER, max_offset=2**62, replication=link(LINK_A2))
    heartbeat(table, FORGER, AFTER_TIMEOUT_MS)
    assert [e.new_master_addr for e in kill_master(table).elections] == [ADDR_A1]


def test_a_master_that_reported_no_links_gets_no_successor() -> None:
    table = RouteTable()
    join(table, ADDR_A0, 0, HA_A0, max_offset=5_000)
    join(table, ADDR_A1, 1, HA_A1, max_offset=5_000, replication=link(LINK_A1))
    heartbeat(table, ADDR_A1, AFTER_TIMEOUT_MS)
    outcome = table.apply(ExpireBrokers(AFTER_TIMEOUT_MS + 1, 0, LAG_MAX_BYTES)).outcome
    assert isinstance(outcome, ExpireOutcome) and outcome.elections == ()


def test_a_slave_the_master_lost_is_dropped_from_its_next_report() -> None:
    table = group_of_three(slave1_offset=4_500, slave2_offset=4_900)
    table.apply(
        BrokerHeartbeat(
            DEFAULT_CLUSTER, ADDR_A0, NOW_MS + 1, 5_000, 5_000, master_report((LINK_A1, 4_600))
        )
    )
    assert [e.new_master_addr for e in kill_master(table).elections] == [ADDR_A1]


def test_the_elected_group_keeps_its_writable_topics() -> None:
    table = group_of_three(slave1_offset=4_500, slave2_offset=4_900)
    before = perm_of(table.pickup_topic_route(TOPIC), BROKER_A)
    kill_master(table)
    assert perm_of(table.pickup_topic_route(TOPIC), BROKER_A) == before


def test_equal_offsets_go_to_the_lowest_broker_id() -> None:
    table = group_of_three(slave1_offset=4_900, slave2_offset=4_900)
    assert [e.new_master_addr for e in kill_master(table).elections] == [ADDR_A1]


def test_a_slave_beyond_the_lag_bound_is_not_a_candidate() -> None:
    table = group_of_three(slave1_offset=4_500, slave2_offset=3_000)
    assert [e.new_master_addr for e in kill_master(table).elections] == [ADDR_A1]


def test_without_an_in_sync_slave_the_group_stays_masterless() -> None:
    table = group_of_three(slave1_offset=100, slave2_offset=200)
    outcome = kill_master(table)
    assert outcome.elections == ()
    assert addrs_of(table.pickup_topic_route(TOPIC), BROKER_A) == {1: ADDR_A1, 2: ADDR_A2}


def test_a_slave_expiring_in_the_same_scan_is_not_a_candidate() -> None:
    table = group_of_three(slave1_offset=4_900, slave2_offset=4_800)
    heartbeat(table, ADDR_A2, AFTER_TIMEOUT_MS)
    outcome = table.apply(ExpireBrokers(AFTER_TIMEOUT_MS + 1, 0, LAG_MAX_BYTES)).outcome
    assert isinstance(outcome, ExpireOutcome)
    assert [e.new_master_addr for e in outcome.elections] == [ADDR_A2]


def test_a_master_that_never_reported_an_offset_gets_no_successor() -> None:
    table = RouteTable()
    join(table, ADDR_A0, 0, HA_A0, max_offset=None, replication=master_report((LINK_A1, 10)))
    join(table, ADDR_A1, 1, HA_A1, max_offset=10, replication=link(LINK_A1))
    heartbeat(table, ADDR_A1, AFTER_TIMEOUT_MS)
    outcome = table.apply(ExpireBrokers(AFTER_TIMEOUT_MS + 1, 0, LAG_MAX_BYTES)).outcome
    assert isinstance(outcome, ExpireOutcome) and outcome.elections == ()


def test_eventual_mode_expiry_elects_nobody() -> None:
    table = group_of_three(slave1_offset=4_900, slave2_offset=4_900)
    outcome = kill_master(table, lag_max=None)
    assert outcome.elections == ()
    assert 0 not in addrs_of(table.pickup_topic_route(TOPIC), BROKER_A)


def test_a_group_that_did_not_opt_in_elects_nobody() -> None:
    table = RouteTable()
    join(table, ADDR_A0, 0, HA_A0, max_offset=10, failover=None)
    join(table, ADDR_A1, 1, HA_A1, max_offset=10, failover=None)
    assert kill_master(table).elections == ()


def test_the_group_is_told_its_new_master() -> None:
    table = group_of_three(slave1_offset=4_500, slave2_offset=4_900)
    for addr in (ADDR_A1, ADDR_A2):
        heartbeat(table, addr, AFTER_TIMEOUT_MS)
    result = table.apply(ExpireBrokers(AFTER_TIMEOUT_MS + 1, 0, LAG_MAX_BYTES))
    (note,) = result.notifications
    assert (note.min_broker_id, note.min_broker_addr) == (0, ADDR_A2)
    assert (note.offline_broker_addr, note.ha_broker_addr) == (ADDR_A0, HA_A2)
    assert set(note.targets) == {ADDR_A1, ADDR_A2}


def test_the_returning_old_master_is_told_to_be_a_slave() -> None:
    table = group_of_three(slave1_offset=4_500, slave2_offset=4_900)
    kill_master(table)
    back = join(table, ADDR_A0, 0, HA_A0, max_offset=5_000, now_ms=AFTER_TIMEOUT_MS + 2)
    assert (back.master_addr, back.ha_server_addr) == (ADDR_A2, HA_A2)
    assert back.assigned_broker_id == 2
    assert table.live_broker(DEFAULT_CLUSTER, ADDR_A0) is None
    as_slave = join(table, ADDR_A0, 2, HA_A0, max_offset=5_000, now_ms=AFTER_TIMEOUT_MS + 3)
    assert (as_slave.master_addr, as_slave.assigned_broker_id) == (ADDR_A2, None)
    expected = {0: ADDR_A2, 1: ADDR_A1, 2: ADDR_A0}
    assert addrs_of(table.pickup_topic_route(TOPIC), BROKER_A) == expected


def test_an_elected_slave_that_missed_the_news_stays_master_when_it_registers() -> None:
    table = group_of_three(slave1_offset=4_500, slave2_offset=4_900)
    kill_master(table)
    answer = join(table, ADDR_A2, 2, HA_A2, max_offset=4_900, now_ms=AFTER_TIMEOUT_MS + 2)
    assert answer.assigned_broker_id == 0 and answer.master_addr is None
    assert addrs_of(table.pickup_topic_route(TOPIC), BROKER_A) == {0: ADDR_A2, 1: ADDR_A1}


def test_heartbeat_offsets_only_move_forward() -> None:
    table = group_of_three(slave1_offset=10, slave2_offset=10)
    heartbeat(table, ADDR_A1, NOW_MS + 1, max_offset=900)
    heartbeat(table, ADDR_A1, NOW_MS + 2, max_offset=400)
    entry = table.live_broker(DEFAULT_CLUSTER, ADDR_A1)
    assert entry is not None and (entry.max_offset, entry.confirm_offset) == (900, 900)


def test_the_default_in_sync_bound_is_upstreams_256_mib() -> None:
    assert DEFAULT_FAILOVER_LAG_BYTES_MAX == 256 * 1024 * 1024


def test_replaying_the_same_failover_gives_the_same_state() -> None:
    first = group_of_three(slave1_offset=4_500, slave2_offset=4_900)
    second = group_of_three(slave1_offset=4_500, slave2_offset=4_900)
    kill_master(first)
    kill_master(second)
    assert first.digest() == second.digest()
    restored = RouteTable.restore(first.snapshot())
    assert restored.digest() == first.digest()
    entry = restored.live_broker(DEFAULT_CLUSTER, ADDR_A2)
    assert entry is not None and entry.max_offset == 4_900
    assert entry.replication == link(LINK_A2)


def test_a_version_1_snapshot_still_restores() -> None:
    table = RouteTable()
    join(table, ADDR_A0, 0, HA_A0, max_offset=None, failover=None)
    data = bytearray(table.snapshot())
    data[len(MAGIC) : len(MAGIC) + 2] = (1).to_bytes(2, "big")
    assert RouteTable.restore(bytes(data)).digest() == table.digest()
