"""The shared database over TLS: a PostgreSQL server that takes TCP clients over TLS only
(``hostssl``), reached with ``sslmode=verify-full`` and the CA in ``sslrootcert``, the
query string of ``DATABASE_URL`` exactly as docs/DEPLOY.md tells operators to write it.

One server start for the three cases: with the right CA Django migrates and keeps an
account, a wrong CA is refused naming the certificate, and a plain connection is not
let in.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

from localcluster.tls_files import CertFiles, make_ca
from tests.postgres import postgres_server

pytestmark = pytest.mark.slow
PROJECT_DIR = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 180
OPERATOR = "tls-viewer"
OPERATOR_PASSWORD = "a-long-tls-database-password"


def manage(database_url: str, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py ARGS`` with ``database_url`` as the shared database."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "NAMESRV_DB_PATH": str(folder / "projection.sqlite3"),
        "OPERATOR_PASSWORD": OPERATOR_PASSWORD,
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def verify_full(url: str, ca_file: Path) -> str:
    """``url`` checked as docs/DEPLOY.md says: the chain against ``ca_file``, and the name."""
    return f"{url}?sslmode=verify-full&sslrootcert={ca_file}"


def test_django_uses_the_shared_database_over_verified_tls_and_refuses_a_wrong_ca() -> None:
    # Not pytest's tmp_path: its parents are root-only, and the server runs as postgres.
    folder = Path(tempfile.mkdtemp(prefix="namesrv-pg-tls-"))
    try:
        wrong_ca = CertFiles(folder / "wrong-ca.pem", folder / "wrong-ca.key")
        make_ca(wrong_ca, "a CA the server's certificate is not from")
        with postgres_server(folder, tls=True) as server:
            assert server.ca_file is not None
            url = verify_full(server.url, server.ca_file)

            migrated = manage(url, folder, "migrate", "--database", "default", "--noinput")
            assert migrated.returncode == 0, migrated.stdout + migrated.stderr
            made = manage(
                url,
                folder,
                "create_operator",
                OPERATOR,
                "--role",
                "viewer",
                "--password-env",
                "OPERATOR_PASSWORD",
            )
            assert made.returncode == 0, made.stdout + made.stderr

            with psycopg.connect(url) as link:
                row = link.execute(
                    "SELECT u.username, g.name, s.ssl FROM auth_user u"
                    " JOIN auth_user_groups ug ON ug.user_id = u.id"
                    " JOIN auth_group g ON g.id = ug.group_id"
                    " JOIN pg_stat_ssl s ON s.pid = pg_backend_pid()"
                    " WHERE u.username = %s",
                    (OPERATOR,),
                ).fetchone()
            assert row == (OPERATOR, "viewer", True)

            # What Django's connection raises too (its OperationalError keeps libpq's text).
            with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
                psycopg.connect(verify_full(server.url, wrong_ca.cert)).close()
            with pytest.raises(psycopg.OperationalError, match="no encryption"):
                psycopg.connect(f"{server.url}?sslmode=disable").close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
