"""Create the console's two role groups, viewer and operator (see namesrv_app.roles)."""

from __future__ import annotations

from typing import Any

from django.db import migrations

ROLE_GROUPS = ("viewer", "operator")


def create_groups(apps: Any, schema_editor: Any) -> None:
    """Create the groups if missing (re-running is harmless)."""
    group_model = apps.get_model("auth", "Group")
    for name in ROLE_GROUPS:
        group_model.objects.get_or_create(name=name)


def delete_groups(apps: Any, schema_editor: Any) -> None:
    """Drop the groups again (their memberships go with them)."""
    group_model = apps.get_model("auth", "Group")
    group_model.objects.filter(name__in=ROLE_GROUPS).delete()


class Migration(migrations.Migration):
    """Data migration: the viewer and operator groups."""

    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("namesrv_app", "0001_initial"),
    ]

    operations = [migrations.RunPython(create_groups, delete_groups)]
