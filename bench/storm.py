"""Route reads during a registration storm, eventual mode against raft mode, in one run.

    .venv/bin/python -m bench.storm [--seconds 10] [--rate 200] [--brokers 300]
        [--topics-per-broker 100] [--modes eventual,raft] [--read-front both]
        [--profile DIR]

For each mode, three real gateways (``run_gateway``, their own SQLite and, in raft
mode, their own journal; entries fsync'd as always). One stable topic
(``StormRead``) is registered on every node, then:

1. **quiet**: a reader *process* keeps 8 connections x 4 requests in flight of
   GET_ROUTEINFO_BY_TOPIC for that topic on n1 (reads/s, p50, p99);
2. **storm**: a registrar *process* offers ``--rate`` registrations/s (open loop):
   each is one broker's REGISTER_BROKER with ``--topics-per-broker`` topics (about
   15 KB of JSON for 100) and a DataVersion bumped every time, so each is a real
   write, sent to every node as a broker sends it; the reader measures meanwhile;
3. **alone**: the registrar keeps 256 registrations in flight (closed loop) with no
   reader: the most heavy registrations/s the cluster acknowledges (target 2,500);
4. **flat out**: the same with the reader running.

A registration counts as acknowledged when every node answered SUCCESS. In raft mode
the terms of every node are read before and after: a term change is an election.
The same offered load runs against both modes, so eventual mode is the baseline of
the run; the ratio raft/eventual of storm reads is the figure to watch (target >= 0.9,
read p99 under 5 ms). ``--profile DIR`` runs n1 of each mode under py-spy when it is
on the PATH or named by ``PY_SPY`` (it is not a project dependency), for finding
where the time goes.

The processes share the machine's cores; nothing is pinned.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import _util
from bench.load import LoadStats, close_load, open_load, request_frames
from gateway.private_codes import InternalCode
from remoting import register_body
from remoting.client import RemotingClient
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.frame import FrameDecoder, encode_frame
from tools import process_facts
from tools.cli import ExactArgumentParser

NODES = 3
READ_TOPIC = "StormRead"
READ_BROKER_INDEX = 9_999
LARGE_BROKER_INDEX_BASE = 5_000
"""The large-table brokers are bench brokers 5000.., apart from the storm's 0.."""
READ_CONNECTIONS = 8
READ_DEPTH = 4
FLAT_OUT_IN_FLIGHT = 256
"""Registrations in flight flat out: fewer (64 until 2026-11-26) left the cluster
waiting on commit rounds and the 20 ms linger with cores idle, which measures the
latency, not the throughput; 300 brokers restarting have up to 300 in flight."""
TARGET_HEAVY_PER_S = 2500
WARMUP_S = 1.0
REQUEST_TIMEOUT_S = 30.0
INTERNAL_SECRET = "bench-storm-internal-secret"
MODES = ("eventual", "raft")
TARGET_READ_RATIO = 0.9
TARGET_P99_MS = 5.0
_MS = 1000.0


# -------------------------------------------------------------------- the cluster


@contextlib.contextmanager
def cluster(
    root: Path, mode: str, profile: Path | None, front: bool
) -> Iterator[list[_util.BenchGateway]]:
    """Three gateways of ``mode`` (with read fronts if ``front``), ready; stopped afterwards."""
    # The setup connection stays idle between phases; in eventual mode its close
    # would unregister the read topic's broker.
    properties = root / "namesrv.properties"
    properties.write_text("serverChannelMaxIdleTimeSeconds=3600\n")
    args = ("--read-front" if front else "--no-read-front", "--config", str(properties))
    gateways = _util.start_gateways(
        root, mode, args=args, env={"NAMESRV_INTERNAL_SECRET": INTERNAL_SECRET}
    )
    profiler = None
    try:
        if profile is not None:
            profiler = start_profiler(gateways[0], profile / f"{mode}-n1.folded.txt")
        yield gateways
    finally:
        if profiler is not None:
            profiler.send_signal(2)
            with contextlib.suppress(subprocess.TimeoutExpired):
                profiler.wait(60)
        for gateway in gateways:
            gateway.proc.terminate()
        for gateway in gateways:
            try:
                gateway.proc.wait(30)
            except subprocess.TimeoutExpired:
                gateway.proc.kill()
                gateway.proc.wait()


def start_profiler(gateway: _util.BenchGateway, out: Path) -> subprocess.Popen[bytes] | None:
    spy = os.environ.get("PY_SPY") or shutil.which("py-spy") or ""
    if not spy or not Path(spy).exists():
        print("py-spy is not installed: no profile")
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [
            spy,
            "record",
            "--pid",
            str(gateway.proc.pid),
            "--threads",
            "--idle",
            "--format",
            "raw",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def terms(gateways: Sequence[_util.BenchGateway]) -> dict[str, int]:
    """Each node's Raft term (0 in eventual mode)."""
    return terms_of(await statuses(gateways))


def terms_of(found: dict[str, dict[str, Any]]) -> dict[str, int]:
    """The terms in NODE_STATUS answers by node (0 in eventual mode)."""
    return {node: int(status.get("term") or 0) for node, status in found.items()}


async def statuses(gateways: Sequence[_util.BenchGateway]) -> dict[str, dict[str, Any]]:
    """Each node's NODE_STATUS, over fresh connections (an idle phase outlasts the
    internal port's idle timeout)."""
    found = {}
    client = RemotingClient()
    try:
        for gateway in gateways:
            request = RemotingCommand.request(
                int(InternalCode.NODE_STATUS), {"secret": INTERNAL_SECRET}
            )
            answer = await client.invoke(f"127.0.0.1:{gateway.internal_port}", request, 5.0)
            ok = answer.code == ResponseCode.SUCCESS
            found[gateway.node_id] = json.loads(answer.body or b"{}") if ok else {}
    finally:
        await client.close()
    return found


# ------------------------------------------------------------------- the registrar


def registration(
    index: int, topics_per_broker: int, counter: int, shared: bool = False
) -> RemotingCommand:
    """Storm broker ``index``'s REGISTER_BROKER with DataVersion counter ``counter``;
    ``shared``: every broker holds the same topics (``LargeTopic...``).

    Made from the broker's encoded request with the counter spliced in: encoding a
    100-topic table took the registrar 0.5 ms a request, a core at 2,000/s, which the
    gateways it measures then did not get."""
    template, head, tail = _registration_template(index, topics_per_broker, shared)
    body = head + str(counter).encode() + tail
    fields = dict(template.ext_fields or {})
    fields["bodyCrc32"] = str(register_body.body_crc32(body))
    return RemotingCommand.request(template.code, fields, body, version=template.version)


_TEMPLATE_COUNTER = 987654321


@functools.cache
def _registration_template(
    index: int, topics_per_broker: int, shared: bool
) -> tuple[RemotingCommand, bytes, bytes]:
    request = encoded_registration(index, topics_per_broker, _TEMPLATE_COUNTER, shared)
    marker = b'"counter":%d' % _TEMPLATE_COUNTER
    body = bytes(request.body or b"")
    assert body.count(marker) == 1, "the DataVersion counter appears once"
    head, tail = body.split(marker)
    return request, head + b'"counter":', tail


def encoded_registration(
    index: int, topics_per_broker: int, counter: int, shared: bool = False
) -> RemotingCommand:
    """:func:`registration` encoded from the topic table, every time."""
    if shared:
        topics = [f"LargeTopic{j:06d}" for j in range(topics_per_broker)]
        return _util.register_request(
            LARGE_BROKER_INDEX_BASE + index, _util.topic_wrapper(topics, counter=counter)
        )
    first = index * topics_per_broker
    topics = [f"StormTopic{(first + j):06d}" for j in range(topics_per_broker)]
    return _util.register_request(index, _util.topic_wrapper(topics, counter=counter))


@dataclass
class RegistrarResult:
    offered: int
    acknowledged: int
    failed: int
    seconds: float
    p50_ms: float
    p99_ms: float
    failures: dict[str, int]
    cpu_cores: float = 0.0

    @property
    def acked_per_s(self) -> float:
        return self.acknowledged / self.seconds


class BrokerLink(asyncio.Protocol):
    """The registrar's connection to one node: writes encoded frames, matches the
    answers by opaque. Every node gets the same frame bytes (opaques are per
    connection), so a registration is encoded once, not once per node: through
    RemotingClient the registrar took a tenth of the two cores at 1,500/s."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._decoder = FrameDecoder()
        self._waiting: dict[int, asyncio.Future[RemotingCommand]] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def send(self, frame: bytes, opaque: int) -> asyncio.Future[RemotingCommand]:
        """Write ``frame`` (a request with ``opaque``); the future of its answer."""
        if self._transport is None or self._transport.is_closing():
            raise ConnectionError("the node closed the connection")
        answer: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._waiting[opaque] = answer
        self._transport.write(frame)
        return answer

    def data_received(self, data: bytes) -> None:
        for cmd in self._decoder.feed(data):
            answer = self._waiting.pop(cmd.opaque, None)
            if answer is not None and not answer.done():
                answer.set_result(cmd)

    def connection_lost(self, exc: Exception | None) -> None:
        waiting, self._waiting = self._waiting, {}
        for answer in waiting.values():
            if not answer.done():
                answer.set_exception(ConnectionError("the node closed the connection"))

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


async def open_links(addrs: Sequence[str]) -> list[BrokerLink]:
    """One :class:`BrokerLink` per node address."""
    loop = asyncio.get_running_loop()
    links = []
    for addr in addrs:
        host, _, port = addr.rpartition(":")
        _, link = await loop.create_connection(BrokerLink, host, int(port))
        links.append(link)
    return links


async def registrar(
    addrs: Sequence[str],
    brokers: int,
    topics_per_broker: int,
    rate: float,
    in_flight: int,
    seconds: float,
    once: bool = False,
) -> RegistrarResult:
    """Offer registrations for ``seconds``: paced at ``rate``/s, or closed loop with
    ``in_flight`` outstanding when ``rate`` is 0; ``once``: each broker registers
    once (a fleet start) with the same shared topics, and the registrar stops.

    One connection per node carries every broker's registrations (a broker has its
    own; what a node does per request is the same)."""
    links = await open_links(addrs)
    latencies: list[float] = []
    counters = [1] * brokers
    state = {"next": 0, "offered": 0, "failed": 0}
    reasons: collections.Counter[str] = collections.Counter()

    async def one() -> None:
        index = state["next"] % brokers
        state["next"] += 1
        counters[index] += 1
        request = registration(index, topics_per_broker, counters[index], shared=once)
        request.opaque = opaque = state["offered"]
        frame = encode_frame(request)
        state["offered"] += 1
        start = time.perf_counter()
        try:
            answers = await asyncio.wait_for(
                asyncio.gather(*(link.send(frame, opaque) for link in links)), REQUEST_TIMEOUT_S
            )
        except Exception as exc:  # a benchmark counts failures, whatever they are
            state["failed"] += 1
            reasons[f"{type(exc).__name__}: {exc}"[:80]] += 1
            return
        if all(a.code == ResponseCode.SUCCESS for a in answers):
            latencies.append(time.perf_counter() - start)
        else:
            state["failed"] += 1
            for a in answers:
                if a.code != ResponseCode.SUCCESS:
                    reasons[f"{a.code}: {a.remark}"[:80]] += 1

    loop = asyncio.get_running_loop()
    started = loop.time()
    cpu_before = _util.own_cpu_s()
    deadline = started + seconds
    if rate > 0:
        tasks = set()
        tick = 1.0 / rate
        due = started
        while loop.time() < deadline:
            task = asyncio.ensure_future(one())
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            due += tick
            await asyncio.sleep(max(0.0, due - loop.time()))
        if tasks:
            await asyncio.wait(tasks, timeout=REQUEST_TIMEOUT_S)
    else:

        async def worker() -> None:
            while loop.time() < deadline and not (once and state["next"] >= brokers):
                await one()

        await asyncio.gather(*(worker() for _ in range(in_flight)))
    elapsed = loop.time() - started
    cpu_cores = (_util.own_cpu_s() - cpu_before) / elapsed
    for link in links:
        link.close()
    return RegistrarResult(
        offered=state["offered"],
        acknowledged=len(latencies),
        failed=state["failed"],
        seconds=elapsed,
        p50_ms=_util.percentile(latencies, 0.5) * _MS if latencies else 0.0,
        p99_ms=_util.percentile(latencies, 0.99) * _MS if latencies else 0.0,
        failures=dict(reasons.most_common(5)),
        cpu_cores=cpu_cores,
    )


# ---------------------------------------------------------------------- the reader


@dataclass
class ReadResult:
    reads_per_s: float
    p50_ms: float
    p99_ms: float
    errors: int
    cpu_cores: float
    """The reader process's own CPU while it measured."""


async def reader(addr: str, seconds: float) -> ReadResult:
    """READ_CONNECTIONS x READ_DEPTH route reads of READ_TOPIC for ``seconds``."""
    host, _, port = addr.rpartition(":")
    # One frame per opaque (the connection matches answers to requests by opaque),
    # all asking for the same topic.
    frames = request_frames([READ_TOPIC] * 4 * READ_DEPTH)
    stats = LoadStats()
    connections = await open_load(host, int(port), frames, READ_CONNECTIONS, READ_DEPTH, stats)
    await asyncio.sleep(WARMUP_S)
    stats.measuring = True
    start = time.perf_counter()
    cpu_before = _util.own_cpu_s()
    await asyncio.sleep(seconds)
    stats.measuring = False
    elapsed = time.perf_counter() - start
    cpu_cores = (_util.own_cpu_s() - cpu_before) / elapsed
    await close_load(connections, stats)
    lat = stats.latencies_s
    return ReadResult(
        len(lat) / elapsed,
        _util.percentile(lat, 0.5) * _MS,
        _util.percentile(lat, 0.99) * _MS,
        stats.errors,
        cpu_cores,
    )


def child(role: str, **options: Any) -> subprocess.Popen[str]:
    """This module as a separate process playing ``role`` (its result: one JSON line)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.storm",
            "--child",
            role,
            "--child-options",
            json.dumps(options),
        ],
        cwd=_util.REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


def server_pids(gateways: Sequence[_util.BenchGateway]) -> dict[str, int]:
    """Each node's gateway process and, with read fronts, its front (a child of it)."""
    named = {f"{g.node_id} gateway": g.proc.pid for g in gateways}
    parents = {g.proc.pid: g.node_id for g in gateways}
    for parent, node_id in parents.items():
        for pid in process_facts.children(parent):
            named[f"{node_id} front"] = pid
    return named


def child_with_cpu(
    gateways: Sequence[_util.BenchGateway], role: str, **options: Any
) -> tuple[dict[str, Any], dict[str, float]]:
    """A bench child's result, and the CPU (in cores) each server process used while it
    ran; the child's own under its role's name."""
    pids = server_pids(gateways)
    before = {name: _util.process_cpu_s(pid) for name, pid in pids.items()}
    began = time.monotonic()
    result = result_of(child(role, **options))
    elapsed = time.monotonic() - began
    cpu = {name: (_util.process_cpu_s(pid) - before[name]) / elapsed for name, pid in pids.items()}
    cpu[role] = result["cpu_cores"]
    return result, cpu


def read_phase(gateways: Sequence[_util.BenchGateway], addr: str, seconds: float) -> dict[str, Any]:
    """One reader run on ``addr``, with the CPU (in cores) each server process used
    over it and the reader's own (the caller adds the registrar's when one ran)."""
    result, cpu = child_with_cpu(gateways, "reader", addr=addr, seconds=seconds)
    result["cpu_cores"] = cpu
    return result


def result_of(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"a bench child failed ({proc.returncode})")
    loaded: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return loaded


def run_child(role: str, options: dict[str, Any]) -> None:
    if role == "reader":
        print(json.dumps(asdict(asyncio.run(reader(options["addr"], options["seconds"])))))
    else:
        result = asyncio.run(
            registrar(
                options["addrs"],
                options["brokers"],
                options["topics_per_broker"],
                options["rate"],
                options["in_flight"],
                options["seconds"],
                options.get("once", False),
            )
        )
        print(json.dumps({**asdict(result), "acked_per_s": result.acked_per_s}))


# ---------------------------------------------------------------------- one mode


async def setup(client: RemotingClient, gateways: Sequence[_util.BenchGateway]) -> None:
    """The stable topic on every node (the client stays open: in eventual mode a
    closed channel would unregister its broker)."""
    # Two topics: a first registration with one topic is refused (the 5.x guard).
    topics = [READ_TOPIC, f"{READ_TOPIC}Twin"]
    request = _util.register_request(READ_BROKER_INDEX, _util.topic_wrapper(topics))
    for gateway in gateways:
        answer = await client.invoke(gateway.addr, request, REQUEST_TIMEOUT_S)
        if answer.code != ResponseCode.SUCCESS:
            raise SystemExit(f"setup registration refused by {gateway.node_id}: {answer.remark}")


def run_mode(mode: str, front: bool, args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix=f"bench-storm-{mode}-"))
    with cluster(root, mode, args.profile, front) as gateways:
        loop = asyncio.new_event_loop()
        client = RemotingClient()
        try:
            loop.run_until_complete(setup(client, gateways))
            terms_before = loop.run_until_complete(terms(gateways))
            addrs = [g.addr for g in gateways]
            n1 = gateways[0].addr
            quiet = read_phase(gateways, n1, args.seconds)
            marks = [("quiet", loop.run_until_complete(statuses(gateways)))]
            storm_options = dict(
                addrs=addrs,
                brokers=args.brokers,
                topics_per_broker=args.topics_per_broker,
                seconds=args.seconds + 2 * WARMUP_S,
            )
            registrar_proc = child("registrar", rate=args.rate, in_flight=0, **storm_options)
            storm_reads = read_phase(gateways, n1, args.seconds)
            storm = result_of(registrar_proc)
            storm_reads["cpu_cores"]["registrar"] = storm["cpu_cores"]
            marks.append(("storm", loop.run_until_complete(statuses(gateways))))
            alone, alone_cpu = child_with_cpu(
                gateways, "registrar", rate=0, in_flight=FLAT_OUT_IN_FLIGHT, **storm_options
            )
            alone["cpu_by_process"] = alone_cpu
            marks.append(("alone", loop.run_until_complete(statuses(gateways))))
            flat_proc = child("registrar", rate=0, in_flight=FLAT_OUT_IN_FLIGHT, **storm_options)
            flat_reads = read_phase(gateways, n1, args.seconds)
            flat = result_of(flat_proc)
            flat_reads["cpu_cores"]["registrar"] = flat["cpu_cores"]
            marks.append(("flat out", loop.run_until_complete(statuses(gateways))))
            large: dict[str, Any] = {}
            if args.large_brokers:
                # A fleet start with big tables: every broker once, its whole table,
                # through every node, while the projection (SQLite) catches up.
                large_proc = child(
                    "registrar",
                    rate=0,
                    in_flight=4,
                    addrs=addrs,
                    brokers=args.large_brokers,
                    topics_per_broker=args.large_topics,
                    seconds=600,
                    once=True,
                )
                large_reads = read_phase(gateways, n1, args.seconds)
                large = {"reads": large_reads, "registrar": result_of(large_proc)}
                large_reads["cpu_cores"]["registrar"] = large["registrar"]["cpu_cores"]
                marks.append(("large table", loop.run_until_complete(statuses(gateways))))
            idle_changes = 0
            if args.idle_s:
                before_idle = loop.run_until_complete(terms(gateways))
                time.sleep(args.idle_s)
                after_idle = loop.run_until_complete(terms(gateways))
                idle_changes = sum(after_idle[n] - before_idle[n] for n in before_idle)
            last = loop.run_until_complete(statuses(gateways))
            terms_after = terms_of(last)
            for node, status in last.items():
                if status.get("long_tick_gaps"):
                    print(
                        f"  {node}: {status['long_tick_gaps']} Raft tick gaps over 250 ms, "
                        f"longest {status['tick_gap_max_ms']:.0f} ms",
                        flush=True,
                    )
            by_phase = phase_marks(marks)
            if mode == "raft":
                print(
                    "  by phase (all nodes): "
                    + "; ".join(
                        f"{phase} {m['long_tick_gaps']} gaps over 250 ms, {m['term_changes']} "
                        f"term changes"
                        for phase, m in by_phase.items()
                    ),
                    flush=True,
                )
        finally:
            loop.run_until_complete(client.close())
            loop.close()
    if args.keep:
        print(f"{mode}: logs and databases kept in {root}", flush=True)
    else:
        shutil.rmtree(root, ignore_errors=True)
    elections = sum(terms_after[n] - terms_before[n] for n in terms_before)
    return {
        "mode": mode,
        "front": front,
        "quiet": quiet,
        "storm_reads": storm_reads,
        "storm": storm,
        "alone": alone,
        "flat_reads": flat_reads,
        "flat": flat,
        "term_changes": elections,
        "large": large,
        "idle_s": args.idle_s,
        "by_phase": by_phase,
        "idle_term_changes": idle_changes,
    }


def phase_marks(marks: list[tuple[str, dict[str, dict[str, Any]]]]) -> dict[str, Any]:
    """Tick gaps over 250 ms and term changes during each phase (all nodes), from the
    NODE_STATUS answers read at the end of each (the first phase's are its total)."""
    found: dict[str, Any] = {}
    before: dict[str, dict[str, Any]] = {}
    for phase, status in marks:
        found[phase] = {
            key: sum(
                int(s.get(key) or 0) - int(before.get(n, {}).get(key) or 0)
                for n, s in status.items()
            )
            for key in ("long_tick_gaps", "term")
        }
        found[phase]["term_changes"] = found[phase].pop("term") if before else 0
        before = status
    return found


# ---------------------------------------------------------------------- report


def report(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for r in results.values():
        rows.append(
            (
                r["mode"],
                "on" if r["front"] else "off",
                f"{r['quiet']['reads_per_s']:,.0f}",
                f"{r['storm_reads']['reads_per_s']:,.0f}",
                f"{r['storm_reads']['p99_ms']:.1f}",
                f"{r['storm']['acked_per_s']:,.0f}",
                f"{r['alone']['acked_per_s']:,.0f}",
                f"{r['flat']['acked_per_s']:,.0f}",
                f"{r['flat_reads']['reads_per_s']:,.0f}",
                f"{r['flat_reads']['p99_ms']:.1f}",
                f"{r['large']['reads']['reads_per_s']:,.0f}" if r["large"] else "-",
                f"{r['large']['reads']['p99_ms']:.1f}" if r["large"] else "-",
                r["term_changes"],
            )
        )
    _util.print_table(
        f"route reads on n1 ({READ_CONNECTIONS} connections x {READ_DEPTH} in flight) during "
        f"registrations of {args.brokers} brokers x {args.topics_per_broker} topics "
        f"through {NODES} nodes; storm offered at {args.rate:g}/s",
        (
            "mode",
            "read front",
            "reads/s quiet",
            "reads/s storm",
            "read p99 ms storm",
            "regs acked/s storm",
            "regs acked/s alone",
            "regs acked/s flat out",
            "reads/s flat out",
            "read p99 ms flat out",
            "reads/s large table",
            "read p99 ms large table",
            "term changes",
        ),
        rows,
    )
    for key, r in results.items():
        phases = [
            ("quiet", r["quiet"]),
            ("storm", r["storm_reads"]),
            ("alone", {"cpu_cores": r["alone"]["cpu_by_process"]}),
            ("flat out", r["flat_reads"]),
        ]
        if r["large"]:
            phases.append(("large table", r["large"]["reads"]))
        names = list(dict.fromkeys(n for _, p in phases for n in p["cpu_cores"]))
        _util.print_table(
            f"{key}: CPU by process (cores, over each reader run; alone: the registrar's)",
            ("phase", *names, "total"),
            [
                (
                    phase,
                    *(f"{p['cpu_cores'].get(n, 0.0):.2f}" for n in names),
                    f"{sum(p['cpu_cores'].values()):.2f}",
                )
                for phase, p in phases
            ],
        )
    summary: dict[str, Any] = {
        "bench": "storm",
        "rate": args.rate,
        "brokers": args.brokers,
        "topics_per_broker": args.topics_per_broker,
        "seconds": args.seconds,
        "results": results,
    }
    for front in ("off", "on"):
        raft, eventual = results.get(f"raft/{front}"), results.get(f"eventual/{front}")
        if raft is None or eventual is None:
            continue
        ratio = raft["storm_reads"]["reads_per_s"] / eventual["storm_reads"]["reads_per_s"]
        summary[f"raft_over_eventual_storm_reads_front_{front}"] = round(ratio, 3)
        print(
            f"read front {front}: raft / eventual reads during the storm: {ratio:.2f}x "
            f"(target >= {TARGET_READ_RATIO}); read p99 target < {TARGET_P99_MS} ms"
        )
    for mode, r in results.items():
        alone = r["alone"]
        print(
            f"{mode}: heavy registrations alone: {alone['acked_per_s']:,.0f}/s acknowledged "
            f"(target >= {TARGET_HEAVY_PER_S:,}), p50 {alone['p50_ms']:.0f} ms, p99 "
            f"{alone['p99_ms']:.0f} ms, {alone['failed']} failed, registrar "
            f"{alone['cpu_cores']:.2f} cores"
        )
        if r["large"]:
            reg = r["large"]["registrar"]
            print(
                f"{mode}: large table: {args.large_brokers} brokers x {args.large_topics} "
                f"shared topics registered through every node in {reg['seconds']:.1f} s "
                f"({reg['acknowledged']} acknowledged, {reg['failed']} failed)"
            )
        if r["idle_s"]:
            print(f"{mode}: {r['idle_term_changes']} term changes in {r['idle_s']:.0f} s idle")
    print(_util.machine_notes())
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds", type=float, default=10.0, help="how long each storm phase runs"
    )
    parser.add_argument(
        "--rate", type=float, default=200.0, help="registrations per second in the storm"
    )
    parser.add_argument("--brokers", type=int, default=300, help="brokers registering")
    parser.add_argument(
        "--topics-per-broker", type=int, default=100, help="topics in each registration"
    )
    parser.add_argument(
        "--modes", default=",".join(MODES), help="comma-separated modes to run, in order"
    )
    parser.add_argument(
        "--read-front",
        choices=("on", "off", "both"),
        default="both",
        help="run the gateways with read fronts, without, or both in turn",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="write n1's folded py-spy profile of each mode into this folder (default: none)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep each cluster's folder (gateway logs, databases)"
    )
    parser.add_argument(
        "--large-brokers",
        type=int,
        default=20,
        help="then this many brokers register once with --large-topics each "
        "(0: skip); reads are measured meanwhile",
    )
    parser.add_argument(
        "--large-topics", type=int, default=5000, help="topics of each --large-brokers broker"
    )
    parser.add_argument(
        "--idle-s",
        type=float,
        default=0.0,
        help="then stay idle this long and count term changes (raft)",
    )
    parser.add_argument("--child", choices=("reader", "registrar"), help=argparse.SUPPRESS)
    parser.add_argument("--child-options", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_child(args.child, json.loads(args.child_options))
        return
    results = {}
    fronts = {"on": (True,), "off": (False,), "both": (False, True)}[args.read_front]
    for front in fronts:
        for mode in args.modes.split(","):
            key = f"{mode}/{'on' if front else 'off'}"
            print(
                f"{key}: 3 gateways (read front {'on' if front else 'off'}), quiet reads, "
                f"storm at {args.rate:g}/s, flat out ...",
                flush=True,
            )
            results[key] = run_mode(mode, front, args)
    print(json.dumps(report(results, args)))


if __name__ == "__main__":
    main()
