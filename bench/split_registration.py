"""Split registrations: what a 50,000-topic broker's registration costs, against a
1,000-topic broker's measured in the same run.

broker_app's own Registrar registers with real gateway processes (one eventual
node; three raft nodes, where every node registers the merged table as one Raft
entry). The large broker splits its table at upstream's 800 topics per part; the
baseline broker's table goes whole. Each size is timed in two rounds kinds:

* ``changed``: a new DataVersion with one topic fewer, so every node rewrites the
  broker's topics (what a topic deletion costs);
* ``same``: the same table again (the periodic forced round).

Printed per mode and kind: the median wall time of a round as the broker sees it
(encoding, every part to every node, the last part's answer), the gateways' CPU per
round, the ratio of the large broker's time to the baseline's, beside the ratio of
their topic counts (50: time growing no faster than the table), and the Raft terms
that began during the run (0: no election).

Run: ``.venv/bin/python -m bench.split_registration [--modes eventual,raft]
[--topics 50000] [--baseline-topics 1000] [--rounds 5]``.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench import _util, storm
from broker_app.registration import BrokerIdentity, Registrar
from remoting.client import RemotingClient
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from tools.cli import ExactArgumentParser

SPLIT_SIZE = 800
NEVER_COMPRESS = 1 << 40
KINDS = ("changed", "same")


def _table(prefix: str, count: int, counter: int) -> TopicConfigSerializeWrapper:
    """``count`` topics named ``prefix``-N (the first ``counter - 1`` dropped, so each
    new counter is a table with one topic fewer) at DataVersion ``counter``."""
    names = [f"{prefix}{i:06d}" for i in range(counter - 1, count)]
    return TopicConfigSerializeWrapper(
        data_version=DataVersion(1_700_000_000_000 + counter, 1_700_000_000_000, counter),
        topic_config_table={n: TopicConfig(n, 8, 8) for n in names},
    )


async def _rounds(
    addrs: Sequence[str], gateways: list[_util.BenchGateway], topics: int, rounds: int, tag: str
) -> dict[str, tuple[float, float]]:
    """Per kind: (median ms per round, gateways' CPU ms per round)."""
    identity = BrokerIdentity(
        "BenchCluster", f"broker-{tag}", 0, f"127.0.0.1:{_util.free_port()}", "127.0.0.1:1"
    )
    current = [_table(f"{tag}Topic", topics, 1)]
    client = RemotingClient()
    registrar = Registrar(
        client,
        tuple(addrs),
        lambda: identity,
        lambda: current[0],
        timeout_s=120.0,
        compress_over_bytes=NEVER_COMPRESS,
        split_size=SPLIT_SIZE,
    )
    try:
        first = await registrar.register_all(force=True)
        assert all(r.ok for r in first), first
        figures: dict[str, tuple[float, float]] = {}
        for kind in KINDS:
            walls: list[float] = []
            cpu_before = sum(_util.process_cpu_s(g.proc.pid) for g in gateways)
            for index in range(rounds):
                if kind == "changed":
                    current[0] = _table(f"{tag}Topic", topics, index + 2)
                started = time.perf_counter()
                results = await registrar.register_all(force=True)
                walls.append(time.perf_counter() - started)
                assert all(r.ok for r in results), results
            cpu = sum(_util.process_cpu_s(g.proc.pid) for g in gateways) - cpu_before
            figures[kind] = (statistics.median(walls) * 1000, cpu / rounds * 1000)
        await registrar.unregister_all()
        return figures
    finally:
        await client.close()


def run_mode(mode: str, topics: int, baseline_topics: int, rounds: int) -> list[list[object]]:
    """The table rows of one mode."""
    with tempfile.TemporaryDirectory(prefix=f"bench-split-{mode}-") as folder:
        gateways = _util.start_gateways(
            Path(folder),
            mode,
            nodes=1 if mode == "eventual" else 3,
            env={"NAMESRV_INTERNAL_SECRET": storm.INTERNAL_SECRET},
        )
        try:
            addrs = [g.addr for g in gateways]
            if mode == "raft":
                time.sleep(3.0)  # a leader elected before the first proposal
            before = asyncio.run(storm.terms(gateways))
            base = asyncio.run(_rounds(addrs, gateways, baseline_topics, rounds, "base"))
            large = asyncio.run(_rounds(addrs, gateways, topics, rounds, "large"))
            after = asyncio.run(storm.terms(gateways))
            term_changes = max(after[n] - before[n] for n in before)
        finally:
            for gateway in gateways:
                gateway.proc.terminate()
                gateway.proc.wait()
    rows: list[list[object]] = []
    for kind in KINDS:
        (base_ms, base_cpu), (large_ms, large_cpu) = base[kind], large[kind]
        rows.append(
            [
                mode,
                kind,
                f"{base_ms:.1f}",
                f"{base_cpu:.1f}",
                f"{large_ms:.1f}",
                f"{large_cpu:.1f}",
                f"{large_ms / base_ms:.1f}",
                f"{topics / baseline_topics:.0f}",
                term_changes,
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = ExactArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="eventual,raft", help="comma-separated modes")
    parser.add_argument("--topics", type=int, default=50_000, help="the large broker's topics")
    parser.add_argument(
        "--baseline-topics", type=int, default=1_000, help="the baseline broker's topics"
    )
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per kind")
    args = parser.parse_args(argv)
    rows: list[list[object]] = []
    for mode in args.modes.split(","):
        rows += run_mode(mode, args.topics, args.baseline_topics, args.rounds)
    _util.print_table(
        f"split registration: {args.topics} topics in parts of {SPLIT_SIZE} against "
        f"{args.baseline_topics} whole ({args.rounds} rounds each; {_util.machine_notes()})",
        [
            "mode",
            "round",
            f"{args.baseline_topics} ms/round",
            "gateway CPU ms",
            f"{args.topics} ms/round",
            "gateway CPU ms",
            "time ratio",
            "topic ratio",
            "term changes",
        ],
        rows,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
