"""Topic types as RocketMQ's dashboard shows them: NORMAL, RETRY, DLQ or SYSTEM.

:func:`topic_type` is the rule, plain Python. ``namesrv_app.web.reads`` writes the
same rule as a SQL expression over the projection, so the topic list filters and
pages by type in the database; tests/web/test_topic_types.py checks that the two
agree topic by topic.

The order of the checks is the dashboard's: a ``%RETRY%`` or ``%DLQ%`` prefix first,
then SYSTEM (RocketMQ's ``TopicValidator.isSystemTopic``: the system topic set or the
``rmq_sys_`` prefix, plus a topic named after a cluster or a broker name, as the
NameServer's GET_SYSTEM_TOPIC_LIST_FROM_NS lists them), else NORMAL. Every comparison
is case-sensitive, as Java's ``String.equals``/``startsWith`` are.
"""

from __future__ import annotations

from collections.abc import Collection

NORMAL = "normal"
RETRY = "retry"
DLQ = "dlq"
SYSTEM = "system"
TOPIC_TYPES = (NORMAL, RETRY, DLQ, SYSTEM)
"""Every type, as the API's ``type`` field and filter spell them."""

ALL = "all"
"""Filter value: every type."""
USER = "user"
"""Filter value: every type but SYSTEM (normal, retry and DLQ topics)."""
TYPE_FILTERS = (USER, ALL, *TOPIC_TYPES)
"""What ``?type=`` accepts."""
TYPE_FILTER_LABELS = {
    USER: "normal + retry + DLQ",
    ALL: "all types",
    NORMAL: "normal",
    RETRY: "retry",
    DLQ: "DLQ",
    SYSTEM: "system",
}

RETRY_PREFIX = "%RETRY%"
"""``MixAll.RETRY_GROUP_TOPIC_PREFIX``: a consumer group's retry topic."""
DLQ_PREFIX = "%DLQ%"
"""``MixAll.DLQ_GROUP_TOPIC_PREFIX``: a consumer group's dead-letter topic."""
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
"""``TopicValidator.SYSTEM_TOPIC_PREFIX`` (e.g. ``rmq_sys_SYNC_BROKER_MEMBER_<broker>``)."""

SYSTEM_TOPICS: frozenset[str] = frozenset(
    {
        # TopicValidator.SYSTEM_TOPIC_SET, RocketMQ 4.9 and 5.x:
        "TBW102",  # AUTO_CREATE_TOPIC_KEY_TOPIC: the template of auto-created topics
        "SCHEDULE_TOPIC_XXXX",  # RMQ_SYS_SCHEDULE_TOPIC: delayed messages wait here
        "BenchmarkTest",  # RMQ_SYS_BENCHMARK_TOPIC
        "RMQ_SYS_TRANS_HALF_TOPIC",  # transactional half messages
        "RMQ_SYS_TRACE_TOPIC",  # default message trace topic
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",  # transaction commit/rollback operations
        "TRANS_CHECK_MAX_TIME_TOPIC",  # RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC
        "SELF_TEST_TOPIC",  # RMQ_SYS_SELF_TEST_TOPIC: every broker creates it
        "OFFSET_MOVED_EVENT",  # RMQ_SYS_OFFSET_MOVED_EVENT: every broker creates it
        # Added in later 5.x releases:
        "CHECKPOINT_TOPIC",  # RMQ_SYS_ROCKSDB_OFFSET_TOPIC
        "RMQ_SYS_TOPIC_CONFIG_SYNC",  # broker metadata sync topics (5.x)
        "RMQ_SYS_CONSUMER_OFFSET_SYNC",
        "RMQ_SYS_DELAY_OFFSET_SYNC",
        "RMQ_SYS_SUBSCRIPTION_GROUP_SYNC",
        "RMQ_SYS_MESSAGE_MODE_SYNC",
        "RMQ_SYS_TIMER_METRICS_SYNC",
        # Only in some 4.9.x releases:
        "SCHEDULE_TOPIC_XXXX_V2",  # RMQ_SYS_SCHEDULE_TOPIC_V2
    }
)
"""RocketMQ's fixed system topics, written out (``TopicValidator.SYSTEM_TOPIC_SET``).

Upper-case ``RMQ_SYS_*`` names are listed one by one: ``isSystemTopic`` checks the
lower-case ``rmq_sys_`` prefix only, case-sensitively."""


def topic_type(topic: str, cluster_names: Collection[str], broker_names: Collection[str]) -> str:
    """``retry``, ``dlq``, ``system`` or ``normal``: the dashboard's type of ``topic``.

    ``cluster_names`` and ``broker_names`` are the clusters and broker names the
    NameServer knows: brokers create a topic named after each (perm inherit, no
    messages), and the dashboard shows them as system topics.
    """
    if topic.startswith(RETRY_PREFIX):
        return RETRY
    if topic.startswith(DLQ_PREFIX):
        return DLQ
    if (
        topic in SYSTEM_TOPICS
        or topic.startswith(SYSTEM_TOPIC_PREFIX)
        or topic in cluster_names
        or topic in broker_names
    ):
        return SYSTEM
    return NORMAL


def types_of_filter(value: str) -> tuple[str, ...]:
    """The types a ``?type=`` value selects (``all`` and unknown values: every type)."""
    if value == USER:
        return (NORMAL, RETRY, DLQ)
    if value in TOPIC_TYPES:
        return (value,)
    return TOPIC_TYPES
