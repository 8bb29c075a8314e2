"""A throwaway PostgreSQL server for tests: Debian's ``postgresql`` package, ``initdb``
and ``pg_ctl`` in a temporary folder, listening on loopback only.

The package is installed with apt-get when missing (CI runs as root, as for the
browser tests' Chromium). PostgreSQL refuses to run as root, so as root the
server runs as the package's ``postgres`` user, in a folder handed to it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tools import ports

APT_TIMEOUT_S = 900
START_TIMEOUT_S = 60
SERVICE_USER = "postgres"
PASSWORD = "namesrv-test-password"


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def ensure_installed() -> Path:
    """The folder of initdb/pg_ctl, installing Debian's postgresql first if needed."""
    folder = _bin_dir()
    if folder is not None:
        return folder
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError("PostgreSQL is missing and cannot be installed (needs root, apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "postgresql"]
    done = subprocess.run(install, env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=False)
    if done.returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True,
                       timeout=APT_TIMEOUT_S, check=False)  # fmt: skip
        subprocess.run(install, env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=True)
    folder = _bin_dir()
    if folder is None:
        raise RuntimeError("apt-get installed postgresql but no pg_ctl was found")
    return folder


@dataclass(frozen=True, slots=True)
class PostgresServer:
    """A running server: its port and the URL of its database ``namesrv``."""

    port: int
    url: str


def _as_service_user(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", SERVICE_USER, "--", *argv]


@contextmanager
def postgres_server(folder: Path) -> Iterator[PostgresServer]:
    """Start a server with its data in ``folder``; stop it (fast) on exit."""
    bin_dir = ensure_installed()
    folder.mkdir(parents=True, exist_ok=True)
    data, sockets = folder / "data", folder / "sockets"
    sockets.mkdir(exist_ok=True)
    password_file = folder / "pwfile"
    password_file.write_text(PASSWORD + "\n", encoding="utf-8")
    if os.geteuid() == 0:
        account = pwd.getpwnam(SERVICE_USER)
        for path in (folder, sockets, password_file):
            os.chown(path, account.pw_uid, account.pw_gid)
    subprocess.run(
        _as_service_user([str(bin_dir / "initdb"), "-D", str(data), "-U", "namesrv",
                          "--auth=scram-sha-256", f"--pwfile={password_file}",
                          "--encoding=UTF8", "--locale=C"]),
        capture_output=True, check=True, timeout=START_TIMEOUT_S,
    )  # fmt: skip
    port = ports.free_port()
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {sockets} -c fsync=off"
    log = folder / "server.log"
    subprocess.run(
        _as_service_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options,
                          "-l", str(log), "-w", "-t", str(START_TIMEOUT_S), "start"]),
        capture_output=True, check=True, timeout=START_TIMEOUT_S + 10,
    )  # fmt: skip
    try:
        env = {**os.environ, "PGPASSWORD": PASSWORD}
        subprocess.run(
            [str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "namesrv",
             "namesrv"], env=env, capture_output=True, check=True, timeout=30,
        )  # fmt: skip
        yield PostgresServer(port, f"postgresql://namesrv:{PASSWORD}@127.0.0.1:{port}/namesrv")
    finally:
        subprocess.run(
            _as_service_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"]),
            capture_output=True, check=False, timeout=60,
        )  # fmt: skip
