"""Wire vocabularies of the RocketMQ remoting protocol (``RequestCode``, ``ResponseCode``,
``LanguageCode``, ``MQVersion``, ``SerializeType``).

Every number here is what real Java, Go, C++ and Node clients put on the wire; the
names follow upstream ``RequestCode``, ``ResponseCode``, ``LanguageCode``,
``SerializeType`` and ``MQVersion.Version`` so a reader can grep the Java sources.
"""

from __future__ import annotations

from enum import IntEnum

# Bits of the ``flag`` header field (``RemotingCommand.markResponseType`` / ``markOnewayRPC``).
FLAG_RESPONSE = 1
FLAG_ONEWAY = 2


class RequestCode(IntEnum):
    """Request codes a NameServer handles or sends, plus the broker codes our broker needs."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    GET_CONSUMER_LIST_BY_GROUP = 38
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_CONSUMER_CONNECTION_LIST = 203
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_TOPIC_IN_NAMESRV = 216
    REGISTER_TOPIC_IN_NAMESRV = 217
    GET_KVLIST_BY_NAMESPACE = 219
    GET_TOPICS_BY_CLUSTER = 224
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    SEND_MESSAGE_V2 = 310
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    QUERY_DATA_VERSION = 322
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_BROKER_MEMBER_GROUP = 901
    BROKER_HEARTBEAT = 904
    NOTIFY_MIN_BROKER_ID_CHANGE = 905


class ResponseCode(IntEnum):
    """Response codes the NameServer and our broker answer with (same numbers in 4.x and 5.x)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    CONSUMER_NOT_ONLINE = 206
    GO_AWAY = 1500


class LanguageCode(IntEnum):
    """``LanguageCode``: the enum name goes into JSON headers, the number into binary ones."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


class SerializeType(IntEnum):
    """The high byte of the header-length word: how the header is encoded."""

    JSON = 0
    ROCKETMQ = 1


class MQVersion(IntEnum):
    """The ``MQVersion.Version`` ordinals that change wire behaviour."""

    V3_0_11 = 37
    V4_5_2 = 317
    V4_9_3 = 399
    V4_9_4 = 401
    V4_9_8 = 409
    V5_0_0 = 413
    V5_3_1 = 471
    V5_3_3 = 479


CURRENT_VERSION = MQVersion.V5_3_3
STANDARD_JSON_VERSION = MQVersion.V4_9_4
"""From this client version on, bodies are standard JSON (quoted integer map keys);
older clients get fastjson's unquoted form (``RemotingSerializable`` before 4.9.4)."""
