"""The NameServer's configuration (RocketMQ 5.x ``NamesrvConfig`` plus a few server knobs).

The config is part of the replicated state: UPDATE_NAMESRV_CONFIG is a command,
so every node holds the same value. It is a frozen dataclass; ``updated`` returns
a new value. Field names are snake_case; the Java property names (camelCase, as
GET_NAMESRV_CONFIG prints them and UPDATE_NAMESRV_CONFIG sends them) are kept in
each field's metadata.

Defaults are literal: nothing here reads the environment, so two nodes built
from the same log hold the same config. Paths keep a leading ``~`` that the
process layer expands (the Java defaults use ``${user.home}``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from remoting.properties import config_boolean

DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS = 120_000
"""A broker silent this long is dropped, unless it registered its own timeout."""
HEARTBEAT_TIMEOUT_MS_MIN = 1_000
"""A registration's ``heartbeatTimeoutMillis`` is clamped up to this: a broker heard
less often than every second is dropped between its heartbeats (5.x brokers send 10 s,
``brokerNotActiveTimeoutMillis``; the demo brokers 3 s)."""
HEARTBEAT_TIMEOUT_MS_MAX = 600_000
"""And down to this, five times upstream's default: a broker asking for more (up to
2^63-1 ms, which in raft mode would never expire) would keep its routes alive for that
long after it died. Upstream takes any value."""


def clamp_heartbeat_timeout_ms(timeout_ms: int) -> int:
    """``timeout_ms`` within [:data:`HEARTBEAT_TIMEOUT_MS_MIN`,
    :data:`HEARTBEAT_TIMEOUT_MS_MAX`]."""
    return min(max(timeout_ms, HEARTBEAT_TIMEOUT_MS_MIN), HEARTBEAT_TIMEOUT_MS_MAX)


DEFAULT_KV_CONFIG_BYTES_MAX = 4 * 1024 * 1024
"""``kvConfigBytesMax``: the KV config's total size (namespace + key + value UTF-8
bytes of every entry). KV config holds ORDER_TOPIC_CONFIG (one short entry per
ordered topic) and a few operator settings: 4 MiB is tens of thousands of such
entries, yet every node keeps it in memory and in every Raft snapshot, and eventual
mode rewrites its whole file on each put. Upstream has no limit; neither had we."""

NODE_KEYS = frozenset(
    {
        "kvConfigPath",
        "configStorePath",
        "listenPort",
        "serverChannelMaxIdleTimeSeconds",
        "scanNotActiveBrokerInterval",
    }
)
"""Per-process keys: each node answers its own real value (its start config), never the
replicated one, and UPDATE_NAMESRV_CONFIG refuses them. Not ``rocketmqHome``: nothing
here reads a RocketMQ home, so a start refuses it unless empty (``_MUST_STAY_DEFAULT``)."""

# The keys UPDATE_NAMESRV_CONFIG may never change, whatever configBlackList says:
# upstream's four (DefaultRequestProcessor's configBlackList, configStorePath,
# kvConfigPath and rocketmqHome), plus the start-time settings of each node.
FIXED_BLACKLISTED_KEYS = frozenset({"configBlackList", "rocketmqHome"}) | NODE_KEYS
BLACKLIST_SEPARATOR = ";"
PORT_MAX = 65_535


def _java(name: str) -> dict[str, str]:
    """Field metadata carrying the Java property name."""
    return {"java": name}


@dataclass(frozen=True, slots=True)
class NamesrvConfig:
    """RocketMQ 5.x ``NamesrvConfig`` fields with their defaults, plus the listen port and
    the idle-channel time of ``NettyServerConfig`` that GET_NAMESRV_CONFIG also reports,
    and our KV config quota (``kvConfigBytesMax``)."""

    rocketmq_home: str = field(default="", metadata=_java("rocketmqHome"))
    kv_config_path: str = field(default="~/namesrv/kvConfig.json", metadata=_java("kvConfigPath"))
    config_store_path: str = field(
        default="~/namesrv/namesrv.properties", metadata=_java("configStorePath")
    )
    product_env_name: str = field(default="center", metadata=_java("productEnvName"))
    cluster_test: bool = field(default=False, metadata=_java("clusterTest"))
    order_message_enable: bool = field(default=False, metadata=_java("orderMessageEnable"))
    return_order_topic_config_to_broker: bool = field(
        default=True, metadata=_java("returnOrderTopicConfigToBroker")
    )
    client_request_thread_pool_nums: int = field(
        default=8, metadata=_java("clientRequestThreadPoolNums")
    )
    default_thread_pool_nums: int = field(default=16, metadata=_java("defaultThreadPoolNums"))
    client_request_thread_pool_queue_capacity: int = field(
        default=50_000, metadata=_java("clientRequestThreadPoolQueueCapacity")
    )
    default_thread_pool_queue_capacity: int = field(
        default=10_000, metadata=_java("defaultThreadPoolQueueCapacity")
    )
    scan_not_active_broker_interval_ms: int = field(
        default=5_000, metadata=_java("scanNotActiveBrokerInterval")
    )
    un_register_broker_queue_capacity: int = field(
        default=3_000, metadata=_java("unRegisterBrokerQueueCapacity")
    )
    support_acting_master: bool = field(default=False, metadata=_java("supportActingMaster"))
    enable_all_topic_list: bool = field(default=True, metadata=_java("enableAllTopicList"))
    enable_topic_list: bool = field(default=True, metadata=_java("enableTopicList"))
    notify_min_broker_id_changed: bool = field(
        default=False, metadata=_java("notifyMinBrokerIdChanged")
    )
    enable_controller_in_namesrv: bool = field(
        default=False, metadata=_java("enableControllerInNamesrv")
    )
    need_wait_for_service: bool = field(default=False, metadata=_java("needWaitForService"))
    wait_seconds_for_service: int = field(default=45, metadata=_java("waitSecondsForService"))
    delete_topic_with_broker_registration: bool = field(
        default=False, metadata=_java("deleteTopicWithBrokerRegistration")
    )
    config_black_list: str = field(
        default="configBlackList;configStorePath;kvConfigPath",
        metadata=_java("configBlackList"),
    )
    listen_port: int = field(default=9876, metadata=_java("listenPort"))
    server_channel_max_idle_time_seconds: int = field(
        default=120, metadata=_java("serverChannelMaxIdleTimeSeconds")
    )
    # Not in upstream: a PUT_KV_CONFIG that would grow the KV config past it is refused.
    kv_config_bytes_max: int = field(
        default=DEFAULT_KV_CONFIG_BYTES_MAX, metadata=_java("kvConfigBytesMax")
    )

    def to_properties(self) -> dict[str, str]:
        """Every field under its Java name, valued as Java ``String.valueOf`` prints it."""
        return {java: _format_value(getattr(self, name)) for java, name in JAVA_TO_FIELD.items()}

    def updated(self, props: Mapping[str, str]) -> NamesrvConfig:
        """A copy with the given Java-named properties merged.

        Unknown keys are ignored (Java ``Configuration.update`` merges only keys
        that exist). A value that does not parse for its field raises ValueError.
        """
        changes: dict[str, Any] = {}
        for java, raw in props.items():
            name = JAVA_TO_FIELD.get(java)
            if name is None:
                continue
            changes[name] = _parse_value(_FIELD_TYPES[name], raw, java)
        return dataclasses.replace(self, **changes) if changes else self

    def blacklisted_keys(self) -> frozenset[str]:
        """Keys UPDATE_NAMESRV_CONFIG must refuse: the fixed four plus ``configBlackList``."""
        extra = (part.strip() for part in self.config_black_list.split(BLACKLIST_SEPARATOR))
        return FIXED_BLACKLISTED_KEYS | frozenset(part for part in extra if part)

    def validate(self) -> None:
        """Raise ValueError when a value is out of its range."""
        positive = (
            "client_request_thread_pool_nums",
            "default_thread_pool_nums",
            "client_request_thread_pool_queue_capacity",
            "default_thread_pool_queue_capacity",
            "scan_not_active_broker_interval_ms",
            "un_register_broker_queue_capacity",
            "kv_config_bytes_max",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{FIELD_TO_JAVA[name]} must be positive")
        if self.wait_seconds_for_service < 0:
            raise ValueError("waitSecondsForService must not be negative")
        if self.server_channel_max_idle_time_seconds < 0:
            raise ValueError("serverChannelMaxIdleTimeSeconds must not be negative")
        if not 0 <= self.listen_port <= PORT_MAX:
            raise ValueError("listenPort must be a TCP port")

    def check_honoured(self) -> None:
        """Raise ValueError, with a one-line reason, when a key this NameServer cannot
        honour is not at its default (see :func:`key_notes`)."""
        for java, reason in _MUST_STAY_DEFAULT.items():
            name = JAVA_TO_FIELD[java]
            value, default = getattr(self, name), getattr(_DEFAULTS, name)
            if value != default:
                shown = _format_value(default)
                keep = f"leave it at {shown}" if shown else "leave it empty"
                raise ValueError(f"{java}={_format_value(value)} is refused: {reason} ({keep})")


FIELD_TO_JAVA: dict[str, str] = {
    f.name: str(f.metadata["java"]) for f in dataclasses.fields(NamesrvConfig)
}
"""snake_case field name → Java property name."""

JAVA_TO_FIELD: dict[str, str] = {java: name for name, java in FIELD_TO_JAVA.items()}
"""Java property name → snake_case field name."""

_DEFAULTS = NamesrvConfig()

_MUST_STAY_DEFAULT: dict[str, str] = {
    "rocketmqHome": "this NameServer reads nothing from a RocketMQ home",
    "clusterTest": "there is no cluster-test request processor in this NameServer",
    "productEnvName": "it only names the cluster-test environment, and clusterTest is refused",
    "clientRequestThreadPoolNums": "requests run on one asyncio event loop, not a thread pool",
    "defaultThreadPoolNums": "requests run on one asyncio event loop, not a thread pool",
    "unRegisterBrokerQueueCapacity": "unregisters are applied as they arrive, never queued",
    "enableControllerInNamesrv": "this NameServer embeds no controller",
}
"""Keys this NameServer cannot honour: refused unless left at the default, with why."""

_FIELD_TYPES: dict[str, type] = {f.name: type(f.default) for f in dataclasses.fields(NamesrvConfig)}


def _format_value(value: object) -> str:
    """Java ``String.valueOf``: booleans are lower case, numbers decimal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse_value(kind: type, raw: str, java: str) -> object:
    """Parse one property value for a field of type ``kind``."""
    text = raw.strip()
    if kind is bool:
        return config_boolean(java, raw)
    if kind is int:
        try:
            return int(text, 10)
        except ValueError:
            raise ValueError(f"{java} must be an integer, got {raw!r}") from None
    return raw


_KEY_NOTES: dict[str, str] = {
    "kvConfigPath": "start-time setting of each node: eventual mode's KV file",
    "configStorePath": (
        "start-time setting of each node: eventual mode saves accepted updates there "
        "and reloads them at start (raft mode: the Raft log is the store)"
    ),
    "orderMessageEnable": "ORDER_TOPIC_CONFIG in routes and registration answers",
    "returnOrderTopicConfigToBroker": "whether registration answers carry ORDER_TOPIC_CONFIG",
    "clientRequestThreadPoolQueueCapacity": (
        "route reads waiting past it answer SYSTEM_BUSY (code 2)"
    ),
    "defaultThreadPoolQueueCapacity": (
        "requests other than route reads waiting past it answer SYSTEM_BUSY (code 2)"
    ),
    "scanNotActiveBrokerInterval": (
        "start-time setting of each node: the period of its silent-broker scan"
    ),
    "supportActingMaster": "acting-master routes while a master is gone",
    "enableAllTopicList": "whether GET_ALL_TOPIC_LIST_FROM_NAMESERVER answers",
    "enableTopicList": "whether the topic-list requests answer",
    "notifyMinBrokerIdChanged": "NOTIFY_MIN_BROKER_ID_CHANGE to the brokers of a group",
    "needWaitForService": "route reads refused for waitSecondsForService after start",
    "waitSecondsForService": "how long route reads are refused after start (needWaitForService)",
    "deleteTopicWithBrokerRegistration": "topics a broker stops listing are deleted",
    "configBlackList": "keys UPDATE_NAMESRV_CONFIG refuses (plus the fixed ones)",
    "listenPort": "start-time setting of each node: the remoting port it really listens on",
    "serverChannelMaxIdleTimeSeconds": (
        "start-time setting of each node: idle connections are closed after it"
    ),
    "kvConfigBytesMax": "PUT_KV_CONFIG that would grow the KV config past it is refused",
}


def value_refusal(java: str, raw: str) -> str | None:
    """Why UPDATE_NAMESRV_CONFIG would refuse ``java=raw`` on its value alone (it does not
    parse, or it is a key this NameServer cannot honour set away from its default); None
    when the value may be sent. Start-time and blacklisted keys: see ``blacklisted_keys``."""
    try:
        _DEFAULTS.updated({java: raw}).check_honoured()
    except ValueError as exc:
        return str(exc)
    return None


def blacklist_reason(key: str) -> str:
    """Why UPDATE_NAMESRV_CONFIG refuses the blacklisted ``key``, to follow "<key> is"."""
    if key in NODE_KEYS:
        return "a start-time setting of each node"
    if key in _MUST_STAY_DEFAULT:
        # rocketmqHome: upstream's fixed blacklist, and a start refuses it too.
        return f"refused: {_MUST_STAY_DEFAULT[key]}"
    return "blacklisted (configBlackList): it cannot be changed at run time"


def key_notes() -> dict[str, str]:
    """Java key -> one short line saying what drives it, or why it is refused.

    The single source the console's Config page and the docs use.
    """
    return {
        java: _KEY_NOTES.get(java)
        or f"refused unless left at the default: {_MUST_STAY_DEFAULT[java]}"
        for java in JAVA_TO_FIELD
    }


_UNIT_SUFFIXES = (("_ms", "ms"), ("_seconds", "s"), ("_bytes_max", "bytes"))


def key_units() -> dict[str, str]:
    """Java key -> the unit its value is in, for the keys that have one (their field
    names say it: ``scanNotActiveBrokerInterval`` is ``scan_not_active_broker_interval_ms``)."""
    units = {}
    for name, java in FIELD_TO_JAVA.items():
        for suffix, unit in _UNIT_SUFFIXES:
            if f"{suffix}_" in f"{name}_":
                units[java] = unit
                break
    return units
