"""Benchmark: how long one costly REGISTER_BROKER body holds up a gateway's other brokers.

A gateway (eventual mode, served by this process on a thread of its own) and a prober:
a small broker registering every 5 ms on its own connection, each answer timed. A
sender then sends bodies that pass every limit of :mod:`remoting.body_limits` and cost
the most a byte to decode (``bench.register_shapes``, ``--size`` bytes each), one at a
time. Two arms in one run:

* ``on the loop``: the gateway decodes every body on its event loop, as it did before
  ``gateway/registration_bodies.py`` (``BodyDecoder(inline_bytes_max=FRAME_BYTES_MAX)``);
* ``worker``: as it ships, a body past ``INLINE_BYTES_MAX`` decoded in its worker process.

For each body: what decoding it costs (CPU of this thread, the least of three), its
sender's answer time, and the prober's slowest answer while it was in flight (the
event loop's delay as another broker sees it), with the ratio of the two arms. The
prober, sender and gateway share this process's interpreter lock, as a gateway's loop
shares it with its Raft and projection threads.

Run: ``.venv/bin/python -m bench.register_offload`` (``--size 4194304`` by default).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from bench import _util
from bench.register_shapes import register_shapes_within
from gateway.options import GatewayOptions
from gateway.registration_bodies import BodyDecoder
from gateway.server import Gateway
from localcluster.demo import DemoBroker, register_request, topic_table
from remoting.blocking import BlockingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import BodyDecodeError
from remoting.frame import FRAME_BYTES_MAX
from remoting.model import DataVersion
from remoting.register_body import body_crc32, decode_register_broker_request_body
from tools.cli import ExactArgumentParser

PROBE_PERIOD_S = 0.005
WIRE_TIMEOUT_S = 60.0
SIZE_BYTES = 4 * 1024 * 1024
CLUSTER = "DefaultCluster"


@dataclass(frozen=True, slots=True)
class Row:
    """One body in one arm."""

    shape: str
    arm: str
    body_bytes: int
    decode_ms: float
    code: int
    sender_ms: float
    prober_max_ms: float
    prober_p50_ms: float
    probes: int


class RunningGateway:
    """A gateway on its own thread and event loop, on free loopback ports."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.gateway: Gateway | None = None
        self._thread = threading.Thread(target=self._serve, name="gateway", daemon=True)

    def __enter__(self) -> RunningGateway:
        self._thread.start()
        self._ready.wait(30.0)
        return self

    def _serve(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.gateway = Gateway(GatewayOptions(node_id="bench", port=0, acl_enabled=False))
        await self.gateway.start()
        self._ready.set()
        await self._stop.wait()
        await self.gateway.stop()

    @property
    def addr(self) -> str:
        assert self.gateway is not None
        return f"127.0.0.1:{self.gateway.port}"

    def use(self, bodies: BodyDecoder) -> None:
        """Decode REGISTER_BROKER bodies with ``bodies`` from now on."""
        assert self.gateway is not None
        registrar = self.gateway.dispatcher.registrar
        registrar.bodies.close()
        registrar.bodies = bodies

    def __exit__(self, *_: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30.0)


@contextmanager
def probing(addr: str) -> Iterator[list[tuple[float, float]]]:
    """A prober registering every :data:`PROBE_PERIOD_S`; yields its (sent, took) list."""
    broker = DemoBroker(CLUSTER, "broker-probe", 0, "127.0.0.1:19911", "127.0.0.1:19912")
    request = register_request(broker, topic_table(["ProbeTopic", "broker-probe"]), DataVersion())
    probes: list[tuple[float, float]] = []
    stop = threading.Event()

    def run() -> None:
        with BlockingClient(addr, timeout_s=WIRE_TIMEOUT_S) as client:
            while not stop.is_set():
                sent_s = time.monotonic()
                client.invoke(request)
                probes.append((sent_s, time.monotonic() - sent_s))
                stop.wait(PROBE_PERIOD_S)

    thread = threading.Thread(target=run, name="prober", daemon=True)
    thread.start()
    try:
        yield probes
    finally:
        stop.set()
        thread.join(WIRE_TIMEOUT_S)


def _request(index: int, body: bytes) -> RemotingCommand:
    fields = {
        "brokerAddr": f"127.0.0.1:{30_000 + index}",
        "brokerId": "0",
        "brokerName": f"broker-costly-{index}",
        "clusterName": CLUSTER,
        "haServerAddr": f"127.0.0.1:{40_000 + index}",
        "compressed": "false",
        "bodyCrc32": str(body_crc32(body)),
    }
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, fields, body)


def _decode_ms(body: bytes) -> float:
    def decode() -> None:
        with suppress(BodyDecodeError):
            decode_register_broker_request_body(body, compressed=False, version=500)

    return _util.least_cpu_s(decode, times=3) * 1000


def measure(gateway: RunningGateway, arm: str, shapes: list[tuple[str, bytes]]) -> list[Row]:
    """Each shape sent once while the prober runs."""
    rows = []
    for index, (shape, body) in enumerate(shapes):
        request = _request(index, body)
        sender = BlockingClient(gateway.addr, timeout_s=WIRE_TIMEOUT_S)
        with probing(gateway.addr) as probes, sender as c:
            time.sleep(0.2)
            sent_s = time.monotonic()
            code = c.invoke(request).code
            answered_s = time.monotonic()
            time.sleep(0.2)
        during = [took for sent, took in probes if sent <= answered_s and sent + took >= sent_s]
        rows.append(
            Row(
                shape=shape,
                arm=arm,
                body_bytes=len(body),
                decode_ms=_decode_ms(body),
                code=code,
                sender_ms=(answered_s - sent_s) * 1000,
                prober_max_ms=max(during, default=0.0) * 1000,
                prober_p50_ms=statistics.median(during) * 1000 if during else 0.0,
                probes=len(during),
            )
        )
    return rows


def run(size: int) -> list[Row]:
    """Both arms over every costly shape of ``size`` bytes."""
    shapes = register_shapes_within(size)
    rows: list[Row] = []
    arms: list[tuple[str, Callable[[], BodyDecoder]]] = [
        ("on the loop", lambda: BodyDecoder(inline_bytes_max=FRAME_BYTES_MAX)),
        ("worker", BodyDecoder),
    ]
    with RunningGateway() as gateway:
        for arm, decoder in arms:
            gateway.use(decoder())
            rows += measure(gateway, arm, shapes)
    return rows


def _code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return str(code)


def print_rows(rows: list[Row]) -> None:
    """The table, and each shape's ratio of the prober's slowest answer."""
    _util.print_table(
        "a costly REGISTER_BROKER body and another broker's registrations",
        (
            "body",
            "arm",
            "bytes",
            "decode CPU ms",
            "ns/byte",
            "answer",
            "sender ms",
            "prober p50 ms",
            "prober max ms",
            "probes",
        ),
        [
            (
                r.shape,
                r.arm,
                r.body_bytes,
                round(r.decode_ms, 1),
                round(r.decode_ms * 1e6 / r.body_bytes, 1),
                _code_name(r.code),
                round(r.sender_ms, 1),
                round(r.prober_p50_ms, 2),
                round(r.prober_max_ms, 1),
                r.probes,
            )
            for r in rows
        ],
    )
    by_shape: dict[str, dict[str, Row]] = {}
    for row in rows:
        by_shape.setdefault(row.shape, {})[row.arm] = row
    for shape, arms in by_shape.items():
        loop, worker = arms.get("on the loop"), arms.get("worker")
        if loop and worker and worker.prober_max_ms > 0:
            print(
                f"{shape}: the prober's slowest answer, on the loop / worker = "
                f"{loop.prober_max_ms / worker.prober_max_ms:.1f}x"
            )


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=SIZE_BYTES, help="bytes of each costly body")
    args = parser.parse_args(argv)
    print(f"# bench/register_offload.py --size {args.size}\n{_util.machine_notes()}")
    print_rows(run(args.size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
