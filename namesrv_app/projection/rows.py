"""The rows the route table becomes: one Delta or one FullState, written in one transaction.

Each written row, and the :class:`~namesrv_app.models.NodeState` row, is stamped with the
applied version it reflects. Queue data, wire routes, live brokers and filter servers go
through :mod:`namesrv_app.projection.sql`; the rest through the ORM.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from django.db import transaction

from namesrv_app import models
from namesrv_app.db_router import PROJECTION_DB
from namesrv_app.projection.delta import Delta, FullState, encode_routes
from namesrv_app.projection.sql import (
    SQL_CHUNK_ROWS,
    Row,
    chunks,
    delete_in,
    delete_keys,
    insert,
)
from raftstore.results import BrokerAddrInfo
from raftstore.route_table import BrokerLiveView
from remoting.bodies import encode_properties
from remoting.model import BrokerData, QueueData, TopicQueueMappingInfo

ROUTE_FIELDS = ("topic", "body", "applied_version")


def _route_rows(routes: dict[str, bytes | None], version: int) -> list[Row]:
    return [(topic, body, version) for topic, body in routes.items() if body is not None]


def _write_routes(routes: dict[str, bytes | None], version: int) -> None:
    delete_in(models.TopicRoute, "topic", routes)
    insert(models.TopicRoute, ROUTE_FIELDS, _route_rows(routes, version))


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
    delete_in(models.QueueData, "topic", delta.queues)
    insert(models.QueueData, QUEUE_FIELDS, _all_queue_rows(delta.queues, version))
    for topics in chunks(delta.mappings):
        models.TopicQueueMapping.objects.filter(topic__in=topics).delete()
        models.TopicQueueMapping.objects.bulk_create(
            [row for t in topics for row in _mapping_rows(t, delta.mappings[t], version)]
        )


def _write_group_delta(delta: Delta, version: int) -> None:
    for names in chunks(delta.groups):
        models.BrokerGroup.objects.filter(broker_name__in=names).delete()
        present = {n: bd for n in names if (bd := delta.groups[n]) is not None}
        _write_groups(present, version)
    for names in chunks(delta.clusters):
        models.Cluster.objects.filter(name__in=names).delete()
        models.Cluster.objects.bulk_create(
            [
                models.Cluster(name=n, broker_names=members, applied_version=version)
                for n in names
                if (members := delta.clusters[n]) is not None
            ]
        )


def _write_live_delta(delta: Delta, version: int) -> None:
    delete_keys(models.LiveBroker, BROKER_KEY_FIELDS, [_broker_key(k) for k in delta.live])
    live = [_live_row(view, version) for view in delta.live.values() if view is not None]
    insert(models.LiveBroker, LIVE_FIELDS, live)
    delete_keys(models.FilterServer, BROKER_KEY_FIELDS, [_broker_key(k) for k in delta.filters])
    filters = [
        _filter_row(k, servers, version)
        for k, servers in delta.filters.items()
        if servers is not None
    ]
    insert(models.FilterServer, FILTER_FIELDS, filters)


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
        insert(models.QueueData, QUEUE_FIELDS, _all_queue_rows(state.queues, version))
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
        insert(models.LiveBroker, LIVE_FIELDS, [_live_row(v, version) for v in state.live])
        insert(
            models.FilterServer,
            FILTER_FIELDS,
            [_filter_row(k, s, version) for k, s in state.filters.items()],
        )
        _write_full_kv(state.kv, version)
        insert(models.TopicRoute, ROUTE_FIELDS, _route_rows(encode_routes(state.routes), version))
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
