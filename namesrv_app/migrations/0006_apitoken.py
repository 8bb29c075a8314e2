"""API tokens of our own: the SHA-256 of the key and an expiry (namesrv_app.tokens).

DRF's authtoken app kept the keys themselves in ``authtoken_token``. A database that
has that table (every deployment before this release) gets each of its tokens as a
hashed row here, valid for ``NAMESRV_WEB['TOKEN_DAYS']`` (90 days) from this migration,
so scripts keep working while their owners make new ones; then the clear keys are
deleted. The table itself stays behind, empty: it belongs to an app no longer
installed, so nothing here owns its schema.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.utils import timezone
from django.utils.dateparse import parse_datetime

DRF_TOKEN_TABLE = "authtoken_token"
TOKEN_DAYS = 90


def _aware(value: Any) -> datetime:
    """A row's ``created`` as an aware datetime (SQLite hands back naive UTC or text)."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if not isinstance(value, datetime):
        return timezone.now()
    return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)


def hash_drf_tokens(apps: Any, schema_editor: Any) -> None:
    """Every clear DRF token becomes a hashed, expiring ApiToken; the clear keys go."""
    connection = schema_editor.connection
    if DRF_TOKEN_TABLE not in connection.introspection.table_names():
        return
    api_token = apps.get_model("namesrv_app", "ApiToken")
    days = int(getattr(settings, "NAMESRV_WEB", {}).get("TOKEN_DAYS", TOKEN_DAYS))
    expires = timezone.now() + timedelta(days=days)
    table = connection.ops.quote_name(DRF_TOKEN_TABLE)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {connection.ops.quote_name('key')}, created, user_id FROM {table}")
        rows = cursor.fetchall()
        api_token.objects.using(connection.alias).bulk_create(
            api_token(
                user_id=user_id,
                # The same digest as namesrv_app.tokens.token_digest, written out here
                # because a migration must not change when that module does.
                digest=hashlib.sha256(str(key).encode("utf-8")).hexdigest(),
                created=_aware(created),
                expires=expires,
            )
            for key, created, user_id in rows
        )
        cursor.execute(f"DELETE FROM {table}")


class Migration(migrations.Migration):
    """The ApiToken table, then DRF's clear tokens moved into it as hashes."""

    dependencies = [
        ("namesrv_app", "0005_auditentry"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("digest", models.CharField(max_length=64, unique=True)),
                ("created", models.DateTimeField()),
                ("expires", models.DateTimeField(db_index=True)),
                ("user", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name="api_token", to=settings.AUTH_USER_MODEL)),
            ],
            options={
                "verbose_name": "API token",
                "ordering": ["user__username"],
            },
        ),
        migrations.RunPython(hash_drf_tokens, migrations.RunPython.noop),
    ]
