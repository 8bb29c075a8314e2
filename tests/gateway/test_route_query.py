"""GET_ROUTEINFO_BY_TOPIC: JSON style by version, the route cache, linearizable reads."""

from __future__ import annotations

from gateway.dispatch import RequestDispatcher
from gateway.route_cache import RouteCache
from gateway.services import NameServerService
from raftstore.replicator import LocalReplicator
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.register_request import BrokerRegistration
from tests.gateway.conftest import unit_topics_wrapper

Node = tuple[LocalReplicator, NameServerService, RequestDispatcher]

GO_CLIENT_VERSION = 317
JAVA_5_VERSION = 479


def route_request(topic: str, version: int, **extra: str) -> RemotingCommand:
    """A route query as a client of ``version`` sends it."""
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, **extra}, version=version
    )


async def test_old_clients_get_unquoted_broker_id_keys(registered_node: Node) -> None:
    """Below V4_9_4 (401) the body is fastjson's plain form: {1234:"..."}."""
    response = await registered_node[2].handle(route_request("unit-test0", GO_CLIENT_VERSION))
    assert response is not None and response.body is not None
    assert b'"brokerAddrs":{1234:"127.0.0.1:10911"}' in response.body


async def test_new_clients_get_quoted_broker_id_keys(registered_node: Node) -> None:
    """From V4_9_4 on the body is standard JSON: {"1234":"..."}."""
    response = await registered_node[2].handle(route_request("unit-test0", JAVA_5_VERSION))
    assert response is not None and response.body is not None
    assert b'"brokerAddrs":{"1234":"127.0.0.1:10911"}' in response.body


async def test_accept_standard_json_only_quotes_keys_for_old_clients(registered_node: Node) -> None:
    """acceptStandardJsonOnly=true asks for the standard form whatever the version."""
    request = route_request("unit-test0", GO_CLIENT_VERSION, acceptStandardJsonOnly="true")
    response = await registered_node[2].handle(request)
    assert response is not None and response.body is not None
    assert b'{"1234":' in response.body


async def test_the_route_cache_serves_repeats_and_misses_after_a_change(
    registered_node: Node,
) -> None:
    """A repeat query is a hit; any route change moves routes_version and misses."""
    _, service, dispatcher = registered_node
    cache = dispatcher.route_cache
    await dispatcher.handle(route_request("unit-test0", JAVA_5_VERSION))
    await dispatcher.handle(route_request("unit-test0", JAVA_5_VERSION))
    assert (cache.hits, cache.misses) == (1, 1)
    await service.wipe_write_perm("default-broker")
    response = await dispatcher.handle(route_request("unit-test0", JAVA_5_VERSION))
    assert cache.misses == 2
    assert response is not None and response.body is not None
    assert b'"perm":4' in response.body


async def test_heartbeats_do_not_invalidate_cached_routes(registered_node: Node) -> None:
    """Liveness touches leave routes_version alone, so the cached body stays valid."""
    _, service, dispatcher = registered_node
    await dispatcher.handle(route_request("unit-test0", JAVA_5_VERSION))
    await service.broker_heartbeat(cluster_name="default-cluster", broker_addr="127.0.0.1:10911")
    await dispatcher.handle(route_request("unit-test0", JAVA_5_VERSION))
    assert dispatcher.route_cache.hits == 1


def test_the_route_cache_is_bounded(registered_node: Node) -> None:
    """The LRU never holds more than its bound."""
    cache = RouteCache(registered_node[0], entries_max=2)
    for topic in ("a", "b", "c", "unit-test0"):
        cache.route_body(topic, standard=True)
    assert len(cache) == 2
    assert cache.route_body("unit-test0", standard=True) is not None


async def test_a_linearizable_read_passes_a_barrier_first(registered_node: Node) -> None:
    """consistency=linearizable commits a barrier (a no-op locally) and answers the route."""
    request = route_request("unit-test0", JAVA_5_VERSION, consistency="linearizable")
    response = await registered_node[2].handle(request)
    assert response is not None and response.code == ResponseCode.SUCCESS


async def _register_zoned_master(service: NameServerService, name: str, zone: str) -> None:
    await service.register_broker(
        BrokerRegistration(
            cluster_name="ZonedCluster",
            broker_addr=f"127.0.0.1:{10911 + len(name) * 7 + len(zone)}",
            broker_name=name,
            broker_id=0,
            ha_server_addr="127.0.0.1:20911",
            zone_name=zone,
            enable_acting_master=False,
        ),
        unit_topics_wrapper(),
    )


async def test_a_zone_mode_client_gets_only_its_zone_and_masterless_groups(node: Node) -> None:
    """5.x ZoneRouteRPCHook on the wire: __ZONE_MODE=true with __ZONE_NAME filters the route."""
    _, service, dispatcher = node
    await _register_zoned_master(service, "broker-east", "zone1")
    await _register_zoned_master(service, "broker-west", "zone2")

    everything = await dispatcher.handle(route_request("unit-test0", JAVA_5_VERSION))
    zoned = await dispatcher.handle(
        route_request("unit-test0", JAVA_5_VERSION, __ZONE_MODE="true", __ZONE_NAME="ZONE1")
    )

    assert everything is not None and everything.body is not None
    assert zoned is not None and zoned.code == ResponseCode.SUCCESS and zoned.body is not None
    assert b"broker-west" in everything.body
    assert b"broker-east" in zoned.body and b"broker-west" not in zoned.body
    assert b"{0:" in zoned.body  # re-encoded in fastjson's plain style, as upstream does
