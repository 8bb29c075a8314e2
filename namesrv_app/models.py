"""The persisted projection of ONE node's route tables (``RouteInfoManager``'s maps).

These rows are a queryable copy of the in-memory ``RouteTable``; they are
written only by :class:`namesrv_app.projection.writer.ProjectionWriter` and never read
back to answer the wire protocol. Every row carries ``applied_version``: the
table version after the command that last wrote it, so a reader can tell how
fresh each row is and the writer can be checked to touch only changed rows.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from namesrv_app.conf import NAME_CHARS_MAX


class Mode(models.TextChoices):
    """How a node replicates writes."""

    EVENTUAL = "eventual", "Eventual (original RocketMQ: every node on its own)"
    RAFT = "raft", "Raft (every write through the replicated log)"


class Versioned(models.Model):
    """Abstract base: the table version a row reflects."""

    applied_version = models.BigIntegerField(default=0, db_index=True)

    class Meta:
        abstract = True


class Cluster(Versioned):
    """One entry of ``clusterAddrTable``: a cluster and the broker names it holds."""

    name = models.CharField(max_length=NAME_CHARS_MAX, unique=True)
    broker_names = models.JSONField(default=list)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class BrokerGroup(Versioned):
    """One ``BrokerData``: a broker name with its cluster, zone and acting-master flag."""

    broker_name = models.CharField(max_length=NAME_CHARS_MAX, unique=True)
    cluster = models.CharField(max_length=NAME_CHARS_MAX)
    zone_name = models.CharField(max_length=NAME_CHARS_MAX, null=True, blank=True)
    enable_acting_master = models.BooleanField(default=False)

    class Meta:
        ordering = ["broker_name"]

    def __str__(self) -> str:
        return self.broker_name


class BrokerAddress(Versioned):
    """One ``brokerAddrs`` entry of a group: broker id (0 = master) to address."""

    group = models.ForeignKey(BrokerGroup, on_delete=models.CASCADE, related_name="addresses")
    broker_id = models.BigIntegerField()
    addr = models.CharField(max_length=NAME_CHARS_MAX)

    class Meta:
        ordering = ["group__broker_name", "broker_id"]
        constraints = [
            models.UniqueConstraint(fields=["group", "broker_id"], name="unique_broker_id"),
        ]

    def __str__(self) -> str:
        return f"{self.group_id}:{self.broker_id}={self.addr}"


class LiveBroker(Versioned):
    """One ``brokerLiveTable`` entry, keyed by (cluster, address) as in 5.x."""

    cluster_name = models.CharField(max_length=NAME_CHARS_MAX)
    broker_addr = models.CharField(max_length=NAME_CHARS_MAX)
    last_update_ms = models.BigIntegerField()
    heartbeat_timeout_ms = models.BigIntegerField()
    data_version_state = models.BigIntegerField(default=0)
    data_version_timestamp = models.BigIntegerField(default=0)
    data_version_counter = models.BigIntegerField(default=0)
    ha_server_addr = models.CharField(max_length=NAME_CHARS_MAX, null=True, blank=True)
    channel = models.CharField(max_length=NAME_CHARS_MAX, null=True, blank=True)

    class Meta:
        ordering = ["cluster_name", "broker_addr"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster_name", "broker_addr"], name="unique_live_broker"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster_name}/{self.broker_addr}"


class QueueData(Versioned):
    """One ``topicQueueTable`` entry: the queues a broker name serves for a topic."""

    topic = models.TextField()
    broker_name = models.CharField(max_length=NAME_CHARS_MAX)
    read_queue_nums = models.IntegerField()
    write_queue_nums = models.IntegerField()
    perm = models.IntegerField()
    topic_sys_flag = models.IntegerField(default=0)

    class Meta:
        ordering = ["topic", "broker_name"]
        verbose_name_plural = "queue data"
        constraints = [
            models.UniqueConstraint(fields=["topic", "broker_name"], name="unique_queue_data"),
        ]

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}"


class TopicRoute(Versioned):
    """The route a GET_ROUTEINFO_BY_TOPIC on this node answers, as the wire encodes it.

    Built by the same ``RouteTable.pickup_topic_route`` that answers the wire
    (acting masters, filter servers, order config and queue mappings included)
    and stored as the standard JSON body a 4.9.4+ client receives, so the REST
    route and the wire route cannot disagree. No row: the wire answers
    TOPIC_NOT_EXIST.
    """

    topic = models.TextField(unique=True)
    body = models.BinaryField()

    def __str__(self) -> str:
        return self.topic


class FilterServer(Versioned):
    """One ``filterServerTable`` entry: the filter servers of a live broker."""

    cluster_name = models.CharField(max_length=NAME_CHARS_MAX)
    broker_addr = models.CharField(max_length=NAME_CHARS_MAX)
    servers = models.JSONField(default=list)

    class Meta:
        ordering = ["cluster_name", "broker_addr"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster_name", "broker_addr"], name="unique_filter_server"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster_name}/{self.broker_addr}"


class TopicQueueMapping(Versioned):
    """One ``topicQueueMappingInfoTable`` entry (static topics), kept as its JSON form."""

    topic = models.TextField()
    bname = models.CharField(max_length=NAME_CHARS_MAX)
    info = models.JSONField(default=dict)

    class Meta:
        ordering = ["topic", "bname"]
        constraints = [
            models.UniqueConstraint(fields=["topic", "bname"], name="unique_topic_mapping"),
        ]

    def __str__(self) -> str:
        return f"{self.topic}@{self.bname}"


class KVNamespace(Versioned):
    """A KV-config namespace; it outlives its last key, as KVConfigManager's does."""

    name = models.TextField(unique=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "KV namespace"

    def __str__(self) -> str:
        return self.name


class KVEntry(Versioned):
    """One KV-config item (PUT_KV_CONFIG), e.g. an ORDER_TOPIC_CONFIG value."""

    namespace = models.ForeignKey(KVNamespace, on_delete=models.CASCADE, related_name="entries")
    key = models.TextField()
    value = models.TextField()

    class Meta:
        ordering = ["namespace__name", "key"]
        verbose_name = "KV entry"
        verbose_name_plural = "KV entries"
        constraints = [
            models.UniqueConstraint(fields=["namespace", "key"], name="unique_kv_key"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace_id}:{self.key}"


class NodeState(models.Model):
    """What this node's projection reflects: versions, digest and NamesrvConfig."""

    node_id = models.CharField(max_length=NAME_CHARS_MAX, unique=True)
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.EVENTUAL)
    applied_version = models.BigIntegerField(default=0)
    routes_version = models.BigIntegerField(default=0)
    digest = models.CharField(max_length=128, blank=True, default="")
    config_properties = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["node_id"]

    def __str__(self) -> str:
        return f"{self.node_id} ({self.mode}) v{self.applied_version}"


ASKED_DURATION_KEY = "asked_duration_s"
"""``ExperimentRun.summary`` key: the recording time the run was asked for, in seconds."""


class ExperimentRun(models.Model):
    """One consistency experiment run (``manage.py run_experiment``): what ran and its summary.

    The history itself lives as Parquet under ``out_dir``; this row is the index the
    console and the reports use to find it.
    """

    class Status(models.TextChoices):
        """Where the run is in its life."""

        RUNNING = "running", "Running"
        FINISHED = "finished", "Finished"
        FAILED = "failed", "Failed"

    run_id = models.CharField(max_length=NAME_CHARS_MAX, unique=True)
    scenario = models.CharField(max_length=64)
    mode = models.CharField(max_length=16, choices=Mode.choices)
    seed = models.BigIntegerField(default=0)
    started = models.DateTimeField()
    finished = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    out_dir = models.CharField(max_length=1024)
    summary = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-started"]

    def __str__(self) -> str:
        return f"{self.run_id} ({self.scenario}, {self.mode}, {self.status})"


class AuditEntry(models.Model):
    """One change an operator asked for: who, what, when, on which node, with what result.

    Lives in the cluster-wide database (namesrv_app.db_router), so every node's
    console lists every node's entries. Written by :mod:`namesrv_app.audit` after
    the request was answered; only signed-in users' requests are recorded.
    """

    at = models.DateTimeField(db_index=True)
    username = models.CharField(max_length=150)
    node_id = models.CharField(max_length=NAME_CHARS_MAX)
    channel = models.CharField(max_length=16)
    """``console`` (a form) or ``api`` (REST)."""
    action = models.CharField(max_length=128)
    target = models.CharField(max_length=NAME_CHARS_MAX, blank=True, default="")
    detail = models.JSONField(default=dict, blank=True)
    status = models.PositiveSmallIntegerField()
    """The HTTP status the request was answered with."""
    ok = models.BooleanField()
    result = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        verdict = "ok" if self.ok else "failed"
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.username}@{self.node_id} {self.action} {verdict}"


class ApiToken(models.Model):
    """A user's API token, stored as the SHA-256 digest of its key, never the key itself.

    Lives in the cluster-wide database, so a token made once works on every node.
    One per user: making a new one (``create_operator --token``) replaces the old.
    Issued and checked by :mod:`namesrv_app.tokens`.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_token"
    )
    digest = models.CharField(max_length=64, unique=True)
    """Lower-case hex SHA-256 of the key."""
    created = models.DateTimeField()
    expires = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["user__username"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"API token of {self.user} until {self.expires:%Y-%m-%d %H:%M} UTC"
