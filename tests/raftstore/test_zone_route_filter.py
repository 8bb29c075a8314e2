"""Zone filtering of route answers, ported from 5.x ZoneRouteRPCHook tests (both classes)."""

from __future__ import annotations

from raftstore.zone import filter_route_by_zone, zone_filter_requested
from remoting.model import BrokerData, QueueData, TopicRouteData

QUEUES_A = QueueData("BrokerA", 8, 8, 6)
QUEUES_B = QueueData("BrokerB", 8, 8, 6)


def zoned_route() -> TopicRouteData:
    """BrokerA master in zone1, BrokerB master in zone2, BrokerC (no master) in zone1."""
    return TopicRouteData(
        queue_datas=[QUEUES_A, QUEUES_B],
        broker_datas=[
            BrokerData("c", "BrokerA", {0: "127.0.0.1:10911"}, zone_name="zone1"),
            BrokerData("c", "BrokerB", {0: "127.0.0.1:10912"}, zone_name="zone2"),
            BrokerData("c", "BrokerC", {}, zone_name="zone1"),
        ],
        filter_server_table={
            "127.0.0.1:10911": ["127.0.0.1:20911"],
            "127.0.0.1:10912": ["127.0.0.1:20912"],
        },
    )


def test_no_zone_mode_means_no_filtering() -> None:
    """testDoAfterResponseWithNoZoneMode and testFilterByZoneName_ZoneModeFalse_ShouldNotFilter."""
    assert not zone_filter_requested("false", "zone1")
    assert not zone_filter_requested(None, "zone1")


def test_zone_mode_without_a_zone_name_means_no_filtering() -> None:
    """testDoAfterResponseWithNoZoneName and testFilterByZoneName_NoZoneName_ShouldNotFilter."""
    assert not zone_filter_requested("true", None)
    assert not zone_filter_requested("true", "   ")
    assert zone_filter_requested("TRUE", "zone1")


def test_it_drops_masters_of_other_zones_with_their_queues_and_filter_servers() -> None:
    """testDoAfterResponseWithValidZoneFiltering: BrokerB (zone2) goes, with its address."""
    filtered = filter_route_by_zone(zoned_route(), "ZONE1")

    assert [b.broker_name for b in filtered.broker_datas] == ["BrokerA", "BrokerC"]
    assert filtered.queue_datas == [QUEUES_A]
    assert list(filtered.filter_server_table) == ["127.0.0.1:10911"]


def test_a_route_with_nothing_to_drop_comes_back_unchanged() -> None:
    """testDoAfterResponseWithNoResponse: filtering never invents or loses data."""
    route = TopicRouteData(
        queue_datas=[QUEUES_A],
        broker_datas=[BrokerData("c", "BrokerA", {0: "127.0.0.1:10911"}, zone_name="zone1")],
    )
    assert filter_route_by_zone(route, "zone1") is route


def test_groups_without_a_master_stay_whatever_their_zone() -> None:
    """A slave-only group is kept for every zone (upstream keeps groups with no id 0)."""
    route = TopicRouteData(
        queue_datas=[QUEUES_B],
        broker_datas=[BrokerData("c", "BrokerB", {1: "127.0.0.1:10922"}, zone_name="zone2")],
    )
    assert filter_route_by_zone(route, "zone1").broker_datas == route.broker_datas
