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
