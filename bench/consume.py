"""Consume benchmark: messages per second end to end through a broker_app master with a slave.

    .venv/bin/python -m bench.consume [--messages 40000] [--body-bytes 1024] [--queues 4]
        [--producers 4] [--role SYNC_MASTER]

1. Starts a bare asyncio echo server in a child process: it decodes each frame
   with ``remoting.frame`` and sends the same command back with the response bit
   set (nothing stored, nothing pulled). ``--producers`` coroutines send the
   ``--messages`` SEND_MESSAGE frames of ``--body-bytes`` bytes to it, spread
   round robin over ``--queues`` queue ids, each producer one request at a time;
   a message counts as received when its echo is back. This is the baseline:
   the same client loop, the same frames, one hop and no work on the server.
2. Starts a real ``run_broker`` master (``--role``, SYNC_MASTER by default, so a
   send is answered once the slave holds it) and a slave that follows it
   (``haMasterAddress`` and a shared ``haSecretFile``, no NameServer; ACL off,
   loopback only), creates a topic of ``--queues`` queues with
   UPDATE_AND_CREATE_TOPIC, and the consumers' connection sends a HEART_BEAT
   for their group (clustering, subscription ``*``). One consumer per queue
   long-polls PULL_MESSAGE (suspend 15 s) and commits its offset in every
   next pull (sysFlag commit | suspend), as
   RocketMQ's push consumer does, and once more with UPDATE_CONSUMER_OFFSET
   after its last message; the same producers send the same messages. The
   run ends when every consumer has had its last offset acknowledged;
   QUERY_CONSUMER_OFFSET then checks every queue was committed to its end,
   and the slave's lag behind the master's max offset is reported.

Each body starts with the message's index and the sender's ``perf_counter_ns``
(producers and consumers share this process), so send-to-receive latency needs
no clock agreement and has sub-microsecond resolution: the time the consumer's
pull answer (or the echo) is back minus the time the send was issued. Both targets get a warm-up of
``WARMUP_MESSAGES`` on their own topic first. Every figure is printed with the
echo's and the ratio broker / echo: on a shared machine only the ratio travels.
CPU seconds of every process during the measured run show who was busy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench import _util
from bench.ha import Broker
from bench.route_query import ServerProcess
from broker_app.consume_processor import FLAG_COMMIT_OFFSET, FLAG_SUSPEND
from broker_app.messages import build_send_request
from remoting.client import RemotingClient
from remoting.codes import FLAG_RESPONSE, RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.frame import encode_frame
from remoting.message_codec import decode_messages
from tools.cli import ExactArgumentParser

TOPIC = "BenchConsume"
WARMUP_TOPIC = "BenchConsumeWarmup"
GROUP = "bench-g"
PRODUCER_GROUP = "bench-p"
CLIENT_ID = "bench"
WARMUP_MESSAGES = 500
SUSPEND_MS = 15_000
PULL_MAX_MESSAGES = 32
PULL_TIMEOUT_S = SUSPEND_MS / 1000 + 15.0
SEND_TIMEOUT_S = 10.0
RUN_TIMEOUT_S = 600.0
READY_TIMEOUT_S = 60.0
SLAVE_CATCH_UP_S = 30.0
PERM_READ_WRITE = 6
STAMP = struct.Struct(">qq")
"""The head of every body: message index, sender's perf_counter_ns."""
ROLES = ("SYNC_MASTER", "ASYNC_MASTER")
ECHO = "bare asyncio echo"
BROKER = "broker_app master + slave"
CLIENT_CPU = "bench client"
LOOP_SUFFIX = " loop"


class BenchError(RuntimeError):
    """The broker answered something a correct run never sees."""


@dataclass(frozen=True, slots=True)
class Shape:
    """What one run sends."""

    messages: int
    body_bytes: int
    queues: int
    producers: int

    def per_queue(self) -> list[int]:
        """How many messages land in each queue (message ``i`` goes to queue ``i % queues``)."""
        return [len(range(q, self.messages, self.queues)) for q in range(self.queues)]


@dataclass
class RunResult:
    """One measured run against one target."""

    target: str
    messages: int
    wall_s: float
    send_ms: list[float]
    receive_ms: list[float]
    cpu_s: dict[str, float] = field(default_factory=dict)
    committed: int = 0
    pulls: int = 0
    """PULL_MESSAGE answers that carried messages (0 for the echo)."""

    @property
    def messages_per_s(self) -> float:
        """Messages sent, received (and, for the broker, committed) per second of wall time."""
        return self.messages / self.wall_s if self.wall_s > 0 else 0.0

    def summary(self) -> dict[str, object]:
        """The figures as JSON-ready values."""
        return {
            "messages": self.messages,
            "wall_s": round(self.wall_s, 3),
            "messages_per_s": round(self.messages_per_s, 1),
            "send_p50_ms": round(_util.percentile(self.send_ms, 0.50), 3),
            "send_p99_ms": round(_util.percentile(self.send_ms, 0.99), 3),
            "receive_p50_ms": round(_util.percentile(self.receive_ms, 0.50), 3),
            "receive_p99_ms": round(_util.percentile(self.receive_ms, 0.99), 3),
            "cpu_cores": {name: round(cpu / self.wall_s, 3) for name, cpu in self.cpu_s.items()},
            "committed": self.committed,
            "pulls_with_messages": self.pulls,
        }


# ---------------------------------------------------------------------- echo server


def echo_answer(request: RemotingCommand) -> bytes:
    """The same command back, response bit set."""
    return encode_frame(dataclasses.replace(request, flag=request.flag | FLAG_RESPONSE))


def start_echo(workdir: Path) -> ServerProcess:
    """This script's ``--serve-echo`` mode in a child process."""
    ready_file = workdir / "echo.ready"
    log_file = workdir / "echo.log"
    command = [
        sys.executable,
        "-m",
        "bench.consume",
        "--serve-echo",
        "--ready-file",
        str(ready_file),
    ]
    with log_file.open("ab") as log:
        proc = subprocess.Popen(command, cwd=_util.REPO_ROOT, stdout=log, stderr=log)
    deadline_s = time.monotonic() + READY_TIMEOUT_S
    while not ready_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline_s:
            proc.kill()
            raise SystemExit(f"echo server did not start:\n{log_file.read_text()[-4000:]}")
        time.sleep(0.02)
    return ServerProcess(ECHO, proc, int(json.loads(ready_file.read_text())["port"]))


# ---------------------------------------------------------------------- requests


def create_topic_request(topic: str, queues: int) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC as mqadmin updateTopic sends it."""
    return RemotingCommand.request(
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        {
            "topic": topic,
            "defaultTopic": "TBW102",
            "readQueueNums": str(queues),
            "writeQueueNums": str(queues),
            "perm": str(PERM_READ_WRITE),
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": "false",
        },
    )


def heartbeat_request(topics: Sequence[str]) -> RemotingCommand:
    """HEART_BEAT of one push-style consumer of ``GROUP`` subscribed to ``topics``."""
    body = {
        "clientID": CLIENT_ID,
        "consumerDataSet": [
            {
                "groupName": GROUP,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "unitMode": False,
                "subscriptionDataSet": [
                    {
                        "topic": topic,
                        "subString": "*",
                        "tagsSet": [],
                        "codeSet": [],
                        "subVersion": 1,
                        "expressionType": "TAG",
                        "classFilterMode": False,
                    }
                    for topic in topics
                ],
            }
        ],
        "producerDataSet": [{"groupName": PRODUCER_GROUP}],
    }
    return RemotingCommand.request(RequestCode.HEART_BEAT, body=json.dumps(body).encode())


def pull_request(topic: str, queue_id: int, offset: int) -> RemotingCommand:
    """A long-polling PULL_MESSAGE that also commits ``offset`` (when past 0)."""
    sys_flag = FLAG_SUSPEND | (FLAG_COMMIT_OFFSET if offset > 0 else 0)
    return RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": GROUP,
            "topic": topic,
            "queueId": str(queue_id),
            "queueOffset": str(offset),
            "maxMsgNums": str(PULL_MAX_MESSAGES),
            "sysFlag": str(sys_flag),
            "commitOffset": str(offset),
            "suspendTimeoutMillis": str(SUSPEND_MS),
            "subscription": "*",
            "subVersion": "1",
            "expressionType": "TAG",
        },
    )


def offset_request(code: int, topic: str, queue_id: int, offset: int | None) -> RemotingCommand:
    """UPDATE_CONSUMER_OFFSET (with ``offset``) or QUERY_CONSUMER_OFFSET (without)."""
    fields = {"consumerGroup": GROUP, "topic": topic, "queueId": str(queue_id)}
    if offset is not None:
        fields["commitOffset"] = str(offset)
    return RemotingCommand.request(code, fields)


def _expect(response: RemotingCommand, what: str) -> RemotingCommand:
    if response.code != ResponseCode.SUCCESS:
        raise BenchError(f"{what}: code {response.code} {response.remark}")
    return response


# ---------------------------------------------------------------------- the client loop


async def produce(
    client: RemotingClient,
    addr: str,
    topic: str,
    shape: Shape,
    first: int,
    *,
    echo: bool,
    send_ms: list[float],
    receive_ms: list[float],
) -> None:
    """Send messages ``first``, ``first + producers``, ... one at a time."""
    padding = os.urandom(shape.body_bytes - STAMP.size)
    for index in range(first, shape.messages, shape.producers):
        sent_ns = time.perf_counter_ns()
        request = build_send_request(
            topic,
            STAMP.pack(index, sent_ns) + padding,
            queue_id=index % shape.queues,
            producer_group=PRODUCER_GROUP,
            tags=None,
            born_timestamp_ms=time.time_ns() // 1_000_000,
        )
        response = await client.invoke(addr, request, SEND_TIMEOUT_S)
        done_ms = (time.perf_counter_ns() - sent_ns) / 1e6
        send_ms.append(done_ms)
        if echo:
            # The echo is the receipt: the frame went to a server and came back.
            receive_ms.append(done_ms)
        else:
            _expect(response, "SEND_MESSAGE")


async def consume(
    client: RemotingClient,
    addr: str,
    topic: str,
    queue_id: int,
    expected: int,
    receive_ms: list[float],
    batches: list[int],
) -> int:
    """Long-poll one queue until ``expected`` messages came; commit; return the offset.

    ``batches`` gets the number of messages of every answer that had some."""
    offset = received = 0
    while received < expected:
        response = await client.invoke(addr, pull_request(topic, queue_id, offset), PULL_TIMEOUT_S)
        now_ns = time.perf_counter_ns()
        fields = response.ext_fields or {}
        if response.code == ResponseCode.SUCCESS:
            messages = decode_messages(response.body or b"")
            for message in messages:
                _, sent_ns = STAMP.unpack_from(message.body)
                receive_ms.append((now_ns - sent_ns) / 1e6)
            received += len(messages)
            batches.append(len(messages))
            offset = int(fields["nextBeginOffset"])
        elif response.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
            offset = int(fields.get("nextBeginOffset", offset))
        else:
            raise BenchError(f"PULL_MESSAGE queue {queue_id}: {response.code} {response.remark}")
    request = offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, topic, queue_id, offset)
    _expect(await client.invoke(addr, request), "UPDATE_CONSUMER_OFFSET")
    return offset


async def drive(addr: str, topic: str, shape: Shape, *, echo: bool) -> RunResult:
    """One run of the client loop: producers, and (broker) one consumer per queue."""
    producers, consumers = RemotingClient(), RemotingClient()
    send_ms: list[float] = []
    receive_ms: list[float] = []
    batches: list[int] = []
    tasks: list[asyncio.Task[int]] = []
    try:
        if not echo:
            # The consumer's own connection carries its heartbeat, as in RocketMQ's client.
            heartbeat = heartbeat_request([topic])
            _expect(await consumers.invoke(addr, heartbeat), "HEART_BEAT")
            tasks = [
                asyncio.create_task(
                    consume(consumers, addr, topic, queue_id, expected, receive_ms, batches)
                )
                for queue_id, expected in enumerate(shape.per_queue())
            ]
            await asyncio.sleep(0.2)  # every consumer's first pull is held by the broker
        start_s = time.perf_counter()
        await asyncio.gather(
            *(
                produce(
                    producers,
                    addr,
                    topic,
                    shape,
                    first,
                    echo=echo,
                    send_ms=send_ms,
                    receive_ms=receive_ms,
                )
                for first in range(shape.producers)
            )
        )
        offsets = await asyncio.gather(*tasks)
        wall_s = time.perf_counter() - start_s
        committed = shape.messages
        if not echo:
            committed = 0
            for queue_id, offset in enumerate(offsets):
                request = offset_request(RequestCode.QUERY_CONSUMER_OFFSET, topic, queue_id, None)
                answer = _expect(await consumers.invoke(addr, request), "QUERY_CONSUMER_OFFSET")
                stored = int((answer.ext_fields or {})["offset"])
                if stored != offset:
                    raise BenchError(f"queue {queue_id}: committed {stored}, consumed {offset}")
                committed += stored
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await producers.close()
        await consumers.close()
    return RunResult(
        ECHO if echo else BROKER,
        shape.messages,
        wall_s,
        send_ms,
        receive_ms,
        committed=committed,
        pulls=len(batches),
    )


async def warm_then_measure(
    addr: str, shape: Shape, *, echo: bool, servers: dict[str, int]
) -> RunResult:
    """A warm-up run on its own topic, then the measured run, with the CPU seconds
    each of ``servers`` (name: pid), its main thread (the event loop) and this
    process spent in the measured run."""
    warm = dataclasses.replace(shape, messages=min(WARMUP_MESSAGES, shape.messages))
    await asyncio.wait_for(drive(addr, WARMUP_TOPIC, warm, echo=echo), RUN_TIMEOUT_S)
    readers = {CLIENT_CPU: _util.own_cpu_s}
    for name, pid in servers.items():
        readers[name] = functools.partial(_util.process_cpu_s, pid)
        readers[f"{name}{LOOP_SUFFIX}"] = functools.partial(_util.main_thread_cpu_s, pid)
    before = {name: read() for name, read in readers.items()}
    result = await asyncio.wait_for(drive(addr, TOPIC, shape, echo=echo), RUN_TIMEOUT_S)
    result.cpu_s = {name: read() - before[name] for name, read in readers.items()}
    return result


async def create_topics(addr: str, queues: int) -> None:
    """Both topics, ``queues`` queues each (the ACL is off: no signature needed)."""
    client = RemotingClient()
    try:
        for topic in (WARMUP_TOPIC, TOPIC):
            response = await client.invoke(addr, create_topic_request(topic, queues))
            _expect(response, f"UPDATE_AND_CREATE_TOPIC {topic}")
    finally:
        await client.close()


# ---------------------------------------------------------------------- the two targets


def run_echo(workdir: Path, shape: Shape) -> RunResult:
    """The baseline: the client loop against the bare echo server."""
    echo = start_echo(workdir)
    try:
        servers = {"echo": echo.proc.pid}
        return asyncio.run(warm_then_measure(echo.addr, shape, echo=True, servers=servers))
    finally:
        echo.stop()


def run_broker(workdir: Path, shape: Shape, role: str) -> tuple[RunResult, int]:
    """The real thing; returns the result and the slave's lag in bytes at the end."""
    extra = ["--set", "aclEnable=false"]
    master = Broker(workdir, "master", role, 0, extra)
    try:
        ha_master = f"ha_master_address=127.0.0.1:{master.info['ha_port']}"
        slave = Broker(workdir, "slave", "SLAVE", 1, [*extra, "--set", ha_master])
        try:
            addr = master.info["addr"]
            asyncio.run(create_topics(addr, shape.queues))
            servers = {"master": master.proc.pid, "slave": slave.proc.pid}
            result = asyncio.run(warm_then_measure(addr, shape, echo=False, servers=servers))
            end = master.max_offset()
            deadline_s = time.monotonic() + SLAVE_CATCH_UP_S
            while (copied := slave.max_offset()) < end and time.monotonic() < deadline_s:
                time.sleep(0.05)
        finally:
            slave.stop()
    finally:
        master.stop()
    return result, end - copied


# ---------------------------------------------------------------------- report


def _cores(result: RunResult, kind: str) -> str:
    """CPU seconds per wall second of the measured run: ``kind`` is process, loop or client."""

    def kind_of(name: str) -> str:
        if name == CLIENT_CPU:
            return "client"
        return "loop" if name.endswith(LOOP_SUFFIX) else "process"

    return " + ".join(
        f"{name} {cpu / result.wall_s:.2f}" if kind != "client" else f"{cpu / result.wall_s:.2f}"
        for name, cpu in result.cpu_s.items()
        if kind_of(name) == kind
    )


def _ratio(value: float, baseline: float) -> float:
    return value / baseline if baseline else 0.0


def report(shape: Shape, role: str, echo: RunResult, broker: RunResult, slave_lag: int) -> None:
    """The table (Markdown) and one JSON line with every figure."""
    rows: list[list[object]] = []
    for label, key in [
        ("messages/s end to end", "messages_per_s"),
        ("send round trip p50 (ms)", "send_p50_ms"),
        ("send round trip p99 (ms)", "send_p99_ms"),
        ("send-to-receive p50 (ms)", "receive_p50_ms"),
        ("send-to-receive p99 (ms)", "receive_p99_ms"),
    ]:
        mine, base = broker.summary()[key], echo.summary()[key]
        assert isinstance(mine, float) and isinstance(base, float)
        rows.append([label, mine, base, f"{_ratio(mine, base):.3f}"])
    for label, kind in [
        ("CPU cores busy: server processes", "process"),
        ("CPU cores busy: their event-loop threads", "loop"),
        ("CPU cores busy: bench client (producers + consumers)", "client"),
    ]:
        rows.append([label, _cores(broker, kind), _cores(echo, kind), ""])
    _util.print_table(
        f"consume: {shape.messages} x {shape.body_bytes} B, {shape.producers} producers, "
        f"{shape.queues} queues ({role} + slave)",
        ["measure", BROKER, ECHO, "ratio broker / echo"],
        rows,
    )
    per_pull = broker.messages / broker.pulls if broker.pulls else 0.0
    print(
        f"\nwall: broker {broker.wall_s:.2f} s, echo {echo.wall_s:.2f} s; {broker.pulls} pull "
        f"answers with messages ({per_pull:.1f} messages each); committed offsets sum "
        f"{broker.committed} of {shape.messages}; slave lag at the end {slave_lag} B"
    )
    broker_rate, echo_rate = broker.messages_per_s, echo.messages_per_s
    summary = {
        "shape": dataclasses.asdict(shape),
        "role": role,
        "broker": broker.summary(),
        "echo": echo.summary(),
        "slave_lag_bytes": slave_lag,
        "ratio_messages_per_s": round(_ratio(broker_rate, echo_rate), 4),
        "ratio_receive_p50": round(
            _ratio(
                _util.percentile(broker.receive_ms, 0.5), _util.percentile(echo.receive_ms, 0.5)
            ),
            3,
        ),
        "ratio_receive_p99": round(
            _ratio(
                _util.percentile(broker.receive_ms, 0.99), _util.percentile(echo.receive_ms, 0.99)
            ),
            3,
        ),
    }
    print(json.dumps(summary))


def main(argv: list[str] | None = None) -> int:
    """Command line entry point (also the echo server's, with ``--serve-echo``)."""
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=40_000, help="total messages sent")
    parser.add_argument("--body-bytes", type=int, default=1024, help="each message's body")
    parser.add_argument("--queues", type=int, default=4, help="queues of the topic (consumers)")
    parser.add_argument("--producers", type=int, default=4, help="producer coroutines")
    parser.add_argument("--role", choices=ROLES, default="SYNC_MASTER", help="the broker's role")
    parser.add_argument("--serve-echo", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ready-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_echo:
        asyncio.run(_util.serve_frames(echo_answer, args.ready_file))
        return 0
    if args.body_bytes < STAMP.size:
        parser.error(f"--body-bytes must be at least {STAMP.size} (index + send time)")
    if min(args.messages, args.queues, args.producers) < 1:
        parser.error("--messages, --queues and --producers must be positive")
    shape = Shape(args.messages, args.body_bytes, args.queues, args.producers)
    print(
        f"# bench/consume.py --messages {shape.messages} --body-bytes {shape.body_bytes} "
        f"--queues {shape.queues} --producers {shape.producers} --role {args.role}\n"
        f"{_util.machine_notes()}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-consume-") as tmp:
        workdir = Path(tmp)
        echo = run_echo(workdir, shape)
        broker, slave_lag = run_broker(workdir, shape, args.role)
    report(shape, args.role, echo, broker, slave_lag)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
