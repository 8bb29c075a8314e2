"""Encoded GET_ROUTEINFO_BY_TOPIC bodies, cached per (topic, JSON style) and
dropped one topic at a time.

Route queries are the hot path (every client polls every topic every 30 s), and
encoding the fastjson body costs far more than the table lookup. Route queries
never touch the database.

Why per topic: a registration storm (a fleet restart, a broker with thousands
of topics) changes thousands of other topics' routes a second. A cache that
forgot everything on every change made each read of an unrelated topic go back
to the table, under the lock the apply thread holds while it applies a whole
batch, so reads waited behind other topics' registrations. Here an apply drops
only the bodies it may have changed:

* ``changes.topics``: those topics;
* ``changes.broker_names``: the topics whose cached route names that broker (a
  route lists the BrokerData, filter servers and acting master of every broker
  holding a queue of the topic);
* an ORDER_TOPIC_CONFIG key: that topic (``orderTopicConf``);
* ``changes.config``: every body (orderMessageEnable, supportActingMaster).

Heartbeats and liveness never change a route answer, so they drop nothing.

A read front (:mod:`gateway.front`, another process) serves copies of these bodies;
:attr:`RouteCache.versions`, when set, is told of every drop so that the front knows
which of its copies went stale (:mod:`gateway.route_versions`).

Concurrency: a hit is one dict lookup, no lock. A miss reads the table, encodes
and stores the body inside one ``replicator.read``, i.e. under the lock the apply
thread holds while it applies and calls :meth:`_applied`. A body is therefore
stored either before an apply that changes it (and dropped by it) or after (and
read from the changed table): an older body is never left behind.
"""

from __future__ import annotations

from gateway.route_versions import RouteVersions
from raftstore.commands import Command
from raftstore.config import NamesrvConfig
from raftstore.replicator import Replicator
from raftstore.results import ApplyResult
from raftstore.route_table import RouteTable
from remoting.bodies import encode_topic_route_data
from remoting.model import NAMESPACE_ORDER_TOPIC_CONFIG

ROUTE_CACHE_ENTRIES_MAX = 65_536

_NOT_FOUND = b""
"""Cached marker for "no route": an encoded route is never empty."""

_Key = tuple[str, bool]


class RouteCache:
    """Bounded cache of encoded route bodies; thread-safe, lock-free hits."""

    def __init__(self, replicator: Replicator, entries_max: int = ROUTE_CACHE_ENTRIES_MAX) -> None:
        if entries_max <= 0:
            raise ValueError("entries_max must be positive")
        self.replicator = replicator
        self.entries_max = entries_max
        # Written only under the replicator's lock (fills and the apply listener);
        # read without it by hits.
        self._bodies: dict[_Key, bytes] = {}
        self._topics_by_broker: dict[str, set[str]] = {}
        self._brokers_by_topic: dict[str, tuple[str, ...]] = {}
        self._config: NamesrvConfig = replicator.read(lambda table: table.config)
        self.hits = 0
        self.misses = 0
        self.dropped = 0
        # Told of every drop, under the same lock (a read front's staleness check).
        self.versions: RouteVersions | None = None
        replicator.subscribe(self._applied)
        # Raft mode: a snapshot can replace the whole table without an apply.
        replicator.subscribe_snapshot(self._snapshot_installed)

    def __len__(self) -> int:
        return len(self._bodies)

    def __contains__(self, key: _Key) -> bool:
        return key in self._bodies

    @property
    def config(self) -> NamesrvConfig:
        """The NamesrvConfig of the applied state (kept current by the apply listener)."""
        return self._config

    # -- invalidation (under the replicator's lock) -------------------------------------

    def _applied(self, command: Command, result: ApplyResult) -> None:
        """Apply listener: drop the bodies this apply may have changed."""
        changes = result.changes
        if not changes.affects_routes:
            return
        if changes.config:
            self._drop_all(self.replicator.read(lambda table: table.config))
            return
        for namespace, key in changes.kv:
            if namespace == NAMESPACE_ORDER_TOPIC_CONFIG:
                self._drop_topic(key)
        for topic in changes.topics:
            self._drop_topic(topic)
        for broker_name in changes.broker_names:
            for topic in tuple(self._topics_by_broker.get(broker_name, ())):
                self._drop_topic(topic)

    def _drop_topic(self, topic: str) -> None:
        if self.versions is not None:
            self.versions.bump(topic)
        bodies = self._bodies
        for key in ((topic, True), (topic, False)):
            if bodies.pop(key, None) is not None:
                self.dropped += 1
        for broker_name in self._brokers_by_topic.pop(topic, ()):
            topics = self._topics_by_broker.get(broker_name)
            if topics is not None:
                topics.discard(topic)
                if not topics:
                    del self._topics_by_broker[broker_name]

    def _drop_all(self, config: NamesrvConfig) -> None:
        if self.versions is not None:
            self.versions.bump_all()
        self.dropped += len(self._bodies)
        self._bodies = {}
        self._topics_by_broker = {}
        self._brokers_by_topic = {}
        self._config = config

    def _snapshot_installed(self, applied_index: int) -> None:
        self.clear()

    def clear(self) -> None:
        """Drop every body (a snapshot replaced the whole table)."""
        self.replicator.read(lambda table: self._drop_all(table.config))

    # -- reads ---------------------------------------------------------------------------

    def route_body(self, topic: str, *, standard: bool) -> bytes | None:
        """The encoded route of ``topic`` (None when it has none), from cache when present."""
        cached = self._bodies.get((topic, standard))
        if cached is not None:
            self.hits += 1
            return cached or None
        self.misses += 1
        return self.replicator.read(lambda table: self._fill(table, topic, standard)) or None

    def _fill(self, table: RouteTable, topic: str, standard: bool) -> bytes:
        """Encode and store the route of ``topic`` (under the replicator's lock)."""
        key = (topic, standard)
        cached = self._bodies.get(key)
        if cached is not None:
            return cached  # another reader filled it meanwhile
        route = table.pickup_topic_route(topic)
        body = _NOT_FOUND if route is None else encode_topic_route_data(route, standard=standard)
        bodies = self._bodies
        while len(bodies) >= self.entries_max:
            self._drop_topic(next(iter(bodies))[0])  # the oldest entry
        bodies[key] = body
        if topic not in self._brokers_by_topic:
            # Every broker holding a queue of the topic, named in its route or not
            # (a queue whose broker group is unknown yet turns up once it registers).
            brokers = tuple(table.topic_queues(topic))
            self._brokers_by_topic[topic] = brokers
            for broker_name in brokers:
                self._topics_by_broker.setdefault(broker_name, set()).add(topic)
        return body
