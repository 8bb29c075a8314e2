"""Fault mechanisms of the experiments: real signals, real proxies, real wire requests.

- :class:`ProxyMesh`: ``tools.faultproxy`` links in front of NameServer ports. Brokers
  are put on *lanes*; a lane has one link per node, so cutting (lane, node) cuts exactly
  the connections of that lane's brokers to that node (S1: ns1 loses b3, ns2 loses b2)
  while the nodes keep their side of the connection open (a blackhole sends no FIN).
- :class:`ClusterHandle`: the processes of a cluster started by ``localcluster.launcher``:
  kill a gateway with SIGKILL (no graceful drain) or SIGTERM, restart it with the same
  command line, ask NODE_STATUS, find the Raft leader, send a liveness scan stamped by a
  skewed clock, remove a Raft member.
- :class:`RaftMesh`: proxy links between Raft members, in place before the gateways start
  (their ``--raft-dial`` through the launcher), so a partition is a mode change on links
  (all of a node's links, or one pair's, both ways or one way).
- :func:`faketime_env`: the environment that starts a gateway on a skewed clock through
  Debian's libfaketime (``LD_PRELOAD``), for a real clock skew of the process.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.private_codes import InternalCode
from localcluster import launcher
from remoting.client import RemotingClient, RemotingClientError
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from tools.faultproxy import FaultProxy, LinkMode

NODE_STATUS_CODE = int(InternalCode.NODE_STATUS)
SCAN_CODE = int(InternalCode.SCAN_NOT_ACTIVE_BROKER)
REMOVE_NODE_CODE = int(InternalCode.RAFT_REMOVE_NODE)
INTERNAL_TIMEOUT_S = 3.0
RESTART_READY_TIMEOUT_S = 60.0
STATE_LEADER = "leader"
FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
"""Debian's libfaketime (package ``faketime``)."""


def faketime_available(lib: Path = FAKETIME_LIB) -> bool:
    """True when libfaketime is installed where Debian puts it."""
    return lib.is_file()


def faketime_env(skew_ms: int, lib: Path = FAKETIME_LIB) -> dict[str, str]:
    """Environment that runs a process with its wall clock ``skew_ms`` off (ahead when
    positive) through libfaketime. Its monotonic clock moves by the same constant, which
    leaves every interval (timeouts, sleeps, Raft's timers) as it was: keeping it real
    (``FAKETIME_DONT_FAKE_MONOTONIC``) makes Debian's 0.9.10 fail ``time.sleep`` with
    EINVAL (its absolute-time ``clock_nanosleep``), which kills PySyncObj's tick thread."""
    if not faketime_available(lib):
        raise FaultError(f"libfaketime is not installed ({lib}); apt-get install faketime")
    return {
        "LD_PRELOAD": str(lib),
        "FAKETIME": f"{skew_ms / 1000:+.3f}",
    }


class FaultError(RuntimeError):
    """A fault could not be injected or healed; the message says why."""


class ProxyMesh:
    """Fault-proxy links per (lane, node) in front of the nodes' remoting ports."""

    def __init__(self) -> None:
        self.proxy = FaultProxy()
        self._addrs: dict[tuple[str, str], str] = {}

    async def lane(self, lane: str, nodes: Mapping[str, str]) -> None:
        """Open one link per node for ``lane`` (idempotent)."""
        for node, target in sorted(nodes.items()):
            if (lane, node) not in self._addrs:
                self._addrs[(lane, node)] = await self.proxy.add_link(f"{lane}->{node}", target)

    def addr(self, lane: str, node: str) -> str:
        """The address brokers of ``lane`` dial for ``node``."""
        return self._addrs[(lane, node)]

    def set(self, lane: str, node: str, mode: LinkMode | str) -> None:
        """Change what link (lane, node) does."""
        self.proxy.set_mode(f"{lane}->{node}", mode)

    def heal(self) -> None:
        """Every link back to pass."""
        self.proxy.heal_all()

    async def close(self) -> None:
        """Stop every link."""
        await self.proxy.close()


@dataclass(slots=True)
class ClusterHandle:
    """A running cluster (the launcher's plan and summary) and what faults do to it."""

    plan: launcher.ClusterPlan
    summary: dict[str, Any]
    extra_env: dict[str, str] = field(default_factory=dict)
    client: RemotingClient = field(default_factory=RemotingClient)

    @property
    def run_dir(self) -> Path:
        """The cluster's run folder."""
        return self.plan.run_dir

    @property
    def node_ids(self) -> list[str]:
        """Node ids in plan order."""
        return [n.node_id for n in self.plan.nodes]

    def node(self, node_id: str) -> launcher.NodePlan:
        """One node's plan."""
        for node in self.plan.nodes:
            if node.node_id == node_id:
                return node
        raise FaultError(f"no node {node_id}")

    def admin_client(self) -> RemotingClient:
        """A client signing with the cluster's admin account (topic and KV operations)."""
        secrets = launcher.read_secrets(self.run_dir, acl=self.plan.acl)
        return RemotingClient(credentials=secrets.admin_credentials())

    def remoting_addrs(self) -> dict[str, str]:
        """Node id to the remoting address clients and brokers dial."""
        return {n.node_id: f"{launcher.LOOPBACK}:{n.remoting_port}" for n in self.plan.nodes}

    def raft_addr(self, node_id: str) -> str:
        """A node's Raft identity (raft mode only)."""
        return f"{launcher.LOOPBACK}:{self.node(node_id).raft_port}"

    # -- internal port ------------------------------------------------------------

    async def internal(
        self,
        node_id: str,
        code: int,
        ext: Mapping[str, str] | None = None,
        timeout_s: float = INTERNAL_TIMEOUT_S,
    ) -> RemotingCommand:
        """One internal-port request to ``node_id`` with the cluster secret."""
        fields = {"secret": launcher.read_secret(self.run_dir), **(ext or {})}
        addr = f"{launcher.LOOPBACK}:{self.node(node_id).internal_port}"
        return await self.client.invoke(addr, RemotingCommand.request(code, fields), timeout_s)

    async def status(self, node_id: str) -> dict[str, Any] | None:
        """NODE_STATUS of a node, None when it does not answer."""
        try:
            answer = await self.internal(node_id, NODE_STATUS_CODE)
        except RemotingClientError:
            return None
        if answer.code != ResponseCode.SUCCESS:
            return None
        body: dict[str, Any] = json.loads(answer.body or b"{}")
        return body

    async def leader(self, timeout_s: float = 10.0) -> str | None:
        """The node id that reports itself Raft leader (None in eventual mode or if none)."""
        if self.plan.mode != launcher.MODE_RAFT:
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            for node_id in self.node_ids:
                status = await self.status(node_id)
                if status is not None and status.get("state") == STATE_LEADER:
                    return node_id
            await asyncio.sleep(0.2)
        return None

    async def scan(self, node_id: str, now_ms: int) -> int:
        """SCAN_NOT_ACTIVE_BROKER stamped ``now_ms`` (a skewed clock); expired count or -1."""
        try:
            answer = await self.internal(node_id, SCAN_CODE, {"now_ms": str(now_ms)})
        except RemotingClientError:
            return -1
        if answer.code != ResponseCode.SUCCESS:
            return -1
        return int((answer.ext_fields or {}).get("expired", "0"))

    async def remove_member(self, via_node: str, member: str) -> str:
        """Ask ``via_node`` to remove Raft member ``member``; '' or the refusal remark."""
        try:
            answer = await self.internal(
                via_node, REMOVE_NODE_CODE, {"addr": member}, timeout_s=10.0
            )
        except RemotingClientError as exc:
            return str(exc)
        return "" if answer.code == ResponseCode.SUCCESS else (answer.remark or "refused")

    # -- processes ----------------------------------------------------------------

    def _gateway_slot(self, node_id: str) -> launcher.ProcessSlot:
        for slot in launcher.process_slots(self.run_dir, self.node_ids):
            if slot.name == f"{node_id}-gateway":
                return slot
        raise FaultError(f"no gateway slot for {node_id}")

    def gateway_record(self, node_id: str) -> launcher.PidRecord | None:
        """The live gateway process of a node, None when it is not running."""
        record = launcher.read_pid_file(self._gateway_slot(node_id).pid_path)
        if record is None or not launcher.is_alive(record):
            return None
        return record

    def kill_gateway(self, node_id: str, sig: signal.Signals = signal.SIGKILL) -> int:
        """Signal a node's gateway (only the very process the launcher started); its pid."""
        record = self.gateway_record(node_id)
        if record is None:
            raise FaultError(f"{node_id} gateway is not running")
        os.kill(record.pid, sig)
        return record.pid

    async def wait_gone(self, node_id: str, timeout_s: float = 15.0) -> None:
        """Wait until the gateway process of ``node_id`` has exited."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.gateway_record(node_id) is not None:
            if loop.time() > deadline:
                raise FaultError(f"{node_id} gateway did not exit")
            await asyncio.sleep(0.1)

    def _env(self, node: launcher.NodePlan) -> dict[str, str]:
        secrets = launcher.read_secrets(self.run_dir, acl=self.plan.acl)
        env = launcher.ClusterEnv(
            redis_url=str(self.summary["redis"]["url"]),
            secret=secrets.internal,
            cluster_file=self.run_dir / launcher.CLUSTER_FILE_NAME,
            mode=self.plan.mode,
            extra=dict(self.extra_env),
            secrets=secrets,
        )
        return env.for_node(self.plan, node)

    async def start_gateway(
        self, node_id: str, env_overrides: Mapping[str, str] | None = None
    ) -> None:
        """Start a node's gateway again with the launcher's command line; wait until ready.
        ``env_overrides`` go on top of its environment (a skewed clock: :func:`faketime_env`)."""
        node = self.node(node_id)
        slot = self._gateway_slot(node_id)
        ready_file = self.plan.node_dir(node_id) / "gateway.ready.json"
        ready_file.unlink(missing_ok=True)
        # The plan carries the per-node options (--raft-dial, --skew-allowance-ms).
        argv = launcher.gateway_argv(self.plan, node)
        env = self._env(node) | dict(env_overrides or {})
        record = launcher.start_process(
            slot.name, argv, env=env, log_path=slot.log_path, pid_path=slot.pid_path
        )
        secret = launcher.read_secret(self.run_dir)
        await asyncio.to_thread(
            launcher.wait_until,
            lambda: launcher.gateway_ready(ready_file, node.internal_port, secret),
            what=f"{node_id} gateway (restart)",
            timeout_s=RESTART_READY_TIMEOUT_S,
            alive=record,
            log_path=slot.log_path,
        )

    async def restart_gateway(self, node_id: str, sig: signal.Signals = signal.SIGTERM) -> None:
        """Stop (by ``sig``) and start a node's gateway again; wait until ready."""
        self.kill_gateway(node_id, sig)
        await self.wait_gone(node_id)
        await self.start_gateway(node_id)

    async def close(self) -> None:
        """Close the handle's internal-port connections."""
        await self.client.close()


class RaftMesh:
    """One proxy link per ordered pair of Raft members, set up *before* the gateways start.

    :meth:`build` opens the links for a cluster plan and returns each node's dial map
    (peer identity -> link address) for ``launcher.with_gateway_options(raft_dial=...)``,
    so the gateways dial every peer through the proxy from their first start and a
    partition needs no restart. Cutting the links of one node isolates it from the others
    in both directions (whichever side of a pair opens the connection).
    """

    def __init__(self) -> None:
        self.proxy = FaultProxy()
        self.links: dict[tuple[str, str], str] = {}

    async def build(self, plan: launcher.ClusterPlan) -> dict[str, dict[str, str]]:
        """Open the links of every ordered pair of ``plan``'s nodes; node -> dial map."""
        if plan.mode != launcher.MODE_RAFT:
            raise FaultError("a Raft proxy mesh needs a raft-mode plan")
        dial: dict[str, dict[str, str]] = {}
        for src in plan.nodes:
            for dst in plan.nodes:
                if src.node_id == dst.node_id:
                    continue
                name = f"raft:{src.node_id}->{dst.node_id}"
                addr = await self.proxy.add_link(name, dst.raft_addr)
                self.links[(src.node_id, dst.node_id)] = name
                dial.setdefault(src.node_id, {})[dst.raft_addr] = addr
        return dial

    def cut(self, node_id: str, mode: LinkMode = LinkMode.BLACKHOLE) -> list[str]:
        """Set every link to and from ``node_id`` to ``mode``; the link names."""
        names = sorted(name for (src, dst), name in self.links.items() if node_id in (src, dst))
        for name in names:
            self.proxy.set_mode(name, mode)
        return names

    def cut_pair(self, a: str, b: str, *, one_way: bool = False) -> list[str]:
        """Cut what ``a`` sends to ``b`` (``one_way``) or both directions between them.

        Each ordered pair has its own link, carrying the connection its source dialed
        both ways; one way cuts a's bytes on a's link forward and on b's link backward,
        so nothing of a reaches b whoever dialed. Returns the link names changed."""
        forward, backward = self.links[(a, b)], self.links[(b, a)]
        if one_way:
            self.proxy.set_mode(forward, LinkMode.CUT_FORWARD)
            self.proxy.set_mode(backward, LinkMode.CUT_BACKWARD)
        else:
            self.proxy.set_mode(forward, LinkMode.BLACKHOLE)
            self.proxy.set_mode(backward, LinkMode.BLACKHOLE)
        return sorted((forward, backward))

    def heal_links(self, names: Sequence[str]) -> None:
        """Only these links back to pass (other faults' links stay as they are)."""
        for name in names:
            self.proxy.set_mode(name, LinkMode.PASS)

    def forwarded_bytes(self) -> dict[str, int]:
        """Bytes each link forwarded so far (shows the Raft traffic really crosses it)."""
        return {name: self.proxy.stats(name)[0] for name in self.links.values()}

    def heal(self) -> None:
        """Every link back to pass."""
        self.proxy.heal_all()

    async def close(self) -> None:
        """Stop every link."""
        await self.proxy.close()


def lane_nodes(nodes: Mapping[str, str], only: Sequence[str] | None = None) -> dict[str, str]:
    """The subset of ``nodes`` a lane needs links for."""
    return {n: a for n, a in nodes.items() if only is None or n in only}
