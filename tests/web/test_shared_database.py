"""Which engine the shared database runs on, and the split between the two databases.

tests/integration/test_postgres_shared_db.py runs this file (with the account,
token, audit and experiment tests) against a real PostgreSQL server and sets
``NAMESRV_EXPECT_SHARED_VENDOR=postgresql``: this test then proves that run
really used it.
"""

from __future__ import annotations

import os

import pytest
from django.contrib.auth.models import User
from django.db import connections, router

from namesrv_app.models import AuditEntry, ExperimentRun, TopicRoute


def test_the_shared_database_is_the_expected_engine() -> None:
    expected = os.environ.get("NAMESRV_EXPECT_SHARED_VENDOR", "sqlite")
    assert connections["default"].vendor == expected
    assert connections["projection"].vendor == "sqlite"  # always this node's own file


def test_accounts_runs_and_audit_are_shared_and_routes_are_the_nodes_own() -> None:
    for model in (User, ExperimentRun, AuditEntry):
        assert router.db_for_write(model) == "default"
    assert router.db_for_write(TopicRoute) == "projection"


@pytest.mark.django_db
def test_each_database_holds_only_its_own_tables() -> None:
    shared = set(connections["default"].introspection.table_names())
    local = set(connections["projection"].introspection.table_names())
    assert "auth_user" in shared and "auth_user" not in local
    assert "namesrv_app_topicroute" in local and "namesrv_app_topicroute" not in shared
