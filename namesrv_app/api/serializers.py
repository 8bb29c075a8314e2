"""API serializers: the shapes of answers, and input validation shared with the console forms."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from namesrv_app import topic_admin, topic_types
from namesrv_app.models import AuditEntry
from namesrv_app.topic_rules import (
    QUEUE_NUMS_MAX,
    QUEUE_NUMS_MIN,
    unknown_broker_names,
    validate_broker_groups,
    validate_perm,
    validate_queue_nums,
    validate_topic,
)
from namesrv_app.web.forms import (
    BROKER_ID_MAX,
    KV_VALUE_CHARS_MAX,
    NAME_CHARS_MAX,
    validate_addr,
    validate_name,
)
from remoting.consistency import CONSISTENCY_LEVELS, CONSISTENCY_LOCAL
from remoting.topic_rule import TOPIC_CHARS_MAX

BROKERS_PER_TOPIC_MAX = 1024
QUEUE_NUMS_HELP = f"queues per broker group, {QUEUE_NUMS_MIN} to {QUEUE_NUMS_MAX}"

if TYPE_CHECKING:
    # The stubs make Serializer generic over its instance; DRF itself is not
    # subscriptable at run time, so the alias exists only for the type checker.
    Serializer = serializers.Serializer[Any]
    ModelSerializer = serializers.ModelSerializer[Any]
else:
    Serializer = serializers.Serializer
    ModelSerializer = serializers.ModelSerializer


def _name(**extra: Any) -> serializers.CharField:
    return serializers.CharField(max_length=NAME_CHARS_MAX, validators=[validate_name], **extra)


# ------------------------------------------------------------------- inputs


CONSISTENCY_CHOICES = f'"{{input}}" is not a valid choice: use {" or ".join(CONSISTENCY_LEVELS)}.'


class RouteQuerySerializer(Serializer):
    """``?consistency=local|linearizable``."""

    consistency = serializers.ChoiceField(
        choices=CONSISTENCY_LEVELS,
        default=CONSISTENCY_LOCAL,
        required=False,
        error_messages={"invalid_choice": CONSISTENCY_CHOICES},
    )


class TopicQuerySerializer(Serializer):
    """Filters of the topic list."""

    # As long as any stored topic may be (the wire accepts more than the topic rule).
    search = serializers.CharField(required=False, allow_blank=True, max_length=KV_VALUE_CHARS_MAX)
    cluster = serializers.CharField(required=False, allow_blank=True, max_length=NAME_CHARS_MAX)
    broker = serializers.CharField(required=False, allow_blank=True, max_length=NAME_CHARS_MAX)
    type = serializers.ChoiceField(
        choices=topic_types.TYPE_FILTERS,
        required=False,
        allow_blank=True,
        help_text="normal, retry, dlq or system; user = all but system; all (the default)",
    )


class QueueNumsField(serializers.IntegerField):
    """A queue count checked by ``validate_queue_nums`` alone, so its sentence (the range
    and the value) is the one the console and the CLI answer; min and max stay on the
    field for the schema. (A class, not a configured field: DRF copies declared fields by
    calling ``__init__`` again.)"""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            min_value=QUEUE_NUMS_MIN, max_value=QUEUE_NUMS_MAX, help_text=QUEUE_NUMS_HELP, **kwargs
        )
        self.validators = [validate_queue_nums]


class QueueSpecSerializer(Serializer):
    """One broker group's queues for a topic being registered."""

    broker_name = _name()
    read_queue_nums = QueueNumsField()
    write_queue_nums = QueueNumsField()
    perm = serializers.IntegerField(validators=[validate_perm], help_text="2, 4 or 6")


def _method() -> serializers.ChoiceField:
    return serializers.ChoiceField(
        choices=topic_admin.METHODS,
        default=topic_admin.METHOD_BROKERS,
        required=False,
        help_text=topic_admin.METHOD_HELP,
    )


class RegisterTopicSerializer(Serializer):
    """A topic and its queues per broker group, created through each group's master
    (default) or registered on the NameServers only (``method=namesrv``)."""

    topic = serializers.CharField(max_length=TOPIC_CHARS_MAX, validators=[validate_topic])
    queue_datas: serializers.ListSerializer[Any] = serializers.ListSerializer(
        child=QueueSpecSerializer(), allow_empty=False, max_length=BROKERS_PER_TOPIC_MAX
    )
    method = _method()

    def validate_queue_datas(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Every broker group must be known to this node, and named once."""
        try:
            validate_broker_groups([q["broker_name"] for q in value])
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.messages) from exc
        return value


class DeleteTopicQuerySerializer(Serializer):
    """``?cluster=`` limits a delete to one cluster; ``?method=namesrv`` skips the brokers."""

    cluster = serializers.CharField(required=False, allow_blank=True, max_length=NAME_CHARS_MAX)
    method = _method()


class BrokerNameSerializer(Serializer):
    """A broker group this node knows."""

    # Not trimmed: " b" and "b" are two broker groups on the wire.
    broker_name = _name(trim_whitespace=False)

    def validate_broker_name(self, value: str) -> str:
        """Refuse unknown groups (upstream would touch nothing and answer 0)."""
        if unknown_broker_names([value]):
            raise serializers.ValidationError(f"unknown broker group {value!r}")
        return value


class UnregisterBrokerSerializer(Serializer):
    """UNREGISTER_BROKER of one replica."""

    cluster_name = _name()
    broker_name = _name()
    broker_addr = serializers.CharField(max_length=NAME_CHARS_MAX, validators=[validate_addr])
    broker_id = serializers.IntegerField(min_value=0, max_value=BROKER_ID_MAX)


class KVPutSerializer(Serializer):
    """PUT_KV_CONFIG."""

    namespace = _name()
    key = _name()
    value = serializers.CharField(max_length=KV_VALUE_CHARS_MAX, allow_blank=True)


class KVKeySerializer(Serializer):
    """DELETE_KV_CONFIG (query parameters)."""

    namespace = _name()
    key = _name()


class MembershipSerializer(Serializer):
    """Add or remove a Raft member."""

    action = serializers.ChoiceField(choices=("add", "remove"))
    address = serializers.CharField(max_length=NAME_CHARS_MAX, validators=[validate_addr])


# ------------------------------------------------------------------- outputs


class RouteSerializer(Serializer):
    """A route answer: the standard TopicRouteData JSON plus where it came from."""

    topic = serializers.CharField()
    consistency = serializers.CharField()
    node_id = serializers.CharField()
    applied_version = serializers.IntegerField(
        help_text="local: the projection version the answer reflects (it may lag the "
        "projection by NAMESRV_WEB['ROUTE_VERSION_TTL_MS'], 200 ms by default); linearizable: "
        "the node's version right after the barrier read (the answer reflects at least every "
        "write before the call)"
    )
    route = serializers.DictField(help_text="TopicRouteData, standard JSON")


class TopicSummarySerializer(Serializer):
    """One topic of the topic list."""

    topic = serializers.CharField()
    type = serializers.ChoiceField(
        choices=topic_types.TOPIC_TYPES,
        help_text="normal, retry (%RETRY%...), dlq (%DLQ%...) or system (RocketMQ's "
        "system topics, rmq_sys_*, and topics named after a cluster or a broker)",
    )
    brokers = serializers.IntegerField()
    read_queues = serializers.IntegerField(help_text="read queues of all its brokers, in total")
    write_queues = serializers.IntegerField(help_text="write queues of all its brokers, in total")
    perm_min = serializers.IntegerField()
    perm_max = serializers.IntegerField()
    version = serializers.IntegerField()


class ClusterSerializer(Serializer):
    """A cluster with counts."""

    name = serializers.CharField()
    broker_names = serializers.ListField(child=serializers.CharField())
    broker_groups = serializers.IntegerField()
    replicas = serializers.IntegerField()
    live_brokers = serializers.IntegerField()
    applied_version = serializers.IntegerField()


class ReplicaSerializer(Serializer):
    """One replica (broker id) of a group, with liveness."""

    broker_id = serializers.IntegerField()
    addr = serializers.CharField()
    role = serializers.CharField()
    ha_server_addr = serializers.CharField(allow_null=True)
    last_update_ms = serializers.IntegerField(allow_null=True)
    heartbeat_age_ms = serializers.IntegerField(allow_null=True)
    heartbeat_timeout_ms = serializers.IntegerField(allow_null=True)
    registered = serializers.BooleanField()
    alive = serializers.BooleanField()
    expiring = serializers.BooleanField()


class BrokerGroupSerializer(Serializer):
    """A broker group with its replicas."""

    broker_name = serializers.CharField()
    cluster = serializers.CharField()
    zone_name = serializers.CharField(allow_null=True)
    enable_acting_master = serializers.BooleanField()
    applied_version = serializers.IntegerField()
    alive = serializers.IntegerField()
    replicas = ReplicaSerializer(many=True)


class KVEntrySerializer(Serializer):
    """One KV item."""

    key = serializers.CharField()
    value = serializers.CharField()
    applied_version = serializers.IntegerField()


class KVNamespaceSerializer(Serializer):
    """A namespace with its items."""

    namespace = serializers.CharField()
    applied_version = serializers.IntegerField()
    entries = KVEntrySerializer(many=True)


class NodeResultSerializer(Serializer):
    """One node's result of a write."""

    node = serializers.CharField()
    ok = serializers.BooleanField()
    error = serializers.CharField(allow_null=True)


class ResultSerializer(Serializer):
    """The answer to a write."""

    ok = serializers.BooleanField()
    detail = serializers.CharField()
    count = serializers.IntegerField(required=False)
    replicated = serializers.BooleanField(
        required=False, help_text="raft mode: one write replicated through the log"
    )
    nodes = NodeResultSerializer(
        many=True,
        required=False,
        help_text="eventual mode: each node the write was sent to, and its result "
        "(HTTP 207 when some node missed it); a topic created through the brokers: "
        "each node's route, confirmed",
    )


class BrokerResultSerializer(Serializer):
    """One broker's part of a topic change."""

    addr = serializers.CharField(allow_null=True, help_text="null: the group has no master")
    group = serializers.CharField(help_text="the broker group (brokerName)")
    done = serializers.BooleanField()
    error = serializers.CharField(allow_null=True, help_text="why it was not done")


class TopicResultSerializer(ResultSerializer):
    """The answer to a topic create or delete: every write's fields plus each broker's
    result (HTTP 207, ``ok`` false and ``partial`` true, when some broker or node
    missed it)."""

    brokers = BrokerResultSerializer(
        many=True,
        help_text="method=brokers: each broker asked (the chosen groups' masters for a "
        "create; every master and slave of the topic's clusters for a delete)",
    )


class ErrorSerializer(Serializer):
    """A failed request: what went wrong."""

    detail = serializers.CharField()


def paginated(item: type[Any], name: str) -> type[Any]:
    """The page envelope DRF's PageNumberPagination answers with, around ``item``."""
    fields = {
        "count": serializers.IntegerField(),
        "next": serializers.URLField(allow_null=True),
        "previous": serializers.URLField(allow_null=True),
        "results": item(many=True),
    }
    return type(name, (serializers.Serializer,), fields)


PaginatedTopicSummarySerializer = paginated(TopicSummarySerializer, "PaginatedTopicSummary")
PaginatedBrokerGroupSerializer = paginated(BrokerGroupSerializer, "PaginatedBrokerGroup")


class AuditEntrySerializer(ModelSerializer):
    """One audit log entry (namesrv_app.audit)."""

    class Meta:
        model = AuditEntry
        fields = [
            "at",
            "username",
            "node_id",
            "channel",
            "action",
            "target",
            "detail",
            "status",
            "ok",
            "result",
        ]


PaginatedAuditEntrySerializer = paginated(AuditEntrySerializer, "PaginatedAuditEntry")


class NamesrvConfigUpdateSerializer(Serializer):
    """Keys of NamesrvConfig to set, by their Java names."""

    properties = serializers.DictField(
        child=serializers.CharField(max_length=1024, allow_blank=True),
        allow_empty=False,
        help_text='e.g. {"orderMessageEnable": "true"}',
    )

    def validate_properties(self, value: dict[str, str]) -> dict[str, str]:
        """Property names look like Java identifiers (dots allowed)."""
        bad = [key for key in value if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.]{0,127}", key)]
        if bad:
            raise serializers.ValidationError(f"not a property name: {', '.join(bad)}")
        return value
