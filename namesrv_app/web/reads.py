"""Read-side queries of the console and the API, over the node's DB projection.

The API and the console pages call the same functions, so a page and its JSON
twin never disagree. Every function aggregates in SQL and fetches a page's
related rows in one query per table (no N+1): the pages must stay fast with
1k brokers and 10k topics.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import connections
from django.db.models import Case, CharField, Count, F, Max, Min, Q, QuerySet, Sum, Value, When
from django.db.models.functions import Greatest, Left
from django.db.models.lookups import Exact

from namesrv_app import gateway_client, models, topic_types
from namesrv_app.agreement import mark_agreement
from namesrv_app.db_router import PROJECTION_DB
from namesrv_app.projection.writer import LIVENESS_LINGER_S
from raftstore.config import NODE_KEYS
from remoting import bodies
from remoting.model import TopicRouteData

MASTER_ID = 0


# ------------------------------------------------------------------- routes


def route_json(route: TopicRouteData) -> dict[str, Any]:
    """The standard (quoted-key) TopicRouteData JSON a 4.9.4+ client receives, as a dict."""
    loaded: dict[str, Any] = json.loads(bodies.encode_topic_route_data(route, standard=True))
    return loaded


@dataclass(frozen=True, slots=True)
class ProjectedRoute:
    """A route read from the projection, with the applied version it reflects."""

    node_id: str
    applied_version: int
    route: TopicRouteData | None
    # Moves only when a route answer may change (never on heartbeats): the key
    # of the API's route answer cache (namesrv_app.api.route_reads).
    routes_version: int = 0


def _route_sql() -> str:
    """One statement for the version and the stored wire route: SQL reads one snapshot
    per statement, so the route belongs to the versions it is returned with."""
    state, route = models.NodeState._meta.db_table, models.TopicRoute._meta.db_table
    return (
        f"SELECT s.node_id, s.applied_version, s.routes_version, r.body "
        f"FROM (SELECT node_id, applied_version, routes_version FROM {state} "
        f"      ORDER BY node_id LIMIT 1) s "
        f"LEFT JOIN {route} r ON r.topic = %s"
    )


def projected_route(topic: str) -> ProjectedRoute:
    """The route of ``topic`` as this node answers GET_ROUTEINFO_BY_TOPIC, from the projection.

    The projection stores each topic's route as the wire encodes it, built by the
    same ``RouteTable.pickup_topic_route`` that answers the wire (acting masters,
    filter servers, order config, queue mappings), so this answer and the wire's
    agree at the same version.
    """
    with connections[PROJECTION_DB].cursor() as cursor:
        cursor.execute(_route_sql(), [topic])
        row = cursor.fetchone()
    if row is None:
        return ProjectedRoute("", 0, None)
    node_id, applied_version, routes_version, body = row
    route = None if body is None else bodies.decode_topic_route_data(bytes(body))
    return ProjectedRoute(node_id, applied_version, route, routes_version)


@dataclass(frozen=True, slots=True)
class ProjectionStamp:
    """The versions this node's projection reflects right now (one NodeState row)."""

    node_id: str
    applied_version: int
    routes_version: int


def projection_stamp() -> ProjectionStamp:
    """One indexed single-row read; ("", 0, 0) before the first projection write."""
    row = (
        models.NodeState.objects.order_by("node_id")
        .values_list("node_id", "applied_version", "routes_version")
        .first()
    )
    return ProjectionStamp("", 0, 0) if row is None else ProjectionStamp(*row)


# ------------------------------------------------------------------- cross-node comparison


@dataclass
class NodeRoute:
    """One node's answer in a comparison."""

    node_id: str
    addr: str
    local: bool
    status: str
    route: dict[str, Any] | None = None
    error: str | None = None
    differences: list[str] = field(default_factory=list)
    missing: bool = False
    """No route for the topic on this node while another node has one: the page says
    "missing on <node>" instead of listing every field of the others' route."""


def _route_index(route: dict[str, Any] | None) -> dict[str, Any]:
    """The comparable facts of a route, keyed by a readable path."""
    if route is None:
        return {}
    facts: dict[str, Any] = {}
    for queue in route.get("queueDatas", []):
        for name in ("readQueueNums", "writeQueueNums", "perm", "topicSysFlag"):
            facts[f"queueDatas[{queue['brokerName']}].{name}"] = queue.get(name)
    for broker in route.get("brokerDatas", []):
        for broker_id, addr in broker.get("brokerAddrs", {}).items():
            facts[f"brokerDatas[{broker['brokerName']}].brokerAddrs[{broker_id}]"] = addr
        facts[f"brokerDatas[{broker['brokerName']}].cluster"] = broker.get("cluster")
    facts["orderTopicConf"] = route.get("orderTopicConf")
    return facts


def compare_route(topic: str) -> dict[str, Any]:
    """Ask every node for its own answer and mark where each differs from the reference.

    The reference is this node's answer when it has a route, else the first node
    with a route, else this node's (or the first) answer. Unreachable nodes are
    reported, not counted as disagreeing. A node that answered "no route" while
    another node has one is marked ``missing`` (and listed in ``missing_on``); its
    ``differences`` still list every field it lacks.
    """
    answers = gateway_client.every_node_route(topic)
    nodes = []
    for answer in answers:
        if answer.error is not None:
            nodes.append(
                NodeRoute(
                    answer.node.node_id,
                    answer.node.remoting_addr,
                    answer.node.local,
                    "unreachable",
                    error=answer.error,
                )
            )
            continue
        route = None if answer.value is None else route_json(answer.value)
        status = "ok" if route is not None else "not_found"
        nodes.append(
            NodeRoute(
                answer.node.node_id, answer.node.remoting_addr, answer.node.local, status, route
            )
        )
    answered = [n for n in nodes if n.status != "unreachable"]
    routed = [n for n in answered if n.route is not None]
    reference = (
        next((n for n in routed if n.local), routed[0])
        if routed
        else next((n for n in answered if n.local), answered[0] if answered else None)
    )
    if routed:
        for node in answered:
            node.missing = node.route is None
    if reference is not None:
        base = _route_index(reference.route)
        for node in answered:
            mine = _route_index(node.route)
            node.differences = sorted(
                key for key in base.keys() | mine.keys() if base.get(key) != mine.get(key)
            )
    return {
        "topic": topic,
        "reference_node": None if reference is None else reference.node_id,
        "agree": all(not n.differences for n in answered),
        "missing_on": [n.node_id for n in nodes if n.missing],
        "nodes": [n.__dict__ for n in nodes],
    }


# ------------------------------------------------------------------- topics


def _topic_rows(search: str = "", cluster: str = "", broker: str = "") -> QuerySet[Any]:
    """The QueueData rows the topic list's filters keep (one row per topic and broker)."""
    rows = models.QueueData.objects.all()
    if search:
        rows = rows.filter(topic__icontains=search)
    if broker:
        rows = rows.filter(broker_name=broker)
    if cluster:
        names = models.BrokerGroup.objects.filter(cluster=cluster).values("broker_name")
        rows = rows.filter(broker_name__in=names)
    return rows


def topic_summaries(
    search: str = "", cluster: str = "", broker: str = "", type_filter: str = topic_types.ALL
) -> QuerySet[Any]:
    """One row per topic: its type, broker count, total queues, min/max perm; filtered,
    ordered by name.

    ``type_filter`` is one of :data:`namesrv_app.topic_types.TYPE_FILTERS`: a type,
    ``user`` (every type but system) or ``all`` (the default: no type filter).
    """
    return _summarised(
        _topic_rows(search, cluster, broker), topic_types.types_of_filter(type_filter)
    )


def topic_summary(topic: str) -> dict[str, Any] | None:
    """The topic-list row of exactly ``topic``; None when no broker serves it."""
    row: dict[str, Any] | None = _summarised(models.QueueData.objects.filter(topic=topic)).first()
    return row


def topic_type_counts(search: str = "", cluster: str = "", broker: str = "") -> dict[str, int]:
    """How many topics of each type the list's other filters keep, in one query."""
    counts = dict.fromkeys(topic_types.TOPIC_TYPES, 0)
    rows = (
        _topic_rows(search, cluster, broker)
        .annotate(type=_topic_type_sql())
        .values("type")
        .annotate(n=Count("topic", distinct=True))
        .values_list("type", "n")
        .order_by()
    )
    counts.update(rows)
    return counts


def topic_queues_by_broker(
    topics: Iterable[str], cluster: str = "", broker: str = ""
) -> dict[str, list[dict[str, Any]]]:
    """Each topic's queues per broker name (one query for a page of topics), under the
    same cluster and broker filters as the list whose totals they break down."""
    wanted = list(topics)
    by_topic: dict[str, list[dict[str, Any]]] = {t: [] for t in wanted}
    rows = (
        _topic_rows(cluster=cluster, broker=broker)
        .filter(topic__in=wanted)
        .order_by("topic", "broker_name")
        .values("topic", "broker_name", "read_queue_nums", "write_queue_nums", "perm")
    )
    for row in rows:
        by_topic[row["topic"]].append(row)
    return by_topic


def _starts_with(field_name: str, prefix: str) -> Exact:
    # Not ``__startswith``: SQLite's LIKE ignores ASCII case, RocketMQ's prefixes do not.
    return Exact(Left(field_name, len(prefix)), Value(prefix))


def _topic_type_sql() -> Case:
    """:func:`namesrv_app.topic_types.topic_type` of ``topic`` as SQL, with the cluster
    and broker names the projection holds as sub-selects (no extra query)."""
    system = Value(topic_types.SYSTEM)
    return Case(
        When(_starts_with("topic", topic_types.RETRY_PREFIX), then=Value(topic_types.RETRY)),
        When(_starts_with("topic", topic_types.DLQ_PREFIX), then=Value(topic_types.DLQ)),
        When(Q(topic__in=sorted(topic_types.SYSTEM_TOPICS)), then=system),
        When(_starts_with("topic", topic_types.SYSTEM_TOPIC_PREFIX), then=system),
        When(Q(topic__in=models.Cluster.objects.values("name")), then=system),
        When(Q(topic__in=models.BrokerGroup.objects.values("broker_name")), then=system),
        default=Value(topic_types.NORMAL),
        output_field=CharField(),
    )


def _summarised(
    rows: QuerySet[models.QueueData], types: tuple[str, ...] = topic_types.TOPIC_TYPES
) -> QuerySet[Any]:
    rows = rows.annotate(type=_topic_type_sql())
    if set(types) != set(topic_types.TOPIC_TYPES):
        rows = rows.filter(type__in=types)
    return (
        rows.values("topic", "type")
        .annotate(
            brokers=Count("broker_name"),
            read_queues=Sum("read_queue_nums"),
            write_queues=Sum("write_queue_nums"),
            perm_min=Min("perm"),
            perm_max=Max("perm"),
            version=Max("applied_version"),
        )
        .order_by("topic")
    )


def topic_count() -> int:
    """How many topics the projection holds."""
    return models.QueueData.objects.values("topic").distinct().count()


# ------------------------------------------------------------------- brokers and clusters


def now_ms() -> int:
    """Wall-clock milliseconds (only for showing heartbeat ages)."""
    return int(time.time() * 1000)


PROJECTION_WRITING_S = LIVENESS_LINGER_S + 1.0
"""While the projection wrote within this long, it is still writing heartbeats."""


def liveness_now_ms() -> int:
    """The instant heartbeat ages are measured at: the projection's last write while it
    keeps writing, the wall clock once it stops.

    The projection's live-broker rows lag the gateway by up to the liveness linger (and a
    busy writer's pause), so ages taken against the wall clock would grow by that lag and
    show healthy brokers as expiring; taken against the last write they are the ages the
    table itself claims. When the writer goes quiet (nothing heartbeats), the wall clock
    takes over and silent brokers age as they should.
    """
    now = now_ms()
    written = models.NodeState.objects.values_list("updated_at", flat=True).first()
    if written is None:
        return now
    written_ms = int(written.timestamp() * 1000)
    if 0 <= now - written_ms <= PROJECTION_WRITING_S * 1000:
        return written_ms
    return now


def cluster_summaries() -> list[dict[str, Any]]:
    """Each cluster with its broker group and replica counts, in two grouped queries."""
    groups = dict(
        models.BrokerGroup.objects.values("cluster")
        .annotate(n=Count("id"))
        .values_list("cluster", "n")
    )
    replicas = dict(
        models.BrokerAddress.objects.values("group__cluster")
        .annotate(n=Count("id"))
        .values_list("group__cluster", "n")
    )
    live = dict(
        models.LiveBroker.objects.values("cluster_name")
        .annotate(n=Count("id"))
        .values_list("cluster_name", "n")
    )
    return [
        {
            "name": cluster.name,
            "broker_names": cluster.broker_names,
            "broker_groups": groups.get(cluster.name, 0),
            "replicas": replicas.get(cluster.name, 0),
            "live_brokers": live.get(cluster.name, 0),
            "applied_version": cluster.applied_version,
        }
        for cluster in models.Cluster.objects.all()
    ]


def broker_groups(search: str = "", cluster: str = "") -> QuerySet[models.BrokerGroup]:
    """Broker groups filtered by name and cluster, ordered by cluster then name."""
    groups = models.BrokerGroup.objects.all()
    if search:
        groups = groups.filter(broker_name__icontains=search)
    if cluster:
        groups = groups.filter(cluster=cluster)
    return groups.order_by("cluster", "broker_name")


def replicas_of(
    groups: Iterable[models.BrokerGroup], at_ms: int | None = None
) -> list[dict[str, Any]]:
    """The page's groups with their replicas and liveness: three queries for the whole page."""
    page = list(groups)
    addresses: list[dict[str, Any]] = [
        dict(row)
        for row in models.BrokerAddress.objects.filter(group__in=page)
        .order_by("group_id", "broker_id")
        .values("group_id", "broker_id", "addr")
    ]
    addrs = {a["addr"] for a in addresses}
    live = {
        (row.cluster_name, row.broker_addr): row
        for row in models.LiveBroker.objects.filter(broker_addr__in=addrs)
    }
    now = liveness_now_ms() if at_ms is None else at_ms
    by_group: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for address in addresses:
        by_group[address["group_id"]].append(address)
    result = []
    for group in page:
        replicas = [
            _replica(group, a, live.get((group.cluster, a["addr"])), now)
            for a in by_group.get(group.pk, [])
        ]
        result.append(
            {
                "broker_name": group.broker_name,
                "cluster": group.cluster,
                "zone_name": group.zone_name,
                "enable_acting_master": group.enable_acting_master,
                "applied_version": group.applied_version,
                "replicas": replicas,
                "alive": sum(1 for r in replicas if r["alive"]),
            }
        )
    return result


def _replica(
    group: models.BrokerGroup, address: dict[str, Any], live: models.LiveBroker | None, now: int
) -> dict[str, Any]:
    age_ms = None if live is None else max(0, now - live.last_update_ms)
    timeout_ms = None if live is None else live.heartbeat_timeout_ms
    alive = live is not None and age_ms is not None and age_ms <= (timeout_ms or 0)
    return {
        "broker_id": address["broker_id"],
        "addr": address["addr"],
        "role": "master" if address["broker_id"] == MASTER_ID else "slave",
        "ha_server_addr": None if live is None else live.ha_server_addr,
        "last_update_ms": None if live is None else live.last_update_ms,
        "heartbeat_age_ms": age_ms,
        "heartbeat_timeout_ms": timeout_ms,
        "registered": live is not None,
        "alive": alive,
        "expiring": alive
        and age_ms is not None
        and timeout_ms is not None
        and age_ms > expiring_after_ms(timeout_ms),
    }


HEARTBEATS_PER_TIMEOUT = 3
"""Assumed heartbeats per timeout when the live entry does not say its interval.

A ``brokerLiveTable`` entry (``LiveBroker``) carries the broker's timeout but not
its heartbeat interval; ``make run``'s brokers beat every 1 s with a 3 s timeout,
so the interval is taken as a third of the timeout."""
MISSED_HEARTBEATS_EXPIRING = 2
"""A broker is "expiring" only after missing this many heartbeats in a row."""


def expiring_after_ms(timeout_ms: int, heartbeat_interval_ms: int | None = None) -> int:
    """The silence (ms) after which a live broker counts as expiring.

    Both must hold: it missed :data:`MISSED_HEARTBEATS_EXPIRING` heartbeats AND it is
    past half its timeout. One late heartbeat (a GC pause, a projection batch that
    lingered) is not a warning. Without a known interval, ``timeout /
    HEARTBEATS_PER_TIMEOUT`` is assumed, so with a 3 s timeout: silent over 2 s.
    """
    interval = heartbeat_interval_ms or timeout_ms // HEARTBEATS_PER_TIMEOUT
    return max(timeout_ms // 2, MISSED_HEARTBEATS_EXPIRING * interval)


def liveness_counts(at_ms: int | None = None) -> dict[str, int]:
    """Live brokers, and those expiring (:func:`expiring_after_ms`), in one query."""
    now = liveness_now_ms() if at_ms is None else at_ms
    timeout = F("heartbeat_timeout_ms")
    threshold = Greatest(
        timeout / 2, MISSED_HEARTBEATS_EXPIRING * (timeout / HEARTBEATS_PER_TIMEOUT)
    )
    rows = models.LiveBroker.objects.aggregate(
        total=Count("id"),
        expiring=Count("id", filter=Q(last_update_ms__lt=now - threshold)),
    )
    return {"live": rows["total"] or 0, "expiring": rows["expiring"] or 0}


# ------------------------------------------------------------------- KV config


def kv_namespaces(search: str = "") -> list[dict[str, Any]]:
    """Every namespace with its entries (two queries in all)."""
    namespaces = models.KVNamespace.objects.all()
    entries = models.KVEntry.objects.select_related("namespace").order_by("namespace__name", "key")
    if search:
        namespaces = namespaces.filter(name__icontains=search)
        entries = entries.filter(namespace__name__icontains=search)
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        grouped[entry.namespace.name].append(
            {"key": entry.key, "value": entry.value, "applied_version": entry.applied_version}
        )
    return [
        {"namespace": ns.name, "applied_version": ns.applied_version, "entries": grouped[ns.name]}
        for ns in namespaces
    ]


# ------------------------------------------------------------------- nodes


def node_panels(*, brokers: bool = False) -> list[dict[str, Any]]:
    """Every node's status over the wire, plus a ``disagrees`` flag per node and the
    live brokers it lacks or alone has (:mod:`namesrv_app.agreement`); with ``brokers``,
    each node's broker replicas as it sees them (``brokers``, for the matrix).
    """
    answers = gateway_client.every_node_status(brokers=brokers)
    names = {a.node.raft_addr: a.node.node_id for a in answers if a.node.raft_addr}
    panels = []
    for answer in answers:
        panel: dict[str, Any] = {
            "node_id": answer.node.node_id,
            "remoting_addr": answer.node.remoting_addr,
            "local": answer.node.local,
            "reachable": answer.error is None,
            "error": answer.error,
            # A member on another host: its internal port is loopback-only there, so its
            # status is on its own console, not "down" here.
            "remote": answer.node.internal_addr is None and not answer.node.local,
            "console_url": answer.node.console_url,
        }
        if answer.error is None:
            panel.update(answer.value)
            panel["node_id"] = answer.node.node_id
            _name_raft_addresses(panel, names)
        panels.append(panel)
    mark_agreement(panels)
    return panels


def _name_raft_addresses(panel: dict[str, Any], names: dict[str, str]) -> None:
    """Raft addresses as node ids for the reader (``leader_id``, each peer's
    ``node_id``), from the member list; an address no member has stays as it is."""
    leader = panel.get("leader")
    panel["leader_id"] = names.get(leader, leader) if isinstance(leader, str) else leader
    for peer in panel.get("peers") or ():
        if isinstance(peer, dict):
            peer["node_id"] = names.get(str(peer.get("address")), "")


def local_node_state() -> dict[str, Any] | None:
    """What this node's projection says about itself (shown when the gateway is down)."""
    state = models.NodeState.objects.first()
    if state is None:
        return None
    return {
        "node_id": state.node_id,
        "mode": state.mode,
        "applied_version": state.applied_version,
        "routes_version": state.routes_version,
        "digest": state.digest,
        "updated_at": state.updated_at.isoformat(),
    }


# ------------------------------------------------------------------- NameServer config


def config_comparison() -> dict[str, Any]:
    """Every node's NamesrvConfig side by side (GET_NAMESRV_CONFIG over the wire).

    ``rows``: one per key, with each node's value and ``differs`` when two reachable
    nodes hold different values; ``blacklisted``: keys UPDATE_NAMESRV_CONFIG refuses
    (``configBlackList`` plus the fixed ones), as this node reports them.
    """
    answers = gateway_client.every_node_config()
    nodes = [{"node_id": a.node.node_id, "local": a.node.local, "error": a.error} for a in answers]
    configs = {a.node.node_id: a.value for a in answers if a.error is None}
    keys = sorted(set().union(*(c.keys() for c in configs.values()))) if configs else []
    rows = []
    for key in keys:
        values = [
            configs[n["node_id"]].get(key) if n["node_id"] in configs else None for n in nodes
        ]
        seen = {configs[node].get(key) for node in configs}
        # Each node's own port, paths and scan period differ by design: no divergence.
        differs = len(seen) > 1 and key not in NODE_KEYS
        rows.append({"key": key, "values": values, "differs": differs})
    local_ids = [n["node_id"] for n in nodes if n["local"] and n["node_id"] in configs]
    local: dict[str, str] = configs[local_ids[0]] if local_ids else next(iter(configs.values()), {})
    blacklisted = sorted(gateway_client.blacklisted_config_keys(local))
    return {
        "nodes": nodes,
        "rows": rows,
        "blacklisted": blacklisted,
        "differs": [r["key"] for r in rows if r["differs"]],
    }
