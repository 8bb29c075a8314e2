"""Benchmark: what TLS costs on a node's remoting port, against plain text in the same run.

One gateway process with its read front serves a permissive port (``tls.server.mode=
permissive``, certificates from a CA made for the run), so TLS and plain clients reach the
same process and the same table:

1. route queries: N connections, each with one request in flight, ask GET_ROUTEINFO_BY_TOPIC
   over every topic, in alternating rounds of plain and TLS connections; the median of
   the per-round ratios (TLS / plain) is the figure (answers per second, p50, p99);
2. registrations: N connections register brokers of 100 topics each as fast as they are
   answered, plain and TLS in alternating rounds. A plain broker connection is handed
   from the front to the gateway; a TLS one cannot be (its session lives in the front),
   so the front relays it: this is the cost that ratio shows.

Connections are opened before each round's clock starts (the handshake is not measured;
brokers and clients keep their connections for hours).

Run: ``.venv/bin/python -m bench.tls [--connections 16] [--rounds 3] [--round-s 3]``.
"""

from __future__ import annotations

import asyncio
import ssl
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import _util
from localcluster.tls_files import ensure_run_tls
from remoting.client import RemotingClient
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.tls import ClientTls, ClientTlsChoice, TlsClientConfig, client_context
from tools.cli import ExactArgumentParser

BROKERS = 200
TOPICS = 2_000
TOPICS_PER_BROKER = 20
REGISTER_TOPICS = 100
INVOKE_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Round:
    """One round of one kind of connection."""

    kind: str
    ops_per_s: float
    p50_ms: float
    p99_ms: float


async def _clients(count: int, addr: str, tls: ClientTlsChoice) -> list[RemotingClient]:
    clients = [RemotingClient(tls=tls, connect_timeout_s=10.0) for _ in range(count)]
    # Connect (and shake hands) before the clock starts.
    await asyncio.gather(
        *(c.invoke(addr, _util.route_request(_util.topic_name(0))) for c in clients)
    )
    return clients


async def _drive(
    clients: Sequence[RemotingClient],
    addr: str,
    requests: Sequence[RemotingCommand],
    seconds: float,
) -> tuple[int, list[float]]:
    """Each client sends the requests in turn, one in flight, for ``seconds``."""
    latencies: list[float] = []
    stop_s = time.perf_counter() + seconds

    async def one(index: int, client: RemotingClient) -> None:
        position = index
        while time.perf_counter() < stop_s:
            started = time.perf_counter()
            answer = await client.invoke(addr, requests[position % len(requests)], INVOKE_TIMEOUT_S)
            latencies.append(time.perf_counter() - started)
            if answer.code not in (ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST):
                raise RuntimeError(f"answer {answer.code}: {answer.remark}")
            position += len(clients)

    await asyncio.gather(*(one(i, c) for i, c in enumerate(clients)))
    return len(latencies), latencies


async def _round(
    kind: str,
    tls: ClientTlsChoice,
    addr: str,
    connections: int,
    requests: Sequence[RemotingCommand],
    seconds: float,
) -> Round:
    clients = await _clients(connections, addr, tls)
    try:
        count, latencies = await _drive(clients, addr, requests, seconds)
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    return Round(
        kind,
        count / seconds,
        1000 * _util.percentile(latencies, 0.5),
        1000 * _util.percentile(latencies, 0.99),
    )


async def _phase(
    addr: str,
    tls: ssl.SSLContext,
    connections: int,
    rounds: int,
    seconds: float,
    requests: Sequence[RemotingCommand],
) -> list[tuple[Round, Round]]:
    pairs = []
    for _ in range(rounds):
        plain = await _round("plain", ClientTls.PLAIN, addr, connections, requests, seconds)
        secure = await _round("tls", tls, addr, connections, requests, seconds)
        pairs.append((plain, secure))
    return pairs


def _register_requests(counter: int) -> list[RemotingCommand]:
    requests = []
    for index in range(BROKERS):
        topics = _util.broker_topics(index, REGISTER_TOPICS, TOPICS)
        requests.append(_util.register_request(index, _util.topic_wrapper(topics, counter)))
    return requests


async def _setup(addr: str) -> None:
    client = RemotingClient(tls=ClientTls.PLAIN)
    try:
        for index in range(BROKERS):
            topics = _util.broker_topics(index, TOPICS_PER_BROKER, TOPICS)
            wrapper = _util.topic_wrapper(topics)
            answer = await client.invoke(addr, _util.register_request(index, wrapper), 30.0)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
    finally:
        await client.close()


def _report(title: str, unit: str, pairs: list[tuple[Round, Round]]) -> None:
    rows = []
    for number, (plain, secure) in enumerate(pairs, 1):
        for result in (plain, secure):
            rows.append(
                (
                    number,
                    result.kind,
                    f"{result.ops_per_s:,.0f}",
                    f"{result.p50_ms:.2f}",
                    f"{result.p99_ms:.2f}",
                )
            )
    _util.print_table(title, ("round", "connections", unit, "p50 ms", "p99 ms"), rows)
    ratios = [secure.ops_per_s / plain.ops_per_s for plain, secure in pairs]
    print(
        f"  TLS / plain {unit}: median {_util.median(ratios):.2f} "
        f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)})\n"
    )


async def run(root: Path, connections: int, rounds: int, seconds: float) -> None:
    run_tls = ensure_run_tls(root, {"n1": ()})
    properties = root / "tls.properties"
    node = run_tls.nodes["n1"]
    properties.write_text(
        f"tls.server.mode=permissive\ntls.server.certPath={node.cert}\n"
        f"tls.server.keyPath={node.key}\n",
        encoding="utf-8",
    )
    args = ("--read-front", "--tls-config", str(properties))
    (gateway,) = _util.start_gateways(root, "eventual", nodes=1, args=args)
    try:
        await _setup(gateway.addr)
        tls = client_context(TlsClientConfig(enabled=True, trust_cert_path=run_tls.ca.cert))
        queries = [_util.route_request(_util.topic_name(i)) for i in range(TOPICS)]
        _report(
            "Route queries (one in flight per connection)",
            "answers/s",
            await _phase(gateway.addr, tls, connections, rounds, seconds, queries),
        )
        # A new DataVersion once, then the same table again: what brokers send every 30 s.
        registrations = _register_requests(counter=2)
        registered = await _phase(gateway.addr, tls, connections, rounds, seconds, registrations)
        _report(f"Registrations of {REGISTER_TOPICS} topics", "registrations/s", registered)
    finally:
        gateway.proc.terminate()
        gateway.proc.wait()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its tables."""
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=16, help="connections per round")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of each kind, plain and TLS alternating"
    )
    parser.add_argument("--round-s", type=float, default=3.0, help="seconds each round runs")
    args = parser.parse_args(argv)
    print(_util.machine_notes())
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as folder:
        asyncio.run(run(Path(folder), args.connections, args.rounds, args.round_s))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
