"""Ports of upstream ``routeinfo/RouteInfoManagerBrokerRegisterTest`` (5.x, 2 tests)
and of its 4.9.8-only ``testScanNotActiveBroker`` adapted to 5.x (cluster, addr) keys."""

from __future__ import annotations

from raftstore.commands import BrokerHeartbeat, ExpireBrokers
from raftstore.config import DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS
from raftstore.results import BrokerAddrInfo, ExpireOutcome
from raftstore.route_table import RouteTable
from tests.raftstore.cast import (
    NOW_MS,
    STATIC_CLUSTER,
    STATIC_IDS,
    STATIC_NAMES,
    addrs_of,
    register,
    static_addr,
    static_topic_table,
    unregister,
)


def test_master_change_from_slave_moves_the_address_to_id_zero(static_table: RouteTable) -> None:
    """testMasterChangeFromSlave."""
    assert addrs_of(static_table.pickup_topic_route("topic-0"), "broker-0")[0] == static_addr(0, 0)
    register(
        static_table,
        cluster=STATIC_CLUSTER,
        addr=static_addr(0, 1),
        name="broker-0",
        broker_id=0,
        ha=static_addr(0, 1),
        topic_table=static_topic_table(),
    )
    assert addrs_of(static_table.pickup_topic_route("topic-0"), "broker-0")[0] == static_addr(0, 1)


def test_unregister_broker_removes_that_id(static_table: RouteTable) -> None:
    """testUnregisterBroker."""
    unregister(static_table, (STATIC_CLUSTER, static_addr(0, 2), "broker-0", 2))
    assert 2 not in addrs_of(static_table.pickup_topic_route("topic-0"), "broker-0")


def test_scan_not_active_broker_expires_exactly_the_silent_broker(static_table: RouteTable) -> None:
    """4.9.8 testScanNotActiveBroker: each of the 9 brokers in turn goes silent alone,
    and each scan expires exactly that one (4.x set the timestamp to 0; here the
    others heartbeat later instead)."""
    keys = [
        BrokerAddrInfo(STATIC_CLUSTER, static_addr(i, b))
        for i in range(STATIC_NAMES)
        for b in range(STATIC_IDS)
    ]
    step_ms = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS + 1
    for round_index, silent in enumerate(keys, start=1):
        now_ms = NOW_MS + round_index * step_ms
        for key in keys[round_index:]:
            static_table.apply(BrokerHeartbeat(key.cluster_name, key.broker_addr, now_ms))
        result = static_table.apply(ExpireBrokers(now_ms=now_ms))
        assert result.outcome == ExpireOutcome(expired=(silent,))
    assert static_table.live_brokers() == []
