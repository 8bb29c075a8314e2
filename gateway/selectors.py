"""Reads of the NameServer state, always through ``replicator.read``.

The wire protocol reads the in-memory table (never the DB projection), under
the same lock as apply, so an answer reflects one applied version. Values
handed out are frozen copies; callers may keep them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from raftstore.replicator import Replicator
from raftstore.route_table import RouteTable
from raftstore.tables import BrokerLiveView
from remoting.model import (
    BrokerMemberGroup,
    ClusterInfo,
    KVTable,
    TopicList,
    TopicRouteData,
)


def route_with_version(replicator: Replicator, topic: str) -> tuple[int, TopicRouteData | None]:
    """The route of ``topic`` (None when unknown) and the routes version it reflects."""

    def read(table: RouteTable) -> tuple[int, TopicRouteData | None]:
        # pickup_topic_route fills orderTopicConf itself when orderMessageEnable is on.
        return table.routes_version, table.pickup_topic_route(topic)

    return replicator.read(read)


def routes_version(replicator: Replicator) -> int:
    """The version that changes whenever any route answer may change."""
    return replicator.read(lambda table: table.routes_version)


def topic_route(replicator: Replicator, topic: str) -> TopicRouteData | None:
    """GET_ROUTEINFO_BY_TOPIC: the route, or None when the topic has none."""
    return route_with_version(replicator, topic)[1]


def cluster_info(replicator: Replicator) -> ClusterInfo:
    """GET_BROKER_CLUSTER_INFO."""
    return replicator.read(lambda table: table.cluster_info())


def all_topic_list(replicator: Replicator) -> TopicList:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic of the topic-queue table."""
    return replicator.read(lambda table: table.all_topic_list())


def topics_by_cluster(replicator: Replicator, cluster: str) -> TopicList:
    """GET_TOPICS_BY_CLUSTER: topics with queues on any broker of ``cluster``."""
    return replicator.read(lambda table: table.topics_by_cluster(cluster))


def system_topic_list(replicator: Replicator) -> TopicList:
    """GET_SYSTEM_TOPIC_LIST_FROM_NS."""
    return replicator.read(lambda table: table.system_topic_list())


def unit_topic_list(replicator: Replicator) -> TopicList:
    """GET_UNIT_TOPIC_LIST."""
    return replicator.read(lambda table: table.unit_topic_list())


def has_unit_sub_topic_list(replicator: Replicator) -> TopicList:
    """GET_HAS_UNIT_SUB_TOPIC_LIST."""
    return replicator.read(lambda table: table.has_unit_sub_topic_list())


def has_unit_sub_ununit_topic_list(replicator: Replicator) -> TopicList:
    """GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST."""
    return replicator.read(lambda table: table.has_unit_sub_ununit_topic_list())


def kv_get(replicator: Replicator, namespace: str, key: str) -> str | None:
    """GET_KV_CONFIG: the value, or None when missing."""
    return replicator.read(lambda table: table.kv_get(namespace, key))


def kv_list(replicator: Replicator, namespace: str) -> KVTable | None:
    """GET_KVLIST_BY_NAMESPACE: the namespace, or None when it was never created."""
    return replicator.read(lambda table: table.kv_list(namespace))


def broker_member_group(
    replicator: Replicator, cluster_name: str, broker_name: str
) -> BrokerMemberGroup:
    """GET_BROKER_MEMBER_GROUP: the group's addresses (empty when unknown)."""
    return replicator.read(lambda table: table.broker_member_group(cluster_name, broker_name))


def node_status(replicator: Replicator) -> dict[str, Any]:
    """This node's replication status plus the routes version (NODE_STATUS, the console)."""
    status = dataclasses.asdict(replicator.status())
    status["routes_version"] = routes_version(replicator)
    return status


def broker_views(replicator: Replicator, now_ms: int) -> list[dict[str, Any]]:
    """Every broker replica this node knows, as it sees it (NODE_STATUS ``brokers``):
    its group, id and address, and the age of its last heartbeat by this node's clock
    (``age_ms``, with its ``timeout_ms``; both None for an address with no live entry).
    Ordered by (cluster, broker name, id); a live entry no group names comes last."""

    def read(table: RouteTable) -> list[dict[str, Any]]:
        live = {(e.cluster_name, e.broker_addr): e for e in table.live_brokers()}
        views: list[dict[str, Any]] = []
        groups = sorted(table.broker_datas().values(), key=lambda g: (g.cluster, g.broker_name))
        for group in groups:
            for broker_id, addr in sorted(group.broker_addrs.items()):
                entry = live.pop((group.cluster, addr), None)
                views.append(
                    _broker_view(group.cluster, group.broker_name, broker_id, addr, entry, now_ms)
                )
        for (cluster, addr), entry in sorted(live.items()):
            views.append(_broker_view(cluster, None, None, addr, entry, now_ms))
        return views

    return replicator.read(read)


def _broker_view(
    cluster: str,
    broker_name: str | None,
    broker_id: int | None,
    addr: str,
    entry: BrokerLiveView | None,
    now_ms: int,
) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "broker_name": broker_name,
        "broker_id": broker_id,
        "addr": addr,
        "age_ms": None if entry is None else max(0, now_ms - entry.last_update_ms),
        "timeout_ms": None if entry is None else entry.heartbeat_timeout_ms,
    }
