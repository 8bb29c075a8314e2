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
from django.db.models import Count, F, Max, Min, Q, QuerySet, Sum

from namesrv_app import gateway_client, models
from namesrv_app.agreement import mark_agreement
from namesrv_app.db_router import PROJECTION_DB
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
    # of the API's route answer cache (namesrv_app.api.fast_routes).
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

    The reference is this node's answer when it answered, else the first node
    that did. Unreachable nodes are reported, not counted as disagreeing.
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
    reference = next((n for n in answered if n.local), answered[0] if answered else None)
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
        "nodes": [n.__dict__ for n in nodes],
    }


# ------------------------------------------------------------------- topics


def topic_summaries(search: str = "", cluster: str = "", broker: str = "") -> QuerySet[Any]:
    """One row per topic: broker count, total queues, min/max perm; filtered, ordered by name."""
    rows = models.QueueData.objects.all()
    if search:
        rows = rows.filter(topic__icontains=search)
    if broker:
        rows = rows.filter(broker_name=broker)
    if cluster:
        names = models.BrokerGroup.objects.filter(cluster=cluster).values("broker_name")
        rows = rows.filter(broker_name__in=names)
    return _summarised(rows)


def topic_summary(topic: str) -> dict[str, Any] | None:
    """The topic-list row of exactly ``topic``; None when no broker serves it."""
    row: dict[str, Any] | None = _summarised(models.QueueData.objects.filter(topic=topic)).first()
    return row


def _summarised(rows: QuerySet[models.QueueData]) -> QuerySet[Any]:
    return (
        rows.values("topic")
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
    now = now_ms() if at_ms is None else at_ms
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
        and age_ms > timeout_ms // 2,
    }


def liveness_counts(at_ms: int | None = None) -> dict[str, int]:
    """Live brokers, and those past half their own timeout (expiring soon), in one query."""
    now = now_ms() if at_ms is None else at_ms
    rows = models.LiveBroker.objects.aggregate(
        total=Count("id"),
        expiring=Count("id", filter=Q(last_update_ms__lt=now - F("heartbeat_timeout_ms") / 2)),
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


def node_panels() -> list[dict[str, Any]]:
    """Every node's status over the wire, plus a ``disagrees`` flag per node and the
    live brokers it lacks or alone has (:mod:`namesrv_app.agreement`).
    """
    answers = gateway_client.every_node_status()
    panels = []
    for answer in answers:
        panel: dict[str, Any] = {
            "node_id": answer.node.node_id,
            "remoting_addr": answer.node.remoting_addr,
            "local": answer.node.local,
            "reachable": answer.error is None,
            "error": answer.error,
        }
        if answer.error is None:
            panel.update(answer.value)
            panel["node_id"] = answer.node.node_id
        panels.append(panel)
    mark_agreement(panels)
    return panels


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
