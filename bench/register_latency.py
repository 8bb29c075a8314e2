"""A broker's changed registration, one at a time on one connection: how long until
it is acknowledged, in each mode and on each kind of node.

Three real gateways per mode (``manage.py run_gateway``, each with its own projection
and, in raft mode, its own fsync'd journal). A broker of ``--topics`` topics sends
REGISTER_BROKER with its DataVersion bumped each time (a real change, decoded and
logged), the next one after the answer, ``--count`` times, after ``WARMUP`` unmeasured
ones:

* eventual mode, to n1: the baseline;
* raft mode, to the leader only;
* raft mode, to one follower only, from another broker: a broker that reaches only
  that node, so the leader's copy of its registration never comes; the follower waits
  for it (``raftstore.liveness.RegistrationDeduper.wait_s``) and then proposes its own;
* raft mode, to all three nodes at once, as brokers send (acknowledged when all three
  answered), with the log entries each registration cost: 1 when the followers
  answered from the leader's copy, up to 3 when they did not see it in time;
* raft mode under overload: ``bench.storm``'s "alone" load (``OVERLOAD_IN_FLIGHT``
  registrations in flight from 300 brokers of 100 topics, each to all three nodes) for
  ``--overload-s`` seconds, with the copies the three nodes proposed for each
  acknowledged registration (1.00: every follower found the leader's copy in time;
  from the nodes' Prometheus counters);
* raft mode's floor in the same run: a light commit, PUT_KV_CONFIG of a 16-byte value on
  the leader, one at a time (a write that never waits for company in its log entry).

Targets (issue 49): the leader's changed registration within 2x a light commit (p50),
and a follower that gets no leader's copy proposing its own within 20 ms, read here as
the follower's p50 less the leader's.

Run: ``.venv/bin/python -m bench.register_latency [--count 200] [--topics 20]``.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import _util, storm
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tools.cli import ExactArgumentParser

WARMUP = 20
REQUEST_TIMEOUT_S = 10.0
LEADER_TIMEOUT_S = 30.0
LEADER_BROKER = 100
FOLLOWER_BROKER = 200
EVENTUAL_BROKER = 300
EVERYWHERE_BROKER = 400
OVERLOAD_IN_FLIGHT = 256
OVERLOAD_BROKERS = 300
OVERLOAD_TOPICS = 100
PROPOSED_SAMPLE = 'namesrv_raft_registrations_total{outcome="proposed"}'
TARGET_LEADER_RATIO = 2.0
TARGET_FOLLOWER_WAIT_MS = 20.0
_MS = 1000.0


def registrations(index: int, topics: int, count: int) -> list[RemotingCommand]:
    """Broker ``index``'s REGISTER_BROKER with DataVersion counters 1..count, encoded
    before anything is timed."""
    names = [f"Latency{index}Topic{j:03d}" for j in range(topics)]
    return [
        _util.register_request(index, _util.topic_wrapper(names, counter=counter))
        for counter in range(1, count + 1)
    ]


async def acknowledged_ms(addr: str, requests: Sequence[RemotingCommand]) -> list[float]:
    """Send ``requests`` one at a time on one connection; each one's ms until SUCCESS."""
    client = RemotingClient()
    took: list[float] = []
    try:
        for request in requests:
            started = time.perf_counter()
            answer = await client.invoke(addr, request, REQUEST_TIMEOUT_S)
            elapsed = time.perf_counter() - started
            if answer.code != ResponseCode.SUCCESS:
                raise SystemExit(f"{addr} answered {answer.code}: {answer.remark}")
            took.append(elapsed * _MS)
    finally:
        await client.close()
    return took


async def acknowledged_everywhere_ms(
    addrs: Sequence[str], requests: Sequence[RemotingCommand]
) -> list[float]:
    """Send each of ``requests`` to every address at once, one request after the other;
    each one's ms until every address answered SUCCESS."""
    client = RemotingClient()
    took: list[float] = []
    try:
        for request in requests:
            started = time.perf_counter()
            answers = await asyncio.gather(
                *(client.invoke(addr, request, REQUEST_TIMEOUT_S) for addr in addrs)
            )
            elapsed = time.perf_counter() - started
            refused = [a for a in answers if a.code != ResponseCode.SUCCESS]
            if refused:
                raise SystemExit(f"answered {refused[0].code}: {refused[0].remark}")
            took.append(elapsed * _MS)
    finally:
        await client.close()
    return took


def kv_puts(count: int) -> list[RemotingCommand]:
    """PUT_KV_CONFIG of a 16-byte value, ``count`` times."""
    return [
        RemotingCommand.request(
            RequestCode.PUT_KV_CONFIG,
            {"namespace": "bench", "key": f"k{i % 8}", "value": f"{i:016d}"},
        )
        for i in range(count)
    ]


async def roles(gateways: Sequence[_util.BenchGateway]) -> dict[str, str]:
    """Each node's Raft state (``leader``, ``follower``...), once one leads."""
    deadline = time.monotonic() + LEADER_TIMEOUT_S
    while True:
        found = {node: str(s.get("state")) for node, s in (await storm.statuses(gateways)).items()}
        if "leader" in found.values():
            return found
        if time.monotonic() > deadline:
            raise SystemExit(f"no leader within {LEADER_TIMEOUT_S} s: {found}")
        await asyncio.sleep(0.2)


async def commit_index(gateway: _util.BenchGateway) -> int:
    """``gateway``'s Raft commit index."""
    return int((await storm.statuses([gateway]))[gateway.node_id]["commit_index"])


def proposed_copies(gateways: Sequence[_util.BenchGateway]) -> float:
    """REGISTER_BROKER copies the nodes proposed so far, from their metrics ports."""
    total = 0.0
    for gateway in gateways:
        url = f"http://127.0.0.1:{gateway.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            text = answer.read().decode()
        for line in text.splitlines():
            if line.startswith(PROPOSED_SAMPLE):
                total += float(line.rsplit(" ", 1)[1])
    return total


def overload(gateways: Sequence[_util.BenchGateway], seconds: float) -> dict[str, float]:
    """``bench.storm``'s closed-loop load on every node; acknowledged/s, p50 and the
    copies proposed per acknowledged registration."""
    before = proposed_copies(gateways)
    result = asyncio.run(
        storm.registrar(
            [g.addr for g in gateways],
            OVERLOAD_BROKERS,
            OVERLOAD_TOPICS,
            0.0,
            OVERLOAD_IN_FLIGHT,
            seconds,
        )
    )
    time.sleep(1.0)  # the last answers' counters
    copies = proposed_copies(gateways) - before
    return {
        "p50_ms": result.p50_ms,
        "p90_ms": float("nan"),
        "n": float(result.acknowledged),
        "acked_per_s": result.acked_per_s,
        "entries_per_registration": copies / max(1, result.acknowledged),
    }


def summary(took: Sequence[float]) -> dict[str, float]:
    measured = list(took[WARMUP:])
    return {
        "p50_ms": _util.percentile(measured, 0.5),
        "p90_ms": _util.percentile(measured, 0.9),
        "n": float(len(measured)),
    }


def run_mode(mode: str, args: Any) -> dict[str, dict[str, float]]:
    total = WARMUP + args.count
    with tempfile.TemporaryDirectory(prefix=f"bench-reglat-{mode}-") as folder:
        # --no-acl: the light commit is an admin code; the gateways listen on loopback.
        gateways = _util.start_gateways(
            Path(folder),
            mode,
            args=("--no-acl",),
            env={"NAMESRV_INTERNAL_SECRET": storm.INTERNAL_SECRET},
            metrics=mode == "raft",
        )
        try:
            by_id = {g.node_id: g for g in gateways}
            if mode == "eventual":
                took = asyncio.run(
                    acknowledged_ms(
                        by_id["n1"].addr, registrations(EVENTUAL_BROKER, args.topics, total)
                    )
                )
                return {"registration (n1)": summary(took)}
            found = asyncio.run(roles(gateways))
            leader = next(by_id[n] for n, state in found.items() if state == "leader")
            follower = next(by_id[n] for n, state in found.items() if state != "leader")
            light = asyncio.run(acknowledged_ms(leader.addr, kv_puts(total)))
            on_leader = asyncio.run(
                acknowledged_ms(leader.addr, registrations(LEADER_BROKER, args.topics, total))
            )
            on_follower = asyncio.run(
                acknowledged_ms(follower.addr, registrations(FOLLOWER_BROKER, args.topics, total))
            )
            before = asyncio.run(commit_index(leader))
            everywhere = asyncio.run(
                acknowledged_everywhere_ms(
                    [g.addr for g in gateways], registrations(EVERYWHERE_BROKER, args.topics, total)
                )
            )
            entries = asyncio.run(commit_index(leader)) - before
            loaded = overload(gateways, args.overload_s)
            return {
                "light commit (leader)": summary(light),
                "registration (leader)": summary(on_leader),
                "registration (follower, no leader copy)": summary(on_follower),
                "registration (all three nodes)": {
                    **summary(everywhere),
                    "entries_per_registration": entries / total,
                },
                f"overload, {OVERLOAD_IN_FLIGHT} in flight to all three": loaded,
            }
        finally:
            for gateway in gateways:
                gateway.proc.terminate()
            for gateway in gateways:
                gateway.proc.wait(30)


def main(argv: list[str] | None = None) -> None:
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--count", type=int, default=200, help="measured requests per row (default 200)"
    )
    parser.add_argument("--topics", type=int, default=20, help="topics of each broker (default 20)")
    parser.add_argument(
        "--modes", default="eventual,raft", help="comma-separated modes (default eventual,raft)"
    )
    parser.add_argument(
        "--overload-s", type=float, default=10.0, help="seconds of the overload row (default 10)"
    )
    args = parser.parse_args(argv)
    print(_util.machine_notes())
    rows: dict[str, dict[str, float]] = {}
    for mode in args.modes.split(","):
        for name, figures in run_mode(mode, args).items():
            rows[f"{mode}: {name}"] = figures
    _util.print_table(
        f"changed registrations of {args.topics} topics, one at a time, after {WARMUP} unmeasured",
        (
            "row",
            "p50 ms",
            "p90 ms",
            "acknowledged",
            "log entries (overload: copies) each",
        ),
        [
            (
                name,
                f"{f['p50_ms']:.2f}",
                f"{f['p90_ms']:.2f}" if f["p90_ms"] == f["p90_ms"] else "-",
                int(f["n"]),
                f"{f['entries_per_registration']:.2f}" if "entries_per_registration" in f else "-",
            )
            for name, f in rows.items()
        ],
    )
    light = rows.get("raft: light commit (leader)")
    leader = rows.get("raft: registration (leader)")
    follower = rows.get("raft: registration (follower, no leader copy)")
    if light and leader and follower:
        ratio = leader["p50_ms"] / light["p50_ms"]
        wait = follower["p50_ms"] - leader["p50_ms"]
        print(
            f"leader registration / light commit, p50: {ratio:.2f}x "
            f"(target at most {TARGET_LEADER_RATIO:.0f}x)"
        )
        print(
            f"follower's wait before its own proposal (follower p50 - leader p50): "
            f"{wait:.1f} ms (target at most {TARGET_FOLLOWER_WAIT_MS:.0f} ms)"
        )
    for name, figures in rows.items():
        if "acked_per_s" in figures:
            print(f"{name}: {figures['acked_per_s']:.0f} registrations/s acknowledged")
    eventual = rows.get("eventual: registration (n1)")
    if eventual and leader:
        print(
            f"raft leader / eventual registration, p50: "
            f"{leader['p50_ms'] / eventual['p50_ms']:.1f}x"
        )


if __name__ == "__main__":
    main()
