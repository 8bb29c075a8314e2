"""App configuration of namesrv_app: registers the system checks."""

from __future__ import annotations

from django.apps import AppConfig


class NamesrvAppConfig(AppConfig):
    """The NameServer app."""

    name = "namesrv_app"
    verbose_name = "NameServer"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Import the checks module so ``manage.py check`` runs its checks."""
        from namesrv_app import checks  # noqa: F401
