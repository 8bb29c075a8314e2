"""Our own snapshot codec and state digest for the route table (never pickle).

Layout: ``MAGIC`` (6 bytes) + format version (uint16 big-endian) + canonical
JSON (sorted keys, compact, ASCII) of ``{"applied_version", "routes_version",
"state"}``. ``state`` is the same canonical document the digest hashes, so two
tables with equal state give equal digests in any process.

Decoding checks every field's type and raises ValueError on anything it does
not understand, including an unknown format version.

Format versions: 1 is the original shape; 2 adds the raft-failover facts (a
group's ``failover`` flag, a live entry's ``max_offset``/``confirm_offset``).
They are written only when set, so a state without failover has the same
canonical document (and digest) as under version 1, and version 1 snapshots
restore unchanged.

Format 3 adds ``registered`` (the topic table each broker's master registered last,
by digest, while its queues are still what that registration wrote; see
``Tables.registered``), written only when non-empty and left out of the client view.

Format 4 adds a live entry's ``replication`` (what a raft-failover broker reported of
its HA links: ``client`` and ``acks``), written only when set.

Config fields added since (``kvConfigBytesMax``) follow the same rule: written
only when they differ from their default, so digests do not change for states
that leave them alone (nodes of the previous release compare digests with this
one during a rolling upgrade), and a snapshot without them restores their default.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
from typing import Any

from raftstore.config import FIELD_TO_JAVA, NamesrvConfig
from raftstore.results import BrokerAddrInfo, Replication
from raftstore.tables import BrokerGroup, BrokerLiveView, RegisteredTopics, Tables
from remoting.ha_report import SLAVE_ACKS_MAX
from remoting.model import DataVersion, QueueData, TopicQueueMappingInfo

MAGIC = b"RMQNRT"
FORMAT_VERSION = 4
READABLE_FORMAT_VERSIONS = frozenset({1, 2, 3, 4})
_HEADER = struct.Struct(">6sH")

Json = dict[str, Any]

# Config fields left out of the canonical document while at their default (see above).
_CONFIG_WRITTEN_WHEN_SET = frozenset({"kv_config_bytes_max"})
_CONFIG_DEFAULTS = NamesrvConfig()


# ---------------------------------------------------------------- encode


def canonical_state(t: Tables, config: NamesrvConfig) -> Json:
    """The whole replicated state as plain JSON values, independent of dict order."""
    doc: Json = {
        "config": _config_json(config),
        "topics": {
            topic: {name: _queue_json(q) for name, q in queues.items()}
            for topic, queues in t.topic_queue.items()
        },
        "brokers": {name: _group_json(g) for name, g in t.broker_addr.items()},
        "clusters": {c: sorted(names) for c, names in t.cluster_addr.items()},
        "live": sorted(
            (_live_json(e) for e in t.live.values()),
            key=lambda e: (e["cluster"], e["addr"]),
        ),
        "filters": sorted(
            [k.cluster_name, k.broker_addr, list(v)] for k, v in t.filter_servers.items()
        ),
        "mappings": {
            topic: {bname: _mapping_json(info) for bname, info in infos.items()}
            for topic, infos in t.mapping_infos.items()
        },
        "kv": {ns: dict(table) for ns, table in t.kv.items()},
    }
    if t.registered:
        doc["registered"] = {
            name: [r.cluster_name, r.broker_addr, r.topics_digest.hex(), r.delete_dropped]
            for name, r in t.registered.items()
        }
    return doc


def _config_json(config: NamesrvConfig) -> Json:
    return {
        name: getattr(config, name)
        for name in sorted(FIELD_TO_JAVA)
        if name not in _CONFIG_WRITTEN_WHEN_SET
        or getattr(config, name) != getattr(_CONFIG_DEFAULTS, name)
    }


def _dumps(doc: Json) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def digest(t: Tables, config: NamesrvConfig) -> str:
    """Hex SHA-256 of the canonical state (versions excluded)."""
    return digest_of(canonical_state(t, config))


@dataclasses.dataclass(frozen=True, slots=True)
class StateDigests:
    """The two ways two nodes' states are compared.

    ``full`` covers everything the node replicates, liveness timestamps included: in
    raft mode every member must reach exactly the same, so it checks determinism.
    ``client_view`` covers only what a client can observe (routes, cluster info, topic
    lists, KV and config) and leaves out the live-broker table, whose heartbeat times
    each eventual-mode node stamps with its own clock and so can never be equal across
    nodes. ``live_brokers`` is who is alive, without times, compared on its own.
    """

    full: str
    client_view: str
    live_brokers: tuple[str, ...]


def digests(t: Tables, config: NamesrvConfig) -> StateDigests:
    """Both digests from one pass over the table, and the live brokers' addresses."""
    return digests_of(canonical_state(t, config))


def digest_of(state: Json) -> str:
    """:func:`digest` of a document :func:`canonical_state` returned."""
    return hashlib.sha256(_dumps(state)).hexdigest()


def digests_of(state: Json) -> StateDigests:
    """:func:`digests` of a document :func:`canonical_state` returned (consumed).

    The document is a copy made of plain values: a caller takes it under the apply
    lock (about a third of the cost) and serializes and hashes it after releasing it."""
    full = hashlib.sha256(_dumps(state)).hexdigest()
    live = state.pop("live")
    state.pop("registered", None)  # raft bookkeeping, not seen by clients
    return StateDigests(
        full=full,
        client_view=hashlib.sha256(_dumps(state)).hexdigest(),
        live_brokers=tuple(sorted(f"{e['cluster']}/{e['addr']}" for e in live)),
    )


def encode(t: Tables, config: NamesrvConfig, applied_version: int, routes_version: int) -> bytes:
    """A snapshot of the table with both version counters."""
    return encode_document(canonical_state(t, config), applied_version, routes_version)


def encode_document(state: Json, applied_version: int, routes_version: int) -> bytes:
    """:func:`encode` of a document :func:`canonical_state` returned: a caller copies the
    state under the apply lock and serializes it after releasing it (backups)."""
    doc = {"applied_version": applied_version, "routes_version": routes_version, "state": state}
    return _HEADER.pack(MAGIC, FORMAT_VERSION) + _dumps(doc)


def _queue_json(q: QueueData) -> Json:
    return {
        "read": q.read_queue_nums,
        "write": q.write_queue_nums,
        "perm": q.perm,
        "sys_flag": q.topic_sys_flag,
    }


def _group_json(g: BrokerGroup) -> Json:
    doc: Json = {
        "cluster": g.cluster,
        "addrs": [[bid, addr] for bid, addr in sorted(g.broker_addrs.items())],
        "zone": g.zone_name,
        "acting": g.enable_acting_master,
    }
    if g.raft_failover:
        doc["failover"] = True
    return doc


def _dv_json(dv: DataVersion) -> list[int]:
    return [dv.state_version, dv.timestamp, dv.counter]


def _live_json(e: BrokerLiveView) -> Json:
    doc: Json = {
        "cluster": e.cluster_name,
        "addr": e.broker_addr,
        "last_update_ms": e.last_update_ms,
        "timeout_ms": e.heartbeat_timeout_ms,
        "data_version": _dv_json(e.data_version),
        "ha": e.ha_server_addr,
        "channel": e.channel,
    }
    if e.max_offset is not None:
        doc["max_offset"] = e.max_offset
    if e.confirm_offset is not None:
        doc["confirm_offset"] = e.confirm_offset
    if e.replication is not None:
        doc["replication"] = _replication_json(e.replication)
    return doc


def _replication_json(r: Replication) -> Json:
    doc: Json = {}
    if r.client_addr is not None:
        doc["client"] = r.client_addr
    if r.slave_acks is not None:
        doc["acks"] = [[addr, offset] for addr, offset in r.slave_acks]
    return doc


def _mapping_json(info: TopicQueueMappingInfo) -> Json:
    ids = None if info.curr_id_map is None else sorted([k, v] for k, v in info.curr_id_map.items())
    return {
        "topic": info.topic,
        "scope": info.scope,
        "total_queues": info.total_queues,
        "bname": info.bname,
        "epoch": info.epoch,
        "dirty": info.dirty,
        "curr_id_map": ids,
    }


# ---------------------------------------------------------------- decode


def decode(data: bytes) -> tuple[Tables, NamesrvConfig, int, int]:
    """Rebuild tables, config and the two versions; ValueError on any bad input."""
    if len(data) < _HEADER.size:
        raise ValueError("route table snapshot is truncated")
    magic, version = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValueError("not a route table snapshot")
    if version not in READABLE_FORMAT_VERSIONS:
        raise ValueError(f"unknown route table snapshot format {version}")
    try:
        doc = json.loads(data[_HEADER.size :].decode("ascii"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"corrupt route table snapshot: {exc}") from None
    doc = _obj(doc, "snapshot")
    state = _obj(doc.get("state"), "state")
    tables = _tables(state)
    config = _config(_obj(state.get("config"), "config"))
    return tables, config, _int(doc.get("applied_version")), _int(doc.get("routes_version"))


def _tables(state: Json) -> Tables:
    t = Tables()
    for topic, queues in _obj(state.get("topics"), "topics").items():
        for name, q in _obj(queues, topic).items():
            q = _obj(q, name)
            t.put_queue(
                topic,
                QueueData(
                    name,
                    _int(q.get("read")),
                    _int(q.get("write")),
                    _int(q.get("perm")),
                    _int(q.get("sys_flag")),
                ),
            )
    for name, g in _obj(state.get("brokers"), "brokers").items():
        t.broker_addr[name] = _group(name, _obj(g, name))
    for cluster, names in _obj(state.get("clusters"), "clusters").items():
        t.cluster_addr[cluster] = {_str(n) for n in _list(names)}
    for item in _list(state.get("live")):
        entry = _live(_obj(item, "live"))
        t.live[entry.key] = entry
    for item in _list(state.get("filters")):
        cluster, addr, servers = _list(item)
        key = BrokerAddrInfo(_str(cluster), _str(addr))
        t.filter_servers[key] = tuple(_str(s) for s in _list(servers))
    for topic, infos in _obj(state.get("mappings"), "mappings").items():
        t.mapping_infos[topic] = {
            bname: _mapping(_obj(info, bname)) for bname, info in _obj(infos, topic).items()
        }
    for ns, table in _obj(state.get("kv"), "kv").items():
        t.kv[ns] = {k: _str(v) for k, v in _obj(table, ns).items()}
    # Last: restoring the queues above drops records, as every queue change does.
    for name, item in _obj(state.get("registered", {}), "registered").items():
        cluster, addr, digest, delete_dropped = _list(item)
        try:
            raw = bytes.fromhex(_str(digest))
        except ValueError:
            raise ValueError(f"bad topics digest of {name!r} in snapshot") from None
        t.registered[name] = RegisteredTopics(_str(cluster), _str(addr), raw, _bool(delete_dropped))
    return t


def _group(name: str, g: Json) -> BrokerGroup:
    addrs: dict[int, str] = {}
    for pair in _list(g.get("addrs")):
        bid, addr = _list(pair)
        addrs[_int(bid)] = _str(addr)
    return BrokerGroup(
        cluster=_str(g.get("cluster")),
        broker_name=name,
        broker_addrs=addrs,
        zone_name=_opt_str(g.get("zone")),
        enable_acting_master=_bool(g.get("acting")),
        raft_failover=_bool(g.get("failover", False)),
    )


def _live(e: Json) -> BrokerLiveView:
    state_version, timestamp, counter = (_int(x) for x in _list(e.get("data_version")))
    return BrokerLiveView(
        cluster_name=_str(e.get("cluster")),
        broker_addr=_str(e.get("addr")),
        last_update_ms=_int(e.get("last_update_ms")),
        heartbeat_timeout_ms=_int(e.get("timeout_ms")),
        data_version=DataVersion(state_version, timestamp, counter),
        ha_server_addr=_opt_str(e.get("ha")),
        channel=_opt_str(e.get("channel")),
        max_offset=_opt_int(e.get("max_offset")),
        confirm_offset=_opt_int(e.get("confirm_offset")),
        replication=None if e.get("replication") is None else _replication(e["replication"]),
    )


def _replication(value: object) -> Replication:
    r = _obj(value, "replication")
    acks = r.get("acks")
    slave_acks = None
    if acks is not None:
        pairs = _list(acks)
        if len(pairs) > SLAVE_ACKS_MAX:
            raise ValueError(f"replication lists {len(pairs)} HA links, more than {SLAVE_ACKS_MAX}")
        slave_acks = tuple(_ack(_list(pair)) for pair in pairs)
    return Replication(client_addr=_opt_str(r.get("client")), slave_acks=slave_acks)


def _ack(pair: list[Any]) -> tuple[str, int]:
    addr, offset = pair  # ValueError unless exactly two
    return _str(addr), _int(offset)


def _mapping(m: Json) -> TopicQueueMappingInfo:
    raw_ids = m.get("curr_id_map")
    ids = None
    if raw_ids is not None:
        ids = {_int(k): _int(v) for k, v in (_list(p) for p in _list(raw_ids))}
    return TopicQueueMappingInfo(
        topic=_opt_str(m.get("topic")),
        scope=_str(m.get("scope")),
        total_queues=_int(m.get("total_queues")),
        bname=_opt_str(m.get("bname")),
        epoch=_int(m.get("epoch")),
        dirty=_bool(m.get("dirty")),
        curr_id_map=ids,
    )


def _config(raw: Json) -> NamesrvConfig:
    kinds = {f.name: type(f.default) for f in dataclasses.fields(NamesrvConfig)}
    values: dict[str, Any] = {}
    for name, value in raw.items():
        kind = kinds.get(name)
        if kind is None:
            raise ValueError(f"unknown config field {name!r} in snapshot")
        if type(value) is not kind:
            raise ValueError(f"config field {name!r} has the wrong type")
        values[name] = value
    config = NamesrvConfig(**values)
    config.validate()
    return config


def _obj(value: object, what: str) -> Json:
    if not isinstance(value, dict):
        raise ValueError(f"snapshot field {what!r} must be an object")
    return value


def _list(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError("snapshot field must be a list")
    return value


def _int(value: object) -> int:
    if type(value) is not int:
        raise ValueError("snapshot field must be an integer")
    return value


def _bool(value: object) -> bool:
    if type(value) is not bool:
        raise ValueError("snapshot field must be a boolean")
    return value


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("snapshot field must be a string")
    return value


def _opt_int(value: object) -> int | None:
    return None if value is None else _int(value)


def _opt_str(value: object) -> str | None:
    return None if value is None else _str(value)
