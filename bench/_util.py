"""Shared helpers of the benchmarks: timing, percentiles, CPU readings, the broker cast.

Benchmarks run on a shared, noisy machine, so every figure they print comes
with a baseline measured in the same run; only the ratio travels between runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from remoting import register_body
from remoting.codes import CURRENT_VERSION, RequestCode
from remoting.command import RemotingCommand
from remoting.frame import FrameDecoder
from remoting.model import (
    DataVersion,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from tools import process_facts

BENCH_CLUSTER_SECRET = "bench-only-raft-cluster-secret"
"""The Raft cluster secret of every benchmark cluster (loopback only, thrown away after)."""
REPO_ROOT = Path(__file__).resolve().parents[1]

CLUSTER = "BenchCluster"
QUEUES_PER_TOPIC = 8
# Fixed clock values: the route table never reads a clock, so neither does its bench.
REGISTERED_AT_MS = 1_700_000_000_000
DATA_VERSION_TIMESTAMP_MS = 1_699_999_000_000

TIMING_REPEATS = 5
TIMING_MIN_BATCH_S = 0.05
TIMING_BATCH_LOOPS_MAX = 1_000_000
_NS_PER_US = 1_000


# ---------------------------------------------------------------------- timing


def _loops_for(fn: Callable[[], object], min_batch_s: float) -> int:
    """Double the loop count until one batch lasts ``min_batch_s`` (timeit's autorange)."""
    loops = 1
    while True:
        start_ns = time.perf_counter_ns()
        for _ in range(loops):
            fn()
        elapsed_s = (time.perf_counter_ns() - start_ns) / 1e9
        if elapsed_s >= min_batch_s or loops >= TIMING_BATCH_LOOPS_MAX:
            return loops
        loops *= 2


@dataclass(frozen=True, slots=True)
class Timing:
    """How hard :func:`us_per_op` tries: batches timed, and the shortest batch."""

    repeats: int = TIMING_REPEATS
    min_batch_s: float = TIMING_MIN_BATCH_S


def us_per_op(fn: Callable[[], object], timing: Timing | None = None) -> float:
    """Microseconds per call of ``fn``: the best of ``timing.repeats`` batches.

    The minimum, not the mean: on a shared machine every disturbance only adds
    time, so the fastest batch is the closest to the code's own cost.
    """
    timing = timing if timing is not None else Timing()
    loops = _loops_for(fn, timing.min_batch_s)
    best_ns = float("inf")
    for _ in range(timing.repeats):
        start_ns = time.perf_counter_ns()
        for _ in range(loops):
            fn()
        best_ns = min(best_ns, (time.perf_counter_ns() - start_ns) / loops)
    return best_ns / _NS_PER_US


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (``fraction`` in 0..1) of ``values``; 0.0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(fraction * len(ordered)) - 1))
    return ordered[rank]


def median(values: Sequence[float]) -> float:
    """The median of ``values``; 0.0 when empty."""
    return statistics.median(values) if values else 0.0


# ---------------------------------------------------------------------- CPU


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads)."""
    return process_facts.cpu_s(pid)


def main_thread_cpu_s(pid: int) -> float:
    """User + system CPU seconds of the main thread of ``pid`` (its asyncio loop thread)."""
    return process_facts.thread_cpu_s(pid, pid)


def own_cpu_s() -> float:
    """User + system CPU seconds of this process."""
    times = os.times()
    return times.user + times.system


# ----------------------------------------------------------------- the gateways


GATEWAY_READY_TIMEOUT_S = 120.0


@dataclass
class BenchGateway:
    """One ``manage.py run_gateway`` process of a benchmark cluster, ready."""

    node_id: str
    proc: subprocess.Popen[bytes]
    port: int
    internal_port: int
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    ready: Path = Path()
    log: Path = Path()
    metrics_port: int = 0
    """The Prometheus port (0: none)."""

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


def _launch(command: list[str], env: Mapping[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        return subprocess.Popen(command, cwd=REPO_ROOT, env=dict(env), stdout=log, stderr=log)


def _wait_ready(node: str, proc: subprocess.Popen[bytes], ready: Path, log: Path) -> dict[str, Any]:
    deadline = time.monotonic() + GATEWAY_READY_TIMEOUT_S
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{node} did not start; see {log}")
        time.sleep(0.1)
    info: dict[str, Any] = json.loads(ready.read_text())
    return info


def restart_stopped(gateways: list[BenchGateway]) -> list[BenchGateway]:
    """The gateways, each that has exited started again with its own command (same
    Raft port and folders; new public and internal ports), once ready."""
    restarted = []
    for gateway in gateways:
        if gateway.proc.poll() is None:
            restarted.append(gateway)
            continue
        gateway.ready.unlink(missing_ok=True)
        command = [c for c in gateway.command if c != "--migrate"]  # migrated at start
        proc = _launch(command, gateway.env, gateway.log)
        info = _wait_ready(gateway.node_id, proc, gateway.ready, gateway.log)
        restarted.append(
            dataclasses.replace(
                gateway,
                proc=proc,
                port=int(info["port"]),
                internal_port=int(info["internal_port"]),
            )
        )
    return restarted


def start_gateways(
    root: Path,
    mode: str,
    *,
    nodes: int = 3,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    metrics: bool = False,
) -> list[BenchGateway]:
    """``nodes`` gateways of ``mode`` on free ports under ``root`` (logs, databases,
    raft dirs), started together and returned once every ready file is written.

    Each node has its own projection *and* its own accounts database: three
    ``--migrate`` runs on one fresh shared file would race (benchmarks never use
    the console). ``args`` and ``env`` are added to every node's command and
    environment; ``metrics``: each node serves Prometheus metrics on a port of its own
    (``BenchGateway.metrics_port``). The caller terminates the processes.
    """
    raft = [f"127.0.0.1:{free_port()}" for _ in range(nodes)]
    metrics_ports = [free_port() if metrics else 0 for _ in range(nodes)]
    started: list[tuple[str, subprocess.Popen[bytes], Path, list[str], dict[str, str]]] = []
    try:
        for index in range(nodes):
            node = f"n{index + 1}"
            ready = root / f"{node}.ready.json"
            node_env = {
                **os.environ,
                "NAMESRV_DB_PATH": str(root / f"{node}.sqlite3"),
                "DATABASE_URL": f"sqlite:///{root / f'{node}-shared.sqlite3'}",
                "NAMESRV_RAFT_SECRET": BENCH_CLUSTER_SECRET,
                "NAMESRV_LOG_LEVEL": "WARNING",
                **(env or {}),
            }
            command = [
                sys.executable,
                "manage.py",
                "run_gateway",
                "--node",
                node,
                "--port",
                "0",
                "--internal-port",
                "0",
                "--ready-file",
                str(ready),
                "--mode",
                mode,
                "--migrate",
                *args,
            ]
            if metrics:
                command += ["--metrics-port", str(metrics_ports[index])]
            if mode == "raft":
                command += [
                    "--raft-port",
                    raft[index].rpartition(":")[2],
                    "--raft-peers",
                    ",".join(raft),
                    "--raft-dir",
                    str(root / f"raft-{node}"),
                ]
            proc = _launch(command, node_env, root / f"{node}.log")
            started.append((node, proc, ready, command, node_env))
        gateways = []
        for index, (node, proc, ready, command, node_env) in enumerate(started):
            info = _wait_ready(node, proc, ready, root / f"{node}.log")
            gateways.append(
                BenchGateway(
                    node,
                    proc,
                    int(info["port"]),
                    int(info["internal_port"]),
                    command,
                    node_env,
                    ready,
                    root / f"{node}.log",
                    metrics_ports[index],
                )
            )
        return gateways
    except BaseException:
        for _, proc, *_ in started:
            proc.kill()
            proc.wait()
        raise


# ---------------------------------------------------------------------- the cast


def web_env(folder: Path, db_name: str = "projection.sqlite3") -> dict[str, str]:
    """The environment of a benchmark's web process over throw-away databases in
    ``folder``: launched-cluster settings (no DEBUG), loopback-only placeholders for the
    gateway it never reaches. The accounts too are fresh: a second run must not find the
    first one's user."""
    return {
        "DJANGO_SETTINGS_MODULE": "namesrv_site.settings",
        "NAMESRV_DB_PATH": str(folder / db_name),
        "NAMESRV_SHARED_DB_PATH": str(folder / "shared.sqlite3"),
        "NAMESRV_STATIC_ROOT": str(folder / "static"),
        "NAMESRV_DEBUG": "false",
        "DJANGO_SECRET_KEY": "bench-only",
        "NAMESRV_INTERNAL_SECRET": "bench",
        "NAMESRV_LOG_LEVEL": "WARNING",
        "NAMESRV_PORT": "1",
        "NAMESRV_INTERNAL_PORT": "1",
        "PYTHONPATH": str(REPO_ROOT),
    }


def free_port() -> int:
    """A port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def topic_name(index: int) -> str:
    """The name of bench topic ``index``."""
    return f"BenchTopic{index:05d}"


def broker_name(index: int) -> str:
    """The name of bench broker group ``index``."""
    return f"bench-broker-{index:04d}"


def broker_addr(index: int) -> str:
    """A loopback-looking address of bench broker ``index`` (never dialled)."""
    return f"127.0.{index // 250}.{index % 250 + 1}:10911"


def broker_topics(index: int, topics_per_broker: int, topic_count: int) -> list[str]:
    """The topics broker ``index`` serves.

    Consecutive blocks wrap around the topic space, so with B brokers every topic
    is served by exactly ``B * topics_per_broker / topic_count`` brokers.
    """
    first = index * topics_per_broker
    return [topic_name((first + j) % topic_count) for j in range(topics_per_broker)]


def topic_wrapper(topics: Sequence[str], counter: int = 1) -> TopicConfigSerializeWrapper:
    """A broker's topic table with a fixed DataVersion (``counter`` moves it)."""
    return TopicConfigSerializeWrapper(
        data_version=DataVersion(timestamp=DATA_VERSION_TIMESTAMP_MS, counter=counter),
        topic_config_table={
            name: TopicConfig(name, QUEUES_PER_TOPIC, QUEUES_PER_TOPIC) for name in topics
        },
    )


def register_request(
    index: int, wrapper: TopicConfigSerializeWrapper, *, compressed: bool = False
) -> RemotingCommand:
    """The REGISTER_BROKER frame a 5.x master sends (plain JSON body by default)."""
    return register_body.register_broker_request(
        cluster_name=CLUSTER,
        broker_name=broker_name(index),
        broker_id=0,
        broker_addr=broker_addr(index),
        ha_server_addr=broker_addr(index).replace(":10911", ":10912"),
        wrapper=wrapper,
        compress_over_bytes=0 if compressed else None,
    )


def route_request(topic: str) -> RemotingCommand:
    """GET_ROUTEINFO_BY_TOPIC as a 5.x client sends it."""
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, version=CURRENT_VERSION
    )


# ---------------------------------------------------------------------- reporting


def machine_notes() -> str:
    """One line about where the figures came from."""
    load_1m, load_5m, _ = os.getloadavg()
    return (
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}; Python {platform.python_version()} "
        f"({sys.implementation.name}); {os.cpu_count()} cores; "
        f"load average {load_1m:.2f}/{load_5m:.2f} at start"
    )


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print a Markdown table (so a run's output pastes into docs/BENCHMARKS.md)."""
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(["---"] * len(header)) + "|")
    for row in rows:
        print("| " + " | ".join(_cell(value) for value in row) + " |")


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


# ---------------------------------------------------------------------- bare frame servers

FrameAnswer = Callable[[RemotingCommand], bytes]
"""One request -> the bytes of its whole answer frame."""


class FrameAnswerer(asyncio.Protocol):
    """The benches' baseline server: the project's frame codec and nothing else; every
    complete request of one read gets ``answer(request)``, all in one write."""

    def __init__(self, answer: FrameAnswer) -> None:
        self._answer = answer
        self._decoder = FrameDecoder()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport."""
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        """Answer every complete request in one write."""
        assert self._transport is not None
        frames = [self._answer(request) for request in self._decoder.feed(data)]
        if frames:
            self._transport.write(b"".join(frames))


async def serve_frames(answer: FrameAnswer, ready_file: Path) -> None:
    """Serve :class:`FrameAnswerer` on a free loopback port until SIGTERM; the port and
    pid go into ``ready_file``."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: FrameAnswerer(answer), "127.0.0.1", 0)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    port = server.sockets[0].getsockname()[1]
    ready_file.write_text(json.dumps({"port": port, "pid": os.getpid()}))
    await stop.wait()
    server.close()
    await server.wait_closed()


def least_cpu_s(call: Callable[[], object], times: int = 2) -> float:
    """The least CPU seconds this thread spends in one of ``times`` calls of ``call``.

    Other threads of the process are not counted, and the garbage collector is held off:
    a full collection walks the whole process's heap (in a test process, everything the
    earlier tests left), not the call's work. The benches of hostile input and the tests
    that bound its cost both measure with it."""
    spent = []
    collecting = gc.isenabled()
    gc.disable()
    try:
        for _ in range(times):
            started_s = time.thread_time()
            call()
            spent.append(time.thread_time() - started_s)
    finally:
        if collecting:
            gc.enable()
    return min(spent)
