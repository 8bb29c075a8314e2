"""What the projection reads from the route table: a Delta of changed keys, or everything.

:func:`read_delta` runs on the apply thread for every command and reads only the keys
the command changed. The writer thread later fills in the changed topics' queue data
(:func:`read_topics`) and the wire routes that moved (:func:`moved_routes`), a few
topics per hold of the apply lock (:data:`ROUTES_PER_READ`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from namesrv_app import models
from namesrv_app.events import MASTER_MOVES_MAX, ChangeEvent
from namesrv_app.projection.pacing import keep_pace
from raftstore.replicator import Replicator
from raftstore.results import ApplyResult, BrokerAddrInfo, MasterMove
from raftstore.route_table import BrokerLiveView, RouteTable
from remoting.bodies import encode_topic_route_data
from remoting.model import (
    NAMESPACE_ORDER_TOPIC_CONFIG,
    BrokerData,
    QueueData,
    TopicQueueMappingInfo,
    TopicRouteData,
)

ROUTES_PER_READ = 32
"""Routes (or topics' queue data) read per hold of the apply lock: about 15 us each for
a topic on one broker, ten times that on twenty, so Raft's apply thread never waits long
behind the writer (see docs/BENCHMARKS.md, "Reads first, the writer's share held, fewer
Raft messages")."""

T = TypeVar("T")


@dataclass(slots=True)
class Delta:
    """The current value of every key one or more commands changed (None = gone).

    Topics are the exception: the apply thread records only which changed
    (``topic_sets``, one per command); the writer reads their queue data and mappings
    at write time (:func:`read_topics`), a few hundred per hold of the apply lock, into
    ``queues`` and ``mappings``, so the apply thread never copies every broker's queues
    of every topic a registration touched.
    """

    applied_version: int
    routes_version: int
    topic_sets: list[frozenset[str]] = field(default_factory=list)
    # Filled by the writer from ``topic_sets`` (read_topics).
    queues: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    mappings: dict[str, dict[str, TopicQueueMappingInfo]] = field(default_factory=dict)
    groups: dict[str, BrokerData | None] = field(default_factory=dict)
    clusters: dict[str, list[str] | None] = field(default_factory=dict)
    live: dict[BrokerAddrInfo, BrokerLiveView | None] = field(default_factory=dict)
    filters: dict[BrokerAddrInfo, tuple[str, ...] | None] = field(default_factory=dict)
    kv: dict[tuple[str, str], str | None] = field(default_factory=dict)
    namespaces: dict[str, bool] = field(default_factory=dict)
    config: dict[str, str] | None = None
    master_moves: list[MasterMove] = field(default_factory=list)

    @property
    def liveness_only(self) -> bool:
        """True when only live-broker (and filter-server) rows change."""
        return not (
            self.topic_sets
            or self.groups
            or self.clusters
            or self.kv
            or self.namespaces
            or self.config is not None
        )

    def merge(self, later: Delta) -> None:
        """Fold a later delta into this one: the later value of a key wins."""
        self.applied_version = later.applied_version
        self.routes_version = later.routes_version
        self.topic_sets.extend(later.topic_sets)
        self.groups.update(later.groups)
        self.clusters.update(later.clusters)
        self.live.update(later.live)
        self.filters.update(later.filters)
        self.kv.update(later.kv)
        self.namespaces.update(later.namespaces)
        if later.config is not None:
            self.config = later.config
        self.master_moves = [*self.master_moves, *later.master_moves][-MASTER_MOVES_MAX:]

    def topics(self) -> frozenset[str]:
        """Every topic this delta changed."""
        return frozenset().union(*self.topic_sets, self.queues, self.mappings)

    def event(self, node_id: str) -> ChangeEvent:
        """The change event announcing this delta once committed."""
        return ChangeEvent(
            node_id=node_id,
            applied_version=self.applied_version,
            routes_version=self.routes_version,
            topics=self.topics(),
            broker_names=frozenset(self.groups),
            clusters=frozenset(self.clusters),
            kv_namespaces=frozenset(self.namespaces) | frozenset(ns for ns, _ in self.kv),
            live_changed=bool(self.live or self.filters),
            config_changed=self.config is not None,
            master_moves=tuple(self.master_moves),
        )


@dataclass(frozen=True, slots=True)
class FullState:
    """Everything the projection holds, read at one applied version (for a rebuild)."""

    applied_version: int
    routes_version: int
    digest: str
    queues: dict[str, dict[str, QueueData]]
    mappings: dict[str, dict[str, TopicQueueMappingInfo]]
    groups: dict[str, BrokerData]
    clusters: dict[str, list[str]]
    live: list[BrokerLiveView]
    filters: dict[BrokerAddrInfo, tuple[str, ...]]
    kv: dict[str, dict[str, str]]
    config: dict[str, str]
    routes: dict[str, TopicRouteData | None] = field(default_factory=dict)
    """Every topic's wire route, from ``RouteTable.pickup_topic_route``."""


def read_delta(table: RouteTable, result: ApplyResult) -> Delta:
    """The current values of the keys ``result.changes`` names (called under the read lock).

    Reads only those keys (per-topic, per-group, per-broker accessors), never a
    whole-table copy: this runs on the apply thread for every command.
    """
    changes = result.changes
    delta = Delta(result.applied_version, table.routes_version)
    if changes.topics:
        delta.topic_sets.append(changes.topics)  # read by the writer (see Delta)
    for name in changes.broker_names:
        delta.groups[name] = table.broker_data(name)
    for cluster in changes.clusters:
        delta.clusters[cluster] = table.cluster_members(cluster)
    for live_key in changes.live_brokers:
        cluster, addr = live_key.cluster_name, live_key.broker_addr
        delta.live[live_key] = table.live_broker(cluster, addr)
        delta.filters[live_key] = table.broker_filter_servers(cluster, addr)
    for namespace, kv_key in changes.kv:
        delta.kv[(namespace, kv_key)] = table.kv_get(namespace, kv_key)
    for namespace in changes.kv_namespaces:
        delta.namespaces[namespace] = table.kv_list(namespace) is not None
    if changes.config:
        delta.config = table.config.to_properties()
    delta.master_moves = list(changes.master_moves)
    return delta


def read_full_state(table: RouteTable) -> FullState:
    """Every table at once (called under the read lock)."""
    return FullState(
        applied_version=table.applied_version,
        routes_version=table.routes_version,
        digest=table.digest(),
        queues=table.topic_queue_table(),
        mappings=table.topic_queue_mapping_infos(),
        groups=table.broker_datas(),
        clusters=table.cluster_info().cluster_addr_table,
        live=table.live_brokers(),
        filters=table.filter_servers(),
        kv=table.kv_namespaces(),
        config=table.config.to_properties(),
        routes=read_routes(table, table.topic_queue_table()),
    )


def read_routes(table: RouteTable, topics: Iterable[str]) -> dict[str, TopicRouteData | None]:
    """The wire routes of ``topics`` (called under the read lock): the one route builder
    the wire answer uses too, so REST and GET_ROUTEINFO_BY_TOPIC cannot disagree."""
    return {topic: table.pickup_topic_route(topic) for topic in topics}


def encode_routes(routes: dict[str, TopicRouteData | None]) -> dict[str, bytes | None]:
    """The standard JSON bodies of ``routes``, as the wire sends them (outside the lock)."""
    return {
        topic: None if route is None else encode_topic_route_data(route, standard=True)
        for topic, route in routes.items()
    }


def read_by_topic(
    replicator: Replicator, topics: Iterable[str], read: Callable[[RouteTable, str], T]
) -> dict[str, T]:
    """``read(table, topic)`` for each of ``topics``, :data:`ROUTES_PER_READ` per
    hold of the apply lock, so Raft's apply thread never waits long behind it.
    Each topic is read at the table's current version."""
    wanted = sorted(topics)

    def chunk_of(table: RouteTable, chunk: list[str]) -> dict[str, T]:
        return {topic: read(table, topic) for topic in chunk}

    found: dict[str, T] = {}
    for start in range(0, len(wanted), ROUTES_PER_READ):
        chunk = wanted[start : start + ROUTES_PER_READ]
        found.update(replicator.read(functools.partial(chunk_of, chunk=chunk)))
        keep_pace()
    return found


def read_topics(replicator: Replicator, delta: Delta) -> None:
    """Fill ``delta.queues`` and ``delta.mappings`` with the current values of the
    topics it changed, :data:`ROUTES_PER_READ` per hold of the apply lock. Read at
    a version no older than ``delta``'s, as the routes are (see moved_routes)."""
    wanted = frozenset().union(*delta.topic_sets)
    delta.topic_sets.clear()
    values = read_by_topic(
        replicator,
        wanted,
        lambda table, t: (table.topic_queues(t), table.topic_queue_mapping(t)),
    )
    for topic, (queues, mappings) in values.items():
        delta.queues[topic] = queues
        delta.mappings[topic] = mappings


def moved_routes(
    replicator: Replicator, delta: Delta, routes_version_written: int
) -> dict[str, bytes | None]:
    """The wire routes of the topics whose answer ``delta`` may have changed.

    Nothing while the routes version stays at ``routes_version_written`` (heartbeats).
    Otherwise the changed topics, the topics of changed broker groups and of brokers
    whose filter servers moved, or every topic when the config or the order config
    changed. Read from the table, not from the rows: the route comes from the code that
    answers the wire. Read at the table's current version, which is never older than
    ``delta``; a later delta rewrites what moves after it.
    """
    if delta.routes_version == routes_version_written:
        return {}
    topics = _topics_of_moved_routes(delta)
    if topics is not None and not topics:
        return {}
    if topics is None:
        # A topic gone from the table is in delta.queues, never in the table: asked
        # for by name, its None removes its row.
        topics = set(delta.queues) | set(delta.mappings)
        topics.update(replicator.read(lambda table: table.all_topic_list().topic_list))
    # In chunks (read_by_topic), so Raft's apply thread and the leader's heartbeats never
    # wait long; each topic is still read at a version no older than ``delta``.
    return encode_routes(
        read_by_topic(replicator, topics, lambda table, t: table.pickup_topic_route(t))
    )


def _topics_of_moved_routes(delta: Delta) -> set[str] | None:
    """The topics whose route ``delta`` may have moved; None for every topic."""
    order_config = NAMESPACE_ORDER_TOPIC_CONFIG
    every_topic = (
        delta.config is not None
        or any(ns == order_config for ns, _ in delta.kv)
        or order_config in delta.namespaces
    )
    if every_topic:
        return None
    topics = set(delta.queues) | set(delta.mappings)
    names = set(delta.groups)
    if delta.filters:
        addrs = {key.broker_addr for key in delta.filters}
        names.update(
            models.BrokerAddress.objects.filter(addr__in=addrs).values_list(
                "group__broker_name", flat=True
            )
        )
    if names:
        topics.update(
            models.QueueData.objects.filter(broker_name__in=names).values_list("topic", flat=True)
        )
    return topics
