"""The projection writer: keeps the node's Django tables equal to its route table.

The replicator calls :meth:`ProjectionWriter.on_applied` on its apply thread
after every command. That call reads only the keys named in
``ApplyResult.changes`` out of the table and merges them, as a :class:`Delta`, into
the one delta waiting for the writer (the later value of a key wins); it never
touches the database, so apply is never held up by SQL. One writer thread takes the
waiting delta whole and writes it in ONE ``transaction.atomic()``, stamping each
written row and the :class:`~namesrv_app.models.NodeState` row with the applied
version. However fast commands apply, what waits is bounded by the table's size: a
writer that falls behind writes fewer, larger transactions. (It used to be a queue
of deltas that, once full, turned into a rebuild of everything; under a flat-out
registration storm that happened every few seconds and the rebuilds took most of
the gateway.)

A rebuild (at start, after a failed write, or when a snapshot replaced the table)
rewrites everything from a fresh read of the table; a waiting delta no newer than
that read is skipped.

Why one module of ~800 lines: reading the table (on the apply thread), the rows it
becomes and the writer thread that batches them share the Delta and FullState shapes;
split, each piece would need the others' private helpers to stay one transaction.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import close_old_connections, connections, transaction
from django.db.models import Field, Model

from namesrv_app import models
from namesrv_app.db_router import PROJECTION_DB
from namesrv_app.events import (
    MASTER_MOVES_MAX,
    ChangeEvent,
    EventPublisher,
    null_publisher,
    publish_safely,
)
from raftstore import snapshot
from raftstore.commands import Command
from raftstore.replicator import Replicator
from raftstore.results import ApplyResult, BrokerAddrInfo, MasterMove
from raftstore.route_table import BrokerLiveView, RouteTable
from remoting.bodies import encode_properties, encode_topic_route_data
from remoting.model import (
    NAMESPACE_ORDER_TOPIC_CONFIG,
    BrokerData,
    QueueData,
    TopicQueueMappingInfo,
    TopicRouteData,
)

log = logging.getLogger(__name__)

SQL_CHUNK_ROWS = 400
"""Keys per ``IN (...)`` clause: below SQLite's historical limit of 999 variables."""
ROUTES_PER_READ = 32
"""Routes (or topics' queue data) read per hold of the apply lock: about 15 us each
for a topic on one broker, ten times that on twenty. At 256 per hold, 20 brokers
sharing 5,000 topics kept Raft's apply thread waiting up to a second in all."""
DIGEST_INTERVAL_S = 10.0
"""The state digest costs a pass over the whole table (about 0.4 s at 100k queue rows;
the copy, a third of it, under the apply lock, the hashing after). A busy node whose
routes changed refreshes the stored digest at most this often; an idle one catches up
at once (after IDLE_POLL_S without deltas), and a flush makes it exact. NODE_STATUS
computes the exact digest on demand."""
DIGEST_COST_FACTOR = 50
"""A busy node's stored digest is refreshed no more often than every this many times
what the last one cost (at most a fiftieth of the time: 20 s apart at 100k queue rows,
whose copy holds the apply lock for a third of its 0.4 s)."""
LIVENESS_DIGEST_INTERVAL_S = 300.0
"""Heartbeats change the state too (last-update times), but at 1k brokers every 30 s a
node is never idle: while only liveness rows change, the stored digest is refreshed at
most this often, so the cadence does not pay a whole-table pass every few seconds."""
LIVENESS_LINGER_S = 1.0
"""A batch of liveness-only deltas (heartbeats: live-broker rows) waits this long for
more before it is written, so 1k brokers re-registering every 30 s cost about one
transaction a second instead of 33. Any other delta, a flush or a stop ends the wait."""
IDLE_POLL_S = 0.5
DUTY_MAX = 0.1
"""The writer shares the gateway's interpreter lock with the event loop (route reads)
and, in raft mode, with the apply thread. During a registration storm or a large
table's first registration it could take most of it, and route reads fell to a
tenth. The writer earns this share of a core in CPU time as wall time passes (holding
at most :data:`DUTY_FREE_S`); once it has spent more than it had, it sleeps until the
debt is paid, checked after every batch and inside one (between two reads of the
table and two chunks of rows), so over any stretch it averages at most this share
however its work is cut. The deltas arriving meanwhile merge into the next
batch (fewer, larger transactions), and the lag shows as
``namesrv_projection_lag_versions``. Route answers never wait for the projection.
A tenth, not the quarter it was: on the storm bench the three writers then took three
quarters of the machine's two cores, and raft mode acknowledged about 700 heavy
registrations/s flat out; at a tenth, about 1,000 (the console's copy catches up a
few seconds later instead)."""
DUTY_FREE_S = 0.005
"""CPU time the writer may spend at once without being slowed down: the steady state
(a liveness batch a second) never waits. The limit used to apply only to batches
costing more than this, and a storm's stream of cheaper batches took two tenths of a
core per node."""
FAILURE_BACKOFF_S = 1.0
"""Pause after a failed write so a broken database is retried, not hammered."""

T = TypeVar("T")
Row = tuple[Any, ...]


@dataclass(slots=True)
class Delta:
    """The current value of every key one or more commands changed (None = gone).

    Topics are the exception: the apply thread records only which changed
    (``topic_sets``, one per command); the writer reads their queue data and
    mappings at write time (:meth:`ProjectionWriter._read_topics`), a few hundred per
    hold of the apply lock, into ``queues`` and ``mappings``. Copying them on the
    apply thread cost it a copy of every broker's queues of every topic a
    registration touched: 20 brokers sharing 5,000 topics made the twentieth copy
    100,000 entries, and Raft's ticks (its heartbeats) waited up to a second.
    """

    applied_version: int
    routes_version: int
    topic_sets: list[frozenset[str]] = field(default_factory=list)
    # Filled by the writer from ``topic_sets`` (ProjectionWriter._read_topics).
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


# ------------------------------------------------------------------ reading the table


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


ROUTE_FIELDS = ("topic", "body", "applied_version")


def _route_rows(routes: dict[str, bytes | None], version: int) -> list[Row]:
    return [(topic, body, version) for topic, body in routes.items() if body is not None]


def _write_routes(routes: dict[str, bytes | None], version: int) -> None:
    _delete_in(models.TopicRoute, "topic", routes)
    _insert(models.TopicRoute, ROUTE_FIELDS, _route_rows(routes, version))


# ------------------------------------------------------------------ writing rows


_pacing = threading.local()
"""``pace``: the projection writer's :meth:`ProjectionWriter._pace`, on its own thread."""


def _keep_pace() -> None:
    """On a projection writer's thread, keep to its share (ProjectionWriter._pace);
    on any other thread (a caller writing a delta itself: tests, tools), nothing."""
    pace: Callable[[], None] | None = getattr(_pacing, "pace", None)
    if pace is not None:
        pace()


def _chunks(items: Iterable[T]) -> Iterator[list[T]]:
    """``items`` in lists of :data:`SQL_CHUNK_ROWS`, the writer's pace kept between two."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= SQL_CHUNK_ROWS:
            yield batch
            batch = []
            _keep_pace()
    if batch:
        yield batch


# The tables a registration storm rewrites (queue data, wire routes, live brokers) are
# written with one prepared statement per chunk instead of the ORM's bulk_create and
# delete: those built a model instance per row and a new SQL text per chunk, and sent
# signals, most of the writer's time while it caught up after a fleet registered
# (docs/BENCHMARKS.md, "registration storm"). Same rows, same transaction.


def _table(model: type[Model], fields: Sequence[str]) -> tuple[str, list[str]]:
    """``model``'s table and the columns of ``fields``, quoted for the backend."""
    quote = connections[PROJECTION_DB].ops.quote_name
    meta = model._meta
    columns = []
    for name in fields:
        field = meta.get_field(name)
        assert isinstance(field, Field) and field.column, f"{model.__name__}.{name}: no column"
        columns.append(quote(field.column))
    return quote(meta.db_table), columns


def _insert(model: type[Model], fields: Sequence[str], rows: Sequence[Row]) -> None:
    """INSERT ``rows`` (values of ``fields``, in order) into ``model``'s table."""
    if not rows:
        return
    table, columns = _table(model, fields)
    marks = ", ".join(["%s"] * len(fields))
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
    with connections[PROJECTION_DB].cursor() as cursor:
        for chunk in _chunks(rows):
            cursor.executemany(sql, chunk)


def _delete_in(model: type[Model], field_name: str, values: Iterable[Any]) -> None:
    """DELETE the rows of ``model`` whose ``field_name`` is one of ``values``."""
    table, (column,) = _table(model, (field_name,))
    with connections[PROJECTION_DB].cursor() as cursor:
        for chunk in _chunks(values):
            marks = ", ".join(["%s"] * len(chunk))
            cursor.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", chunk)


def _delete_keys(model: type[Model], fields: Sequence[str], keys: Sequence[Row]) -> None:
    """DELETE the rows of ``model`` whose ``fields`` equal one of ``keys``."""
    if not keys:
        return
    table, columns = _table(model, fields)
    where = " AND ".join(f"{column} = %s" for column in columns)
    with connections[PROJECTION_DB].cursor() as cursor:
        for chunk in _chunks(keys):
            cursor.executemany(f"DELETE FROM {table} WHERE {where}", chunk)


QUEUE_FIELDS = (
    "topic",
    "broker_name",
    "read_queue_nums",
    "write_queue_nums",
    "perm",
    "topic_sys_flag",
    "applied_version",
)


def _all_queue_rows(queues: dict[str, dict[str, QueueData]], version: int) -> list[Row]:
    return [
        (
            topic,
            qd.broker_name,
            qd.read_queue_nums,
            qd.write_queue_nums,
            qd.perm,
            qd.topic_sys_flag,
            version,
        )
        for topic, by_broker in queues.items()
        for qd in by_broker.values()
    ]


def mapping_json(info: TopicQueueMappingInfo) -> dict[str, Any]:
    """A TopicQueueMappingInfo as JSON-friendly data (string keys for the id map)."""
    data = dataclasses.asdict(info)
    if info.curr_id_map is not None:
        data["curr_id_map"] = {str(k): v for k, v in sorted(info.curr_id_map.items())}
    return data


def _mapping_rows(
    topic: str, infos: dict[str, TopicQueueMappingInfo], version: int
) -> list[models.TopicQueueMapping]:
    return [
        models.TopicQueueMapping(
            topic=topic, bname=bname, info=mapping_json(info), applied_version=version
        )
        for bname, info in infos.items()
    ]


def _write_groups(groups: dict[str, BrokerData], version: int) -> None:
    rows = models.BrokerGroup.objects.bulk_create(
        [
            models.BrokerGroup(
                broker_name=bd.broker_name,
                cluster=bd.cluster,
                zone_name=bd.zone_name,
                enable_acting_master=bd.enable_acting_master,
                applied_version=version,
            )
            for bd in groups.values()
        ]
    )
    by_name = {row.broker_name: row for row in rows}
    if any(row.pk is None for row in rows):
        # Backends that do not return ids from bulk_create: look them up.
        by_name = {
            row.broker_name: row
            for row in models.BrokerGroup.objects.filter(broker_name__in=list(groups))
        }
    models.BrokerAddress.objects.bulk_create(
        [
            models.BrokerAddress(
                group=by_name[name], broker_id=broker_id, addr=addr, applied_version=version
            )
            for name, bd in groups.items()
            for broker_id, addr in bd.broker_addrs.items()
        ]
    )


LIVE_FIELDS = (
    "cluster_name",
    "broker_addr",
    "last_update_ms",
    "heartbeat_timeout_ms",
    "data_version_state",
    "data_version_timestamp",
    "data_version_counter",
    "ha_server_addr",
    "channel",
    "applied_version",
)


def _live_row(view: BrokerLiveView, version: int) -> Row:
    dv = view.data_version
    return (
        view.cluster_name,
        view.broker_addr,
        view.last_update_ms,
        view.heartbeat_timeout_ms,
        dv.state_version,
        dv.timestamp,
        dv.counter,
        view.ha_server_addr,
        view.channel,
        version,
    )


BROKER_KEY_FIELDS = ("cluster_name", "broker_addr")
FILTER_FIELDS = (*BROKER_KEY_FIELDS, "servers", "applied_version")


def _broker_key(key: BrokerAddrInfo) -> Row:
    return (key.cluster_name, key.broker_addr)


def _filter_row(key: BrokerAddrInfo, servers: tuple[str, ...], version: int) -> Row:
    # ``servers`` is a JSONField: the text Django's JSONField stores for a list.
    return (key.cluster_name, key.broker_addr, json.dumps(list(servers)), version)


def _properties_text(props: dict[str, str]) -> str:
    return encode_properties(props).decode("utf-8")


def write_delta(
    delta: Delta,
    node_id: str,
    mode: str,
    digest: str | None,
    routes: dict[str, bytes | None] | None = None,
) -> None:
    """Write one merged delta, with the wire routes it moved, in one transaction."""
    version = delta.applied_version
    with transaction.atomic(using=PROJECTION_DB):
        _write_routes(routes or {}, version)
        _write_topic_delta(delta, version)
        _write_group_delta(delta, version)
        _write_live_delta(delta, version)
        _write_kv_delta(delta, version)
        _write_node_state(
            node_id,
            mode,
            delta.applied_version,
            delta.routes_version,
            digest,
            None if delta.config is None else _properties_text(delta.config),
        )


def _write_topic_delta(delta: Delta, version: int) -> None:
    _delete_in(models.QueueData, "topic", delta.queues)
    _insert(models.QueueData, QUEUE_FIELDS, _all_queue_rows(delta.queues, version))
    for topics in _chunks(delta.mappings):
        models.TopicQueueMapping.objects.filter(topic__in=topics).delete()
        models.TopicQueueMapping.objects.bulk_create(
            [row for t in topics for row in _mapping_rows(t, delta.mappings[t], version)]
        )


def _write_group_delta(delta: Delta, version: int) -> None:
    for names in _chunks(delta.groups):
        models.BrokerGroup.objects.filter(broker_name__in=names).delete()
        present = {n: bd for n in names if (bd := delta.groups[n]) is not None}
        _write_groups(present, version)
    for names in _chunks(delta.clusters):
        models.Cluster.objects.filter(name__in=names).delete()
        models.Cluster.objects.bulk_create(
            [
                models.Cluster(name=n, broker_names=members, applied_version=version)
                for n in names
                if (members := delta.clusters[n]) is not None
            ]
        )


def _write_live_delta(delta: Delta, version: int) -> None:
    _delete_keys(models.LiveBroker, BROKER_KEY_FIELDS, [_broker_key(k) for k in delta.live])
    live = [_live_row(view, version) for view in delta.live.values() if view is not None]
    _insert(models.LiveBroker, LIVE_FIELDS, live)
    _delete_keys(models.FilterServer, BROKER_KEY_FIELDS, [_broker_key(k) for k in delta.filters])
    filters = [
        _filter_row(k, servers, version)
        for k, servers in delta.filters.items()
        if servers is not None
    ]
    _insert(models.FilterServer, FILTER_FIELDS, filters)


def _write_kv_delta(delta: Delta, version: int) -> None:
    for namespace, exists in delta.namespaces.items():
        if exists:
            models.KVNamespace.objects.update_or_create(
                name=namespace, defaults={"applied_version": version}
            )
        else:
            models.KVNamespace.objects.filter(name=namespace).delete()
    for (namespace, key), value in delta.kv.items():
        if value is None:
            models.KVEntry.objects.filter(namespace__name=namespace, key=key).delete()
            continue
        ns_row, _ = models.KVNamespace.objects.get_or_create(
            name=namespace, defaults={"applied_version": version}
        )
        models.KVEntry.objects.update_or_create(
            namespace=ns_row, key=key, defaults={"value": value, "applied_version": version}
        )


def _write_node_state(
    node_id: str,
    mode: str,
    applied_version: int,
    routes_version: int,
    digest: str | None,
    config_text: str | None,
) -> None:
    defaults: dict[str, Any] = {
        "mode": mode,
        "applied_version": applied_version,
        "routes_version": routes_version,
    }
    if digest is not None:
        defaults["digest"] = digest
    if config_text is not None:
        defaults["config_properties"] = config_text
    models.NodeState.objects.update_or_create(node_id=node_id, defaults=defaults)


PROJECTION_MODELS: tuple[type[Any], ...] = (
    models.KVEntry,
    models.KVNamespace,
    models.BrokerAddress,
    models.BrokerGroup,
    models.Cluster,
    models.LiveBroker,
    models.FilterServer,
    models.QueueData,
    models.TopicQueueMapping,
    models.TopicRoute,
)


def write_full_state(state: FullState, node_id: str, mode: str) -> None:
    """Rewrite every projection table from ``state`` in one transaction."""
    version = state.applied_version
    with transaction.atomic(using=PROJECTION_DB):
        for model in PROJECTION_MODELS:
            model.objects.all().delete()
        _insert(models.QueueData, QUEUE_FIELDS, _all_queue_rows(state.queues, version))
        models.TopicQueueMapping.objects.bulk_create(
            [row for t, m in state.mappings.items() for row in _mapping_rows(t, m, version)],
            batch_size=SQL_CHUNK_ROWS,
        )
        _write_groups(state.groups, version)
        models.Cluster.objects.bulk_create(
            [
                models.Cluster(name=n, broker_names=m, applied_version=version)
                for n, m in state.clusters.items()
            ]
        )
        _insert(models.LiveBroker, LIVE_FIELDS, [_live_row(v, version) for v in state.live])
        _insert(
            models.FilterServer,
            FILTER_FIELDS,
            [_filter_row(k, s, version) for k, s in state.filters.items()],
        )
        _write_full_kv(state.kv, version)
        _insert(models.TopicRoute, ROUTE_FIELDS, _route_rows(encode_routes(state.routes), version))
        _write_node_state(
            node_id,
            mode,
            version,
            state.routes_version,
            state.digest,
            _properties_text(state.config),
        )


def _write_full_kv(kv: dict[str, dict[str, str]], version: int) -> None:
    namespaces = models.KVNamespace.objects.bulk_create(
        [models.KVNamespace(name=ns, applied_version=version) for ns in kv]
    )
    if any(row.pk is None for row in namespaces):
        namespaces = list(models.KVNamespace.objects.all())
    by_name = {row.name: row for row in namespaces}
    models.KVEntry.objects.bulk_create(
        [
            models.KVEntry(namespace=by_name[ns], key=k, value=v, applied_version=version)
            for ns, entries in kv.items()
            for k, v in entries.items()
        ],
        batch_size=SQL_CHUNK_ROWS,
    )


# ------------------------------------------------------------------ the writer


@dataclass(frozen=True, slots=True)
class _Marker:
    """A flush request: set once everything applied before it is written."""

    done: threading.Event


_STOP = object()


class ProjectionWriter:
    """Subscribes to a replicator and mirrors its table into the node's Django tables."""

    def __init__(
        self,
        replicator: Replicator,
        *,
        node_id: str | None = None,
        publisher: EventPublisher = null_publisher,
        digest_interval_s: float = DIGEST_INTERVAL_S,
        liveness_digest_interval_s: float = LIVENESS_DIGEST_INTERVAL_S,
        liveness_linger_s: float = LIVENESS_LINGER_S,
        idle_poll_s: float = IDLE_POLL_S,
    ) -> None:
        self.replicator = replicator
        self.node_id = node_id or replicator.node_id
        self.publisher = publisher
        self.digest_interval_s = digest_interval_s
        self.liveness_digest_interval_s = liveness_digest_interval_s
        self.liveness_linger_s = liveness_linger_s
        self.idle_poll_s = idle_poll_s
        self._duty_credit_s = DUTY_FREE_S
        self._duty_credit_at = time.monotonic()
        self._charged_cpu_s = 0.0
        self._awaited = False
        # What the writer has still to do: the merged delta and the flush and stop
        # requests made since it last looked, guarded by one condition.
        self._wake = threading.Condition()
        self._pending: Delta | None = None
        self._controls: list[object] = []
        self._rebuild_needed = threading.Event()
        self._skip_through_version = -1
        self._thread: threading.Thread | None = None
        self._attached = False
        self._last_digest_s = 0.0
        self._digest_cost_s = 0.0
        self._digest_routes_version = -1
        self._routes_version_written = -1
        self._version_seen = 0
        self._version_written = 0
        """The routes version the stored wire routes reflect (-1: none yet)."""
        """The routes version the stored digest was taken at (-1: none yet)."""
        self._digest_stale = False
        self.digests_computed = 0
        self.batches_written = 0
        self.rebuilds = 0

    # -- apply-thread side --------------------------------------------------------

    def on_applied(self, command: Command, result: ApplyResult) -> None:
        """The replicator's listener: merge the changed keys into the waiting delta;
        never touch the DB here."""
        if result.changes.empty or self._rebuild_needed.is_set():
            # A pending rebuild reads the table later and covers this command too.
            return
        self._version_seen = max(self._version_seen, result.applied_version)
        delta = self.replicator.read(lambda table: read_delta(table, result))
        with self._wake:
            if self._pending is None:
                self._pending = delta
            else:
                self._pending.merge(delta)
            self._wake.notify()

    # -- lifecycle ----------------------------------------------------------------

    def attach(self) -> None:
        """Subscribe to the replicator (once); changes wait, merged, until :meth:`start`."""
        if not self._attached:
            self.replicator.subscribe(self.on_applied)
            self._attached = True

    def start(self, *, rebuild: bool = True) -> None:
        """Subscribe, optionally rebuild everything first, and start the writer thread."""
        self.attach()
        if rebuild:
            self._rebuild_needed.set()
        self._thread = threading.Thread(
            target=self._run, name=f"projection-{self.node_id}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Write what is waiting, then stop the writer thread."""
        thread = self._thread
        if thread is None:
            return
        self._control(_STOP)
        thread.join(timeout_s)
        self._thread = None

    def lag_versions(self) -> int:
        """Changes applied to the table but not yet written to the rows (the metrics'
        ``namesrv_projection_lag_versions``; 0 when the copy is current)."""
        return max(0, self._version_seen - self._version_written)

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every change applied before the call is committed; False on timeout."""
        if self._thread is None or not self._thread.is_alive():
            return False
        done = threading.Event()
        self._control(_Marker(done))
        return done.wait(timeout_s)

    def _control(self, item: object) -> None:
        with self._wake:
            self._controls.append(item)
            self._wake.notify()

    def request_rebuild(self) -> None:
        """Rewrite everything at the writer's next step (any thread, never blocks).

        Raft mode calls this when a snapshot replaced the whole table: the waiting
        delta describes the old table, and the rebuild's read skips it.
        """
        self._rebuild_needed.set()

    def rebuild(self) -> None:
        """Rewrite every row from the table now, on the caller's thread."""
        self._rebuild_needed.clear()
        state = self.replicator.read(read_full_state)
        write_full_state(state, self.node_id, self.replicator.mode)
        self._skip_through_version = state.applied_version
        self._last_digest_s = time.monotonic()
        self._digest_routes_version = state.routes_version
        self._routes_version_written = state.routes_version
        self._version_written = max(self._version_written, state.applied_version)
        self.digests_computed += 1
        self.rebuilds += 1
        publish_safely(
            self.publisher,
            ChangeEvent(
                node_id=self.node_id,
                applied_version=state.applied_version,
                routes_version=state.routes_version,
                rebuilt=True,
            ),
        )

    # -- writer thread ------------------------------------------------------------

    def _run(self) -> None:
        _pacing.pace = self._pace
        self._charged_cpu_s = time.thread_time()
        try:
            while self._step():
                pass
        finally:
            connections[PROJECTION_DB].close()

    def _step(self) -> bool:
        """One round of the writer loop; False once told to stop."""
        if self._rebuild_needed.is_set():
            self._guarded(self.rebuild)
        taken = self._take(self.idle_poll_s)
        if taken is None:
            if self._digest_stale:
                # Idle now: catch the digest up that busy batches skipped.
                self._guarded(self._refresh_digest)
            return True
        self._charged_cpu_s = time.thread_time()
        keep_running = self._process(*taken)
        if keep_running:
            self._pace()
        return keep_running

    def _pace(self) -> None:
        """Charge the CPU this thread spent since the last charge against the writer's
        share (:data:`DUTY_MAX`) and sleep off what it spent beyond its credit.

        Called at the end of a batch and inside one, between two reads of the table and
        two chunks of rows: a large table's first registration makes a single batch of
        100,000 queue rows and 5,000 routes, and charged only at its end that batch ran
        at full speed for its whole cost, beside Raft's tick thread and the event loop.
        While a flush or a stop waits, nothing is slowed down and no debt is kept:
        catching up is what was asked. Writer thread only (see _keep_pace)."""
        cpu_s = time.thread_time()
        spent_s, self._charged_cpu_s = cpu_s - self._charged_cpu_s, cpu_s
        now = time.monotonic()
        earned = (now - self._duty_credit_at) * DUTY_MAX
        credit = min(DUTY_FREE_S, self._duty_credit_s + earned) - spent_s
        if self._awaited or self._controls:
            credit = max(credit, 0.0)
        elif credit < 0:
            time.sleep(-credit / DUTY_MAX)
            credit = 0.0
            self._charged_cpu_s = time.thread_time()
        self._duty_credit_s = credit
        self._duty_credit_at = time.monotonic()

    def _take(self, wait_s: float) -> tuple[Delta | None, list[object]] | None:
        """The waiting delta and requests, taken away; None after ``wait_s`` of nothing.

        While the delta holds liveness-only changes and no request waits, wait up
        to ``liveness_linger_s`` for more (see LIVENESS_LINGER_S).
        """
        with self._wake:
            if self._pending is None and not self._controls:
                self._wake.wait(wait_s)
                if self._pending is None and not self._controls:
                    return None
            deadline_s = time.monotonic() + self.liveness_linger_s
            while (
                self._pending is not None
                and self._pending.liveness_only
                and not self._controls
                and (remaining_s := deadline_s - time.monotonic()) > 0
            ):
                self._wake.wait(remaining_s)
            taken = (self._pending, self._controls)
            self._pending, self._controls = None, []
            return taken

    def _process(self, delta: Delta | None, controls: list[object]) -> bool:
        """Write ``delta`` (unless a rebuild covered it), then answer ``controls``
        (flushes, stop) in order; False once told to stop."""
        # Requests taken with the delta wait for it: it is written at full speed.
        self._awaited = bool(controls)
        if delta is not None and delta.applied_version > self._skip_through_version:
            self._guarded(lambda: self._commit(delta))
        keep_running = True
        for item in controls:
            if isinstance(item, _Marker):
                if self._rebuild_needed.is_set():
                    self._guarded(self.rebuild)
                self._guarded(self._refresh_digest)
                item.done.set()
            elif item is _STOP:
                keep_running = False
        return keep_running

    def _guarded(self, action: Any) -> None:
        close_old_connections()
        try:
            action()
        except Exception:
            # The rows may now miss this batch; a rebuild puts everything right.
            log.exception("projection write failed; rebuilding")
            self._rebuild_needed.set()
            time.sleep(FAILURE_BACKOFF_S)

    def _commit(self, delta: Delta) -> None:
        self._read_topics(delta)
        digest = self._digest_if_due(delta)
        routes = self._moved_routes(delta)
        write_delta(delta, self.node_id, self.replicator.mode, digest, routes)
        self._routes_version_written = max(self._routes_version_written, delta.routes_version)
        self._version_written = max(self._version_written, delta.applied_version)
        self._digest_stale = digest is None
        self.batches_written += 1
        publish_safely(self.publisher, delta.event(self.node_id))

    def _read_topics(self, delta: Delta) -> None:
        """Fill ``delta.queues`` and ``delta.mappings`` with the current values of the
        topics it changed, :data:`ROUTES_PER_READ` per hold of the apply lock. Read at
        a version no older than ``delta``'s, as the routes are (see _moved_routes)."""
        wanted = frozenset().union(*delta.topic_sets)
        delta.topic_sets.clear()
        values = self._read_by_topic(
            wanted, lambda table, t: (table.topic_queues(t), table.topic_queue_mapping(t))
        )
        for topic, (queues, mappings) in values.items():
            delta.queues[topic] = queues
            delta.mappings[topic] = mappings

    def _read_by_topic(
        self, topics: Iterable[str], read: Callable[[RouteTable, str], T]
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
            found.update(self.replicator.read(functools.partial(chunk_of, chunk=chunk)))
            _keep_pace()
        return found

    def _moved_routes(self, delta: Delta) -> dict[str, bytes | None]:
        """The wire routes of the topics whose answer ``delta`` may have changed.

        Nothing while the routes version stays put (heartbeats). Otherwise the
        changed topics, the topics of changed broker groups and of brokers whose
        filter servers moved, or every topic when the config or the order config
        changed. Read from the table, not from the rows: the route comes from the
        code that answers the wire. Read at the table's current version, which is
        never older than ``delta``; a later delta rewrites what moves after it.
        """
        if delta.routes_version == self._routes_version_written:
            return {}
        order_config = NAMESPACE_ORDER_TOPIC_CONFIG
        every_topic = (
            delta.config is not None
            or any(ns == order_config for ns, _ in delta.kv)
            or order_config in delta.namespaces
        )
        if every_topic:
            topics: set[str] | None = None
        else:
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
                    models.QueueData.objects.filter(broker_name__in=names).values_list(
                        "topic", flat=True
                    )
                )
            if not topics:
                return {}

        if topics is None:
            # A topic gone from the table is in delta.queues, never in the table: asked
            # for by name, its None removes its row.
            topics = set(delta.queues) | set(delta.mappings)
            topics.update(self.replicator.read(lambda table: table.all_topic_list().topic_list))
        # In chunks: reading the routes of a fleet's first registrations (30,000
        # topics) in one hold kept Raft's apply thread, and with it the leader's
        # heartbeats, waiting for half a second. Each topic is still read at a
        # version no older than ``delta``.
        return encode_routes(
            self._read_by_topic(topics, lambda table, t: table.pickup_topic_route(t))
        )

    def _digest_if_due(self, delta: Delta) -> str | None:
        """The digest to store with ``delta``, or None to leave the stored one (stale)."""
        elapsed_s = time.monotonic() - self._last_digest_s
        if delta.routes_version != self._digest_routes_version:
            interval_s = self.digest_interval_s
        else:
            interval_s = self.liveness_digest_interval_s
        # A big table's digest waits longer: its copy holds the apply lock.
        due = elapsed_s >= max(interval_s, DIGEST_COST_FACTOR * self._digest_cost_s)
        return self._current_digest(delta.applied_version) if due else None

    def _current_digest(self, applied_version: int) -> str | None:
        """The table's digest if the table is still at ``applied_version``, else None."""

        def read(table: RouteTable) -> tuple[dict[str, Any], int] | None:
            if table.applied_version != applied_version:
                return None
            return table.state_document(), table.routes_version  # hashed after the lock

        began_s = time.monotonic()
        taken = self.replicator.read(read)
        if taken is None:
            return None
        document, routes_version = taken
        digest = snapshot.digest_of(document)
        self._last_digest_s = time.monotonic()
        self._digest_cost_s = self._last_digest_s - began_s
        self._digest_routes_version = routes_version
        self.digests_computed += 1
        return digest

    def _refresh_digest(self) -> None:
        self._digest_stale = False
        state = models.NodeState.objects.filter(node_id=self.node_id).first()
        if state is None:
            return
        digest = self._current_digest(state.applied_version)
        if digest is not None and digest != state.digest:
            models.NodeState.objects.filter(node_id=self.node_id).update(digest=digest)
