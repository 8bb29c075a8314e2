"""A database of an earlier release, whose API tokens DRF stored in clear, is migrated to
hashed, expiring tokens: the keys keep working and are gone from the database.

Django's own migration executor on the test database: back to the last migration
before the hashed tokens, DRF's ``authtoken_token`` table and a token in it as that
release had them, then forward again.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.utils import timezone

from namesrv_app.models import ApiToken
from namesrv_app.tokens import TOKEN_DAYS, token_digest
from tests.web.conftest import make_user

BEFORE = [("namesrv_app", "0005_auditentry")]
AFTER = [("namesrv_app", "0006_apitoken")]
OLD_KEY = "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"  # DRF's own documentation example
OLD_CREATED = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
DRF_TOKEN_TABLE = """CREATE TABLE "authtoken_token" (
    "key" varchar(40) NOT NULL PRIMARY KEY, "created" datetime NOT NULL,
    "user_id" integer NOT NULL UNIQUE REFERENCES "auth_user" ("id"))"""


def migrate(targets: list[tuple[str, str]]) -> None:
    """Move the test database's migrations to ``targets`` (as ``manage.py migrate``)."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


@pytest.fixture
def earlier_release(transactional_db: Any) -> Iterator[None]:
    """The shared database as the release before hashed tokens left it; migrated
    forward again and DRF's table dropped afterwards."""
    migrate(BEFORE)
    with connection.cursor() as cursor:
        cursor.execute(DRF_TOKEN_TABLE)
    try:
        yield
    finally:
        migrate(AFTER)
        with connection.cursor() as cursor:
            cursor.execute('DROP TABLE IF EXISTS "authtoken_token"')


def test_clear_drf_tokens_become_hashed_tokens_and_the_clear_keys_are_deleted(
    earlier_release: None,
) -> None:
    robot = make_user("robot", "viewer")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO authtoken_token VALUES (%s, %s, %s)",
            [OLD_KEY, OLD_CREATED.strftime("%Y-%m-%d %H:%M:%S"), robot.pk],
        )
    started = timezone.now()
    migrate(AFTER)
    finished = timezone.now()

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM authtoken_token")
        assert cursor.fetchone() == (0,)
    token = ApiToken.objects.get()
    assert (token.user, token.digest, token.created) == (robot, token_digest(OLD_KEY), OLD_CREATED)
    # Valid for the configured lifetime from the migration, not from its old creation.
    lifetime = timedelta(days=TOKEN_DAYS)
    assert started + lifetime <= token.expires <= finished + lifetime
    answer = Client().get("/api/v1/topics/", headers={"Authorization": f"Token {OLD_KEY}"})
    assert answer.status_code == 200
    assert User.objects.get(pk=robot.pk).api_token == token
