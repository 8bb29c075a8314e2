"""Wire-domain value types shared by the codec and the route table.

These mirror the Java beans RocketMQ puts on the wire (``TopicRouteData``,
``QueueData``, ``BrokerData``, ``DataVersion``, ``TopicConfig`` ...). Field names
are snake_case here; the camelCase JSON names live only in ``remoting.bodies``.

Every type is a frozen dataclass so a value handed to the route table (and from
there into the Raft log) can never be changed behind its back. Maps inside them
are plain dicts by convention never mutated after construction: build a new
value with :func:`dataclasses.replace` instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1

TOPIC_SYS_FLAG_UNIT = 1
TOPIC_SYS_FLAG_UNIT_SUB = 2

MASTER_ID = 0
DEFAULT_QUEUE_NUMS = 16
DEFAULT_TOPIC_FILTER_TYPE = "SINGLE_TAG"
METADATA_SCOPE_GLOBAL = "__global__"
NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
SYNC_BROKER_MEMBER_GROUP_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"


_CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f]")
"""Unicode's control characters (category Cc): exactly these 65 code points."""


_LONE_SURROGATES = re.compile("[\ud800-\udfff]")
"""A surrogate code point left in a decoded string: JSON's ``\\ud83d\\ude00`` pair decodes to
one astral character, so any surrogate still there had no partner."""


def has_lone_surrogate(text: str) -> bool:
    """True when ``text`` holds a lone surrogate (``\\ud800`` in JSON without its pair): it
    is not Unicode text, no UTF-8 file, database or page can hold it, and no broker
    writes one (RocketMQ's TopicValidator allows ASCII names only)."""
    return _LONE_SURROGATES.search(text) is not None


def has_control_characters(text: str) -> bool:
    """True when ``text`` holds a control character (names must not: a log line or a
    console page would show something other than what was stored)."""
    return _CONTROL_CHARACTERS.search(text) is not None


def is_writeable(perm: int) -> bool:
    """True when the WRITE bit of a RocketMQ permission value is set."""
    return perm & PERM_WRITE == PERM_WRITE


def is_readable(perm: int) -> bool:
    """True when the READ bit of a RocketMQ permission value is set."""
    return perm & PERM_READ == PERM_READ


@dataclass(frozen=True, slots=True)
class DataVersion:
    """A broker's topic-config version. 4.x senders omit ``state_version`` (0)."""

    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    def sort_key(self) -> tuple[int, int, int]:
        """5.x ``DataVersion.compare`` order: stateVersion, counter, timestamp."""
        return (self.state_version, self.counter, self.timestamp)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One topic as a broker holds it (``TopicConfig``)."""

    topic_name: str | None = None
    read_queue_nums: int = DEFAULT_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_QUEUE_NUMS
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = DEFAULT_TOPIC_FILTER_TYPE
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QueueData:
    """The queues one broker group serves for one topic (``QueueData``)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(frozen=True, slots=True)
class BrokerData:
    """A broker group: its cluster, name and address per broker id (0 = master)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    zone_name: str | None = None
    enable_acting_master: bool = False


@dataclass(frozen=True, slots=True)
class TopicQueueMappingInfo:
    """Static-topic mapping of one broker (``TopicQueueMappingInfo``)."""

    topic: str | None = None
    scope: str = METADATA_SCOPE_GLOBAL
    total_queues: int = 0
    bname: str | None = None
    epoch: int = 0
    dirty: bool = False
    curr_id_map: dict[int, int] | None = None


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    """The answer to GET_ROUTEINFO_BY_TOPIC."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None
    topic_queue_mapping_by_broker: dict[str, TopicQueueMappingInfo] | None = None


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """The answer to GET_BROKER_CLUSTER_INFO."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class KVTable:
    """A namespace's key/value pairs (``KVTable``)."""

    table: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicList:
    """A list of topic names; ``broker_addr`` only for the system-topic answer."""

    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None


@dataclass(frozen=True, slots=True)
class TopicConfigSerializeWrapper:
    """A broker's whole topic table with its DataVersion (5.x mapping fields optional).

    ``topic_queue_mapping_detail_map`` is carried as already-parsed JSON values:
    the NameServer never interprets it.
    """

    data_version: DataVersion = field(default_factory=DataVersion)
    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    mapping_data_version: DataVersion | None = None
    topic_queue_mapping_info_map: dict[str, TopicQueueMappingInfo] = field(default_factory=dict)
    topic_queue_mapping_detail_map: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    """The body of REGISTER_BROKER for request versions >= 37 (V3_0_11)."""

    topic_config_wrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper
    )
    filter_server_list: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class BrokerMemberGroup:
    """The answer body of GET_BROKER_MEMBER_GROUP."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
