"""The shared database on a real PostgreSQL server: the account, token, audit and
experiment tests run again with ``DATABASE_URL`` pointing at a server this test
starts itself (Debian's postgresql: initdb + pg_ctl in a temporary folder).

The same test files run against SQLite in the ordinary suite, so both engines
are covered by one set of tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.postgres import postgres_server

pytestmark = pytest.mark.slow
PROJECT_DIR = Path(__file__).resolve().parents[2]
SHARED_DB_TESTS = (
    "tests/web/test_shared_database.py",
    "tests/web/test_create_operator.py",
    "tests/web/test_audit_log.py",
    "tests/web/test_api_permissions.py",
    "tests/web/test_experiment_pages.py",
    "tests/web/test_login_throttle.py",
)
RUN_TIMEOUT_S = 900


def test_account_token_audit_and_experiment_tests_pass_on_postgresql() -> None:
    # Not pytest's tmp_path: its parents are root-only, and the server runs as postgres.
    folder = Path(tempfile.mkdtemp(prefix="namesrv-pg-"))
    try:
        with postgres_server(folder) as server:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "-p",
                    "no:randomly",
                    *SHARED_DB_TESTS,
                ],
                cwd=PROJECT_DIR,
                env={
                    **os.environ,
                    "DATABASE_URL": server.url,
                    "NAMESRV_EXPECT_SHARED_VENDOR": "postgresql",
                },
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT_S,
                check=False,
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert " passed" in summary and "skipped" not in summary, summary
