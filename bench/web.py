"""Benchmark of the web side: the REST route endpoint and the two heavy console pages.

    .venv/bin/python -m bench.web [--brokers 1000] [--topics 10000] [--seconds 10]
        [--connections 32] [--workers 2] [--load-processes 2]
        [--server uvicorn|daphne] [--http httptools|h11] [--baseline-seconds 5]

1. Builds a projection DB of ``--brokers`` broker replicas (masters + slaves,
   half as many groups) and ``--topics`` topics (each on two groups) through the
   real route table and the projection's own writer, plus an operator with a token.
2. Serves ``namesrv_site/asgi.py`` with the launcher's own web command
   (``launcher.asgi_server_argv``: uvicorn, httptools, uvloop) and ``--workers``
   worker processes; ``--server daphne`` serves it with daphne instead (one
   process, as the launcher ran it before), ``--http h11`` with uvicorn's
   pure-Python HTTP parser.
3. Load: ``--connections`` keep-alive HTTP/1.1 connections spread over
   ``--load-processes`` forked processes (raw asyncio protocols, pre-built
   request bytes, so the generator is not the bottleneck) ask
   GET /api/v1/routes/<random topic>/ with the token: one ordered cold pass,
   ``--warm-passes`` more, then ``--seconds`` of random topics; prints
   requests/s, latency percentiles and the workers' CPU per answer.
4. Baseline, same run and same server command: the DRF view alone (Django's
   application without :class:`~namesrv_app.api.route_reads.RouteReads` in front, so
   every read goes through Django's handler, the middleware stack and the view) for
   ``--baseline-seconds``; prints the ratio.
5. Pages: logs in and times /topology/ and /topics/ (first, middle and a
   searched page) sequentially; prints the median and p95 per page.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from bench._util import CLUSTER, REPO_ROOT, web_env
from remoting.register_request import BrokerRegistration
from tools import process_facts
from tools.cli import ExactArgumentParser

START_MS = 1_700_000_000_000
PAGE_SAMPLES = 15
READY_TIMEOUT_S = 60.0
ROUTE_TARGET_RPS = 1500
PAGE_TARGET_MS = 300
PASSWORD = "bench-password-not-secret"
LOAD_START_DELAY_S = 0.5


def _env(db_path: Path) -> dict[str, str]:
    return {**os.environ, **web_env(db_path.parent, db_path.name)}


def build_db(db_path: Path, brokers: int, topics: int) -> str:
    """Migrate, project the fleet, create the operator; the API token."""
    os.environ.update(_env(db_path))
    import django

    django.setup()
    from django.core.management import call_command

    for database in ("default", "projection"):
        call_command("migrate", interactive=False, verbosity=0, database=database)
    # The pages name their files by hashed names, as on a node (docs/DEPLOY.md).
    call_command("collectstatic", interactive=False, verbosity=0)
    from django.contrib.auth.models import Group, User

    from gateway.clock import ManualClock
    from gateway.services import NameServerService
    from namesrv_app.projection.delta import read_full_state
    from namesrv_app.projection.rows import write_full_state
    from namesrv_app.tokens import issue_token
    from raftstore.replicator import LocalReplicator
    from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper

    replicator = LocalReplicator("n1")
    service = NameServerService(replicator, ManualClock(START_MS))
    groups = max(1, brokers // 2)
    per_group = [[] for _ in range(groups)]  # type: list[list[str]]
    for index in range(topics):
        for offset in (0, 1):
            per_group[(index * 2 + offset) % groups].append(f"BenchTopic{index:05d}")

    async def register() -> None:
        for group in range(groups):
            table = {t: TopicConfig(t, 8, 8, 6) for t in per_group[group]}
            wrapper = TopicConfigSerializeWrapper(DataVersion(timestamp=START_MS, counter=1), table)
            for broker_id in (0, 1):
                port = 20000 + group * 4 + broker_id * 2
                await service.register_broker(
                    BrokerRegistration(
                        cluster_name=CLUSTER,
                        broker_addr=f"10.0.{group // 250}.{group % 250}:{port}",
                        broker_name=f"bench-broker-{group:04d}",
                        broker_id=broker_id,
                        ha_server_addr=f"10.0.{group // 250}.{group % 250}:{port + 1}",
                    ),
                    wrapper,
                    channel=f"c{group}-{broker_id}",
                )

    asyncio.run(register())
    write_full_state(replicator.read(read_full_state), "n1", "eventual")
    user = User.objects.create_user("bench", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name="operator")[0])
    return issue_token(user)[0]


def drf_view_application() -> Any:
    """uvicorn factory for the baseline: the site's Django application alone, without
    the route reads answered beside it, so the DRF view answers every read."""
    import importlib

    # The site's module sets Django up; the app's modules need that first.
    return importlib.import_module("namesrv_site.asgi").django_application


def server_argv(port: int, workers: int, server: str, http: str, baseline: bool) -> list[str]:
    """The web command: the launcher's own (uvicorn), or daphne, on ``port``."""
    from localcluster.launcher import ASGI_APP, asgi_server_argv

    if server == "daphne":
        assert not baseline, "the DRF baseline runs on the launcher's server"
        return [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), ASGI_APP]
    app = "bench.web:drf_view_application" if baseline else ASGI_APP
    argv = asgi_server_argv("127.0.0.1", port, workers, app)
    if baseline:
        argv.append("--factory")
    if http != "httptools":
        argv[argv.index("--http") + 1] = http
    argv[argv.index("--log-level") + 1] = "warning"
    return argv


def start_server(db_path: Path, argv: list[str], port: int) -> subprocess.Popen[bytes]:
    """Start the web command; return once it answers."""
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=_env(db_path))
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=2).read()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the web server did not start: {argv}")


def stop_server(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM (uvicorn's supervisor passes it to its workers) and wait."""
    server.terminate()
    server.wait(20)


class _KeepAliveClient(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection: send a request, read the answer, repeat.

    Raw bytes and a protocol callback instead of streams: the generator must cost
    far less per request than the server, or it measures itself.
    """

    def __init__(self, next_request: Callable[[], bytes | None], stats: _LoadStats) -> None:
        self.next_request, self.stats = next_request, stats
        self.buffer = b""
        self.started = 0.0
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Send the first request."""
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._send()

    def _send(self) -> None:
        assert self.transport is not None
        request = self.next_request()
        if request is None:
            self.transport.close()
            return
        self.started = time.perf_counter()
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        """Complete answers are counted and answered with the next request."""
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buffer[:head_end]
            marker = head.lower().find(b"content-length:")
            length = 0 if marker < 0 else int(head[marker + 15 :].split(b"\r\n", 1)[0])
            if len(self.buffer) < head_end + 4 + length:
                return
            self.buffer = self.buffer[head_end + 4 + length :]
            self.stats.record(time.perf_counter() - self.started, head.startswith(b"HTTP/1.1 200"))
            self._send()

    def connection_lost(self, exc: Exception | None) -> None:
        """The run (or the server) ended this connection."""
        if not self.done.done():
            self.done.set_result(None)


class _LoadStats:
    """Counts of one load process and a bounded, evenly thinned latency sample."""

    samples_max = 200_000

    def __init__(self) -> None:
        self.count = 0
        self.errors = 0
        self.latencies: list[float] = []

    def record(self, latency_s: float, ok: bool) -> None:
        """One answer."""
        self.count += 1
        self.errors += 0 if ok else 1
        if len(self.latencies) < self.samples_max:
            self.latencies.append(latency_s)


def _load_process(
    port: int, requests: list[bytes], start_at: float, seconds: float, connections: int, out: Any
) -> None:
    """One load process: ``connections`` keep-alive connections.

    ``seconds`` > 0: random requests until the deadline; 0: each request of the
    list once, in order (the warm-up passes).
    """

    async def run() -> _LoadStats:
        stats = _LoadStats()
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, start_at - time.time()))
        stop_at = time.monotonic() + seconds
        in_order = iter(requests)

        def timed() -> bytes | None:
            return random.choice(requests) if time.monotonic() < stop_at else None

        def once() -> bytes | None:
            return next(in_order, None)

        clients = []
        for _ in range(connections):
            _, client = await loop.create_connection(
                lambda: _KeepAliveClient(timed if seconds > 0 else once, stats), "127.0.0.1", port
            )
            clients.append(client)
        await asyncio.gather(*(c.done for c in clients))
        return stats

    stats = asyncio.run(run())
    out.send((stats.count, stats.errors, stats.latencies))
    out.close()


def _route_requests(token: str, topics: int) -> list[bytes]:
    headers = f"Host: 127.0.0.1\r\nAccept: application/json\r\nAuthorization: Token {token}"
    return [
        f"GET /api/v1/routes/BenchTopic{index:05d}/ HTTP/1.1\r\n{headers}\r\n\r\n".encode()
        for index in range(topics)
    ]


def load_routes(
    port: int, token: str, topics: int, seconds: float, connections: int, processes: int
) -> dict[str, Any]:
    """Keep-alive load on the route endpoint from ``processes`` processes; throughput, latency.

    ``seconds`` = 0 sends every topic once, in order (a warm-up pass).
    """
    import multiprocessing

    context = multiprocessing.get_context("fork")
    requests = _route_requests(token, topics)
    start_at = time.time() + LOAD_START_DELAY_S
    pipes, workers = [], []
    for index in range(processes):
        share = connections // processes + (1 if index < connections % processes else 0)
        receiver, sender = context.Pipe(duplex=False)
        mine = requests if seconds > 0 else requests[index::processes]
        worker = context.Process(
            target=_load_process, args=(port, mine, start_at, seconds, share, sender)
        )
        worker.start()
        pipes.append(receiver)
        workers.append(worker)
    results = [pipe.recv() for pipe in pipes]
    for worker in workers:
        worker.join()
    count = sum(r[0] for r in results)
    ordered = sorted(latency for r in results for latency in r[2])
    return {
        "requests": count,
        "errors": sum(r[1] for r in results),
        "rps": round(count / seconds) if seconds > 0 else None,
        "p50_ms": round(ordered[len(ordered) // 2] * 1000, 2) if ordered else None,
        "p99_ms": round(ordered[int(len(ordered) * 0.99)] * 1000, 2) if ordered else None,
        "load_processes": processes,
    }


def _server_cpu_s(server: subprocess.Popen[bytes]) -> float | None:
    """CPU seconds used so far by the server and its workers (None once it is gone)."""
    try:
        return process_facts.tree_cpu_s(server.pid)
    except psutil.Error:
        return None


def time_pages(port: int) -> dict[str, dict[str, float]]:
    """Log in, then time each console page sequentially."""
    base = f"http://127.0.0.1:{port}"
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(f"{base}/accounts/login/").read()
    csrf = next(c.value for c in jar if c.name == "csrftoken")
    form = urllib.parse.urlencode(
        {"username": "bench", "password": PASSWORD, "csrfmiddlewaretoken": csrf}
    ).encode()
    opener.open(
        urllib.request.Request(
            f"{base}/accounts/login/", form, headers={"Referer": f"{base}/accounts/login/"}
        )
    ).read()
    results = {}
    for url in (
        "/topology/",
        "/topology/?page=10",
        "/topics/",
        "/topics/?page=100",
        "/topics/?search=BenchTopic09",
    ):
        samples = []
        for _ in range(PAGE_SAMPLES):
            started = time.perf_counter()
            body = opener.open(f"{base}{url}").read()
            samples.append((time.perf_counter() - started) * 1000)
        assert b"<table" in body, url
        ordered = sorted(samples)
        results[url] = {
            "median_ms": round(statistics.median(samples), 1),
            "p95_ms": round(ordered[int(len(ordered) * 0.95)], 1),
        }
    return results


def _measure_routes(
    server: subprocess.Popen[bytes], load: tuple[int, str, int], seconds: float, spread: Any
) -> dict[str, Any]:
    """A timed random-topic run with the server's CPU per answer."""
    cpu_before = _server_cpu_s(server)
    routes = load_routes(*load, seconds, *spread)
    cpu_after = _server_cpu_s(server)
    if cpu_before is not None and cpu_after is not None and routes["requests"]:
        # On a shared box the workers get a fraction of the cores; the CPU each
        # answer costs says what an idle box would sustain.
        cpu_ms = (cpu_after - cpu_before) * 1000 / routes["requests"]
        routes["server_cpu_ms_per_request"] = round(cpu_ms, 3)
    return routes


def _load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def main() -> int:
    """Build, serve, load, report."""
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--brokers", type=int, default=1000, help="broker replicas in the projection"
    )
    parser.add_argument("--topics", type=int, default=10_000, help="topics in the projection")
    parser.add_argument(
        "--seconds", type=float, default=10.0, help="the timed run of random topics"
    )
    parser.add_argument(
        "--connections", type=int, default=32, help="keep-alive connections of the load"
    )
    parser.add_argument("--workers", type=int, default=2, help="web worker processes")
    parser.add_argument(
        "--load-processes", type=int, default=2, help="processes the connections are spread over"
    )
    parser.add_argument(
        "--warm-passes",
        type=int,
        default=4,
        help="ordered passes over every topic before the timed run (each worker's cache)",
    )
    parser.add_argument(
        "--server",
        choices=("uvicorn", "daphne"),
        default="uvicorn",
        help="uvicorn: the launcher's web command (ships); daphne: one daphne process",
    )
    parser.add_argument(
        "--http",
        choices=("httptools", "h11"),
        default="httptools",
        help="uvicorn's HTTP parser (h11: the pure-Python one)",
    )
    parser.add_argument(
        "--baseline-seconds",
        type=float,
        default=5.0,
        help="timed run of the DRF view alone on the same server command (0: skip)",
    )
    parser.add_argument("--skip-pages", action="store_true", help="no console page timings")
    args = parser.parse_args()
    if min(args.seconds, args.workers, args.connections, args.load_processes, args.topics) <= 0:
        parser.error("--seconds, --workers, --connections, --load-processes, --topics must be > 0")
    if args.server == "daphne" and (args.workers != 1 or args.http != "httptools"):
        parser.error(
            "--server daphne runs one process with its own HTTP stack: use --workers 1, no --http"
        )
    from localcluster.launcher import free_port

    load_at_start = _load_average()
    with tempfile.TemporaryDirectory() as folder:
        db_path = Path(folder) / "bench.sqlite3"
        started = time.monotonic()
        token = build_db(db_path, args.brokers, args.topics)
        print(
            f"built {args.brokers} brokers / {args.topics} topics "
            f"in {time.monotonic() - started:.1f} s"
        )
        port = free_port()
        argv = server_argv(port, args.workers, args.server, args.http, baseline=False)
        print("server:", " ".join(argv[1:]))
        load = (port, token, args.topics)
        spread = (args.connections, args.load_processes)
        server = start_server(db_path, argv, port)
        try:
            # Cold: one pass over every topic, in order; each worker misses and
            # reads the projection for the topics it is handed.
            started = time.monotonic()
            cold = load_routes(*load, 0, *spread)
            cold["rps"] = round(cold["requests"] / (time.monotonic() - started))
            for _ in range(args.warm_passes):
                load_routes(*load, 0, *spread)
            routes = _measure_routes(server, load, args.seconds, spread)
            # Printed before the pages run, so a page failure loses no numbers.
            print(json.dumps({"route_endpoint_cold_pass": cold, "route_endpoint": routes}))
            pages = {} if args.skip_pages else time_pages(port)
        finally:
            stop_server(server)
        baseline = None
        if args.baseline_seconds > 0 and args.server == "uvicorn":
            port = free_port()
            argv = server_argv(port, args.workers, args.server, args.http, baseline=True)
            load = (port, token, args.topics)
            server = start_server(db_path, argv, port)
            try:
                baseline = _measure_routes(server, load, args.baseline_seconds, spread)
            finally:
                stop_server(server)
    report: dict[str, Any] = {
        "route_endpoint_cold_pass": {"requests": cold["requests"], "rps": cold["rps"]},
        "route_endpoint": {
            **routes,
            "warm_passes": args.warm_passes,
            "server": args.server,
            "workers": args.workers if args.server == "uvicorn" else 1,
            "http": args.http if args.server == "uvicorn" else "daphne (twisted)",
            "connections": args.connections,
            "target_rps": ROUTE_TARGET_RPS,
            "target_met": routes["rps"] >= ROUTE_TARGET_RPS,
        },
        "pages": pages,
        "page_target_ms": PAGE_TARGET_MS,
        "load_average_at_start": load_at_start,
        "load_average_at_end": _load_average(),
    }
    if baseline is not None:
        report["baseline_drf_view"] = baseline
        if baseline["rps"]:
            report["fast_path_rps_over_drf_view_rps"] = round(routes["rps"] / baseline["rps"], 2)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
