"""A REST route read's cost in the web process, in-process, with no server or socket:

    .venv/bin/python -m bench.route_reads [--requests 20000] [--repeats 7]

The site's HTTP application (namesrv_app.api.route_reads.RouteReads) answers a held
``GET /api/v1/routes/<topic>/`` beside Django; the baseline, in the same run, is the same
request answered by Django's own ASGI application (its handler, the middleware stack and
the DRF view). Both are driven as uvicorn drives them, one ASGI call per request, over a
projection of the demo cast in a throw-away SQLite folder. Prints µs per request (the
fastest batch of ``--repeats``, and the median) and the ratio.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._util import web_env
from remoting.register_request import BrokerRegistration
from tools.cli import ExactArgumentParser

TOPIC = "TopicTest"
ROUTE = f"/api/v1/routes/{TOPIC}/"


def _setup(folder: Path) -> bytes:
    """Django over a fresh database in ``folder``, the cast projected; a viewer's token."""
    os.environ.update(web_env(folder))
    (folder / "static").mkdir()
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command

    from bench._util import CLUSTER, broker_addr, broker_name, topic_wrapper
    from gateway.clock import ManualClock
    from gateway.services import NameServerService
    from namesrv_app.projection.delta import read_full_state
    from namesrv_app.projection.rows import write_full_state
    from namesrv_app.tokens import issue_token
    from raftstore.replicator import LocalReplicator

    for database in ("default", "projection"):
        call_command("migrate", interactive=False, verbosity=0, database=database)
    # The timed reads are all held: the stamp must not go stale in the middle of a batch.
    settings.NAMESRV_WEB = {**settings.NAMESRV_WEB, "ROUTE_VERSION_TTL_MS": 10**9}
    replicator = LocalReplicator("n1")
    service = NameServerService(replicator, ManualClock(1_700_000_000_000))

    async def register() -> None:
        # Two broker groups serving the read topic, as a producer's topic usually is.
        for index in range(2):
            await service.register_broker(
                BrokerRegistration(
                    cluster_name=CLUSTER,
                    broker_addr=broker_addr(index),
                    broker_name=broker_name(index),
                    broker_id=0,
                ),
                topic_wrapper([TOPIC, f"{TOPIC}-{index}"]),
            )

    asyncio.run(register())
    write_full_state(replicator.read(read_full_state), "n1", "eventual")
    user = User.objects.create_user("bench", password="bench-only-password")
    user.groups.add(Group.objects.get_or_create(name="viewer")[0])
    token: bytes = issue_token(user)[0].encode()
    return token


def _scope(token: bytes) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": ROUTE,
        "raw_path": ROUTE.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"authorization", b"Token " + token),
            (b"accept", b"application/json"),
        ],
        "client": ("127.0.0.1", 50_000),
        "server": ("127.0.0.1", 80),
    }


def _timer(app: Callable[..., Any], scope: dict[str, Any]) -> Callable[[int], float]:
    """A function that sends ``n`` requests to ``app`` and returns µs per request."""
    statuses: list[int] = []
    asked: list[bool] = []

    async def receive() -> dict[str, Any]:
        if not asked:
            asked.append(True)
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # no disconnect while the answer is written
        return {}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async def run(n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            asked.clear()
            await app(scope, receive, send)
        return (time.perf_counter() - started) / n * 1e6

    def timed(n: int) -> float:
        us = asyncio.run(run(n))
        if set(statuses) != {200}:
            raise SystemExit(f"a route read was not answered 200: {sorted(set(statuses))}")
        statuses.clear()
        return us

    return timed


def main(argv: list[str] | None = None) -> int:
    parser = ExactArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000, help="requests per timed batch")
    parser.add_argument("--repeats", type=int, default=7, help="timed batches of each")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        token = _setup(Path(folder))
        from namesrv_site.asgi import application, django_application

        scope = _scope(token)
        beside, django = _timer(application, scope), _timer(django_application, scope)
        beside(10)  # the Host's headers learnt, the grant, stamp and route held
        django(10)
        # Django answers about a thousand times slower: shorter batches, the same repeats.
        baseline_n = max(1, args.requests // 200)
        ours = [beside(args.requests) for _ in range(args.repeats)]
        theirs = [django(baseline_n) for _ in range(args.repeats)]
    report = {
        "route_read_beside_django_us": {
            "best": round(min(ours), 2),
            "median": round(statistics.median(ours), 2),
        },
        "baseline_django_view_us": {
            "best": round(min(theirs), 1),
            "median": round(statistics.median(theirs), 1),
        },
        "django_over_beside_ratio": round(min(theirs) / min(ours), 1),
        "requests_per_batch": args.requests,
        "baseline_requests_per_batch": baseline_n,
        "repeats": args.repeats,
        "python": sys.version.split()[0],
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
