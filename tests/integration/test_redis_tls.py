"""Redis over TLS: Celery (broker and results), the Channels layer and beat's lock all
reach a TLS-only Redis through one ``rediss://`` URL that names the CA
(``?ssl_ca_certs=...``), and all of them refuse a server their CA did not sign.

The server is Debian's redis-server with TLS (tests/redis_tls.py); the clients run in
processes of their own with the project's settings, a real Celery worker answers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster.tls_files import CertFiles, make_ca
from node.processes import worker_argv
from tests.integration.redis_tls_probe import ECHOED
from tests.redis_tls import RedisTlsServer, redis_tls_server
from tests.waiting import wait_until

pytestmark = pytest.mark.slow
PROJECT_DIR = Path(__file__).resolve().parents[2]
PROBE_TIMEOUT_S = 120
WORKER_STOP_TIMEOUT_S = 20
CERTIFICATE_REFUSED = "certificate verify failed"


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisTlsServer]:
    """One TLS-only Redis for the module."""
    with redis_tls_server(tmp_path_factory.mktemp("redis-tls")) as server:
        yield server


def process_env(redis_url: str, folder: Path) -> dict[str, str]:
    """A node process's environment with ``redis_url`` (nothing of the caller's settings)."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NAMESRV_", "DJANGO_", "REDIS_", "DATABASE_"))
    }
    return {
        **clean,
        "DJANGO_SETTINGS_MODULE": "namesrv_site.settings",
        "REDIS_URL": redis_url,
        "DATABASE_URL": f"sqlite:///{folder / 'shared.sqlite3'}",
        "NAMESRV_DB_PATH": str(folder / "projection.sqlite3"),
    }


def _task_done(worker_log: Path) -> bool:
    """True once the worker logged the probe's ``celery.accumulate`` as done, echoing it."""
    text = worker_log.read_text(encoding="utf-8", errors="replace")
    return any(
        "celery.accumulate" in line and "succeeded" in line and repr(ECHOED) in line
        for line in text.splitlines()
    )


def probe(env: dict[str, str], *args: str) -> dict[str, Any]:
    """Run tests/integration/redis_tls_probe.py; its JSON line."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration.redis_tls_probe", *args],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_celery_channels_and_beat_work_over_rediss_checking_the_servers_ca(
    tls_redis: RedisTlsServer, tmp_path: Path
) -> None:
    env = process_env(tls_redis.url(), tmp_path)
    with open(tmp_path / "worker.log", "wb") as log:
        worker = subprocess.Popen(
            worker_argv("tls-probe@test", ["celery"]),
            cwd=PROJECT_DIR,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    log_path = tmp_path / "worker.log"
    try:
        result = probe(env)
        # The task the probe sent ran (there is no result backend to read it from).
        wait_until(
            lambda: _task_done(log_path),
            what="the probe's task in the worker log",
            timeout_s=PROBE_TIMEOUT_S,
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=WORKER_STOP_TIMEOUT_S)
    worker_log = log_path.read_text(encoding="utf-8", errors="replace")
    assert result == {
        "celery": {"ok": [{"ok": "pong"}]},
        "channels": {"ok": "over tls"},
        "beat_lock": {"ok": True},
    }, worker_log[-3000:]
    # The worker itself reached the broker over TLS and never fell back to no checks.
    assert "rediss://" in worker_log and "insecure" not in worker_log.lower()


@pytest.mark.parametrize("trusted", ["another CA", "the system's CAs"])
def test_every_redis_client_refuses_a_server_its_ca_did_not_sign(
    trusted: str, tls_redis: RedisTlsServer, tmp_path: Path
) -> None:
    if trusted == "another CA":
        other = CertFiles(tmp_path / "other-ca.pem", tmp_path / "other-ca.key")
        make_ca(other, "a CA the Redis server's certificate is not from")
        url = tls_redis.url(ca_file=other.cert)
    else:
        # No TLS option at all: left alone, Celery's broker (kombu) would connect
        # without checking anything; the settings make every client check.
        url = tls_redis.url().partition("?")[0]

    result = probe(process_env(url, tmp_path), "--no-worker")

    assert set(result) == {"celery_broker", "channels", "beat_lock"}
    for client in result:
        assert CERTIFICATE_REFUSED in result[client].get("error", ""), (client, result)
