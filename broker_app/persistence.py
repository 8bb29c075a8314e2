"""The Django implementation of :class:`broker_app.metadata.MetadataRepository`.

A save replaces the broker's rows in one transaction, so a crash leaves
either the old snapshot or the new one. Metadata tables are small (topics,
groups, offsets of one broker), which keeps whole-snapshot saves cheap.
Called only from the broker's persistence thread, never from its event loop.
"""

from __future__ import annotations

from django.db import transaction

from broker_app.metadata import MetadataSnapshot
from broker_app.models import (
    BrokerConsumerOffset,
    BrokerDelayOffset,
    BrokerInstance,
    BrokerSubscriptionGroup,
    BrokerTopic,
)
from remoting.model import DataVersion, TopicConfig

PROJECTION_DB = "projection"
"""The node-local database alias (namesrv_app.db_router routes broker_app's models there)."""


def _version_list(version: DataVersion) -> list[int]:
    return [version.state_version, version.timestamp, version.counter]


def _version_from(values: object) -> DataVersion:
    if isinstance(values, list) and len(values) == 3:
        return DataVersion(int(values[0]), int(values[1]), int(values[2]))
    return DataVersion()


class DjangoMetadataRepository:
    """Keeps one broker's metadata in the broker_app tables."""

    def __init__(
        self, cluster_name: str, broker_name: str, broker_id: int, *, role: str = ""
    ) -> None:
        self.cluster_name = cluster_name
        self.broker_name = broker_name
        self.broker_id = broker_id
        self.role = role

    def load(self) -> MetadataSnapshot | None:
        """The saved snapshot, or None for a broker that never ran."""
        instance = BrokerInstance.objects.filter(
            cluster_name=self.cluster_name, broker_name=self.broker_name, broker_id=self.broker_id
        ).first()
        if instance is None:
            return None
        topics = {
            row.topic_name: TopicConfig(
                row.topic_name,
                row.read_queue_nums,
                row.write_queue_nums,
                row.perm,
                row.topic_filter_type,
                row.topic_sys_flag,
                row.order,
                dict(row.attributes),
            )
            for row in BrokerTopic.objects.filter(broker=instance)
        }
        offsets: dict[str, dict[int, int]] = {}
        for row in BrokerConsumerOffset.objects.filter(broker=instance):
            offsets.setdefault(row.topic_group, {})[row.queue_id] = row.offset
        versions = instance.other_versions or {}
        return MetadataSnapshot(
            topics=topics,
            topic_version=DataVersion(
                instance.topic_version_state,
                instance.topic_version_timestamp,
                instance.topic_version_counter,
            ),
            subscription_groups={
                row.group_name: dict(row.config)
                for row in BrokerSubscriptionGroup.objects.filter(broker=instance)
            },
            subscription_version=_version_from(versions.get("subscription")),
            consumer_offsets=offsets,
            consumer_offset_version=_version_from(versions.get("offsets")),
            delay_offsets={
                row.delay_level: row.offset
                for row in BrokerDelayOffset.objects.filter(broker=instance)
            },
        )

    @transaction.atomic(using=PROJECTION_DB)
    def save(self, snapshot: MetadataSnapshot) -> None:
        """Replace the saved snapshot with ``snapshot``."""
        version = snapshot.topic_version
        instance, _ = BrokerInstance.objects.update_or_create(
            cluster_name=self.cluster_name,
            broker_name=self.broker_name,
            broker_id=self.broker_id,
            defaults={
                "role": self.role,
                "topic_version_state": version.state_version,
                "topic_version_timestamp": version.timestamp,
                "topic_version_counter": version.counter,
                "other_versions": {
                    "subscription": _version_list(snapshot.subscription_version),
                    "offsets": _version_list(snapshot.consumer_offset_version),
                },
            },
        )
        BrokerTopic.objects.filter(broker=instance).delete()
        BrokerTopic.objects.bulk_create(
            BrokerTopic(
                broker=instance,
                topic_name=name,
                read_queue_nums=c.read_queue_nums,
                write_queue_nums=c.write_queue_nums,
                perm=c.perm,
                topic_filter_type=c.topic_filter_type,
                topic_sys_flag=c.topic_sys_flag,
                order=c.order,
                attributes=dict(c.attributes),
            )
            for name, c in snapshot.topics.items()
        )
        BrokerSubscriptionGroup.objects.filter(broker=instance).delete()
        BrokerSubscriptionGroup.objects.bulk_create(
            BrokerSubscriptionGroup(broker=instance, group_name=name, config=dict(config))
            for name, config in snapshot.subscription_groups.items()
        )
        BrokerConsumerOffset.objects.filter(broker=instance).delete()
        BrokerConsumerOffset.objects.bulk_create(
            BrokerConsumerOffset(broker=instance, topic_group=key, queue_id=queue_id, offset=offset)
            for key, queues in snapshot.consumer_offsets.items()
            for queue_id, offset in queues.items()
        )
        BrokerDelayOffset.objects.filter(broker=instance).delete()
        BrokerDelayOffset.objects.bulk_create(
            BrokerDelayOffset(broker=instance, delay_level=level, offset=offset)
            for level, offset in snapshot.delay_offsets.items()
        )
