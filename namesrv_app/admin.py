"""Admin: every projection table is visible and read-only.

The tables mirror the route table; changing a row here would make the
projection lie about the node's state, so operations go through services
(the wire protocol, the API) and the admin only shows.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from namesrv_app import models


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """A model admin with no add, change or delete permission."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Rows are created by the projection writer only."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Rows change only when the route table changes."""
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Rows disappear only when the route table drops them."""
        return False


@admin.register(models.Cluster)
class ClusterAdmin(ReadOnlyAdmin):
    """Clusters and their broker names."""

    list_display = ("name", "broker_names", "applied_version")
    search_fields = ("name",)


@admin.register(models.BrokerGroup)
class BrokerGroupAdmin(ReadOnlyAdmin):
    """Broker groups (BrokerData)."""

    list_display = (
        "broker_name",
        "cluster",
        "zone_name",
        "enable_acting_master",
        "applied_version",
    )
    search_fields = ("broker_name", "cluster")


@admin.register(models.BrokerAddress)
class BrokerAddressAdmin(ReadOnlyAdmin):
    """Broker id to address entries."""

    list_display = ("group", "broker_id", "addr", "applied_version")
    search_fields = ("addr", "group__broker_name")


@admin.register(models.LiveBroker)
class LiveBrokerAdmin(ReadOnlyAdmin):
    """Live brokers and their last heartbeat."""

    list_display = (
        "cluster_name",
        "broker_addr",
        "last_update_ms",
        "heartbeat_timeout_ms",
        "ha_server_addr",
        "applied_version",
    )
    search_fields = ("cluster_name", "broker_addr")


@admin.register(models.QueueData)
class QueueDataAdmin(ReadOnlyAdmin):
    """Topic queues per broker name."""

    list_display = (
        "topic",
        "broker_name",
        "read_queue_nums",
        "write_queue_nums",
        "perm",
        "topic_sys_flag",
        "applied_version",
    )
    search_fields = ("topic", "broker_name")


@admin.register(models.FilterServer)
class FilterServerAdmin(ReadOnlyAdmin):
    """Filter servers per live broker."""

    list_display = ("cluster_name", "broker_addr", "servers", "applied_version")


@admin.register(models.TopicQueueMapping)
class TopicQueueMappingAdmin(ReadOnlyAdmin):
    """Static-topic mapping infos."""

    list_display = ("topic", "bname", "applied_version")
    search_fields = ("topic",)


@admin.register(models.KVNamespace)
class KVNamespaceAdmin(ReadOnlyAdmin):
    """KV-config namespaces."""

    list_display = ("name", "applied_version")


@admin.register(models.KVEntry)
class KVEntryAdmin(ReadOnlyAdmin):
    """KV-config items."""

    list_display = ("namespace", "key", "value", "applied_version")
    search_fields = ("key", "value")


@admin.register(models.NodeState)
class NodeStateAdmin(ReadOnlyAdmin):
    """This node's projection state."""

    list_display = ("node_id", "mode", "applied_version", "routes_version", "digest", "updated_at")


@admin.register(models.ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """API tokens: who holds one and until when; deleting one revokes it.

    Only the key's hash is stored, so there is nothing secret to show and nothing to
    edit: a new token comes from ``manage.py create_operator USERNAME --token``.
    """

    list_display = ("user", "created", "expires")
    search_fields = ("user__username",)
    fields = ("user", "created", "expires")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Tokens are made by create_operator, which shows the key once."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """A token's owner and lifetime are fixed when it is made."""
        return False
