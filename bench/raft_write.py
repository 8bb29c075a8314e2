"""Raft write path: registrations/s, commit latency and fail-over through 3 real nodes.

Each node is a subprocess of this script (``--serve``) owning one RaftReplicator
(or, for the baseline, one raw PySyncObj object), so every entry crosses real
loopback TCP. The driver talks JSON lines to the nodes; the load itself runs
inside the leader's process, so the figures measure Raft, not the driver.

Compared in one run (docs/BENCHMARKS.md "## raft" has the results):

* ``tuned``: the RaftSettings we ship (group commit, entries sent as soon as they
  are queued, 50 ms heartbeat, 20 ms tick, fsync on);
* ``no-group-commit``: the same, but one command per log entry (up to 256 entries
  in flight), to show what group commit buys;
* ``pysyncobj-defaults``: the same replicator with PySyncObj's default timing
  (entries sent on a 100 ms timer, 50 ms tick, 0.4-1.4 s election, 30 s leader
  fallback);
* ``raw-pysyncobj``: a bare SyncObj with one no-op replicated method and default
  config, no journal: the floor of what PySyncObj itself costs;
* ``etcd``: a 3-member etcd (Debian etcd-server) put of the same payload size over
  its HTTP/JSON gateway, when ``etcd`` is installed.

Loads: "light" is sequential proposals on the leader; "heavy" keeps 256 in flight on
the leader; "spread" runs the heavy load split over the three nodes at once (85 in
flight each), as brokers register with every node (followers forward to the leader).

Run: ``.venv/bin/python -m bench.raft_write [--heavy 5000] [--light 200]``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import http.client
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tools.cli import ExactArgumentParser

ROOT = Path(__file__).resolve().parents[1]

from bench import _util  # noqa: E402

NODES = 3
BROKERS_CYCLED = 500
"""Registrations cycle over this many brokers: re-registrations, as in steady state."""
TOPICS_PER_BROKER = 4
HEAVY_CONCURRENCY = 256
START_TIMEOUT_S = 60.0
LEADER_TIMEOUT_S = 20.0
FAILOVER_PROBE_S = 0.02
FAILOVER_LIMIT_S = 30.0
ETCD_CLIENTS = 32

NO_GROUP_COMMIT = {"max_batch_commands": 1, "max_batches_in_flight": HEAVY_CONCURRENCY}
PYSYNCOBJ_DEFAULT_TIMING = {
    "send_at_once": False,
    "append_entries_period_s": 0.1,
    "raft_min_timeout_s": 0.4,
    "raft_max_timeout_s": 1.4,
    "auto_tick_period_s": 0.05,
    "leader_fallback_timeout_s": 30.0,
    "connection_timeout_s": 3.5,
    "connection_retry_s": 5.0,
}


free_port = _util.free_port


# ------------------------------------------------------------------ node side


def _command(index: int) -> Any:
    from raftstore.commands import RegisterBroker

    b = index % BROKERS_CYCLED
    topics = [f"bench-topic-{(b * TOPICS_PER_BROKER + j) % 1000}" for j in range(TOPICS_PER_BROKER)]
    return RegisterBroker(
        cluster_name="BenchCluster",
        broker_addr=_util.broker_addr(b),
        broker_name=_util.broker_name(b),
        broker_id=0,
        ha_server_addr="",
        now_ms=1_700_000_000_000 + index,
        topic_config_wrapper=_util.topic_wrapper(topics),
    )


def payload_bytes() -> int:
    """Size of one registration's log entry (the etcd and no-op baselines use it too)."""
    from raftstore.raft.codec import encode_entry

    return len(encode_entry("n1/0123abcd/1", _command(0)))


BENCH_CLUSTER_SECRET = _util.BENCH_CLUSTER_SECRET


class _RawNode:
    """The raw PySyncObj baseline: a no-op replicated method, default config."""

    def __init__(self, addr: str, peers: list[str]) -> None:
        from pysyncobj import SyncObj, SyncObjConf, replicated

        class NoOp(SyncObj):  # type: ignore[misc]
            @replicated  # type: ignore[untyped-decorator]
            def noop(self, payload: bytes) -> int:
                return len(payload)

        # The same cluster secret as our nodes, so both pay for the authenticated transport.
        self.sync = NoOp(addr, peers, SyncObjConf(password=BENCH_CLUSTER_SECRET))
        self.payload = b"x" * payload_bytes()

    def prepare(self, _indices: range) -> None:
        """Nothing to build: every no-op carries the same payload."""

    async def propose(self, _index: int) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()

        def settle(error: int) -> None:
            if not done.done():
                done.set_result(error)

        def callback(_result: object, error: int) -> None:
            loop.call_soon_threadsafe(settle, error)

        self.sync.noop(self.payload, callback=callback)
        if await done != 0:
            raise RuntimeError(f"noop failed: {done.result()}")

    def status(self) -> dict[str, Any]:
        raw = self.sync.getStatus()
        leader = raw.get("leader")
        return {
            "state": {2: "leader"}.get(raw["state"], "other"),
            "leader": leader and leader.id,
            "cpu_s": time.process_time(),
            "entries": 0,
        }


class _ReplicatorNode:
    def __init__(self, replicator: Any) -> None:
        self.replicator = replicator
        self.prepared: dict[int, Any] = {}

    def prepare(self, indices: range) -> None:
        """Build the load's commands before the clock starts, as the baselines'
        payloads are: the figure is the replication path's, not the cost of making
        RegisterBroker values (a gateway decodes those from the register body;
        bench/cores.py measures that decode)."""
        self.prepared = {index: _command(index) for index in indices}

    async def propose(self, index: int) -> None:
        command = self.prepared.pop(index, None)
        await self.replicator.propose(_command(index) if command is None else command)

    def status(self) -> dict[str, Any]:
        status = self.replicator.status()
        return {
            "state": status.state,
            "leader": status.leader,
            "alarms": list(status.alarms),
            "cpu_s": time.process_time(),
            "entries": status.commit_index,
        }


async def _load(
    node: Any, start: int, count: int, concurrency: int, keep: bool = False
) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0
    node.prepare(range(start, start + count))
    indices = iter(range(start, start + count))

    async def worker() -> None:
        nonlocal errors
        for index in indices:
            began = time.perf_counter()
            try:
                await node.propose(index)
            except Exception:
                errors += 1
                continue
            latencies.append((time.perf_counter() - began) * 1000)

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - began
    return {
        "per_s": len(latencies) / elapsed,
        "p50_ms": _util.percentile(latencies, 0.5),
        "p99_ms": _util.percentile(latencies, 0.99),
        "errors": errors,
        "latencies": latencies if keep else [],
    }


async def _serve(args: argparse.Namespace) -> None:
    peers = [p for p in args.peers.split(",") if p != args.addr]
    if args.kind == "raw":
        node: Any = _RawNode(args.addr, peers)
    else:
        from raftstore.raft import RaftReplicator, RaftSettings

        replicator = RaftReplicator(
            args.addr,
            args.addr,
            peers,
            Path(args.data_dir),
            settings=RaftSettings(**json.loads(args.settings)),
            secret=BENCH_CLUSTER_SECRET,
        )
        await replicator.start()
        node = _ReplicatorNode(replicator)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print(json.dumps({"ready": True}), flush=True)
    while line := await reader.readline():
        order = json.loads(line)
        if order["op"] == "status":
            reply = node.status()
        elif order["op"] == "load":
            reply = await _load(
                node, order["start"], order["count"], order["concurrency"], order.get("keep", False)
            )
        else:
            try:
                await node.propose(order["start"])
                reply = {"ok": True}
            except Exception as exc:
                reply = {"ok": False, "error": str(exc)[:200]}
        print(json.dumps(reply), flush=True)


# ------------------------------------------------------------------ driver side


class Node:
    """One ``--serve`` subprocess."""

    def __init__(self, kind: str, addr: str, peers: Sequence[str], folder: Path, settings: str):
        argv = [
            sys.executable,
            "-m",
            "bench.raft_write",
            "--serve",
            "--kind",
            kind,
            "--addr",
            addr,
            "--peers",
            ",".join(peers),
            "--data-dir",
            str(folder),
            "--settings",
            settings,
        ]
        self.addr = addr
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT
        )

    def ask(self, **order: Any) -> dict[str, Any]:
        """One order, one reply."""
        self.tell(**order)
        return self.reply()

    def tell(self, **order: Any) -> None:
        """Send one order without waiting for its reply."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(order) + "\n")
        self.proc.stdin.flush()

    def reply(self) -> dict[str, Any]:
        """The reply to the oldest order not yet answered."""
        assert self.proc.stdout is not None
        reply: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return reply

    def wait_ready(self) -> None:
        """Block until the node printed its ready line."""
        assert self.proc.stdout is not None
        assert json.loads(self.proc.stdout.readline())["ready"]

    def kill(self) -> None:
        """SIGKILL."""
        self.proc.kill()
        self.proc.wait()


def _leader(nodes: list[Node]) -> Node:
    deadline = time.monotonic() + LEADER_TIMEOUT_S
    while time.monotonic() < deadline:
        for node in nodes:
            if node.ask(op="status")["state"] == "leader":
                return node
        time.sleep(0.05)
    raise RuntimeError("no leader")


def _failover(nodes: list[Node], leader: Node, round_: int) -> float:
    """SIGKILL ``leader``; seconds until a survivor acknowledges a write."""
    survivor = next(n for n in nodes if n is not leader)
    leader.kill()
    killed = time.monotonic()
    attempt = 0
    while time.monotonic() - killed < FAILOVER_LIMIT_S:
        attempt += 1
        if survivor.ask(op="probe", start=1_000_000 * (round_ + 1) + attempt)["ok"]:
            return time.monotonic() - killed
        time.sleep(FAILOVER_PROBE_S)
    return float("nan")


def run_config(
    name: str,
    kind: str,
    settings: dict[str, Any],
    light: int,
    heavy: int,
    root: Path,
    kills: int = 1,
) -> dict[str, Any]:
    """Start 3 nodes, measure light and heavy load on the leader, then ``kills``
    leader SIGKILLs (the killed node restarted between them)."""
    addrs = [f"127.0.0.1:{free_port()}" for _ in range(NODES)]
    nodes = [
        Node(kind, addr, addrs, root / name / f"n{i}", json.dumps(settings))
        for i, addr in enumerate(addrs)
    ]
    try:
        for node in nodes:
            node.wait_ready()
        leader = _leader(nodes)
        leader.ask(op="load", start=0, count=50, concurrency=8)  # warm-up
        quiet = leader.ask(op="load", start=1000, count=light, concurrency=1)
        before = [node.ask(op="status") for node in nodes]
        began = time.monotonic()
        loaded = leader.ask(op="load", start=100_000, count=heavy, concurrency=HEAVY_CONCURRENCY)
        elapsed = time.monotonic() - began
        after = [node.ask(op="status") for node in nodes]
        cpu = [a["cpu_s"] - b["cpu_s"] for a, b in zip(after, before, strict=True)]
        lead = nodes.index(leader)
        loaded["leader_cpu"] = cpu[lead] / elapsed
        loaded["followers_cpu"] = sum(cpu) / elapsed - loaded["leader_cpu"]
        if kind != "raw":
            loaded["per_entry"] = heavy / max(1, after[lead]["entries"] - before[lead]["entries"])
        spread = _spread_load(nodes, heavy)
        alarms = [a for n in nodes if kind != "raw" for a in n.ask(op="status").get("alarms", [])]
        failovers = []
        for kill in range(kills):
            leader = _leader(nodes)
            failovers.append(_failover(nodes, leader, kill))
            if kill + 1 < kills:
                # The killed node comes back on its data dir (as a follower).
                index = nodes.index(leader)
                nodes[index] = Node(
                    kind, leader.addr, addrs, root / name / f"n{index}", json.dumps(settings)
                )
                nodes[index].wait_ready()
        failover_s = statistics.median(failovers) if failovers else float("nan")
        return {
            "name": name,
            "light": quiet,
            "heavy": loaded,
            "spread": spread,
            "failover_s": failover_s,
            "failovers_s": failovers,
            "alarms": alarms,
        }
    finally:
        for node in nodes:
            if node.proc.poll() is None:
                node.kill()


def _spread_load(nodes: list[Node], count: int) -> dict[str, Any]:
    """The heavy load split over every node (as brokers register with every node):
    each proposes a third, a third of the in-flight budget each, at the same time."""
    share = count // len(nodes)
    began = time.monotonic()
    for i, node in enumerate(nodes):
        node.tell(
            op="load",
            start=200_000 + i * share,
            count=share,
            concurrency=HEAVY_CONCURRENCY // len(nodes),
            keep=True,
        )
    replies = [node.reply() for node in nodes]
    elapsed = time.monotonic() - began
    latencies = [x for r in replies for x in r["latencies"]]
    return {
        "per_s": len(latencies) / elapsed,
        "p50_ms": _util.percentile(latencies, 0.5),
        "p99_ms": _util.percentile(latencies, 0.99),
        "errors": sum(r["errors"] for r in replies),
    }


# ------------------------------------------------------------------ etcd baseline


def run_etcd(light: int, heavy: int, root: Path) -> dict[str, Any] | None:
    """A 3-member etcd on loopback; puts of the registration's size over HTTP/JSON."""
    etcd = shutil.which("etcd")
    if etcd is None:
        return None
    peers = [(free_port(), free_port()) for _ in range(NODES)]
    initial = ",".join(f"e{i}=http://127.0.0.1:{p}" for i, (_, p) in enumerate(peers))
    procs = []
    for i, (client, peer) in enumerate(peers):
        argv = [
            etcd,
            "--name",
            f"e{i}",
            "--data-dir",
            str(root / "etcd" / f"e{i}"),
            "--listen-client-urls",
            f"http://127.0.0.1:{client}",
            "--advertise-client-urls",
            f"http://127.0.0.1:{client}",
            "--listen-peer-urls",
            f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls",
            f"http://127.0.0.1:{peer}",
            "--initial-cluster",
            initial,
            "--initial-cluster-state",
            "new",
            "--log-level",
            "error",
        ]
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        port = peers[0][0]
        value = base64.b64encode(b"x" * payload_bytes()).decode()
        local = threading.local()

        def put(index: int) -> float:
            if not hasattr(local, "conn"):
                local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            key = base64.b64encode(f"broker-{index % BROKERS_CYCLED}".encode()).decode()
            began = time.perf_counter()
            local.conn.request("POST", "/v3/kv/put", json.dumps({"key": key, "value": value}))
            response = local.conn.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"etcd put answered {response.status}")
            return (time.perf_counter() - began) * 1000

        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                put(0)
                break
            except (OSError, RuntimeError, http.client.HTTPException):
                local.__dict__.clear()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        quiet = [put(i) for i in range(light)]
        began = time.perf_counter()
        with ThreadPoolExecutor(ETCD_CLIENTS) as pool:
            loaded = list(pool.map(put, range(heavy)))
        elapsed = time.perf_counter() - began
        return {
            "name": "etcd",
            "light": {
                "per_s": light / (sum(quiet) / 1000),
                "p50_ms": _util.percentile(quiet, 0.5),
                "p99_ms": _util.percentile(quiet, 0.99),
                "errors": 0,
            },
            "heavy": {
                "per_s": heavy / elapsed,
                "p50_ms": _util.percentile(loaded, 0.5),
                "p99_ms": _util.percentile(loaded, 0.99),
                "errors": 0,
            },
            "failover_s": float("nan"),
            "alarms": [],
        }
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _spread(result: dict[str, Any], key: str, spec: str) -> str:
    return _fmt(result["spread"][key], spec) if "spread" in result else "n/a"


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def main() -> None:
    """Parse arguments; serve a node or run the whole comparison."""
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    # The node processes' own options (the benchmark starts them), hidden from --help.
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kind", default="replicator", help=argparse.SUPPRESS)
    parser.add_argument("--addr", default="", help=argparse.SUPPRESS)
    parser.add_argument("--peers", default="", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", default="", help=argparse.SUPPRESS)
    parser.add_argument("--settings", default="{}", help=argparse.SUPPRESS)
    parser.add_argument("--light", type=int, default=200, help="sequential proposals")
    parser.add_argument("--heavy", type=int, default=20000, help="proposals, 256 in flight")
    parser.add_argument("--no-etcd", action="store_true", help="skip the etcd comparison")
    parser.add_argument(
        "--kills",
        type=int,
        default=5,
        help="leader SIGKILLs per config; the failover column is their median",
    )
    parser.add_argument(
        "--configs",
        default="tuned,no-group-commit,pysyncobj-defaults,raw-pysyncobj",
        help="comma-separated subset to run (raw-pysyncobj is the ratio's baseline)",
    )
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args))
        return
    print(_util.machine_notes())
    print(f"payload: {payload_bytes()} bytes per registration entry")
    with tempfile.TemporaryDirectory(prefix="raft-bench-") as folder:
        root = Path(folder)
        configs: dict[str, tuple[str, dict[str, Any]]] = {
            "tuned": ("replicator", {}),
            "no-group-commit": ("replicator", NO_GROUP_COMMIT),
            "pysyncobj-defaults": ("replicator", PYSYNCOBJ_DEFAULT_TIMING),
            "raw-pysyncobj": ("raw", {}),
        }
        chosen = [name for name in args.configs.split(",") if name]
        unknown = sorted(set(chosen) - set(configs))
        if unknown:
            parser.error(f"unknown configs {unknown}; choose from {sorted(configs)}")
        results = [
            run_config(
                name,
                configs[name][0],
                configs[name][1],
                args.light,
                args.heavy,
                root,
                1 if configs[name][0] == "raw" else args.kills,
            )
            for name in chosen
        ]
        etcd = None if args.no_etcd else run_etcd(args.light, args.heavy, root)
        if etcd is not None:
            results.append(etcd)
    rows = [
        [
            r["name"],
            f"{r['heavy']['per_s']:.0f}",
            f"{r['heavy']['p50_ms']:.1f}",
            f"{r['heavy']['p99_ms']:.1f}",
            f"{r['light']['p50_ms']:.1f}",
            f"{r['light']['p99_ms']:.1f}",
            f"{r['failover_s']:.2f}",
            _spread(r, "per_s", ".0f"),
            _spread(r, "p50_ms", ".1f"),
            _spread(r, "p99_ms", ".1f"),
            r["heavy"]["errors"] + r["light"]["errors"] + r.get("spread", {}).get("errors", 0),
            len(r["alarms"]),
            _fmt(r["heavy"].get("per_entry"), ".1f"),
            _fmt(r["heavy"].get("leader_cpu"), ".2f"),
            _fmt(r["heavy"].get("followers_cpu"), ".2f"),
        ]
        for r in results
    ]
    _util.print_table(
        "3 nodes, loopback",
        [
            "config",
            "writes/s (256 in flight)",
            "p50 ms",
            "p99 ms",
            "light p50 ms",
            "light p99 ms",
            "failover s",
            "spread writes/s",
            "spread p50 ms",
            "spread p99 ms",
            "errors",
            "alarms",
            "commands per log entry",
            "leader CPU (cores)",
            "followers CPU (cores)",
        ],
        rows,
    )
    for r in results:
        kills = r.get("failovers_s") or []
        if len(kills) > 1:
            print(
                f"{r['name']}: leader SIGKILL to the first acknowledged write, median "
                f"{r['failover_s']:.2f} s of {len(kills)}: " + ", ".join(f"{k:.2f}" for k in kills)
            )
    etcd_row = next((r for r in results if r["name"] == "etcd"), None)
    if etcd_row is not None and results[0] is not etcd_row:
        ratio = results[0]["light"]["p50_ms"] / etcd_row["light"]["p50_ms"]
        print(f"{results[0]['name']} light commit p50 vs etcd (same run): {ratio:.2f}x")
    raw = next((r for r in results if r["name"] == "raw-pysyncobj"), None)
    if raw is not None and results[0] is not raw:
        ratio = results[0]["heavy"]["per_s"] / raw["heavy"]["per_s"]
        print(f"{results[0]['name']} vs raw PySyncObj no-ops (same run): {ratio:.2f}x writes/s")
    if etcd is None and not args.no_etcd:
        print("etcd baseline skipped: no `etcd` binary (apt-get install etcd-server)")


if __name__ == "__main__":
    main()
