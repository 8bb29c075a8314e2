"""The plan of a local cluster: its constants, nodes, ports and gateway options."""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from node import processes as node_processes
from raftstore import vocab
from remoting.tls import TlsMode
from tools import ports

PROJECT_DIR = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"
CLUSTER_FILE_NAME = "cluster.json"
NODE_DB_FILE_NAME = node_processes.DB_FILE_NAME
SHARED_DB_FILE_NAME = node_processes.SHARED_DB_FILE_NAME
"""The database every node of a local cluster shares (accounts, tokens, experiment runs)."""

DEFAULT_NODES = 3
DEFAULT_MODE = "eventual"
DEFAULT_BASE_PORT = 9876
DEFAULT_WEB_BASE_PORT = 8000
DEFAULT_INTERNAL_BASE_PORT = 19876
DEFAULT_REDIS_PORT = 6379
DEFAULT_RAFT_BASE_PORT = 7101
DEFAULT_METRICS_BASE_PORT = 29876
"""Each gateway's Prometheus port (GET /metrics): 29876 + i."""
MODE_RAFT = vocab.MODE_RAFT
RAFT_DIR_NAME = "raft"
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

# Stop order: the simulated brokers first (their unregistrations still reach the
# gateways), Redis last (Celery and Channels need it until they are gone, so they shut
# down cleanly instead of logging reconnect storms). The kinds of one stage stop
# together: none of them needs another of its stage, and a gateway needs none of its
# clients (a web process or a scan that loses it first logs one failed call).
STOP_STAGES = (("demo",), ("beat", "worker", "web", "gateway"), ("redis",))
PROCESS_ORDER = tuple(kind for stage in STOP_STAGES for kind in stage)


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
    metrics_port: int = 0
    """The gateway's Prometheus port; 0: none."""

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
    tls: TlsMode = TlsMode.DISABLED
    """The remoting ports' ``tls.server.mode`` (``--tls``): with TLS, every node and demo
    broker gets a certificate of the run's CA (:mod:`localcluster.tls_files`)."""
    retired: tuple[NodePlan, ...] = ()
    """Nodes ``cluster recover`` took out (a lost majority): their ids and ports are never
    given to a node ``add-node`` starts, so a new member never takes a lost one's Raft
    identity (the survivor's marker refuses peers that name one: node/force.py)."""

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
    metrics_base_port: int | None = None,
) -> ClusterPlan:
    """Lay out the ports of an N-node cluster; a base of 0 picks free ports.

    ``metrics_base_port`` None follows ``base_port`` (free ports when it is 0, else
    29876 + i); a negative one opens no metrics ports. Raises :class:`PortInUseError`
    naming every planned port that is already bound, and :class:`LauncherError` when
    two series overlap.
    """
    if nodes < 1:
        raise LauncherError(f"--nodes must be at least 1, got {nodes}")
    chosen: set[int] = set()
    remoting = _port_series(base_port, nodes, chosen)
    web = _port_series(web_base_port, nodes, chosen)
    internal = _port_series(internal_base_port, nodes, chosen)
    redis = _port_series(redis_port, 1, chosen)[0]
    raft = _port_series(raft_base_port, nodes, chosen) if mode == MODE_RAFT else [0] * nodes
    if metrics_base_port is None:
        metrics_base_port = 0 if base_port == 0 else DEFAULT_METRICS_BASE_PORT
    metrics = (
        [0] * nodes if metrics_base_port < 0 else _port_series(metrics_base_port, nodes, chosen)
    )
    planned = remoting + web + internal + [redis] + (raft if mode == MODE_RAFT else [])
    planned += [port for port in metrics if port]
    if len(set(planned)) != len(planned):
        raise LauncherError(f"the port series overlap: {sorted(planned)}")
    node_plans = tuple(
        NodePlan(f"n{i + 1}", remoting[i], web[i], internal[i], raft[i], metrics_port=metrics[i])
        for i in range(nodes)
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
