"""Body codecs: bytes on the wire <-> the value types of :mod:`remoting.model`.

The JSON shapes are the fastjson encodings of the Java beans (``RemotingSerializable``): camelCase
keys in alphabetical order, ``null`` properties omitted, primitives always written.
Every ``encode_*`` takes ``standard`` where the Java side uses both styles: plain
writes Long map keys unquoted (``{0:"addr"}``), standard quotes them and escapes
non-ASCII. Hot-path objects are written with hand-ordered f-strings instead of a
generic serializer, because a route answer is encoded on every cache miss.

Every ``decode_*`` raises :class:`BodyDecodeError` (and nothing else) for bytes that are
not the expected wire type, and its subclass :class:`~remoting.errors.BodyRefused` for a
body past a limit of its kind: each reads its body through
:func:`remoting.body_limits.read_json` with the budget of its kind, and checks the
parts that have limits of their own (a topic's attributes, a static topic's queue
mapping) where it converts them. Missing properties keep the Java defaults.

The REGISTER_BROKER body (JSON or its compressed binary form) is in
:mod:`remoting.register_body`; Java properties text in :mod:`remoting.properties`
(re-exported here, as the KV and config bodies use it).

Why one module: every codec here shares the private decoding helpers
that give Java's defaults and raise only BodyDecodeError; split per type, each module
would import the same private helpers.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Mapping
from typing import TypeVar

from remoting import body_limits, fastjson
from remoting.body_limits import BodyLimits, PartRefused, refusing
from remoting.errors import BodyDecodeError, BodyRefused
from remoting.model import (
    DEFAULT_QUEUE_NUMS,
    DEFAULT_TOPIC_FILTER_TYPE,
    METADATA_SCOPE_GLOBAL,
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    BrokerMemberGroup,
    ClusterInfo,
    DataVersion,
    KVTable,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicQueueMappingInfo,
    TopicRouteData,
)
from remoting.properties import (
    decode_properties as decode_properties,
    encode_properties as encode_properties,
)

TOPIC_FILTER_TYPES = frozenset({"SINGLE_TAG", "MULTI_TAG"})

_T = TypeVar("_T")
_JSONObject = dict[str, object]
_INT32 = struct.Struct(">i")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "replace")


def _bool_json(value: bool) -> str:
    return "true" if value else "false"


# ------------------------------------------------------------------ decoding helpers


def _load_object(
    data: bytes | bytearray | memoryview | str, what: str, limits: BodyLimits
) -> _JSONObject:
    value = body_limits.read_json(data, limits)
    if not isinstance(value, dict):
        raise BodyDecodeError(f"{what} is not a JSON object")
    return value


def _as_object(value: object, what: str) -> _JSONObject:
    if not isinstance(value, dict):
        raise BodyDecodeError(f"{what} is not a JSON object")
    return value


def _parse_java_int(text: str, what: str, low: int, high: int) -> int:
    """``Integer.parseInt`` / ``Long.parseLong``: optional sign, ASCII digits, in range."""
    if _JAVA_INT.fullmatch(text) is None:
        raise BodyDecodeError(f"{what} is not a number: {text[:40]!r}")
    number = int(text)
    if not low <= number <= high:
        raise BodyDecodeError(f"{what} {number} is out of range")
    return number


def _java_int32(text: str, what: str) -> int:
    """``Integer.parseInt``; up to nine plain ASCII digits (always in range) skip the regex."""
    if 0 < len(text) <= 9 and text.isascii() and text.isdigit():
        return int(text)
    return _parse_java_int(text, what, _INT32_MIN, _INT32_MAX)


def _int(obj: _JSONObject, key: str, default: int) -> int:
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, str):  # fastjson casts numeric strings into number fields
        return _parse_java_int(value, key, _INT64_MIN, _INT64_MAX)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BodyDecodeError(f"{key} is not an integer")
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise BodyDecodeError(f"{key} {value} is out of range")
    return value


def _bool(obj: _JSONObject, key: str, default: bool) -> bool:
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    if isinstance(value, int) and value in (0, 1):
        return value == 1
    raise BodyDecodeError(f"{key} is not a boolean")


def _text(value: object, what: str) -> str:
    """A JSON scalar as Java would cast it into a String field."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return _bool_json(value)
    if isinstance(value, int | float):
        return str(value)
    raise BodyDecodeError(f"{what} is not a string")


def _opt_str(obj: _JSONObject, key: str) -> str | None:
    value = obj.get(key)
    return None if value is None else _text(value, key)


def _req_str(obj: _JSONObject, key: str, what: str) -> str:
    value = obj.get(key)
    if value is None:
        raise BodyDecodeError(f"{what} has no {key}")
    return _text(value, key)


def _list(obj: _JSONObject, key: str) -> list[object]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise BodyDecodeError(f"{key} is not a JSON array")
    return value


def _map(obj: _JSONObject, key: str) -> _JSONObject:
    value = obj.get(key)
    if value is None:
        return {}
    return _as_object(value, key)


def _str_list(values: list[object], what: str) -> list[str]:
    return [_text(item, what) for item in values if item is not None]


def _str_map(values: _JSONObject, what: str) -> dict[str, str]:
    return {key: _text(item, what) for key, item in values.items() if item is not None}


def _long_key(key: str, what: str) -> int:
    return _parse_java_int(key, f"{what} key", _INT64_MIN, _INT64_MAX)


def _object_map(
    values: _JSONObject, decode: Callable[[_JSONObject], _T], what: str
) -> dict[str, _T]:
    return {key: decode(_as_object(item, what)) for key, item in values.items() if item is not None}


# ------------------------------------------------------------------ encoding helpers


def _encode_object_map(
    values: Mapping[str, _T], encode: Callable[[_T, bool], str], standard: bool
) -> str:
    parts = [
        fastjson.quote(key, standard=standard) + ":" + encode(values[key], standard)
        for key in fastjson.sorted_keys(values)
        if values[key] is not None
    ]
    return "{" + ",".join(parts) + "}"


# ---------------------------------------------------------------------- DataVersion


def _data_version_json(version: DataVersion, standard: bool = False) -> str:
    return (
        f'{{"counter":{version.counter:d},"stateVersion":{version.state_version:d},'
        f'"timestamp":{version.timestamp:d}}}'
    )


def _data_version_from(obj: _JSONObject) -> DataVersion:
    return DataVersion(
        state_version=_int(obj, "stateVersion", 0),
        timestamp=_int(obj, "timestamp", 0),
        counter=_int(obj, "counter", 0),
    )


def encode_data_version(version: DataVersion) -> bytes:
    """``{"counter":..,"stateVersion":..,"timestamp":..}`` (5.x; 4.x peers ignore stateVersion)."""
    return _data_version_json(version).encode("ascii")


def decode_data_version(data: bytes | None) -> DataVersion | None:
    """A DataVersion body; ``None`` for a missing or empty body (QUERY_DATA_VERSION allows it)."""
    if not data:
        return None
    return _data_version_from(_load_object(data, "DataVersion", body_limits.DATA_VERSION))


# --------------------------------------------------------------- TopicQueueMappingInfo


def _mapping_info_json(info: TopicQueueMappingInfo, standard: bool) -> str:
    parts = []
    if info.bname is not None:
        parts.append('"bname":' + fastjson.quote(info.bname, standard=standard))
    if info.curr_id_map is not None:
        parts.append('"currIdMap":' + fastjson.dumps(info.curr_id_map, standard=standard))
    parts.append(f'"dirty":{_bool_json(info.dirty)}')
    parts.append(f'"epoch":{info.epoch:d}')
    if info.scope is not None:
        parts.append('"scope":' + fastjson.quote(info.scope, standard=standard))
    if info.topic is not None:
        parts.append('"topic":' + fastjson.quote(info.topic, standard=standard))
    parts.append(f'"totalQueues":{info.total_queues:d}')
    return "{" + ",".join(parts) + "}"


def _int_int_map(values: _JSONObject, what: str) -> dict[int, int]:
    result: dict[int, int] = {}
    for key, item in values.items():
        if item is None:
            continue
        if isinstance(item, bool) or not isinstance(item, int):
            raise BodyDecodeError(f"{what} value is not an integer")
        result[_parse_java_int(key, f"{what} key", _INT32_MIN, _INT32_MAX)] = item
    return result


def _curr_id_map(value: object) -> dict[int, int]:
    curr = _as_object(value, "currIdMap")
    if len(curr) > body_limits.MAPPING_QUEUES_MAX:
        raise PartRefused(
            f"a static topic's currIdMap of {len(curr)} queues, more than "
            f"{body_limits.MAPPING_QUEUES_MAX}"
        )
    return _int_int_map(curr, "currIdMap")


def _mapping_info_from(obj: _JSONObject) -> TopicQueueMappingInfo:
    """A TopicQueueMappingInfo; :class:`PartRefused` past :data:`MAPPING_QUEUES_MAX`."""
    curr = obj.get("currIdMap")
    return TopicQueueMappingInfo(
        topic=_opt_str(obj, "topic"),
        scope=_opt_str(obj, "scope") or METADATA_SCOPE_GLOBAL,
        total_queues=_int(obj, "totalQueues", 0),
        bname=_opt_str(obj, "bname"),
        epoch=_int(obj, "epoch", 0),
        dirty=_bool(obj, "dirty", False),
        curr_id_map=None if curr is None else _curr_id_map(curr),
    )


def encode_topic_queue_mapping_info(
    info: TopicQueueMappingInfo, *, standard: bool = False
) -> bytes:
    """``TopicQueueMappingInfo`` JSON (``currIdMap`` keys unquoted in plain style)."""
    return _utf8(_mapping_info_json(info, standard))


def decode_topic_queue_mapping_info(data: bytes) -> TopicQueueMappingInfo:
    """Parse a ``TopicQueueMappingInfo`` JSON body."""
    limits = body_limits.MAPPING_INFO
    with refusing(limits, len(data)):
        return _mapping_info_from(_load_object(data, "TopicQueueMappingInfo", limits))


# -------------------------------------------------------------------------- routes


def _queue_data_json(queue: QueueData, standard: bool) -> str:
    return (
        f'{{"brokerName":{fastjson.quote(queue.broker_name, standard=standard)},'
        f'"perm":{queue.perm:d},"readQueueNums":{queue.read_queue_nums:d},'
        f'"topicSysFlag":{queue.topic_sys_flag:d},"writeQueueNums":{queue.write_queue_nums:d}}}'
    )


def _broker_data_json(broker: BrokerData, standard: bool) -> str:
    zone = ""
    if broker.zone_name is not None:
        zone = ',"zoneName":' + fastjson.quote(broker.zone_name, standard=standard)
    return (
        f'{{"brokerAddrs":{fastjson.dumps(broker.broker_addrs, standard=standard)},'
        f'"brokerName":{fastjson.quote(broker.broker_name, standard=standard)},'
        f'"cluster":{fastjson.quote(broker.cluster, standard=standard)},'
        f'"enableActingMaster":{_bool_json(broker.enable_acting_master)}{zone}}}'
    )


def _queue_data_from(obj: _JSONObject) -> QueueData:
    # 4.x up to 4.8.0 spelled the flag topicSynFlag.
    flag_key = "topicSysFlag" if "topicSysFlag" in obj else "topicSynFlag"
    return QueueData(
        broker_name=_req_str(obj, "brokerName", "QueueData"),
        read_queue_nums=_int(obj, "readQueueNums", 0),
        write_queue_nums=_int(obj, "writeQueueNums", 0),
        perm=_int(obj, "perm", 0),
        topic_sys_flag=_int(obj, flag_key, 0),
    )


def _broker_addrs_from(values: _JSONObject) -> dict[int, str]:
    return {
        _long_key(key, "brokerAddrs"): _text(item, "brokerAddrs value")
        for key, item in values.items()
        if item is not None
    }


def _broker_data_from(obj: _JSONObject) -> BrokerData:
    return BrokerData(
        cluster=_req_str(obj, "cluster", "BrokerData"),
        broker_name=_req_str(obj, "brokerName", "BrokerData"),
        broker_addrs=_broker_addrs_from(_map(obj, "brokerAddrs")),
        zone_name=_opt_str(obj, "zoneName"),
        enable_acting_master=_bool(obj, "enableActingMaster", False),
    )


def encode_topic_route_data(route: TopicRouteData, *, standard: bool) -> bytes:
    """The GET_ROUTEINFO_BY_TOPIC body.

    ``standard`` when the request version is >= 401 or it set acceptStandardJsonOnly.
    """
    parts = [
        '{"brokerDatas":[',
        ",".join([_broker_data_json(broker, standard) for broker in route.broker_datas]),
        '],"filterServerTable":',
        fastjson.dumps(route.filter_server_table, standard=standard),
    ]
    if route.order_topic_conf is not None:
        parts.append(',"orderTopicConf":')
        parts.append(fastjson.quote(route.order_topic_conf, standard=standard))
    parts.append(',"queueDatas":[')
    parts.append(",".join([_queue_data_json(queue, standard) for queue in route.queue_datas]))
    parts.append("]")
    if route.topic_queue_mapping_by_broker is not None:
        parts.append(',"topicQueueMappingByBroker":')
        parts.append(
            _encode_object_map(route.topic_queue_mapping_by_broker, _mapping_info_json, standard)
        )
    parts.append("}")
    return _utf8("".join(parts))


def decode_topic_route_data(data: bytes) -> TopicRouteData:
    """Parse a TopicRouteData body in either JSON style (also the 4.x ``topicSynFlag`` key)."""
    limits = body_limits.TOPIC_ROUTE_DATA
    obj = _load_object(data, "TopicRouteData", limits)
    with refusing(limits, len(data)):
        return _route_data_from(obj)


def _route_data_from(obj: _JSONObject) -> TopicRouteData:
    mapping = obj.get("topicQueueMappingByBroker")
    return TopicRouteData(
        queue_datas=[
            _queue_data_from(_as_object(item, "queueDatas entry"))
            for item in _list(obj, "queueDatas")
            if item is not None
        ],
        broker_datas=[
            _broker_data_from(_as_object(item, "brokerDatas entry"))
            for item in _list(obj, "brokerDatas")
            if item is not None
        ],
        filter_server_table={
            key: _str_list(_as_list(item, "filterServerTable value"), "filter server")
            for key, item in _map(obj, "filterServerTable").items()
            if item is not None
        },
        order_topic_conf=_opt_str(obj, "orderTopicConf"),
        topic_queue_mapping_by_broker=None
        if mapping is None
        else _object_map(
            _as_object(mapping, "topicQueueMappingByBroker"),
            _mapping_info_from,
            "TopicQueueMappingInfo",
        ),
    )


def _as_list(value: object, what: str) -> list[object]:
    if not isinstance(value, list):
        raise BodyDecodeError(f"{what} is not a JSON array")
    return value


# --------------------------------------------------------------------- ClusterInfo


def encode_cluster_info(info: ClusterInfo, *, standard: bool = False) -> bytes:
    """The GET_BROKER_CLUSTER_INFO body (the real server always uses the plain style)."""
    return _utf8(
        '{"brokerAddrTable":'
        + _encode_object_map(info.broker_addr_table, _broker_data_json, standard)
        + ',"clusterAddrTable":'
        + fastjson.dumps(info.cluster_addr_table, standard=standard)
        + "}"
    )


def decode_cluster_info(data: bytes) -> ClusterInfo:
    """Parse a ClusterInfo body in either JSON style."""
    obj = _load_object(data, "ClusterInfo", body_limits.CLUSTER_INFO)
    return ClusterInfo(
        broker_addr_table=_object_map(
            _map(obj, "brokerAddrTable"), _broker_data_from, "BrokerData"
        ),
        cluster_addr_table={
            key: _str_list(_as_list(item, "clusterAddrTable value"), "broker name")
            for key, item in _map(obj, "clusterAddrTable").items()
            if item is not None
        },
    )


# --------------------------------------------------------------- KVTable, TopicList


def encode_kv_table(table: KVTable, *, standard: bool = False) -> bytes:
    """``{"table":{k:v}}``."""
    return _utf8('{"table":' + fastjson.dumps(table.table, standard=standard) + "}")


def decode_kv_table(data: bytes) -> KVTable:
    """Parse a KVTable body."""
    obj = _load_object(data, "KVTable", body_limits.KV_TABLE)
    return KVTable(table=_str_map(_map(obj, "table"), "KVTable value"))


def encode_topic_list(topics: TopicList, *, standard: bool = False) -> bytes:
    """``{"brokerAddr":..,"topicList":[..]}``; brokerAddr only when set (system topics)."""
    addr = ""
    if topics.broker_addr is not None:
        addr = '"brokerAddr":' + fastjson.quote(topics.broker_addr, standard=standard) + ","
    topic_list = fastjson.dumps(topics.topic_list, standard=standard)
    return _utf8("{" + addr + '"topicList":' + topic_list + "}")


def decode_topic_list(data: bytes) -> TopicList:
    """Parse a TopicList body."""
    obj = _load_object(data, "TopicList", body_limits.TOPIC_LIST)
    return TopicList(
        topic_list=_str_list(_list(obj, "topicList"), "topic"),
        broker_addr=_opt_str(obj, "brokerAddr"),
    )


def encode_kv_config_wrapper(
    config_table: Mapping[str, Mapping[str, str]], *, standard: bool = False
) -> bytes:
    """The KV config file / KVConfigSerializeWrapper: ``{"configTable":{ns:{k:v}}}``."""
    return _utf8('{"configTable":' + fastjson.dumps(config_table, standard=standard) + "}")


def decode_kv_config_wrapper(data: bytes) -> dict[str, dict[str, str]]:
    """Parse a KVConfigSerializeWrapper into namespace -> (key -> value)."""
    obj = _load_object(data, "KVConfigSerializeWrapper", body_limits.KV_CONFIG)
    return {
        namespace: _str_map(_as_object(table, "configTable namespace"), "KV value")
        for namespace, table in _map(obj, "configTable").items()
        if table is not None
    }


# ------------------------------------------------------------------ BrokerMemberGroup


def encode_broker_member_group(group: BrokerMemberGroup, *, standard: bool = False) -> bytes:
    """GetBrokerMemberGroupResponseBody: ``{"brokerMemberGroup":{...}}``."""
    return _utf8(
        '{"brokerMemberGroup":{"brokerAddrs":'
        + fastjson.dumps(group.broker_addrs, standard=standard)
        + ',"brokerName":'
        + fastjson.quote(group.broker_name, standard=standard)
        + ',"cluster":'
        + fastjson.quote(group.cluster, standard=standard)
        + "}}"
    )


def decode_broker_member_group(data: bytes) -> BrokerMemberGroup:
    """Parse a GetBrokerMemberGroupResponseBody."""
    obj = _load_object(data, "GetBrokerMemberGroupResponseBody", body_limits.BROKER_MEMBER_GROUP)
    group = _as_object(obj.get("brokerMemberGroup"), "brokerMemberGroup")
    return BrokerMemberGroup(
        cluster=_req_str(group, "cluster", "BrokerMemberGroup"),
        broker_name=_req_str(group, "brokerName", "BrokerMemberGroup"),
        broker_addrs=_broker_addrs_from(_map(group, "brokerAddrs")),
    )


# --------------------------------------------------------------------- TopicConfig


def _topic_config_json(config: TopicConfig, standard: bool) -> str:
    name = ""
    if config.topic_name is not None:
        name = '"topicName":' + fastjson.quote(config.topic_name, standard=standard) + ","
    return (
        f'{{"attributes":{fastjson.dumps(config.attributes, standard=standard)},'
        f'"order":{_bool_json(config.order)},"perm":{config.perm:d},'
        f'"readQueueNums":{config.read_queue_nums:d},'
        f'"topicFilterType":{fastjson.quote(config.topic_filter_type, standard=standard)},'
        f'{name}"topicSysFlag":{config.topic_sys_flag:d},'
        f'"writeQueueNums":{config.write_queue_nums:d}}}'
    )


def _checked_attributes(attributes: _JSONObject) -> _JSONObject:
    """``attributes`` of one topic; :class:`PartRefused` for more than
    :data:`TOPIC_ATTRIBUTES_MAX` (each key and value is a string of its body, as long as
    its kind lets strings be; in a compressed body, the whole text is bounded)."""
    if len(attributes) > body_limits.TOPIC_ATTRIBUTES_MAX:
        raise PartRefused(
            f"a topic of {len(attributes)} attributes, more than {body_limits.TOPIC_ATTRIBUTES_MAX}"
        )
    return attributes


def _topic_config_from(obj: _JSONObject) -> TopicConfig:
    return TopicConfig(
        topic_name=_opt_str(obj, "topicName"),
        read_queue_nums=_int(obj, "readQueueNums", DEFAULT_QUEUE_NUMS),
        write_queue_nums=_int(obj, "writeQueueNums", DEFAULT_QUEUE_NUMS),
        perm=_int(obj, "perm", PERM_READ | PERM_WRITE),
        topic_filter_type=_opt_str(obj, "topicFilterType") or DEFAULT_TOPIC_FILTER_TYPE,
        topic_sys_flag=_int(obj, "topicSysFlag", 0),
        order=_bool(obj, "order", False),
        attributes=_str_map(_checked_attributes(_map(obj, "attributes")), "attribute value"),
    )


def _topic_config_fast(obj: object) -> TopicConfig | None:
    """The TopicConfig of ``obj`` when every property is present with exactly the type
    a broker writes (the common case), else None for :func:`_topic_config_from`.

    Gives what the careful path gives for such an object: same values, same checks
    (64-bit integer ranges, a non-empty filter type, string attribute values).
    """
    if type(obj) is not dict:
        return None
    name = obj.get("topicName")
    read = obj.get("readQueueNums")
    write = obj.get("writeQueueNums")
    perm = obj.get("perm")
    filter_type = obj.get("topicFilterType")
    sys_flag = obj.get("topicSysFlag")
    order = obj.get("order")
    attributes = obj.get("attributes")
    if not (
        type(name) is str
        and type(read) is int
        and type(write) is int
        and type(perm) is int
        and type(sys_flag) is int
        and type(order) is bool
        and type(filter_type) is str
        and filter_type
        and _INT64_MIN <= read <= _INT64_MAX
        and _INT64_MIN <= write <= _INT64_MAX
        and _INT64_MIN <= perm <= _INT64_MAX
        and _INT64_MIN <= sys_flag <= _INT64_MAX
    ):
        return None
    if attributes is None or (type(attributes) is dict and not attributes):
        copied: dict[str, str] = {}
    elif type(attributes) is dict and len(attributes) > body_limits.TOPIC_ATTRIBUTES_MAX:
        _checked_attributes(attributes)  # refuses, before a value is looked at
        return None
    elif type(attributes) is dict and all(type(v) is str for v in attributes.values()):
        copied = dict(attributes)
    else:
        return None
    return TopicConfig(name, read, write, perm, filter_type, sys_flag, order, copied)


def _topic_config_table(values: _JSONObject) -> dict[str, TopicConfig]:
    """A topicConfigTable: the fast conversion per entry, the careful one when it declines."""
    table: dict[str, TopicConfig] = {}
    for key, item in values.items():
        if item is None:
            continue
        config = _topic_config_fast(item)
        table[key] = (
            _topic_config_from(_as_object(item, "TopicConfig")) if config is None else config
        )
    return table


def encode_topic_config(config: TopicConfig, *, standard: bool = False) -> bytes:
    """The 5.x TopicConfig JSON (``attributes`` always present, ``topicName`` if set)."""
    return _utf8(_topic_config_json(config, standard))


def decode_topic_config(data: bytes) -> TopicConfig:
    """Parse TopicConfig JSON (4.x bodies without ``attributes`` give ``{}``)."""
    limits = body_limits.TOPIC_CONFIG
    with refusing(limits, len(data)):
        return _topic_config_from(_load_object(data, "TopicConfig", limits))


def encode_topic_config_text(config: TopicConfig) -> str:
    """``TopicConfig.encode()``: ``name read write perm filterType {attributes}``.

    The form used inside compressed REGISTER_BROKER bodies; ``topicSysFlag`` and
    ``order`` are not carried (upstream quirk).
    """
    name = "null" if config.topic_name is None else config.topic_name
    return (
        f"{name} {config.read_queue_nums:d} {config.write_queue_nums:d} {config.perm:d} "
        f"{config.topic_filter_type} {fastjson.dumps(config.attributes)}"
    )


AttributesSeen = dict[str, dict[str, str]]
"""Attribute texts of one compressed body already read as standard JSON, and what they
read as: most topics of a table have the same few texts."""


def _text_attributes(text: str, seen: AttributesSeen | None) -> dict[str, str]:
    # Upstream ignores attribute JSON it cannot parse and keeps the empty default; a
    # text past a limit is refused all the same.
    if seen is not None:
        known = seen.get(text)
        if known is not None:
            return dict(known)
    if len(text) > body_limits.TOPIC_ATTRIBUTES_CHARS_MAX:
        raise PartRefused(
            f"a topic's attributes of {len(text)} characters, more than "
            f"{body_limits.TOPIC_ATTRIBUTES_CHARS_MAX}"
        )
    lenient_left = fastjson.lenient_reads_left()
    try:
        value = body_limits.read_json(text, body_limits.TOPIC_ATTRIBUTES)
    except BodyRefused:
        raise
    except BodyDecodeError:
        return {}
    if not isinstance(value, dict):
        return {}
    attributes = _str_map(_checked_attributes(value), "attribute value")
    # Only a text read without leniency is kept: each one that is not standard JSON
    # costs (and counts against the body's allowance) every time.
    if (
        seen is not None
        and lenient_left is not None
        and fastjson.lenient_reads_left() == lenient_left
    ):
        seen[text] = attributes
        return dict(attributes)
    return attributes


def decode_topic_config_text(text: str) -> TopicConfig:
    """Parse ``TopicConfig.encode()`` text the 5.x way (at least five space-separated
    parts); :class:`BodyRefused` for a name or attributes past their limits."""
    with refusing(body_limits.TOPIC_TEXT, len(text.encode("utf-8", "surrogatepass"))):
        return topic_config_text(text)


def topic_config_text(text: str, seen: AttributesSeen | None = None) -> TopicConfig:
    """:func:`decode_topic_config_text` for the compressed REGISTER_BROKER body, which
    names the body in its refusal: :class:`PartRefused` for a name longer than
    :data:`TOPIC_NAME_CHARS_MAX` or attributes past theirs. ``seen``: the attribute
    texts the body's earlier topics had (filled here)."""
    parts = text.split(" ")
    while parts and parts[-1] == "":  # Java's String.split drops trailing empty strings
        parts.pop()
    if len(parts) < 5:
        raise BodyDecodeError(f"topic config text has {len(parts)} parts, needs 5")
    if parts[4] not in TOPIC_FILTER_TYPES:
        raise BodyDecodeError(f"unknown topic filter type {parts[4][:40]!r}")
    if len(parts[0]) > body_limits.TOPIC_NAME_CHARS_MAX:
        raise PartRefused(
            f"a topic name of {len(parts[0])} characters, more than "
            f"{body_limits.TOPIC_NAME_CHARS_MAX}"
        )
    attributes: dict[str, str] = {}
    if len(parts) >= 6 and parts[5] != "{}":  # "{}": what every topic without attributes has
        attributes = _text_attributes(parts[5], seen)
    return TopicConfig(
        topic_name=parts[0],
        read_queue_nums=_java_int32(parts[1], "readQueueNums"),
        write_queue_nums=_java_int32(parts[2], "writeQueueNums"),
        perm=_java_int32(parts[3], "perm"),
        topic_filter_type=parts[4],
        attributes=attributes,
    )


# ------------------------------------------------------ TopicConfigSerializeWrapper


def _wrapper_json(wrapper: TopicConfigSerializeWrapper, standard: bool) -> str:
    parts = ['{"dataVersion":', _data_version_json(wrapper.data_version)]
    # A 5.x TopicConfigAndMappingSerializeWrapper always writes the three mapping
    # properties; the 4.x TopicConfigSerializeWrapper has none of them.
    mapping_version = wrapper.mapping_data_version
    if mapping_version is not None:
        parts.append(',"mappingDataVersion":')
        parts.append(_data_version_json(mapping_version))
    parts.append(',"topicConfigTable":')
    parts.append(_encode_object_map(wrapper.topic_config_table, _topic_config_json, standard))
    if mapping_version is not None:
        parts.append(',"topicQueueMappingDetailMap":')
        parts.append(fastjson.dumps(wrapper.topic_queue_mapping_detail_map, standard=standard))
        parts.append(',"topicQueueMappingInfoMap":')
        parts.append(
            _encode_object_map(wrapper.topic_queue_mapping_info_map, _mapping_info_json, standard)
        )
    parts.append("}")
    return "".join(parts)


def _wrapper_from(obj: _JSONObject) -> TopicConfigSerializeWrapper:
    data_version = obj.get("dataVersion")
    mapping_version = obj.get("mappingDataVersion")
    return TopicConfigSerializeWrapper(
        data_version=DataVersion()
        if data_version is None
        else _data_version_from(_as_object(data_version, "dataVersion")),
        topic_config_table=_topic_config_table(_map(obj, "topicConfigTable")),
        mapping_data_version=None
        if mapping_version is None
        else _data_version_from(_as_object(mapping_version, "mappingDataVersion")),
        topic_queue_mapping_info_map=_object_map(
            _map(obj, "topicQueueMappingInfoMap"), _mapping_info_from, "TopicQueueMappingInfo"
        ),
        topic_queue_mapping_detail_map={
            key: item
            for key, item in _map(obj, "topicQueueMappingDetailMap").items()
            if item is not None
        },
    )


def encode_topic_config_serialize_wrapper(
    wrapper: TopicConfigSerializeWrapper, *, standard: bool = False
) -> bytes:
    """The bare wrapper JSON (the REGISTER_BROKER body of request versions < 37).

    The 5.x mapping properties are written exactly when ``mapping_data_version`` is set.
    """
    return _utf8(_wrapper_json(wrapper, standard))


def decode_topic_config_serialize_wrapper(data: bytes) -> TopicConfigSerializeWrapper:
    """Parse the bare wrapper JSON (4.x form or the 5.x form with mapping properties)."""
    limits = body_limits.TOPIC_CONFIG_WRAPPER
    with refusing(limits, len(data)):
        return _wrapper_from(_load_object(data, "TopicConfigSerializeWrapper", limits))
