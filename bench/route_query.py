"""Benchmark of one real gateway process: route-query throughput and heartbeat CPU.

1. Start ``manage.py run_gateway`` (eventual mode, its own SQLite file) and
   register 1k brokers over the wire, each with a block of 20 of 10k topics, so
   every topic has a route served by two broker groups.
2. N asyncio connections issue GET_ROUTEINFO_BY_TOPIC over every topic at
   pipeline depths 1 and 8 (QPS, p50, p99). The same load generator then runs
   against a bare asyncio server in another process that decodes each request
   with ``remoting.frame`` and answers a fixed pre-encoded route body: the
   Python-side upper bound. The ratio gateway / bare is the figure to watch;
   the two servers alternate for a few rounds per depth and the median of the
   per-round ratios is reported (other processes on a shared machine come and
   go). The gateway is measured once its projection writer has finished the
   setup's rows.
3. 1k brokers x 100 topics re-register as they do every 30 s. The 1k
   registrations of one period are sent as fast as the gateway takes them and
   the gateway's CPU time (psutil) is divided by the 30 s
   period: the fraction of one core the cadence costs. A window at the real
   rate (33 registrations/s for one period) checks the compressed figure.
4. On that table, with every route cached, the depth-1 query load runs once
   quiet and once during real-rate registrations: the ratio shows what the
   heartbeats cost the queries.

The load generator and the gateway share the machine's cores; nothing is pinned.

Run: ``.venv/bin/python -m bench.route_query --scale full``.

Why one script: a benchmark must be one command that sets up,
measures against its same-run baseline and tears down; its phases share the
gateway process and the registered table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import _util
from bench.load import LoadStats, close_load, open_load, request_frames
from remoting.client import RemotingClient
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, make_response
from remoting.frame import encode_frame_prefix
from tools.cli import ExactArgumentParser

READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
POLL_INTERVAL_S = 0.05
SECRET = "bench-secret"
# Connections stay idle between phases; the default 120 s idle close would
# unregister the brokers registered over them (eventual mode's channel hook).
BENCH_IDLE_TIMEOUT_S = 3600
HEARTBEAT_PERIOD_S = 30.0
# A window with less CPU than this counts as quiet. Full scale waits 1 s, longer
# than the projection writer's 0.5 s idle poll, so its idle digest is counted.
CPU_QUIET_CPU_S = 0.02
CPU_QUIET_WAIT_MAX_S = 60.0
REGISTER_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0
PHASES = ("query", "heartbeat")
QUIET_HEARTBEAT_TABLE = "gateway, heartbeat table, quiet"
DURING_HEARTBEATS = "gateway during heartbeats"
TARGET_RATIO = 0.80
TARGET_CORE_FRACTION = 0.10
_MS_PER_S = 1_000.0


@dataclass(frozen=True, slots=True)
class Scale:
    """The sizes of one run."""

    name: str
    brokers: int
    topics: int
    topics_per_broker: int
    heartbeat_topics_per_broker: int
    warmup_s: float
    measure_s: float
    paced_s: float
    steady_rounds: int
    idle_sample_s: float
    quiet_window_s: float
    query_rounds: int
    """Gateway and bare server alternate this many times per depth (median ratio)."""


SCALES = {
    "full": Scale("full", 1_000, 10_000, 20, 100, 1.0, 5.0, HEARTBEAT_PERIOD_S, 3, 2.0, 1.0, 3),
    "small": Scale("small", 20, 200, 20, 20, 0.2, 0.5, 0.5, 1, 0.3, 0.2, 1),
}


# ---------------------------------------------------------------------- processes


@dataclass
class ServerProcess:
    """A server under test in its own process: its pid, port and how to stop it."""

    name: str
    proc: subprocess.Popen[bytes]
    port: int

    @property
    def addr(self) -> str:
        """The remoting address."""
        return f"127.0.0.1:{self.port}"

    def cpu_s(self) -> float:
        """CPU seconds the process used so far."""
        return _util.process_cpu_s(self.proc.pid)

    def loop_cpu_s(self) -> float:
        """CPU seconds of the main thread (the event loop) so far."""
        return _util.main_thread_cpu_s(self.proc.pid)

    def stop(self) -> int:
        """SIGTERM, wait, and return the exit code (killed after the timeout)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def _wait_ready(proc: subprocess.Popen[bytes], ready_file: Path, log_file: Path) -> dict[str, int]:
    deadline_s = time.monotonic() + READY_TIMEOUT_S
    while not ready_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline_s:
            proc.kill()
            raise RuntimeError(f"server did not start:\n{log_file.read_text()[-4000:]}")
        time.sleep(POLL_INTERVAL_S)
    info: dict[str, int] = json.loads(ready_file.read_text())
    return info


def start_gateway(workdir: Path) -> ServerProcess:
    """``manage.py run_gateway`` on free ports with a fresh SQLite projection (production
    settings: DEBUG off, so Django keeps no query log)."""
    ready_file = workdir / "gateway.ready"
    log_file = workdir / "gateway.log"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "namesrv_site.settings",
        "NAMESRV_DB_PATH": str(workdir / "gateway.sqlite3"),
        "NAMESRV_INTERNAL_SECRET": SECRET,
        "NAMESRV_DEBUG": "false",
        "DJANGO_SECRET_KEY": "bench-only-secret-key",
        "NAMESRV_LOG_LEVEL": "WARNING",
    }
    properties = workdir / "namesrv.properties"
    properties.write_text(f"serverChannelMaxIdleTimeSeconds={BENCH_IDLE_TIMEOUT_S}\n")
    command = [
        sys.executable,
        "manage.py",
        "run_gateway",
        "--node",
        "n1",
        "--port",
        "0",
        "--internal-port",
        "0",
        "--ready-file",
        str(ready_file),
        "--config",
        str(properties),
        "--migrate",
    ]
    with log_file.open("ab") as log:
        proc = subprocess.Popen(command, cwd=_util.REPO_ROOT, env=env, stdout=log, stderr=log)
    info = _wait_ready(proc, ready_file, log_file)
    return ServerProcess("gateway", proc, int(info["port"]))


def start_bare_server(workdir: Path, body: bytes) -> ServerProcess:
    """This script's ``--serve-bare`` mode in a child process, answering ``body``."""
    body_file = workdir / "route.body"
    body_file.write_bytes(body)
    ready_file = workdir / "bare.ready"
    log_file = workdir / "bare.log"
    command = [
        sys.executable,
        "-m",
        "bench.route_query",
        "--serve-bare",
        "--body-file",
        str(body_file),
        "--ready-file",
        str(ready_file),
    ]
    with log_file.open("ab") as log:
        proc = subprocess.Popen(command, cwd=_util.REPO_ROOT, stdout=log, stderr=log)
    info = _wait_ready(proc, ready_file, log_file)
    return ServerProcess("bare asyncio", proc, int(info["port"]))


# ---------------------------------------------------------------------- bare server


def bare_answer(body: bytes) -> _util.FrameAnswer:
    """Each request answered SUCCESS with the fixed route ``body``."""

    def answer(request: RemotingCommand) -> bytes:
        response = make_response(request, ResponseCode.SUCCESS, body=body)
        return encode_frame_prefix(response) + body

    return answer


# ---------------------------------------------------------------------- load generator


@dataclass(frozen=True, slots=True)
class LoadResult:
    """One (server, depth) run."""

    server: str
    connections: int
    depth: int
    qps: float
    p50_ms: float
    p99_ms: float
    errors: int
    server_core_fraction: float
    client_core_fraction: float
    round: int = 1


async def run_load(
    server: ServerProcess,
    frames: Sequence[bytes],
    connections: int,
    depth: int,
    scale: Scale,
) -> LoadResult:
    """Open ``connections`` connections, warm up, measure for ``scale.measure_s``."""
    stats = LoadStats()
    opened = await open_load(
        "127.0.0.1", server.port, frames, connections, depth, stats, spread=True
    )
    await asyncio.sleep(scale.warmup_s)
    server_cpu, client_cpu, start = server.cpu_s(), _util.own_cpu_s(), time.perf_counter()
    stats.measuring = True
    await asyncio.sleep(scale.measure_s)
    stats.measuring = False
    elapsed_s = time.perf_counter() - start
    server_cpu, client_cpu = server.cpu_s() - server_cpu, _util.own_cpu_s() - client_cpu
    await close_load(opened, stats)
    latencies = stats.latencies_s
    return LoadResult(
        server=server.name,
        connections=connections,
        depth=depth,
        qps=len(latencies) / elapsed_s,
        p50_ms=_util.percentile(latencies, 0.50) * _MS_PER_S,
        p99_ms=_util.percentile(latencies, 0.99) * _MS_PER_S,
        errors=stats.errors,
        server_core_fraction=server_cpu / elapsed_s,
        client_core_fraction=client_cpu / elapsed_s,
    )


# ---------------------------------------------------------------------- registration


async def register_over_wire(
    clients: Sequence[RemotingClient], addr: str, frames: Sequence[RemotingCommand]
) -> None:
    """Send every REGISTER_BROKER, one sequential stream per client; each must succeed."""

    async def stream(client: RemotingClient, requests: Sequence[RemotingCommand]) -> None:
        for request in requests:
            response = await client.invoke(addr, request, REGISTER_TIMEOUT_S)
            if response.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"register failed: {response.code} {response.remark}")

    shares = [frames[i :: len(clients)] for i in range(len(clients))]
    await asyncio.gather(*(stream(c, share) for c, share in zip(clients, shares, strict=True)))


def register_frames(scale: Scale, topics_per_broker: int, counter: int) -> list[RemotingCommand]:
    """The REGISTER_BROKER request of every bench broker (plain JSON body, as by default)."""
    return [
        _util.register_request(
            index,
            _util.topic_wrapper(
                _util.broker_topics(index, topics_per_broker, scale.topics), counter=counter
            ),
        )
        for index in range(scale.brokers)
    ]


async def wait_quiet(server: ServerProcess, window_s: float) -> float:
    """Wait until the server's CPU use falls silent (its projection writer done)."""
    deadline_s = time.monotonic() + CPU_QUIET_WAIT_MAX_S
    last = server.cpu_s()
    while time.monotonic() < deadline_s:
        await asyncio.sleep(window_s)
        now = server.cpu_s()
        if now - last < CPU_QUIET_CPU_S:
            return now
        last = now
    return server.cpu_s()


@dataclass(frozen=True, slots=True)
class CpuResult:
    """Gateway CPU for one period's worth of registrations."""

    label: str
    registrations: int
    wall_s: float
    cpu_s: float
    loop_cpu_s: float

    @property
    def core_fraction_of_period(self) -> float:
        """The CPU of one period divided by the 30 s period."""
        return self.cpu_s / HEARTBEAT_PERIOD_S


async def burst_cpu(
    server: ServerProcess,
    clients: Sequence[RemotingClient],
    frames: Sequence[RemotingCommand],
    idle_cpu_per_s: float,
    label: str,
    quiet_s: float,
) -> CpuResult:
    """Send one period's registrations at once; the gateway CPU they cost, idle removed."""
    await wait_quiet(server, quiet_s)
    start_cpu, start_loop, start = server.cpu_s(), server.loop_cpu_s(), time.perf_counter()
    await register_over_wire(clients, server.addr, frames)
    end_cpu = await wait_quiet(server, quiet_s)
    wall_s = time.perf_counter() - start
    cpu_s = max(0.0, end_cpu - start_cpu - idle_cpu_per_s * wall_s)
    return CpuResult(label, len(frames), wall_s, cpu_s, server.loop_cpu_s() - start_loop)


async def paced_cpu(
    server: ServerProcess,
    clients: Sequence[RemotingClient],
    frames: Sequence[RemotingCommand],
    window_s: float,
    quiet_s: float,
    *,
    settle: bool = True,
) -> CpuResult:
    """Registrations at the real rate (brokers / 30 s) for ``window_s``; CPU / wall.

    ``settle`` first waits for the server to fall quiet (not while other load runs).
    """
    rate_per_s = len(frames) / HEARTBEAT_PERIOD_S
    count = max(1, round(rate_per_s * window_s))
    if settle:
        await wait_quiet(server, quiet_s)
    start_cpu, start_loop, start = server.cpu_s(), server.loop_cpu_s(), time.perf_counter()
    for sent in range(count):
        due = start + sent / rate_per_s
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        client = clients[sent % len(clients)]
        response = await client.invoke(server.addr, frames[sent % len(frames)], REGISTER_TIMEOUT_S)
        assert response.code == ResponseCode.SUCCESS, response
    await asyncio.sleep(max(0.0, start + window_s - time.perf_counter()))
    wall_s = time.perf_counter() - start
    return CpuResult(
        f"real rate: {rate_per_s:.1f} registrations/s for {wall_s:.1f} s",
        count,
        wall_s,
        server.cpu_s() - start_cpu,
        server.loop_cpu_s() - start_loop,
    )


async def idle_cpu_rate(server: ServerProcess, sample_s: float, quiet_s: float) -> float:
    """The server's CPU seconds per second while nobody talks to it."""
    await wait_quiet(server, quiet_s)
    start_cpu, start = server.cpu_s(), time.perf_counter()
    await asyncio.sleep(sample_s)
    return (server.cpu_s() - start_cpu) / (time.perf_counter() - start)


# ---------------------------------------------------------------------- run


@dataclass
class Report:
    """Everything one run measured."""

    scale: str
    loads: list[LoadResult]
    cpu: list[CpuResult]
    idle_cpu_per_s: float
    route_body_bytes: int
    setup_register_s: float


async def fetch_route_body(client: RemotingClient, addr: str, topic: str) -> bytes:
    """The gateway's encoded route body of ``topic``."""
    response = await client.invoke(addr, _util.route_request(topic))
    assert response.code == ResponseCode.SUCCESS and response.body, response
    return response.body


async def query_phase(
    servers: Sequence[ServerProcess], scale: Scale, connections: int, depths: Sequence[int]
) -> list[LoadResult]:
    """Every depth against every server, alternating ``scale.query_rounds`` times so
    drift and other processes' bursts hit both alike."""
    topics = [_util.topic_name(i) for i in range(scale.topics)]
    random.Random(scale.topics).shuffle(topics)
    frames = request_frames(topics)
    results = []
    for depth in depths:
        for round_number in range(1, scale.query_rounds + 1):
            for server in servers:
                load = await run_load(server, frames, connections, depth, scale)
                results.append(dataclasses.replace(load, round=round_number))
    return results


async def heartbeat_phase(
    gateway: ServerProcess, clients: Sequence[RemotingClient], scale: Scale
) -> tuple[list[CpuResult], float]:
    """First registration of the 100-topic tables, compressed periods, one real period."""
    idle = await idle_cpu_rate(gateway, scale.idle_sample_s, scale.quiet_window_s)
    frames = register_frames(scale, scale.heartbeat_topics_per_broker, counter=2)
    results = [
        await burst_cpu(
            gateway, clients, frames, idle, "changed DataVersion (once)", scale.quiet_window_s
        )
    ]
    for round_index in range(scale.steady_rounds):
        label = f"compressed period {round_index + 1}: unchanged DataVersion, all at once"
        results.append(await burst_cpu(gateway, clients, frames, idle, label, scale.quiet_window_s))
    results.append(await paced_cpu(gateway, clients, frames, scale.paced_s, scale.quiet_window_s))
    return results, idle


async def warm_route_cache(
    gateway: ServerProcess, clients: Sequence[RemotingClient], topics: Sequence[str]
) -> None:
    """Query every topic once, so the runs that follow measure cached answers."""

    async def stream(client: RemotingClient, share: Sequence[str]) -> None:
        for topic in share:
            response = await client.invoke(gateway.addr, _util.route_request(topic))
            assert response.code == ResponseCode.SUCCESS, response

    shares = [topics[i :: len(clients)] for i in range(len(clients))]
    await asyncio.gather(*(stream(c, share) for c, share in zip(clients, shares, strict=True)))


async def mixed_phase(
    gateway: ServerProcess, clients: Sequence[RemotingClient], scale: Scale, connections: int
) -> list[LoadResult]:
    """Route queries at depth 1 on the heartbeat table: quiet, then while the brokers
    re-register at their real rate (the same load both times; cached routes)."""
    topics = [_util.topic_name(i) for i in range(scale.topics)]
    frames = register_frames(scale, scale.heartbeat_topics_per_broker, counter=2)
    await warm_route_cache(gateway, clients, topics)
    await wait_quiet(gateway, scale.quiet_window_s)
    quiet = await run_load(gateway, request_frames(topics), connections, 1, scale)
    await wait_quiet(gateway, scale.quiet_window_s)
    load, _ = await asyncio.gather(
        run_load(gateway, request_frames(topics), connections, 1, scale),
        paced_cpu(
            gateway,
            clients,
            frames,
            scale.warmup_s + scale.measure_s,
            scale.quiet_window_s,
            settle=False,
        ),
    )
    return [
        dataclasses.replace(quiet, server=QUIET_HEARTBEAT_TABLE),
        dataclasses.replace(load, server=DURING_HEARTBEATS),
    ]


@contextlib.asynccontextmanager
async def gateway_session(
    workdir: Path, connections: int
) -> AsyncIterator[tuple[ServerProcess, list[RemotingClient]]]:
    """A fresh gateway and ``connections`` broker-side clients; the gateway stops first,
    so closing the clients afterwards unregisters nothing."""
    workdir.mkdir(parents=True, exist_ok=True)
    gateway = start_gateway(workdir)
    clients = [RemotingClient(connect_timeout_s=CONNECT_TIMEOUT_S) for _ in range(connections)]
    try:
        yield gateway, clients
    finally:
        gateway.stop()
        for client in clients:
            await client.close()


async def query_run(
    scale: Scale, connections: int, depths: Sequence[int], workdir: Path
) -> tuple[list[LoadResult], int, float]:
    """Register the query layout, then gateway and bare server under the same load."""
    async with gateway_session(workdir, connections) as (gateway, clients):
        start = time.perf_counter()
        await register_over_wire(
            clients, gateway.addr, register_frames(scale, scale.topics_per_broker, counter=1)
        )
        setup_s = time.perf_counter() - start
        # The projection writer is still writing the setup's rows into SQLite; its
        # thread would share the GIL with the measured event loop. Queries are
        # measured on a settled node, as the heartbeat phase measures them.
        await wait_quiet(gateway, scale.quiet_window_s)
        body = await fetch_route_body(clients[0], gateway.addr, _util.topic_name(0))
        bare = start_bare_server(workdir, body)
        try:
            loads = await query_phase([gateway, bare], scale, connections, depths)
        finally:
            bare.stop()
    return loads, len(body), setup_s


async def heartbeat_run(
    scale: Scale, connections: int, workdir: Path
) -> tuple[list[CpuResult], float, list[LoadResult]]:
    """A fresh gateway holding exactly the brokers x 100-topic tables of the heartbeat."""
    async with gateway_session(workdir, connections) as (gateway, clients):
        cpu, idle = await heartbeat_phase(gateway, clients, scale)
        mixed = await mixed_phase(gateway, clients, scale, connections)
    return cpu, idle, mixed


async def run(
    scale: Scale,
    connections: int,
    depths: Sequence[int],
    workdir: Path,
    phases: Sequence[str] = PHASES,
) -> Report:
    """The query run, then the heartbeat run, each on its own gateway process."""
    loads: list[LoadResult] = []
    cpu: list[CpuResult] = []
    body_bytes, setup_s, idle = 0, 0.0, 0.0
    if "query" in phases:
        loads, body_bytes, setup_s = await query_run(scale, connections, depths, workdir / "query")
    if "heartbeat" in phases:
        cpu, idle, mixed = await heartbeat_run(scale, connections, workdir / "heartbeat")
        loads.extend(mixed)
    return Report(scale.name, loads, cpu, idle, body_bytes, setup_s)


def _heartbeat_ratio(loads: Sequence[LoadResult]) -> float | None:
    by_server = {r.server: r for r in loads}
    quiet, busy = by_server.get(QUIET_HEARTBEAT_TABLE), by_server.get(DURING_HEARTBEATS)
    if quiet is None or busy is None or not quiet.qps:
        return None
    return busy.qps / quiet.qps


def _ratios(loads: Sequence[LoadResult]) -> Iterator[tuple[int, list[float]]]:
    """Per depth: gateway QPS / bare QPS of each round (both measured back to back)."""
    by_key = {(r.server, r.depth, r.round): r for r in loads}
    for depth in sorted({r.depth for r in loads if r.server == "gateway"}):
        ratios = []
        for round_number in sorted({r.round for r in loads if r.depth == depth}):
            gateway = by_key.get(("gateway", depth, round_number))
            bare = by_key.get(("bare asyncio", depth, round_number))
            if gateway is not None and bare is not None and bare.qps:
                ratios.append(gateway.qps / bare.qps)
        if ratios:
            yield depth, ratios


def print_report(report: Report) -> None:
    """Markdown tables of a report."""
    _util.print_table(
        f"route queries ({report.scale}; route body {report.route_body_bytes} bytes)",
        [
            "server",
            "conns",
            "depth",
            "round",
            "QPS",
            "p50 ms",
            "p99 ms",
            "errors",
            "server CPU",
            "load-gen CPU",
        ],
        [
            (
                r.server,
                r.connections,
                r.depth,
                r.round,
                r.qps,
                r.p50_ms,
                r.p99_ms,
                r.errors,
                f"{r.server_core_fraction:.0%}",
                f"{r.client_core_fraction:.0%}",
            )
            for r in report.loads
        ],
    )
    _util.print_table(
        "gateway QPS / bare asyncio QPS (same run; each round back to back)",
        ["depth", "per round", "median", f"target >= {TARGET_RATIO:.0%}"],
        [
            (
                d,
                " ".join(f"{r:.0%}" for r in ratios),
                f"{_util.median(ratios):.0%}",
                "met" if _util.median(ratios) >= TARGET_RATIO else "MISSED",
            )
            for d, ratios in _ratios(report.loads)
        ],
    )
    heartbeat_ratio = _heartbeat_ratio(report.loads)
    if heartbeat_ratio is not None:
        print(
            f"\nroute queries during real-rate heartbeats: {heartbeat_ratio:.0%} of the "
            "same gateway's QPS without them (same run)"
        )
    _util.print_table(
        f"heartbeat CPU of the gateway (idle {report.idle_cpu_per_s:.2%} of a core removed "
        "from bursts)",
        [
            "window",
            "registrations",
            "wall s",
            "gateway CPU s",
            "of which event loop s",
            "share of one core",
            f"target < {TARGET_CORE_FRACTION:.0%}",
        ],
        [_cpu_row(c) for c in report.cpu],
    )
    print(f"\nsetup: {report.setup_register_s:.1f} s to register the query brokers")


def _cpu_row(result: CpuResult) -> tuple[object, ...]:
    if result.label.startswith("real rate"):
        share = result.cpu_s / result.wall_s
    else:
        share = result.core_fraction_of_period
    verdict = "met" if share < TARGET_CORE_FRACTION else "MISSED"
    if result.label.startswith("changed"):
        verdict = "(not a steady state)"
    return (
        result.label,
        result.registrations,
        result.wall_s,
        result.cpu_s,
        result.loop_cpu_s,
        f"{share:.1%}",
        verdict,
    )


def main(argv: list[str] | None = None) -> int:
    """Command line entry point (also the bare server's, with ``--serve-bare``)."""
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scale", choices=sorted(SCALES), default="full", help="small: a quick check run"
    )
    parser.add_argument(
        "--connections", type=int, default=16, help="client connections of the load"
    )
    parser.add_argument("--depths", default="1,8", help="comma-separated pipeline depths")
    parser.add_argument(
        "--phases",
        default=",".join(PHASES),
        help="comma-separated phases to run (query: QPS against both servers; heartbeat: "
        "registration CPU and queries during heartbeats)",
    )
    parser.add_argument("--serve-bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--body-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--ready-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_bare:
        asyncio.run(_util.serve_frames(bare_answer(args.body_file.read_bytes()), args.ready_file))
        return 0
    depths = [int(d) for d in args.depths.split(",")]
    phases = [p for p in args.phases.split(",") if p]
    unknown = sorted(set(phases) - set(PHASES))
    if unknown or not phases:
        parser.error(f"--phases takes a comma-separated subset of {','.join(PHASES)}")
    scale = SCALES[args.scale]
    print(
        f"# bench/route_query.py --scale {args.scale} --connections {args.connections} "
        f"--depths {args.depths} --phases {','.join(phases)}\n{_util.machine_notes()}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-route-") as workdir:
        report = asyncio.run(run(scale, args.connections, depths, Path(workdir), phases))
    print_report(report)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
