"""Broker metadata persisted between runs: topics, groups, consumer and delay offsets.

One :class:`BrokerInstance` row per (cluster, broker name, broker id); the
other tables hang off it. They are written only by
:class:`broker_app.persistence.DjangoMetadataRepository` (the broker process's
persistence thread) and read by the admin and, later, the console.
"""

from __future__ import annotations

from django.db import models


class BrokerRoleChoice(models.TextChoices):
    """RocketMQ's BrokerRole values."""

    ASYNC_MASTER = "ASYNC_MASTER", "Async master"
    SYNC_MASTER = "SYNC_MASTER", "Sync master"
    SLAVE = "SLAVE", "Slave"


class BrokerInstance(models.Model):
    """One broker process identity and the DataVersions of its tables."""

    cluster_name = models.CharField(max_length=255)
    broker_name = models.CharField(max_length=255)
    broker_id = models.BigIntegerField()
    role = models.CharField(max_length=16, choices=BrokerRoleChoice.choices)
    broker_addr = models.CharField(max_length=255, blank=True)
    ha_addr = models.CharField(max_length=255, blank=True)
    topic_version_state = models.BigIntegerField(default=0)
    topic_version_timestamp = models.BigIntegerField(default=0)
    topic_version_counter = models.BigIntegerField(default=0)
    # The DataVersions of subscription groups and consumer offsets, as
    # {"subscription": [state, timestamp, counter], "offsets": [...]}.
    other_versions = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster_name", "broker_name", "broker_id"], name="broker_instance_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.cluster_name}/{self.broker_name}/{self.broker_id}"


class BrokerTopic(models.Model):
    """One row of a broker's topic config table (TopicConfig)."""

    broker = models.ForeignKey(BrokerInstance, on_delete=models.CASCADE, related_name="topics")
    topic_name = models.CharField(max_length=255)
    read_queue_nums = models.IntegerField()
    write_queue_nums = models.IntegerField()
    perm = models.IntegerField()
    topic_filter_type = models.CharField(max_length=16)
    topic_sys_flag = models.IntegerField(default=0)
    order = models.BooleanField(default=False)
    attributes = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["broker", "topic_name"], name="broker_topic_unique")
        ]

    def __str__(self) -> str:
        return self.topic_name


class BrokerSubscriptionGroup(models.Model):
    """A subscription group's config, kept as RocketMQ's JSON object."""

    broker = models.ForeignKey(
        BrokerInstance, on_delete=models.CASCADE, related_name="subscription_groups"
    )
    group_name = models.CharField(max_length=255)
    config = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["broker", "group_name"], name="broker_group_unique")
        ]

    def __str__(self) -> str:
        return self.group_name


class BrokerConsumerOffset(models.Model):
    """A consumer group's offset in one queue (key ``topic@group`` upstream)."""

    broker = models.ForeignKey(
        BrokerInstance, on_delete=models.CASCADE, related_name="consumer_offsets"
    )
    topic_group = models.CharField(max_length=512)
    queue_id = models.IntegerField()
    offset = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["broker", "topic_group", "queue_id"], name="broker_offset_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.topic_group}#{self.queue_id}={self.offset}"


class BrokerDelayOffset(models.Model):
    """The schedule-message offset of one delay level."""

    broker = models.ForeignKey(
        BrokerInstance, on_delete=models.CASCADE, related_name="delay_offsets"
    )
    delay_level = models.IntegerField()
    offset = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["broker", "delay_level"], name="broker_delay_unique")
        ]

    def __str__(self) -> str:
        return f"level {self.delay_level}={self.offset}"
