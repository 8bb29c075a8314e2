"""Liveness: heartbeats, QUERY_DATA_VERSION and the replicated expiry scan."""

from __future__ import annotations

from raftstore.commands import BrokerHeartbeat, ExpireBrokers, QueryDataVersion
from raftstore.results import BrokerAddrInfo, ExpireOutcome, QueryDataVersionOutcome
from raftstore.route_table import RouteTable
from remoting.model import DataVersion
from tests.raftstore.cast import (
    ADDR_A0,
    ADDR_A1,
    BROKER_A,
    DEFAULT_CLUSTER,
    DV1,
    NOW_MS,
    register,
    topics,
)

TIMEOUT_MS = 120_000
KEY_A0 = BrokerAddrInfo(DEFAULT_CLUSTER, ADDR_A0)


def registered(table: RouteTable) -> RouteTable:
    register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=topics("T", "U"))
    return table


def test_a_heartbeat_moves_the_last_update_forward_but_never_back(table: RouteTable) -> None:
    registered(table)
    forward = table.apply(BrokerHeartbeat(DEFAULT_CLUSTER, ADDR_A0, NOW_MS + 10))
    backward = table.apply(BrokerHeartbeat(DEFAULT_CLUSTER, ADDR_A0, NOW_MS + 5))
    live = table.live_broker(DEFAULT_CLUSTER, ADDR_A0)
    assert live is not None and live.last_update_ms == NOW_MS + 10
    assert forward.changes.live_brokers == {KEY_A0} and not forward.changes.affects_routes
    assert backward.changes.empty


def test_a_heartbeat_of_an_unknown_broker_changes_nothing(table: RouteTable) -> None:
    result = table.apply(BrokerHeartbeat(DEFAULT_CLUSTER, ADDR_A0, NOW_MS))
    assert result.changes.empty and table.live_brokers() == []


def test_query_data_version_reports_unchanged_for_the_stored_version_and_touches(
    table: RouteTable,
) -> None:
    registered(table)
    result = table.apply(QueryDataVersion(DEFAULT_CLUSTER, ADDR_A0, BROKER_A, 0, DV1, NOW_MS + 7))
    assert result.outcome == QueryDataVersionOutcome(changed=False, data_version=DV1)
    live = table.live_broker(DEFAULT_CLUSTER, ADDR_A0)
    assert live is not None and live.last_update_ms == NOW_MS + 7


def test_query_data_version_reports_changed_for_another_or_missing_version(
    table: RouteTable,
) -> None:
    registered(table)
    other = DataVersion(timestamp=NOW_MS, counter=2)
    for given in (other, None):
        result = table.apply(QueryDataVersion(DEFAULT_CLUSTER, ADDR_A0, BROKER_A, 0, given, NOW_MS))
        assert result.outcome == QueryDataVersionOutcome(changed=True, data_version=DV1)


def test_query_data_version_of_a_broker_that_is_not_live_is_changed(table: RouteTable) -> None:
    result = table.apply(QueryDataVersion(DEFAULT_CLUSTER, ADDR_A0, BROKER_A, 0, DV1, NOW_MS))
    assert result.outcome == QueryDataVersionOutcome(changed=True, data_version=None)
    assert result.changes.empty


def test_a_broker_expires_only_after_timeout_plus_skew_allowance(table: RouteTable) -> None:
    registered(table)
    deadline = NOW_MS + TIMEOUT_MS + 500
    kept = table.apply(ExpireBrokers(now_ms=deadline, skew_allowance_ms=500))
    assert kept.outcome == ExpireOutcome() and kept.changes.empty
    dropped = table.apply(ExpireBrokers(now_ms=deadline + 1, skew_allowance_ms=500))
    assert dropped.outcome == ExpireOutcome(expired=(KEY_A0,))
    assert table.pickup_topic_route("T") is None
    assert table.cluster_info().cluster_addr_table == {}


def test_a_broker_registered_with_its_own_timeout_expires_on_that_timeout(
    table: RouteTable,
) -> None:
    register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=topics("T", "U"))
    register(table, addr=ADDR_A1, name=BROKER_A, broker_id=1, timeout_ms=10_000)
    result = table.apply(ExpireBrokers(now_ms=NOW_MS + 10_001))
    assert result.outcome == ExpireOutcome(expired=(BrokerAddrInfo(DEFAULT_CLUSTER, ADDR_A1),))
    assert table.broker_datas()[BROKER_A].broker_addrs == {0: ADDR_A0}
