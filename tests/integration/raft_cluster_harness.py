"""Real raft-mode gateways for the integration tests: N ``run_gateway --mode raft``
processes whose Raft links all cross one ``tools/faultproxy.py`` process.

PySyncObj knows a node by its Raft address, so every node keeps the real
addresses as identities and dials each peer through the proxy link
``"<i>-><j>"`` instead (``--raft-dial``). Cutting every link of one node
partitions it; the proxy's control port takes one JSON line per order.
Public and internal ports are 0 (the ready file says which were bound); Raft
ports are fixed per node so a restarted node keeps its identity.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.private_codes import InternalCode
from localcluster.argv import GatewayArgs
from localcluster.demo import DemoBroker, register_request, topic_table
from raftstore.vocab import MODE_RAFT
from remoting.blocking import BlockingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.model import DataVersion
from tests.integration.gateway_harness import (
    REPO_ROOT,
    SECRET,
    GatewayProcess,
    wait_for_ready_file,
)
from tests.waiting import wait_until
from tools import ports

CLUSTER = "RaftCluster"
RAFT_SECRET = "integration-raft-cluster-secret"
PROPOSE_TIMEOUT_S = 3.0
WIRE_TIMEOUT_S = 8.0
"""Above the propose bound: a refused write must come back as SYSTEM_ERROR, not a timeout."""
CONVERGE_TIMEOUT_S = 20.0
LEADER_TIMEOUT_S = 15.0
PROXY_START_TIMEOUT_S = 10.0

RAFT_ADD_NODE = int(InternalCode.RAFT_ADD_NODE)
RAFT_REMOVE_NODE = int(InternalCode.RAFT_REMOVE_NODE)
DIGEST_CHECKPOINTS = int(InternalCode.DIGEST_CHECKPOINTS)
RAFT_COMPACT_LOG = int(InternalCode.RAFT_COMPACT_LOG)
NODE_STATUS = int(InternalCode.NODE_STATUS)
SCAN_NOT_ACTIVE_BROKER = int(InternalCode.SCAN_NOT_ACTIVE_BROKER)


def free_port() -> int:
    """A port free on 127.0.0.1 right now, below the ephemeral range (tools.ports)."""
    return ports.free_port()


def broker(index: int) -> DemoBroker:
    """The ``index``-th broker of the cast: ``broker-<index>``, a master on its own port."""
    port = 20_000 + 10 * index
    return DemoBroker(CLUSTER, f"broker-{index}", 0, f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}")


def topic_of(index: int) -> str:
    """The topic ``broker(index)`` serves (plus its own-name topic)."""
    return f"RaftTopic{index}"


def register_frame(index: int) -> RemotingCommand:
    """REGISTER_BROKER of ``broker(index)`` announcing ``topic_of(index)``."""
    b = broker(index)
    return register_request(
        b, topic_table([topic_of(index), b.broker_name]), DataVersion(timestamp=1, counter=1)
    )


def unregister_frame(index: int) -> RemotingCommand:
    """The graceful UNREGISTER_BROKER of ``broker(index)``."""
    b = broker(index)
    fields = {
        "clusterName": b.cluster,
        "brokerAddr": b.addr,
        "brokerName": b.broker_name,
        "brokerId": str(b.broker_id),
    }
    return RemotingCommand.request(RequestCode.UNREGISTER_BROKER, fields)


def route_frame(topic: str, *, linearizable: bool = False) -> RemotingCommand:
    """GET_ROUTEINFO_BY_TOPIC, optionally with ext ``consistency=linearizable``."""
    fields = {"topic": topic, "acceptStandardJsonOnly": "true"}
    if linearizable:
        fields["consistency"] = "linearizable"
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, fields)


@dataclass
class RaftGateway(GatewayProcess):
    """A raft-mode gateway process (GatewayProcess plus its Raft options)."""

    raft_port: int = 0
    peers: tuple[str, ...] = ()
    dial: dict[str, str] = field(default_factory=dict)
    raft_dir: Path = Path()
    options: dict[str, Any] = field(default_factory=dict)
    """More :class:`GatewayArgs` fields (``scan_interval_ms=1000``, ...)."""

    @property
    def leader_log(self) -> Path:
        """Where this node's gateway records every leader change it sees."""
        return self.log_path.with_suffix(".leaders.jsonl")

    @property
    def raft_addr(self) -> str:
        """This node's Raft identity."""
        return f"127.0.0.1:{self.raft_port}"

    def launch(self, *, migrate: bool = True) -> None:
        """Start the process without waiting (see :meth:`wait_ready`)."""
        self.ready_file.unlink(missing_ok=True)
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "namesrv_site.settings",
            "NAMESRV_DB_PATH": str(self.db_path),
            "NAMESRV_INTERNAL_SECRET": SECRET,
            "NAMESRV_RAFT_SECRET": RAFT_SECRET,
            "NAMESRV_LOG_LEVEL": "WARNING",
            "NAMESRV_LEADER_PUBLISHER": "tests.integration.leader_log.record",
            "LEADER_LOG_FILE": str(self.leader_log),
            **self.extra_env,
        }
        args = GatewayArgs(
            node=self.node_id,
            port=0,
            internal_port=0,
            ready_file=self.ready_file,
            mode=MODE_RAFT,
            raft_port=self.raft_port,
            raft_peers=self.peers,
            raft_dir=self.raft_dir,
            raft_dial=tuple(sorted(self.dial.items())),
            propose_timeout_s=PROPOSE_TIMEOUT_S,
            migrate=migrate,
            **self.options,
        )
        command = [*args.argv(), *self.extra_args]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                command, cwd=REPO_ROOT, env=env, stdout=log, stderr=log, preexec_fn=self.preexec
            )

    def wait_ready(self) -> RaftGateway:
        """Wait for the ready file and read the bound ports."""
        assert self.proc is not None
        self.info = wait_for_ready_file(self.proc, self.ready_file, self.log_path)
        return self

    @property
    def running(self) -> bool:
        """True while the process is alive."""
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no drain, no flush beyond what the node already did."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def invoke(self, request: RemotingCommand) -> RemotingCommand:
        """One request on a fresh public connection."""
        with BlockingClient(self.addr, timeout_s=WIRE_TIMEOUT_S) as client:
            return client.invoke(request)

    def internal(self, code: int, **fields: str) -> RemotingCommand:
        """One internal request (secret added)."""
        with BlockingClient(self.internal_addr, timeout_s=WIRE_TIMEOUT_S) as client:
            return client.invoke(RemotingCommand.request(code, {"secret": SECRET, **fields}))

    def projection_count(self, table: str) -> int:
        """Rows of one projection table (``queuedata``, ``livebroker``, ...)."""
        return int(self.db_rows(f"select count(*) from namesrv_app_{table}")[0][0])


class FaultProxyProcess:
    """``python -m tools.faultproxy`` with one link per ordered pair of nodes."""

    def __init__(self, links: dict[str, tuple[int, str]], log_path: Path) -> None:
        self.links = links
        self.control_port = free_port()
        argv = [sys.executable, "-m", "tools.faultproxy", "--control", str(self.control_port)]
        for name, (listen, target) in sorted(links.items()):
            argv += ["--link", f"{name}={listen}:{target}"]
        self._log = log_path.open("ab")
        self.proc = subprocess.Popen(
            argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=self._log, text=True
        )
        self._wait_control()

    def _wait_control(self) -> None:
        assert self.proc.stdout is not None
        deadline_s = time.monotonic() + PROXY_START_TIMEOUT_S
        while time.monotonic() < deadline_s:
            line = self.proc.stdout.readline()
            if not line:
                break
            if "control" in json.loads(line):
                return
        raise RuntimeError("fault proxy did not start")

    def order(self, **order: Any) -> None:
        """Send one control order; AssertionError if the proxy refuses it."""
        with socket.create_connection(("127.0.0.1", self.control_port), timeout=5) as sock:
            sock.sendall(json.dumps(order).encode() + b"\n")
            reply = json.loads(sock.makefile().readline())
        assert reply.get("ok"), reply

    def close(self) -> None:
        """Stop the proxy process."""
        self.proc.terminate()
        self.proc.wait(10)
        self._log.close()


class RaftGatewayCluster:
    """N raft-mode gateways on loopback, every Raft link through a fault proxy."""

    def __init__(self, root: Path, size: int = 3, extra_args: tuple[str, ...] = ()) -> None:
        self.root = root
        raft_ports = [free_port() for _ in range(size)]
        addrs = tuple(f"127.0.0.1:{port}" for port in raft_ports)
        links: dict[str, tuple[int, str]] = {}
        for i in range(size):
            for j in range(size):
                if i != j:
                    links[f"{i}->{j}"] = (free_port(), addrs[j])
        self.proxy = FaultProxyProcess(links, root / "proxy.log")
        self.nodes = [
            RaftGateway(
                node_id=f"n{i + 1}",
                db_path=root / f"n{i + 1}.sqlite3",
                ready_file=root / f"n{i + 1}.ready.json",
                log_path=root / f"n{i + 1}.log",
                raft_port=raft_ports[i],
                peers=addrs,
                dial={
                    addrs[j]: f"127.0.0.1:{links[f'{i}->{j}'][0]}" for j in range(size) if j != i
                },
                raft_dir=root / f"raft-n{i + 1}",
                extra_args=extra_args,
            )
            for i in range(size)
        ]

    def start(self, indices: list[int] | None = None) -> None:
        """Start the given nodes (default: all) at once and wait until each is ready."""
        chosen = [self.nodes[i] for i in (indices if indices is not None else range(len(self)))]
        for node in chosen:
            node.launch()
        for node in chosen:
            node.wait_ready()

    def __len__(self) -> int:
        return len(self.nodes)

    def running(self) -> list[RaftGateway]:
        """Nodes whose process is alive."""
        return [node for node in self.nodes if node.running]

    def partition(self, index: int) -> None:
        """Blackhole every link to and from node ``index`` (a silent partition)."""
        for name in self.proxy.links:
            if str(index) in name.split("->"):
                self.proxy.order(link=name, mode="blackhole")

    def heal(self) -> None:
        """Every link back to normal."""
        self.proxy.order(heal_all=True)

    def leader(self, among: list[int] | None = None, timeout_s: float = LEADER_TIMEOUT_S) -> int:
        """Index of the node that every asked running node agrees leads."""
        asked = among if among is not None else [i for i, n in enumerate(self.nodes) if n.running]

        def agreed() -> tuple[int] | None:
            statuses = {i: self.nodes[i].node_status() for i in asked}
            leaders = {s["leader"] for s in statuses.values()}
            for i, status in statuses.items():
                if status["state"] == "leader" and leaders == {status["self_addr"]}:
                    return (i,)
            return None

        (index,) = wait_until(agreed, what="an agreed leader", timeout_s=timeout_s, interval_s=0.1)
        return index

    def converged(self, timeout_s: float = CONVERGE_TIMEOUT_S) -> list[dict[str, Any]]:
        """Wait until every running node reports the same applied index and digest."""
        statuses: list[dict[str, Any]] = []

        def same() -> list[dict[str, Any]] | None:
            statuses[:] = [node.node_status() for node in self.running()]
            return (
                statuses
                if len({(s["applied_index"], s["digest"]) for s in statuses}) == 1
                else None
            )

        return wait_until(
            same,
            what=lambda: f"convergence of {[(s['applied_index'], s['digest']) for s in statuses]}",
            timeout_s=timeout_s,
            interval_s=0.1,
        )

    def stop(self) -> None:
        """SIGTERM every running node, then stop the proxy."""
        for node in self.running():
            try:
                node.terminate()
            except subprocess.TimeoutExpired:
                node.kill()
        self.proxy.close()


@contextlib.contextmanager
def running_cluster(
    root: Path,
    extra_args: tuple[str, ...] = (),
    node_args: Callable[[], tuple[str, ...]] | None = None,
) -> Iterator[RaftGatewayCluster]:
    """Three raft gateways started with an agreed leader; stopped on exit. ``node_args``
    gives each node arguments of its own (called once per node, e.g. a fixed port)."""
    nodes = RaftGatewayCluster(root, extra_args=extra_args)
    if node_args is not None:
        for node in nodes.nodes:
            node.extra_args = (*node.extra_args, *node_args())
    try:
        nodes.start()
        nodes.leader()
        yield nodes
    finally:
        nodes.stop()


def write_until_accepted(node: RaftGateway, request: RemotingCommand, timeout_s: float) -> float:
    """Send ``request`` (a fresh copy each time) until it succeeds; seconds it took."""
    started = time.monotonic()
    last: list[RemotingCommand] = []

    def accepted() -> bool:
        fresh = RemotingCommand.request(
            request.code, dict(request.ext_fields or {}), request.body, version=request.version
        )
        last[:] = [node.invoke(fresh)]
        return last[0].code == ResponseCode.SUCCESS

    wait_until(
        accepted, what=lambda: f"the write accepted (last answer: {last})", timeout_s=timeout_s
    )
    return time.monotonic() - started
