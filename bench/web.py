"""Benchmark of the web side: the REST route endpoint and the two heavy console pages.

    .venv/bin/python bench/web.py [--brokers 1000] [--topics 10000] [--seconds 10]
        [--connections 32] [--workers 2]

1. Builds a projection DB of ``--brokers`` broker replicas (masters + slaves,
   half as many groups) and ``--topics`` topics (each on two groups) through the
   real route table and the projection's own writer, plus an operator with a token.
2. Starts ``uvicorn --workers N`` on the ASGI app over that DB.
3. Load: ``--connections`` keep-alive HTTP/1.1 connections (asyncio, in this
   process) ask GET /api/v1/routes/<random topic>/ with the token for
   ``--seconds``; prints requests/s and latency percentiles.
4. Pages: logs in and times /topology/ and /topics/ (first, middle and a
   searched page) sequentially; prints the median and p95 per page.
"""

from __future__ import annotations

import argparse
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
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
CLUSTER = "BenchCluster"
START_MS = 1_700_000_000_000
PAGE_SAMPLES = 15
READY_TIMEOUT_S = 60.0
ROUTE_TARGET_RPS = 1500
PAGE_TARGET_MS = 300
PASSWORD = "bench-password-not-secret"


def _env(db_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "namesrv_site.settings",
        "NAMESRV_DB_PATH": str(db_path),
        "NAMESRV_DEBUG": "false",
        "DJANGO_SECRET_KEY": "bench-only",
        "NAMESRV_INTERNAL_SECRET": "bench",
        "NAMESRV_LOG_LEVEL": "WARNING",
        "NAMESRV_PORT": "1",
        "NAMESRV_INTERNAL_PORT": "1",
        "PYTHONPATH": str(REPO_ROOT),
    }


def build_db(db_path: Path, brokers: int, topics: int) -> str:
    """Migrate, project the fleet, create the operator; the API token."""
    os.environ.update(_env(db_path))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    from django.contrib.auth.models import Group, User
    from rest_framework.authtoken.models import Token

    from namesrv_app.clock import ManualClock
    from namesrv_app.projection import read_full_state, write_full_state
    from namesrv_app.services import NameServerService
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
                    cluster_name=CLUSTER,
                    broker_addr=f"10.0.{group // 250}.{group % 250}:{port}",
                    broker_name=f"bench-broker-{group:04d}",
                    broker_id=broker_id,
                    ha_server_addr=f"10.0.{group // 250}.{group % 250}:{port + 1}",
                    topic_config_wrapper=wrapper,
                    channel=f"c{group}-{broker_id}",
                )

    asyncio.run(register())
    write_full_state(replicator.read(read_full_state), "n1", "eventual")
    user = User.objects.create_user("bench", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name="operator")[0])
    return str(Token.objects.create(user=user).key)


def start_server(db_path: Path, port: int, workers: int) -> subprocess.Popen[bytes]:
    """uvicorn with N worker processes on the project's ASGI app."""
    argv = [
        sys.executable,
        "-m",
        "uvicorn",
        "namesrv_site.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=_env(db_path))
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/schema/", timeout=2).read()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("uvicorn did not start")


async def _connection_loop(
    port: int, token: str, topics: int, stop_at: float, latencies: list[float], errors: list[int]
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.monotonic() < stop_at:
            topic = f"BenchTopic{random.randrange(topics):05d}"
            request = (
                f"GET /api/v1/routes/{topic}/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Token {token}\r\nAccept: application/json\r\n\r\n"
            )
            started = time.perf_counter()
            writer.write(request.encode())
            status_line = await reader.readline()
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - started)
            if b" 200 " not in status_line:
                errors.append(1)
    finally:
        writer.close()


def load_routes(
    port: int, token: str, topics: int, seconds: float, connections: int
) -> dict[str, Any]:
    """Keep-alive load on the route endpoint; throughput and latency."""
    latencies: list[float] = []
    errors: list[int] = []

    async def run() -> None:
        stop_at = time.monotonic() + seconds
        await asyncio.gather(
            *(
                _connection_loop(port, token, topics, stop_at, latencies, errors)
                for _ in range(connections)
            )
        )

    started = time.monotonic()
    asyncio.run(run())
    elapsed = time.monotonic() - started
    ordered = sorted(latencies)
    return {
        "requests": len(latencies),
        "errors": len(errors),
        "rps": round(len(latencies) / elapsed),
        "p50_ms": round(ordered[len(ordered) // 2] * 1000, 1),
        "p99_ms": round(ordered[int(len(ordered) * 0.99)] * 1000, 1),
    }


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


def main() -> int:
    """Build, serve, load, report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db_path = Path(folder) / "bench.sqlite3"
        started = time.monotonic()
        token = build_db(db_path, args.brokers, args.topics)
        print(
            f"built {args.brokers} brokers / {args.topics} topics "
            f"in {time.monotonic() - started:.1f} s"
        )
        from namesrv_app.launcher import free_port

        port = free_port()
        server = start_server(db_path, port, args.workers)
        try:
            load_routes(port, token, args.topics, 1.0, args.connections)  # warm-up
            routes = load_routes(port, token, args.topics, args.seconds, args.connections)
            pages = time_pages(port)
        finally:
            server.terminate()
            server.wait(20)
    report = {
        "route_endpoint": {**routes, "workers": args.workers, "target_rps": ROUTE_TARGET_RPS},
        "pages": pages,
        "page_target_ms": PAGE_TARGET_MS,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
