"""Benchmark of the two cores (remoting codec, raftstore route table) in one process.

Measures, with baselines from the same run (the machine is shared and noisy,
so compare the ratios between runs, not the microseconds):

* decode + encode of a GET_ROUTEINFO_BY_TOPIC request frame and its answer;
* route pickup (``RouteTable.pickup_topic_route`` + body encode) on a table of
  1k broker groups and 10k topics;
* registration of 32 brokers x 10k topics (the shape of upstream's JMH
  ``RegisterBrokerBenchmark``: every broker registers a 10k-topic table);
* the heartbeat on that table: a re-registration with an unchanged
  DataVersion, and QUERY_DATA_VERSION;
* the tables' memory (tracemalloc).

Run: ``.venv/bin/python -m bench.cores --scale full`` (``small`` takes seconds).
"""

from __future__ import annotations

import gc
import itertools
import json
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

from bench import _util
from raftstore.commands import QueryDataVersion, RegisterBroker
from raftstore.results import RegisterBrokerOutcome
from raftstore.route_table import RouteTable
from remoting import bodies, register_body
from remoting.codes import CURRENT_VERSION, ResponseCode
from remoting.frame import FrameDecoder, decode_frame, encode_frame
from remoting.model import RegisterBrokerBody, TopicConfigSerializeWrapper
from tools.cli import ExactArgumentParser

_BYTES_PER_MIB = 1024 * 1024
_BYTES_PER_KIB = 1024
_US_PER_S = 1_000_000


@dataclass(frozen=True, slots=True)
class Scale:
    """The sizes of one run."""

    name: str
    route_brokers: int
    route_topics: int
    topics_per_route_broker: int
    register_brokers: int
    register_topics: int
    register_rounds: int
    repeats: int
    min_batch_s: float


SCALES = {
    "full": Scale("full", 1_000, 10_000, 20, 32, 10_000, 3, _util.TIMING_REPEATS, 0.05),
    "small": Scale("small", 20, 200, 20, 4, 200, 1, 2, 0.002),
}


@dataclass(frozen=True, slots=True)
class Row:
    """One measured operation, its baseline and their ratio."""

    name: str
    us_per_op: float
    baseline: str
    baseline_us: float

    @property
    def ratio(self) -> float:
        """How many baselines one operation costs."""
        return self.us_per_op / self.baseline_us if self.baseline_us else 0.0


@dataclass
class Report:
    """Everything one run measured."""

    scale: str
    rows: list[Row]
    memory_mib: dict[str, float]
    facts: dict[str, float]


# ---------------------------------------------------------------------- builders


def _kib(data: bytes) -> str:
    return f"{len(data) / _BYTES_PER_KIB:,.1f} KiB"


def register_command(
    index: int, wrapper: TopicConfigSerializeWrapper, now_ms: int
) -> RegisterBroker:
    """The REGISTER_BROKER command a master ``index`` sends, as the gateway proposes it."""
    return RegisterBroker(
        cluster_name=_util.CLUSTER,
        broker_addr=_util.broker_addr(index),
        broker_name=_util.broker_name(index),
        broker_id=0,
        ha_server_addr=_util.broker_addr(index).replace(":10911", ":10912"),
        now_ms=now_ms,
        topic_config_wrapper=wrapper,
        filter_server_list=(),
        enable_acting_master=False,
    )


def build_route_table(scale: Scale) -> RouteTable:
    """1k broker groups (full scale), each serving a block of the 10k topics."""
    table = RouteTable()
    for index in range(scale.route_brokers):
        topics = _util.broker_topics(index, scale.topics_per_route_broker, scale.route_topics)
        wrapper = _util.topic_wrapper(topics)
        table.apply(register_command(index, wrapper, _util.REGISTERED_AT_MS))
    return table


def register_all(
    table: RouteTable, wrappers: list[TopicConfigSerializeWrapper], now_ms: int
) -> list[float]:
    """Register broker i with ``wrappers[i]``; the seconds each apply took."""
    elapsed: list[float] = []
    for index, wrapper in enumerate(wrappers):
        command = register_command(index, wrapper, now_ms)
        start = time.perf_counter()
        result = table.apply(command)
        elapsed.append(time.perf_counter() - start)
        assert isinstance(result.outcome, RegisterBrokerOutcome) and not result.outcome.failed
    return elapsed


def traced_mib(build: Callable[[], object]) -> tuple[object, float]:
    """Build something under tracemalloc; what it returned and the MiB still held after."""
    gc.collect()
    tracemalloc.start()
    before, _ = tracemalloc.get_traced_memory()
    built = build()
    gc.collect()
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return built, (after - before) / _BYTES_PER_MIB


# ---------------------------------------------------------------------- sections


def codec_rows(route_body: bytes, timing: _util.Timing) -> list[Row]:
    """Request and response frames of GET_ROUTEINFO_BY_TOPIC, against plain json."""
    request = _util.route_request(_util.topic_name(0))
    request.opaque = 4242
    request_frame = encode_frame(request)
    response = request.make_response(ResponseCode.SUCCESS, body=route_body)
    response_frame = encode_frame(response)
    decoder = FrameDecoder()
    header_dict = {
        "code": request.code,
        "extFields": request.ext_fields,
        "flag": 0,
        "language": "JAVA",
        "opaque": request.opaque,
        "serializeTypeCurrentRPC": "JSON",
        "version": request.version,
    }
    header_json = json.dumps(header_dict)
    route_dict = json.loads(route_body)
    route_json = json.dumps(route_dict)

    def decode_response() -> object:
        cmd = decode_frame(response_frame)
        assert cmd.body is not None
        return bodies.decode_topic_route_data(cmd.body)

    def baseline_decode_response() -> object:
        return json.loads(header_json), json.loads(route_json)

    def baseline_encode_response() -> object:
        return json.dumps(header_dict), json.dumps(route_dict)

    return [
        Row(
            "request frame decode (FrameDecoder.feed)",
            _util.us_per_op(lambda: decoder.feed(request_frame), timing),
            "json.loads(header)",
            _util.us_per_op(lambda: json.loads(header_json), timing),
        ),
        Row(
            "request frame encode",
            _util.us_per_op(lambda: encode_frame(request), timing),
            "json.dumps(header)",
            _util.us_per_op(lambda: json.dumps(header_dict), timing),
        ),
        Row(
            "response frame decode + TopicRouteData decode",
            _util.us_per_op(decode_response, timing),
            "json.loads(header + route)",
            _util.us_per_op(baseline_decode_response, timing),
        ),
        Row(
            "response frame encode (body already encoded)",
            _util.us_per_op(
                lambda: encode_frame(request.make_response(ResponseCode.SUCCESS, body=route_body)),
                timing,
            ),
            "json.dumps(header)",
            _util.us_per_op(lambda: json.dumps(header_dict), timing),
        ),
    ]


def pickup_rows(table: RouteTable, scale: Scale, timing: _util.Timing) -> list[Row]:
    """Route pickup and body encode over every topic in turn, against json.dumps."""
    topics = [_util.topic_name(i) for i in range(scale.route_topics)]
    cycle = itertools.cycle(topics)
    route = table.pickup_topic_route(topics[0])
    assert route is not None
    route_dict = json.loads(bodies.encode_topic_route_data(route, standard=True))
    dict_table = {topic: index for index, topic in enumerate(topics)}
    dict_cycle = itertools.cycle(topics)

    def pickup_and_encode() -> bytes:
        found = table.pickup_topic_route(next(cycle))
        assert found is not None
        return bodies.encode_topic_route_data(found, standard=True)

    json_dumps_us = _util.us_per_op(lambda: json.dumps(route_dict), timing)
    dict_get_us = _util.us_per_op(lambda: dict_table[next(dict_cycle)], timing)
    return [
        Row(
            "route pickup + body encode (standard JSON)",
            _util.us_per_op(pickup_and_encode, timing),
            "json.dumps(route dict)",
            json_dumps_us,
        ),
        Row(
            "route pickup only",
            _util.us_per_op(lambda: table.pickup_topic_route(next(cycle)), timing),
            "dict lookup (10k str keys)",
            dict_get_us,
        ),
        Row(
            "route body encode only",
            _util.us_per_op(lambda: bodies.encode_topic_route_data(route, standard=True), timing),
            "json.dumps(route dict)",
            json_dumps_us,
        ),
    ]


def registration_rows(scale: Scale, timing: _util.Timing) -> tuple[list[Row], RouteTable]:
    """32 brokers x 10k topics into fresh tables, then the heartbeat on the last one."""
    topics = [_util.topic_name(i) for i in range(scale.register_topics)]
    wrapper = _util.topic_wrapper(topics)
    wrappers = [wrapper] * scale.register_brokers
    body = register_body.encode_register_broker_body(
        RegisterBrokerBody(wrapper, []), compressed=False
    )
    compressed = register_body.encode_register_broker_body(
        RegisterBrokerBody(wrapper, []), compressed=True
    )
    loads_us = _util.us_per_op(lambda: json.loads(body), timing)
    per_register: list[float] = []
    table = RouteTable()
    for _ in range(scale.register_rounds):
        table = RouteTable()
        per_register.extend(register_all(table, wrappers, _util.REGISTERED_AT_MS))
    first_us = min(per_register) * _US_PER_S
    register_us = _util.median(per_register) * _US_PER_S

    clock = itertools.count(_util.REGISTERED_AT_MS + 1)
    version = wrapper.data_version

    def reregister() -> object:
        return table.apply(register_command(0, wrapper, next(clock)))

    def query_version() -> object:
        return table.apply(
            QueryDataVersion(
                _util.CLUSTER, _util.broker_addr(0), _util.broker_name(0), 0, version, next(clock)
            )
        )

    n = scale.register_topics
    rows = [
        Row(
            f"REGISTER_BROKER apply, {n} topics, new broker (median of "
            f"{len(per_register)}; fastest {first_us:,.0f} µs)",
            register_us,
            f"json.loads(register body, {_kib(body)})",
            loads_us,
        ),
        Row(
            f"register body decode, plain JSON ({_kib(body)})",
            _util.us_per_op(
                lambda: register_body.decode_register_broker_body(
                    body, compressed=False, version=CURRENT_VERSION
                ),
                timing,
            ),
            "json.loads(register body)",
            loads_us,
        ),
        Row(
            f"register body decode, zlib form ({_kib(compressed)})",
            _util.us_per_op(
                lambda: register_body.decode_register_broker_body(
                    compressed, compressed=True, version=CURRENT_VERSION
                ),
                timing,
            ),
            "json.loads(register body)",
            loads_us,
        ),
        Row(
            f"heartbeat: re-register, unchanged DataVersion, {n} topics",
            _util.us_per_op(reregister, timing),
            "json.loads(register body)",
            loads_us,
        ),
        Row(
            "heartbeat: QUERY_DATA_VERSION apply",
            _util.us_per_op(query_version, timing),
            "json.loads(register body)",
            loads_us,
        ),
    ]
    return rows, table


def memory_figures(scale: Scale) -> dict[str, float]:
    """MiB held by each table, the brokers' topic tables built inside the trace and dropped."""
    route_label = (
        f"route table: {scale.route_brokers} brokers x {scale.topics_per_route_broker} topics "
        f"({scale.route_topics} topics)"
    )
    _, route_mib = traced_mib(lambda: build_route_table(scale))

    def build_register_table() -> RouteTable:
        table = RouteTable()
        topics = [_util.topic_name(i) for i in range(scale.register_topics)]
        for index in range(scale.register_brokers):
            # A fresh wrapper per broker, as each broker's own decoded body would be.
            table.apply(
                register_command(index, _util.topic_wrapper(topics), _util.REGISTERED_AT_MS)
            )
        return table

    _, register_mib = traced_mib(build_register_table)
    return {
        route_label: route_mib,
        f"route table: {scale.register_brokers} brokers x {scale.register_topics} topics": (
            register_mib
        ),
    }


# ---------------------------------------------------------------------- run


def run(scale: Scale) -> Report:
    """Measure everything at ``scale``."""
    timing = _util.Timing(scale.repeats, scale.min_batch_s)
    start = time.perf_counter()
    table = build_route_table(scale)
    build_s = time.perf_counter() - start
    route = table.pickup_topic_route(_util.topic_name(0))
    assert route is not None
    route_body = bodies.encode_topic_route_data(route, standard=True)
    rows = codec_rows(route_body, timing)
    rows += pickup_rows(table, scale, timing)
    del table
    register_rows, _ = registration_rows(scale, timing)
    rows += register_rows
    return Report(
        scale=scale.name,
        rows=rows,
        memory_mib=memory_figures(scale),
        facts={"route table build s": build_s, "route body bytes": float(len(route_body))},
    )


def print_report(report: Report) -> None:
    """Markdown tables of a report."""
    _util.print_table(
        f"cores ({report.scale})",
        ["operation", "µs/op", "baseline (same run)", "baseline µs", "x baseline"],
        [(r.name, r.us_per_op, r.baseline, r.baseline_us, r.ratio) for r in report.rows],
    )
    _util.print_table(
        "memory (tracemalloc, after gc)", ["table", "MiB"], list(report.memory_mib.items())
    )
    _util.print_table("facts", ["fact", "value"], list(report.facts.items()))


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scale", choices=sorted(SCALES), default="full", help="small: a quick check run"
    )
    args = parser.parse_args(argv)
    print(f"# bench/cores.py --scale {args.scale}\n{_util.machine_notes()}")
    print_report(run(SCALES[args.scale]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
