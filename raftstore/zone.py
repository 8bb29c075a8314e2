"""Zone filtering of a route answer (5.x ``ZoneRouteRPCHook``).

A client that sends extFields ``__ZONE_MODE=true`` and a non-blank
``__ZONE_NAME`` gets a route that keeps only the broker groups it may use: those
without a master, and those whose zone is its own (case ignored). The queue data
and filter servers of dropped groups go with them. This is a pure read-time
transform; the stored table is never changed.
"""

from __future__ import annotations

from dataclasses import replace

from remoting.model import MASTER_ID, TopicRouteData
from remoting.properties import java_boolean
from remoting.register_request import ZONE_NAME_EXT_FIELD as ZONE_NAME_EXT_FIELD

ZONE_MODE_EXT_FIELD = "__ZONE_MODE"


def zone_filter_requested(zone_mode: str | None, zone_name: str | None) -> bool:
    """True when the request asks for zone filtering (Java ``Boolean.parseBoolean`` rules)."""
    return java_boolean(zone_mode, False) and bool(zone_name and zone_name.strip())


def filter_route_by_zone(route: TopicRouteData, zone_name: str) -> TopicRouteData:
    """Keep the broker groups with no master or in ``zone_name``; drop the rest's data."""
    zone = zone_name.lower()
    kept = []
    removed_names: set[str] = set()
    removed_addrs: set[str] = set()
    for broker in route.broker_datas:
        in_zone = broker.zone_name is not None and broker.zone_name.lower() == zone
        if MASTER_ID not in broker.broker_addrs or in_zone:
            kept.append(broker)
        else:
            removed_names.add(broker.broker_name)
            removed_addrs.update(broker.broker_addrs.values())
    if not removed_names:
        return route
    return replace(
        route,
        broker_datas=kept,
        queue_datas=[q for q in route.queue_datas if q.broker_name not in removed_names],
        filter_server_table={
            addr: servers
            for addr, servers in route.filter_server_table.items()
            if addr not in removed_addrs
        },
    )
