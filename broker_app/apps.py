"""App configuration of broker_app."""

from __future__ import annotations

from django.apps import AppConfig


class BrokerAppConfig(AppConfig):
    """Broker processes, their topic config and HA replication (filled in by its owner)."""

    name = "broker_app"
    verbose_name = "Brokers"
    default_auto_field = "django.db.models.BigAutoField"
