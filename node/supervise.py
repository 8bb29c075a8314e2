"""``run_node``: start one node's processes from its config file and keep them together.

The supervisor is the one process an init system (systemd, a container runtime)
starts on a host. It migrates the node's databases (while ``collectstatic`` gathers
the web process's static files; each only when this code has not done it already,
:mod:`node.preparation`), starts the gateway, the web process and, with
Redis configured, the scan worker and beat; writes each one's output to
``<data_dir>/<name>.log``; and stays until SIGTERM/SIGINT, then stops them in order
(web and Celery first, the gateway last, so clients are not cut mid-request). When
one of them dies, the supervisor stops the others and exits non-zero, so the init
system restarts the node as a whole instead of leaving half a node answering.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from node import preparation, processes
from node.config import NodeConfig
from node.files import write_secret_file

STOP_GRACE_S = 10.0
MIGRATE_TIMEOUT_S = 300.0
READY_TIMEOUT_S = 90.0
POLL_INTERVAL_S = 0.2
SECRET_BYTES = 32
STOP_ORDER = ("web", "beat", "worker", "gateway")


class SupervisorError(RuntimeError):
    """The node could not be started; the message says which part and why."""


@dataclass
class Child:
    """One process of the node."""

    name: str
    argv: list[str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None


def prepare_data_dir(config: NodeConfig) -> None:
    """Create the data folder (owner only) and what the node keeps there: a fresh
    internal-port secret when none is configured, the member list and the TLS settings
    its processes read."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        config.data_dir.chmod(0o700)
    if config.internal_secret_file is None:
        write_secret_file(
            processes.internal_secret_file(config), secrets.token_hex(SECRET_BYTES) + "\n"
        )
    if config.cluster_file is None:
        processes.write_cluster_document(config)
    processes.write_tls_properties(config)


def children(config: NodeConfig) -> list[Child]:
    """The node's processes, in start order."""
    log = config.data_dir.joinpath
    made = [
        Child("gateway", processes.gateway_argv(config), log("gateway.log")),
        Child("web", processes.web_argv(config), log("web.log")),
    ]
    if config.redis_url:
        queues = [processes.scan_queue(config.node_id), "celery"]
        hostname = f"scan-{config.node_id}@{config.remoting.host}"
        made.append(Child("worker", processes.worker_argv(hostname, queues), log("worker.log")))
        made.append(
            Child("beat", processes.beat_argv(config.data_dir / "beat-schedule"), log("beat.log"))
        )
    return made


def _spawn(child: Child, env: Mapping[str, str]) -> None:
    with open(child.log_path, "ab") as log:
        child.popen = subprocess.Popen(
            child.argv,
            cwd=processes.PROJECT_DIR,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _tail(path: Path, size: int = 2000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-size:].decode("utf-8", "replace")


def migrate(config: NodeConfig, env: Mapping[str, str]) -> None:
    """Apply the migrations of each database not migrated for this code already (its
    stamp, :mod:`node.preparation`; a database on a server always); SupervisorError with
    the log's tail when one fails."""
    log_path = config.data_dir / "migrate.log"
    schema = preparation.schema_fingerprint()
    files = (
        preparation.sqlite_file(env.get("DATABASE_URL", "")),
        Path(env[processes.PROJECTION_DB_ENV]),
    )
    for argv, db in zip(processes.migrate_argvs(), files, strict=True):
        if db is not None and preparation.is_prepared(db, schema):
            continue
        with open(log_path, "ab") as log:
            code = subprocess.call(
                argv,
                cwd=processes.PROJECT_DIR,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=MIGRATE_TIMEOUT_S,
            )
        if code != 0:
            raise SupervisorError(
                f"migrate {argv[-1]} failed (exit {code}), {log_path}:\n{_tail(log_path)}"
            )
        if db is not None:
            preparation.stamp(db, schema)


def collect_static(config: NodeConfig, env: Mapping[str, str]) -> Collecting | None:
    """Start ``collectstatic`` into the node's static folder (its output in
    ``collectstatic.log``); :func:`collected` waits for it. None when the folder was
    collected for this code already (its stamp)."""
    fingerprint = preparation.static_fingerprint()
    if preparation.is_prepared(processes.static_root(config), fingerprint):
        return None
    with open(config.data_dir / "collectstatic.log", "ab") as log:
        popen = subprocess.Popen(
            processes.collectstatic_argv(),
            cwd=processes.PROJECT_DIR,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return Collecting(popen, fingerprint)


@dataclass(frozen=True, slots=True)
class Collecting:
    """A running ``collectstatic`` and the fingerprint its folder is stamped with."""

    popen: subprocess.Popen[bytes]
    fingerprint: str


def collected(config: NodeConfig, collecting: Collecting | None) -> None:
    """Wait for :func:`collect_static` and stamp the folder; SupervisorError with the
    log's tail when it failed."""
    if collecting is None:
        return
    try:
        code = collecting.popen.wait(timeout=MIGRATE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        collecting.popen.kill()
        code = collecting.popen.wait()
    if code != 0:
        log_path = config.data_dir / "collectstatic.log"
        raise SupervisorError(f"collectstatic failed (exit {code}), {log_path}:\n{_tail(log_path)}")
    preparation.stamp(processes.static_root(config), collecting.fingerprint)


def stop(running: list[Child], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM in STOP_ORDER, SIGKILL whatever is still there after ``grace_s``."""
    order = {name: i for i, name in enumerate(STOP_ORDER)}
    for child in sorted(running, key=lambda c: order.get(c.name, 0)):
        if not child.alive() or child.popen is None:
            continue
        child.popen.terminate()
        try:
            child.popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            child.popen.kill()
            child.popen.wait()


def _gateway_ready(config: NodeConfig) -> bool:
    return processes.ready_file(config).exists()


BeforeStart = Callable[[NodeConfig, Mapping[str, str]], NodeConfig]
"""Called with the config and the processes' environment once the databases are
migrated, before any process starts; returns the config to start from (``run_node
--force-new-cluster`` replays and replaces the Raft folder there: node/force.py)."""


def run_node(
    config: NodeConfig,
    *,
    base_env: Mapping[str, str] | None = None,
    say: Callable[[str], None] = print,
    stop_event: threading.Event | None = None,
    before_start: BeforeStart | None = None,
) -> int:
    """Run the node until a stop signal (or ``stop_event``); the exit status.

    0 after a requested stop; 1 when a process of the node died on its own.
    """
    stop_requested = stop_event or threading.Event()
    prepare_data_dir(config)
    base = os.environ if base_env is None else base_env
    env = processes.node_env(config, base)
    collecting = collect_static(config, env)
    try:
        migrate(config, env)
    except BaseException:
        if collecting is not None:
            collecting.popen.kill()
            collecting.popen.wait()
        raise
    collected(config, collecting)
    if before_start is not None:
        config = before_start(config, env)
        env = processes.node_env(config, base)
    processes.ready_file(config).unlink(missing_ok=True)
    processes.reset_metrics_dir(config)
    running = children(config)
    previous = _install_signals(stop_requested)
    try:
        for child in running:
            _spawn(child, env)
            pid = child.popen.pid if child.popen else "-"
            say(f"{config.node_id}: started {child.name} (pid {pid}, log {child.log_path})")
        announced = False
        while not stop_requested.is_set():
            dead = [c for c in running if not c.alive()]
            if dead:
                for child in dead:
                    code = child.popen.returncode if child.popen else None
                    say(
                        f"{config.node_id}: {child.name} exited ({code}); stopping the node. "
                        f"Last lines of {child.log_path}:\n{_tail(child.log_path)}"
                    )
                return 1
            if not announced and _gateway_ready(config):
                announced = True
                say(_ready_line(config))
            stop_requested.wait(POLL_INTERVAL_S)
        say(f"{config.node_id}: stopping")
        return 0
    finally:
        stop(running)
        _restore_signals(previous)


def _ready_line(config: NodeConfig) -> str:
    web = processes.console_url(config.tls, str(config.web_advertise or config.web))
    parts = [f"remoting {config.remoting_advertise or config.remoting}", f"web {web}"]
    if config.raft:
        parts.append(f"raft {config.raft}")
    return f"{config.node_id} ready ({config.mode}): " + ", ".join(parts)


def _install_signals(stop_requested: threading.Event) -> dict[int, object]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous: dict[int, object] = {}
    for signum in (signal.SIGTERM, signal.SIGINT):
        previous[signum] = signal.signal(signum, lambda *_: stop_requested.set())
    return previous


def _restore_signals(previous: dict[int, object]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)  # type: ignore[arg-type]


def wait_ready(config: NodeConfig, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Block until the node's gateway wrote its ready file (tests, scripts)."""
    deadline = time.monotonic() + timeout_s
    while not _gateway_ready(config):
        if time.monotonic() > deadline:
            raise SupervisorError(f"{config.node_id}: not ready after {timeout_s:.0f} s")
        time.sleep(POLL_INTERVAL_S)
