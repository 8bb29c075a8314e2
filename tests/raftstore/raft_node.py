"""A tiny Raft node process for tests, and the client the tests drive it with.

Run: ``python tests/raftstore/raft_node.py --node-id n1 --addr 127.0.0.1:7001
--peers 127.0.0.1:7002,127.0.0.1:7003 --data-dir DIR [--dial JSON]``.
It reads one JSON request per line on stdin and answers one JSON line on stdout:
``{"id": 1, "op": "put", "namespace": "ns", "key": "k", "value": "v"}`` ->
``{"id": 1, "ok": true, ...}``; failures carry ``"error"`` with the exception
class name first (``"NoQuorumError: ..."``). Ops: put, get, barrier, status.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REPLY_LINE_BYTES_MAX = 1 << 20
CLUSTER_SECRET = "raftstore-tests-cluster-secret"
"""The Raft cluster secret of every test node (in this process or a subprocess)."""


def free_port() -> int:
    """A port free on 127.0.0.1 right now, below the ephemeral range (tools.ports)."""
    from tools import ports  # test side only: the node side runs as a bare script

    return ports.free_port()


# ------------------------------------------------------------------ node side


async def _handle(replicator: Any, request: dict[str, Any]) -> dict[str, Any]:
    from raftstore.commands import PutKV

    op = request["op"]
    if op == "put":
        command = PutKV(request["namespace"], request["key"], request["value"])
        result = await replicator.propose(command)
        return {"applied_version": result.applied_version}
    if op == "barrier":
        await replicator.barrier()
        return {}
    if op == "get":
        value = replicator.read(lambda t: t.kv_get(request["namespace"], request["key"]))
        return {"value": value}
    if op == "status":
        status = asdict(replicator.status())
        status["peers"] = [dict(p) for p in status["peers"]]
        return {"status": status}
    raise ValueError(f"unknown op {op}")


async def _answer(replicator: Any, line: bytes, out: asyncio.Lock) -> None:
    request = json.loads(line)
    try:
        reply = {"id": request.get("id"), "ok": True, **await _handle(replicator, request)}
    except Exception as exc:
        reply = {"id": request.get("id"), "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    async with out:
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


async def serve(args: argparse.Namespace) -> None:
    """Start the replicator and answer stdin requests until EOF or SIGTERM."""
    from raftstore.raft import RaftReplicator

    peers = [p for p in args.peers.split(",") if p]
    replicator = RaftReplicator(
        args.node_id,
        args.addr,
        peers,
        Path(args.data_dir),
        dial=json.loads(args.dial),
        propose_timeout_s=args.timeout,
        secret=CLUSTER_SECRET,
    )
    await replicator.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    reader = asyncio.StreamReader(limit=REPLY_LINE_BYTES_MAX)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    sys.stdout.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    sys.stdout.flush()
    out = asyncio.Lock()
    tasks: set[asyncio.Task[None]] = set()
    eof = loop.create_task(_read_lines(reader, replicator, out, tasks))
    await asyncio.wait([eof, loop.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
    await replicator.stop()


async def _read_lines(
    reader: asyncio.StreamReader, replicator: Any, out: asyncio.Lock, tasks: set[Any]
) -> None:
    while line := await reader.readline():
        task = asyncio.get_running_loop().create_task(_answer(replicator, line, out))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


# ------------------------------------------------------------------ test side


class NodeProcess:
    """A raft_node.py subprocess and a JSON-lines client to it."""

    def __init__(
        self,
        node_id: str,
        addr: str,
        peers: list[str],
        data_dir: Path,
        dial: dict[str, str] | None = None,
        timeout_s: float = 3.0,
    ) -> None:
        self.node_id = node_id
        self.addr = addr
        self._argv = [
            sys.executable,
            "-m",
            "tests.raftstore.raft_node",
            "--node-id",
            node_id,
            "--addr",
            addr,
            "--peers",
            ",".join(peers),
            "--data-dir",
            str(data_dir),
            "--dial",
            json.dumps(dial or {}),
            "--timeout",
            str(timeout_s),
        ]
        self._proc: asyncio.subprocess.Process | None = None
        self._ids = itertools.count(1)
        self._replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader_task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """True while the process is alive."""
        return self._proc is not None and self._proc.returncode is None

    async def start(self) -> None:
        """Spawn the node and wait for its ready line."""
        self._proc = await asyncio.create_subprocess_exec(
            *self._argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=str(ROOT),
            limit=REPLY_LINE_BYTES_MAX,
        )
        assert self._proc.stdout is not None
        first = await asyncio.wait_for(self._proc.stdout.readline(), 30)
        if not first or not json.loads(first).get("ready"):
            raise RuntimeError(f"{self.node_id} did not start: {first!r}")
        self._reader_task = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            reply = json.loads(line)
            waiter = self._replies.pop(reply.get("id"), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(reply)
        for waiter in self._replies.values():
            if not waiter.done():
                waiter.set_result({"ok": False, "error": "ProcessExited: node died"})
        self._replies.clear()

    async def call(self, op: str, timeout_s: float = 15.0, **fields: Any) -> dict[str, Any]:
        """Send one request and return its reply."""
        if not self.running:
            return {"ok": False, "error": "ProcessExited: not running"}
        assert self._proc is not None and self._proc.stdin is not None
        request_id = next(self._ids)
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._replies[request_id] = waiter
        self._proc.stdin.write(json.dumps({"id": request_id, "op": op, **fields}).encode() + b"\n")
        await self._proc.stdin.drain()
        return await asyncio.wait_for(waiter, timeout_s)

    async def put(self, key: str, value: str, namespace: str = "ns") -> dict[str, Any]:
        """Propose PutKV through this node."""
        return await self.call("put", namespace=namespace, key=key, value=value)

    async def status(self) -> dict[str, Any]:
        """This node's replicator status as a dict."""
        reply = await self.call("status")
        assert reply["ok"], reply
        return dict(reply["status"])

    async def kill(self) -> None:
        """SIGKILL: no shutdown, no flush beyond what the node already did."""
        if self.running:
            assert self._proc is not None
            self._proc.kill()
            await self._proc.wait()
        await self._join_reader()

    async def stop(self) -> None:
        """Graceful stop: close stdin and wait."""
        if self.running:
            assert self._proc is not None and self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                await asyncio.wait_for(self._proc.wait(), 15)
            except TimeoutError:
                self._proc.kill()
                await self._proc.wait()
        await self._join_reader()

    async def _join_reader(self) -> None:
        if self._reader_task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._reader_task, 5)
            self._reader_task = None


class ProcessCluster:
    """N node processes whose Raft links all cross a :class:`FaultProxy`.

    PySyncObj identifies a node by its address, so every node keeps the real
    addresses as identities and dials each peer through the link
    ``"<self>-><peer>"`` instead (RaftReplicator's ``dial`` map).
    """

    def __init__(self, root: Path, size: int = 3) -> None:
        from tools.faultproxy import FaultProxy

        self.root = root
        self.proxy = FaultProxy()
        self.addrs = [f"127.0.0.1:{free_port()}" for _ in range(size)]
        self.nodes: list[NodeProcess] = []

    async def start(self) -> None:
        """Create the links, then start every node."""
        dials: list[dict[str, str]] = [{} for _ in self.addrs]
        for i in range(len(self.addrs)):
            for j, dst in enumerate(self.addrs):
                if i != j:
                    dials[i][dst] = await self.proxy.add_link(f"{i}->{j}", dst)
        self.nodes = [
            NodeProcess(f"n{i}", addr, self.addrs, self.root / f"n{i}", dial=dials[i])
            for i, addr in enumerate(self.addrs)
        ]
        await asyncio.gather(*(node.start() for node in self.nodes))

    def partition(self, index: int, mode: str = "blackhole") -> None:
        """Cut node ``index`` off from every other node."""
        for name in self.proxy.links():
            src, dst = name.split("->")
            if str(index) in (src, dst):
                self.proxy.set_mode(name, mode)

    def heal(self) -> None:
        """Every link back to normal."""
        self.proxy.heal_all()

    async def statuses(self) -> list[dict[str, Any]]:
        """Status of every running node."""
        return [await node.status() for node in self.nodes if node.running]

    async def leader(self, timeout_s: float = 15.0) -> int:
        """Index of the node every running node agrees leads."""
        from tests.waiting import eventually

        async def agreed() -> tuple[int] | None:
            running = [(i, await n.status()) for i, n in enumerate(self.nodes) if n.running]
            leaders = {s["leader"] for _, s in running}
            for i, s in running:
                if s["state"] == "leader" and leaders == {s["self_addr"]}:
                    return (i,)
            return None

        (index,) = await eventually(
            agreed, what="an agreed leader", timeout_s=timeout_s, interval_s=0.1
        )
        return index

    async def converged(self, timeout_s: float = 20.0) -> list[dict[str, Any]]:
        """Wait until every running node has the same applied index and digest."""
        from tests.waiting import eventually

        statuses: list[dict[str, Any]] = []

        async def same() -> list[dict[str, Any]] | None:
            statuses[:] = await self.statuses()
            return (
                statuses
                if len({(s["applied_index"], s["digest"]) for s in statuses}) == 1
                else None
            )

        return await eventually(
            same,
            what=lambda: f"convergence of {[(s['applied_index'], s['digest']) for s in statuses]}",
            timeout_s=timeout_s,
            interval_s=0.1,
        )

    async def close(self) -> None:
        """Stop every node and the proxy."""
        await asyncio.gather(*(node.stop() for node in self.nodes))
        await self.proxy.close()


class InProcessCluster:
    """N RaftReplicators in this process on free 127.0.0.1 ports."""

    def __init__(self, root: Path, size: int = 3, **options: Any) -> None:
        from raftstore.raft import RaftReplicator

        self.root = root
        self.addrs = [f"127.0.0.1:{free_port()}" for _ in range(size)]
        self._options = options
        self.nodes: list[RaftReplicator] = [self.make(i) for i in range(size)]

    def make(self, index: int) -> Any:
        """A fresh (unstarted) replicator for node ``index`` on its data dir."""
        from raftstore.raft import RaftReplicator

        return RaftReplicator(
            f"n{index}",
            self.addrs[index],
            self.addrs,
            self.root / f"n{index}",
            secret=CLUSTER_SECRET,
            **self._options,
        )

    async def start(self) -> None:
        """Start every node."""
        await asyncio.gather(*(node.start() for node in self.nodes))

    async def __aenter__(self) -> InProcessCluster:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def follower(self) -> Any:
        """A node that is not the agreed leader."""
        leader = await self.leader()
        return next(n for n in self.nodes if n is not leader)

    async def leader(self, timeout_s: float = 15.0) -> Any:
        """The node every started node agrees leads."""
        from tests.waiting import eventually

        def agreed() -> Any:
            statuses = [n.status() for n in self.nodes if n.status().state != "stopped"]
            leaders = {s.leader for s in statuses}
            for node, s in zip(self.nodes, [n.status() for n in self.nodes], strict=True):
                if s.state == "leader" and leaders == {node.self_addr}:
                    return node
            return None

        return await eventually(
            agreed, what="an agreed leader", timeout_s=timeout_s, interval_s=0.05
        )

    async def converged(self, timeout_s: float = 15.0) -> list[Any]:
        """Wait until every started node reports the same applied index and digest."""
        from tests.waiting import eventually

        statuses: list[Any] = []

        def same() -> list[Any] | None:
            statuses[:] = [n.status() for n in self.nodes if n.status().state != "stopped"]
            return statuses if len({(s.applied_index, s.digest) for s in statuses}) == 1 else None

        return await eventually(
            same,
            what=lambda: f"convergence of {[(s.applied_index, s.digest) for s in statuses]}",
            timeout_s=timeout_s,
            interval_s=0.05,
        )

    async def close(self) -> None:
        """Stop every node."""
        await asyncio.gather(*(node.stop() for node in self.nodes))


def main() -> None:
    """Parse arguments and serve."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--node-id", required=True)
    parser.add_argument("--addr", required=True)
    parser.add_argument("--peers", default="")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--dial", default="{}")
    parser.add_argument("--timeout", type=float, default=3.0)
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()


async def stall_tick_thread(
    node: Any, longest_s: float = 15.0
) -> tuple[asyncio.Future[Any], Callable[[], None]]:
    """Hold ``node``'s Raft tick thread (an apply listener that blocks on a KV write, as a
    large entry or a starved core would hold it) until the returned ``release`` is called,
    or ``longest_s`` at most; returns once the thread is held, with the write's pending
    proposal to await afterwards (it ends, whatever its answer). The test, not a sleep,
    decides when the tick resumes, so a slow machine cannot end the stall before the test
    has looked."""
    import contextlib
    import threading

    from raftstore.commands import PutKV
    from raftstore.replicator import NoQuorumError

    held = threading.Event()
    released = threading.Event()

    def hold(command: Any, _result: Any) -> None:
        if getattr(command, "key", "") == STALL_KEY and not held.is_set():
            held.set()
            released.wait(longest_s)

    async def stall_write() -> None:
        # The write is held in its own apply, so it often outlives its propose timeout:
        # its answer may be "no quorum" although it committed; only its end matters.
        with contextlib.suppress(NoQuorumError):
            await node.propose(PutKV("ns", STALL_KEY, "1"))

    node.subscribe(hold)
    pending: asyncio.Future[Any] = asyncio.ensure_future(stall_write())
    while not held.is_set():
        await asyncio.sleep(0.01)
    return pending, released.set


STALL_KEY = "stall-the-tick"
