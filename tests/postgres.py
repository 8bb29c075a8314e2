"""A throwaway PostgreSQL server for tests: Debian's ``postgresql`` package, ``initdb``
and ``pg_ctl`` in a temporary folder, listening on loopback only.

The package is installed with apt-get when missing (CI runs as root, as for the
browser tests' Chromium). PostgreSQL refuses to run as root, so as root the
server runs as the package's ``postgres`` user, in a folder handed to it.

With ``tls=True`` the server has a certificate of a CA of its own
(:mod:`localcluster.tls_files`, for ``localhost``/``127.0.0.1``) and accepts TCP
clients over TLS only (``hostssl`` alone in ``pg_hba.conf``), as a site that
mandates TLS would run it; ``PostgresServer.ca_file`` is what clients check it with.
"""

from __future__ import annotations

import glob
import os
import pwd
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from localcluster.tls_files import CertFiles, issue_cert, make_ca
from tests.debian import ensure_package
from tools import ports

START_TIMEOUT_S = 60
SERVICE_USER = "postgres"
PASSWORD = "namesrv-test-password"
TLS_DIR = "tls"
# TCP clients must come over TLS and prove the password; no other line, so a plain
# connection is refused ("no pg_hba.conf entry ... no encryption").
TLS_ONLY_HBA = "hostssl all all 127.0.0.1/32 scram-sha-256\n"


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def ensure_installed() -> Path:
    """The folder of initdb/pg_ctl, installing Debian's postgresql first if needed."""
    ensure_package("postgresql", lambda: _bin_dir() is not None, "pg_ctl")
    folder = _bin_dir()
    assert folder is not None
    return folder


@dataclass(frozen=True, slots=True)
class PostgresServer:
    """A running server: its port and the URL of its database ``namesrv``."""

    port: int
    url: str
    ca_file: Path | None = None
    """With TLS: the CA of the server's certificate (``sslrootcert``)."""


def _as_service_user(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", SERVICE_USER, "--", *argv]


def _server_tls(folder: Path) -> tuple[CertFiles, Path]:
    """A CA and the server's certificate in ``folder/tls``: (the server's pair, the CA file)."""
    tls = folder / TLS_DIR
    tls.mkdir(mode=0o700)
    ca = CertFiles(tls / "ca.pem", tls / "ca.key")
    server = CertFiles(tls / "server.pem", tls / "server.key")
    issue_cert(make_ca(ca, "namesrv test PostgreSQL CA"), server, "postgres")
    return server, ca.cert


def _enable_tls(data: Path, server: CertFiles) -> None:
    """ssl = on with ``server``'s pair, and TLS-only TCP clients (``pg_hba.conf``)."""
    with (data / "postgresql.conf").open("a", encoding="utf-8") as conf:
        conf.write(f"ssl = on\nssl_cert_file = '{server.cert}'\nssl_key_file = '{server.key}'\n")
    (data / "pg_hba.conf").write_text(TLS_ONLY_HBA, encoding="utf-8")


@contextmanager
def postgres_server(folder: Path, *, tls: bool = False) -> Iterator[PostgresServer]:
    """Start a server with its data in ``folder`` (TLS only with ``tls``); stop it (fast)
    on exit."""
    bin_dir = ensure_installed()
    folder.mkdir(parents=True, exist_ok=True)
    data, sockets = folder / "data", folder / "sockets"
    sockets.mkdir(exist_ok=True)
    password_file = folder / "pwfile"
    password_file.write_text(PASSWORD + "\n", encoding="utf-8")
    owned = [folder, sockets, password_file]
    server_tls, ca_file = _server_tls(folder) if tls else (None, None)
    if server_tls is not None:
        # The server reads them as its own user; it refuses a key others may read (0600).
        owned += [server_tls.cert.parent, server_tls.cert, server_tls.key]
    if os.geteuid() == 0:
        account = pwd.getpwnam(SERVICE_USER)
        for path in owned:
            os.chown(path, account.pw_uid, account.pw_gid)
    subprocess.run(
        _as_service_user(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "namesrv",
                "--auth=scram-sha-256",
                f"--pwfile={password_file}",
                "--encoding=UTF8",
                "--locale=C",
            ]
        ),
        capture_output=True,
        check=True,
        timeout=START_TIMEOUT_S,
    )
    if server_tls is not None:
        _enable_tls(data, server_tls)
    port = ports.free_port()
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {sockets} -c fsync=off"
    log = folder / "server.log"
    subprocess.run(
        _as_service_user(
            [
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(log),
                "-w",
                "-t",
                str(START_TIMEOUT_S),
                "start",
            ]
        ),
        capture_output=True,
        check=True,
        timeout=START_TIMEOUT_S + 10,
    )
    try:
        env = {**os.environ, "PGPASSWORD": PASSWORD}
        subprocess.run(
            [
                str(bin_dir / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "namesrv",
                "namesrv",
            ],
            env=env,
            capture_output=True,
            check=True,
            timeout=30,
        )
        url = f"postgresql://namesrv:{PASSWORD}@127.0.0.1:{port}/namesrv"
        yield PostgresServer(port, url, ca_file)
    finally:
        subprocess.run(
            _as_service_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"]),
            capture_output=True,
            check=False,
            timeout=60,
        )
