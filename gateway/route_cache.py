"""Encoded GET_ROUTEINFO_BY_TOPIC bodies of the applied table, per (topic, JSON style):
the gateway's :class:`~gateway.route_answers.RouteAnswers`, versioned per topic.

Route queries are the hot path (every client polls every topic every 30 s), and
encoding the fastjson body costs far more than the table lookup. Route queries
never touch the database.

Why per topic: a registration storm changes thousands of other topics' routes a second,
and a cache that forgot everything on every change sent each read of an unrelated topic
back to the table, behind the apply thread's lock (docs/BENCHMARKS.md, "registration
storm"). An apply bumps the version (:class:`~gateway.route_answers.RouteVersions`) of
only the topics whose answer it may have changed:

* ``changes.topics``: those topics;
* ``changes.broker_names``: the topics whose held route names that broker (a route lists
  the BrokerData, filter servers and acting master of every broker holding a queue of
  the topic);
* an ORDER_TOPIC_CONFIG key: that topic (``orderTopicConf``);
* ``changes.config``, or a snapshot that replaced the table: every topic (the epoch).

Heartbeats and liveness never change a route answer, so they bump nothing. An evicted
topic is bumped too: its brokers are no longer indexed here, so a read front's copy of
it must not outlive it.

Concurrency: a hit reads the topic's version and one dict entry, no lock. A miss reads
the version, the table and stores the body inside one ``replicator.read``, i.e. under the
lock the apply thread holds while it applies and bumps: a body is held either at a
version before a change (and goes stale with it) or after it.
"""

from __future__ import annotations

from gateway.route_answers import RouteAnswers, RouteVersions, Version
from gateway.route_request import RouteKey
from raftstore.commands import Command
from raftstore.config import NamesrvConfig
from raftstore.replicator import Replicator
from raftstore.results import ApplyResult
from raftstore.route_table import RouteTable
from remoting.bodies import encode_topic_route_data
from remoting.model import NAMESPACE_ORDER_TOPIC_CONFIG

ROUTE_CACHE_ENTRIES_MAX = 65_536

_NOT_FOUND = b""
"""Held for "no route": an encoded route is never empty."""


class RouteCache:
    """The gateway's route answers; thread-safe, lock-free hits."""

    def __init__(self, replicator: Replicator, entries_max: int = ROUTE_CACHE_ENTRIES_MAX) -> None:
        self.replicator = replicator
        # Written only under the replicator's lock (fills and the apply listener);
        # read without it by hits.
        self.answers: RouteAnswers[RouteKey, Version, bytes] = RouteAnswers(entries_max)
        self.versions = RouteVersions.private()
        self.versions.set_routes_version(replicator.read(lambda table: table.routes_version))
        self._topics_by_broker: dict[str, set[str]] = {}
        self._brokers_by_topic: dict[str, tuple[str, ...]] = {}
        self._config: NamesrvConfig = replicator.read(lambda table: table.config)
        self.hits = 0
        self.misses = 0
        replicator.subscribe(self._applied)
        # Raft mode: a snapshot can replace the whole table without an apply.
        replicator.subscribe_snapshot(self._snapshot_installed)

    def __len__(self) -> int:
        return len(self.answers)

    def __contains__(self, key: RouteKey) -> bool:
        return self.answers.get(key, self.versions.version(key[0])) is not None

    @property
    def config(self) -> NamesrvConfig:
        """The NamesrvConfig of the applied state (kept current by the apply listener)."""
        return self._config

    def share_versions(self, versions: RouteVersions) -> None:
        """Version answers by ``versions`` (a file a read front reads) from now on."""
        self.replicator.read(lambda table: self._use_versions(versions, table))

    def _use_versions(self, versions: RouteVersions, table: RouteTable) -> None:
        self.versions = versions
        self._forget_all(table)

    # -- invalidation (under the replicator's lock) -------------------------------------

    def _applied(self, command: Command, result: ApplyResult) -> None:
        """Apply listener: bump the topics whose answer this apply may have changed, then
        publish the table's routes version (after the bumps: a reader that sees the new
        version sees the stale answers gone)."""
        changes = result.changes
        if not changes.affects_routes:
            return
        # Re-entrant: the apply thread already holds the replicator's lock.
        if changes.config:
            self.replicator.read(self._forget_all)
            return
        for namespace, key in changes.kv:
            if namespace == NAMESPACE_ORDER_TOPIC_CONFIG:
                self._forget(key)
        for topic in changes.topics:
            self._forget(topic)
        for broker_name in changes.broker_names:
            for topic in tuple(self._topics_by_broker.get(broker_name, ())):
                self._forget(topic)
        self.versions.set_routes_version(self.replicator.read(lambda table: table.routes_version))

    def _forget(self, topic: str) -> None:
        """Make the topic's held answers stale and stop indexing its brokers."""
        self.versions.bump(topic)
        for broker_name in self._brokers_by_topic.pop(topic, ()):
            topics = self._topics_by_broker.get(broker_name)
            if topics is not None:
                topics.discard(topic)
                if not topics:
                    del self._topics_by_broker[broker_name]

    def _forget_all(self, table: RouteTable) -> None:
        self.versions.bump_all()
        self.answers.clear()
        self._topics_by_broker = {}
        self._brokers_by_topic = {}
        self._config = table.config
        self.versions.set_routes_version(table.routes_version)

    def _snapshot_installed(self, applied_index: int) -> None:
        self.clear()

    def clear(self) -> None:
        """Make every answer stale (a snapshot replaced the whole table)."""
        self.replicator.read(self._forget_all)

    # -- reads ---------------------------------------------------------------------------

    def route_body(self, topic: str, *, standard: bool) -> bytes | None:
        """The encoded route of ``topic`` (None when it has none), held when current."""
        key = (topic, standard)
        held = self.answers.get(key, self.versions.version(topic))
        if held is not None:
            self.hits += 1
            return held or None
        self.misses += 1
        return self.replicator.read(lambda table: self._fill(table, key)) or None

    def _fill(self, table: RouteTable, key: RouteKey) -> bytes:
        """Encode and hold the route of ``key`` (under the replicator's lock)."""
        topic = key[0]
        evicted = None if key in self.answers else self.answers.make_room()
        if evicted is not None:
            self._forget(evicted[0])
        version = self.versions.version(topic)
        held = self.answers.get(key, version)
        if held is not None:
            return held  # another reader filled it meanwhile
        route = table.pickup_topic_route(topic)
        body = _NOT_FOUND if route is None else encode_topic_route_data(route, standard=key[1])
        self.answers.put(key, version, body)
        if topic not in self._brokers_by_topic:
            # Every broker holding a queue of the topic, named in its route or not
            # (a queue whose broker group is unknown yet turns up once it registers).
            brokers = tuple(table.topic_queues(topic))
            self._brokers_by_topic[topic] = brokers
            for broker_name in brokers:
                self._topics_by_broker.setdefault(broker_name, set()).add(topic)
        return body
