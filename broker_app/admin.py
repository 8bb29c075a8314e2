"""Read-only admin pages of broker metadata (writes go through the broker process)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from broker_app.models import (
    BrokerConsumerOffset,
    BrokerDelayOffset,
    BrokerInstance,
    BrokerSubscriptionGroup,
    BrokerTopic,
)


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """An admin that shows rows and never changes them."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        """No adds: the broker process owns these rows."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """No edits: the broker process owns these rows."""
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """No deletes: the broker process owns these rows."""
        return False


@admin.register(BrokerInstance)
class BrokerInstanceAdmin(ReadOnlyAdmin):
    """Broker identities and their topic DataVersion."""

    list_display = (
        "cluster_name",
        "broker_name",
        "broker_id",
        "role",
        "topic_version_counter",
        "updated_at",
    )
    list_filter = ("cluster_name", "role")


@admin.register(BrokerTopic)
class BrokerTopicAdmin(ReadOnlyAdmin):
    """Topic configs per broker."""

    list_display = ("topic_name", "broker", "read_queue_nums", "write_queue_nums", "perm")
    search_fields = ("topic_name",)


@admin.register(BrokerSubscriptionGroup)
class BrokerSubscriptionGroupAdmin(ReadOnlyAdmin):
    """Subscription groups per broker."""

    list_display = ("group_name", "broker")


@admin.register(BrokerConsumerOffset)
class BrokerConsumerOffsetAdmin(ReadOnlyAdmin):
    """Consumer offsets per broker."""

    list_display = ("topic_group", "queue_id", "offset", "broker")


@admin.register(BrokerDelayOffset)
class BrokerDelayOffsetAdmin(ReadOnlyAdmin):
    """Delay-level offsets per broker."""

    list_display = ("delay_level", "offset", "broker")
