"""The node's databases migrated in this process (``run_gateway --migrate``), each only
when it has work: a database already migrated for this code, or fresh and copied from
the first one migrated, is left alone (:mod:`node.preparation`)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management import call_command

from node import preparation

SQLITE_ENGINE = "django.db.backends.sqlite3"


def _sqlite_file(alias: str) -> Path | None:
    database = settings.DATABASES[alias]
    return Path(database["NAME"]) if database["ENGINE"] == SQLITE_ENGINE else None


def migrate(aliases: tuple[str, ...]) -> None:
    """Apply the migrations of each database of ``aliases``, in order."""
    schema = preparation.schema_fingerprint()
    for alias in aliases:
        db = _sqlite_file(alias)
        if preparation.database_ready(db, alias, schema):
            continue
        fresh = db is not None and not db.exists()
        call_command("migrate", interactive=False, verbosity=0, skip_checks=True, database=alias)
        if db is not None:
            preparation.keep_database(db, alias, schema, template=fresh)
