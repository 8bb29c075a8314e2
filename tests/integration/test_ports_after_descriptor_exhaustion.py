"""The web port and the metrics port accept again once a descriptor exhaustion ends.

Each process is started with a low open-files limit (soft and hard, so it cannot raise
it back). Silent connections are opened until the process cannot accept any more (a
fresh request gets no answer); then they are all closed, and a fresh request must be
answered within a few seconds, by the same process:

* the web process is the one ``run_node`` starts (uvicorn, httptools, uvloop, Django),
  from a node config (``node.processes.web_argv``); uvicorn holds a connection that
  sends nothing for as long as the peer keeps it;
* the metrics port is the gateway's own HTTP server (``gateway/metrics_http.py``) in a
  gateway without a read front whose connection cap (``NAMESRV_CONNECTIONS_MAX``) is set
  above its limit, so its remoting port runs it out of descriptors first (see
  docs/SECURITY.md, "Hostile clients").
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster.readiness import accepts_connections
from node.config import Endpoint, NodeConfig
from node.processes import PROJECT_DIR, node_env, reset_metrics_dir, web_argv
from node.supervise import prepare_data_dir
from tests.descriptors import descriptors_for, open_files_max
from tests.integration.gateway_harness import GatewayProcess
from tests.waiting import wait_until
from tools import ports, process_facts

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.serial]

LOOPBACK = "127.0.0.1"
OPEN_FILES_MAX = 160
"""The limit of each process under test: well above what it needs to start (a few
dozen descriptors), low enough to exhaust in a moment."""
CONNECTIONS_MAX = 400
"""More connections than any process here can hold: the flood's own bound."""
BATCH = 16
"""Connections opened between two probes."""
PROBE_TIMEOUT_S = 0.5
SETTLE_S = 2.0
"""How long a batch may wait for the process to accept what the kernel queued: the
connections succeed from the listen backlog before the process takes them (in a CI run
all 400 were queued in 40 ms while the gateway accepted none)."""
SETTLE_INTERVAL_S = 0.02
SLACK_FDS = 4
RECOVERY_S = 10.0
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
LOG_LINES_MAX = 40


def answered(port: int, path: str) -> int | None:
    """The status of ``GET path`` on a fresh connection, None when there is no answer
    within PROBE_TIMEOUT_S (refused, reset, closed unanswered or silent)."""
    client = http.client.HTTPConnection(LOOPBACK, port, timeout=PROBE_TIMEOUT_S)
    try:
        client.request("GET", path)
        return client.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        client.close()


@contextlib.contextmanager
def exhausted(
    flood_port: int, probe_port: int, path: str, pid: int
) -> Iterator[list[socket.socket]]:
    """Silent connections to ``flood_port`` until process ``pid`` holds its whole limit
    and a fresh ``GET path`` on ``probe_port`` is not answered; all closed on exit."""
    held: list[socket.socket] = []
    before = process_facts.open_fds(pid)
    with descriptors_for(CONNECTIONS_MAX + BATCH), contextlib.ExitStack() as cleanup:
        cleanup.callback(close_all, held)
        while True:
            assert len(held) < CONNECTIONS_MAX, "the process never ran out of descriptors"
            for _ in range(BATCH):
                with contextlib.suppress(OSError):
                    held.append(socket.create_connection((LOOPBACK, flood_port), timeout=1.0))
            full = settled_fds(pid, before + len(held)) >= OPEN_FILES_MAX - 1
            if full and answered(probe_port, path) is None:
                break
        yield held


def settled_fds(pid: int, wanted: int) -> int:
    """The descriptors ``pid`` holds once it took about ``wanted`` (capped at its
    limit; SLACK_FDS fewer, as the count before the flood may hold a descriptor that
    was closing), or once SETTLE_S passed."""
    deadline_s = time.monotonic() + SETTLE_S
    wanted = min(wanted, OPEN_FILES_MAX - 1) - SLACK_FDS
    count = process_facts.open_fds(pid)
    while count < wanted and time.monotonic() < deadline_s:
        time.sleep(SETTLE_INTERVAL_S)
        count = process_facts.open_fds(pid)
    return count


def close_all(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        sock.close()


def recovers(port: int, path: str, status: int) -> float:
    """Seconds until a fresh ``GET path`` is answered ``status`` again."""
    started_s = time.monotonic()
    while answered(port, path) != status:
        assert time.monotonic() - started_s < RECOVERY_S, "the port did not accept again"
        time.sleep(0.1)
    return time.monotonic() - started_s


def _web_config(folder: Path) -> NodeConfig:
    return NodeConfig(
        source=folder / "node.toml",
        node_id="n1",
        mode="eventual",
        data_dir=folder / "data",
        remoting=Endpoint(LOOPBACK, ports.free_port()),
        web=Endpoint(LOOPBACK, ports.free_port()),
        internal_port=ports.free_port(),
        web_profile="local",
    )


def _clean_environment() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NAMESRV_", "DJANGO_", "DATABASE_", "REDIS_"))
    }


@pytest.fixture
def web(tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[bytes], Path]]:
    """A node's web process limited to OPEN_FILES_MAX descriptors: (port, process, log)."""
    config = _web_config(tmp_path)
    prepare_data_dir(config)
    reset_metrics_dir(config)
    env = node_env(config, _clean_environment())
    log = tmp_path / "web.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            web_argv(config),
            cwd=PROJECT_DIR,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=open_files_max(OPEN_FILES_MAX),
        )
    try:

        def listening() -> bool:
            if accepts_connections(config.web.port):
                return True
            assert process.poll() is None, log.read_text(errors="replace")[-3000:]
            return False

        wait_until(
            listening,
            what=lambda: f"the web port\n{log.read_text(errors='replace')[-3000:]}",
            timeout_s=START_TIMEOUT_S,
            interval_s=0.2,
        )
        yield config.web.port, process, log
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_the_web_port_answers_again_once_its_descriptors_are_back(
    web: tuple[int, subprocess.Popen[bytes], Path],
) -> None:
    port, process, log = web
    assert answered(port, "/healthz") == 200

    with exhausted(port, port, "/healthz", process.pid):
        pass  # it held the process's last descriptor and a request went unanswered
    took_s = recovers(port, "/healthz", 200)

    assert process.poll() is None, log.read_text(errors="replace")[-3000:]
    assert took_s < RECOVERY_S / 2


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    """An eventual-mode gateway without a read front, its limit OPEN_FILES_MAX and its
    connection cap above it, with a metrics port."""
    process = GatewayProcess(
        "n1",
        tmp_path / "n1.sqlite3",
        tmp_path / "n1.ready.json",
        tmp_path / "n1.log",
        extra_args=("--metrics-port", str(ports.free_port())),
        extra_env={"NAMESRV_CONNECTIONS_MAX": str(CONNECTIONS_MAX)},
        preexec=open_files_max(OPEN_FILES_MAX),
    )
    process.start()
    try:
        yield process
    finally:
        process.terminate()


def test_the_metrics_port_answers_again_once_its_descriptors_are_back(
    gateway: GatewayProcess,
) -> None:
    metrics_port = gateway.info["metrics_port"]
    pid = int(gateway.info["pid"])
    assert answered(metrics_port, "/metrics") == 200

    # The remoting port takes the descriptors (its cap is above the limit); the metrics
    # port then cannot accept either.
    with exhausted(gateway.info["port"], metrics_port, "/metrics", pid):
        pass  # it held the process's last descriptor and a scrape went unanswered
    took_s = recovers(metrics_port, "/metrics", 200)

    assert gateway.proc is not None and gateway.proc.poll() is None
    assert took_s < RECOVERY_S / 2
    # One rate-limited line per pause, no traceback per failed accept (2,400 lines in
    # two seconds on asyncio's start_server).
    lines = gateway.log_path.read_text(errors="replace").splitlines()
    assert any("metrics port" in line and "out of descriptors" in line for line in lines)
    assert len(lines) < LOG_LINES_MAX and not any("Traceback" in line for line in lines), "\n".join(
        lines[-40:]
    )
