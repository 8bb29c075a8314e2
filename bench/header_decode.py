"""Benchmark of what one hostile frame or body costs the process that decodes it.

1. Headers: the costliest JSON headers an attacker can write, each as long as the limits
   let it be (``HEADER_BYTES_MAX``; ``HEADER_LENIENT_BYTES_MAX`` when it is not standard
   JSON), fed to a :class:`~remoting.frame.FrameDecoder` as a server's connection feeds
   it. A header refused by a limit counts too: the limits are what keep it cheap. The
   baselines, same run: a route query's header and a PUT_KV_CONFIG header with the
   largest value the console sends (32,768 characters,
   ``namesrv_app.web.forms.KV_VALUE_CHARS_MAX``).
2. Bodies: ``fastjson.loads`` on hostile bodies as long as a frame allows (16 MiB at
   full scale), with the C decoder alone on a standard body of the same length as the
   baseline. ``fastjson.loads`` has no limits of its own for bodies.
3. REGISTER_BROKER bodies, the one body decoded before anyone is authenticated (a
   white-listed address registers unsigned): ``decode_register_broker_request_body`` on
   real tables (1,000 and 50,000 topics, JSON and compressed), on the costliest hostile
   bodies within the limits of :mod:`remoting.register_body` (each as dense as they let
   it be), and on bodies past them (refused by the pre-check). CPU time of the thread,
   garbage collector held off, as the tests measure it; "x real" compares the cost a byte
   with the 50,000-topic table's (a compressed body: a compressed byte, with the
   compressed 50,000-topic table's). ``--without-register-limits`` runs the same bodies
   with the pre-check turned off: what they cost before it.

Run: ``.venv/bin/python -m bench.header_decode --scale full`` (``small``: 1 MiB bodies).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import json
import random
import string
import struct
import sys
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from bench import _util
from remoting import fastjson, register_body
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.errors import BodyDecodeError, ProtocolError
from remoting.frame import (
    HEADER_BYTES_MAX,
    HEADER_EXT_FIELDS_MAX,
    HEADER_LENIENT_BYTES_MAX,
    HEADER_SEPARATORS_MAX,
    FrameDecoder,
    encode_frame,
)
from remoting.model import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicQueueMappingInfo,
)
from tools.cli import ExactArgumentParser

_MS_PER_S = 1_000.0
_BYTES_PER_MIB = 1024 * 1024
CONSOLE_KV_VALUE_CHARS = 32_768
# The frame of issue 30: 8 MiB of single-quoted "JSON" that froze a node for 14.7 s.
ISSUE_30_HEADER_BYTES = 8 * _BYTES_PER_MIB


@dataclass(frozen=True, slots=True)
class Scale:
    """The sizes of one run."""

    name: str
    body_bytes: int
    header_repeats: int
    body_repeats: int
    real_tables: tuple[int, ...] = (1_000, 50_000)
    """Topics of the real REGISTER_BROKER tables measured; the last is the reference."""


SCALES = {
    "full": Scale("full", 16 * _BYTES_PER_MIB - 1024, 15, 2),
    "small": Scale("small", _BYTES_PER_MIB, 5, 1, (1_000, 5_000)),
}


@dataclass(frozen=True, slots=True)
class Row:
    """One measured input."""

    name: str
    input_bytes: int
    best_ms: float
    median_ms: float
    outcome: str
    peak_mib: float = 0.0


@dataclass(frozen=True, slots=True)
class RegisterRow:
    """One REGISTER_BROKER body through ``decode_register_broker_request_body``."""

    name: str
    input_bytes: int
    cpu_ms: float
    ns_per_byte: float
    times_real: float
    """Cost a byte over the reference real table's (compressed: a compressed byte)."""
    outcome: str


@dataclass(frozen=True, slots=True)
class Report:
    """Everything one run measured."""

    scale: str
    headers: list[Row]
    bodies: list[Row]
    registers: list[RegisterRow] = field(default_factory=list)
    register_limits: bool = True


# ---------------------------------------------------------------------- inputs


def _filled(prefix: str, unit: str, suffix: str, size: int) -> str:
    """``prefix`` + as many ``unit`` as fit in ``size`` bytes + ``suffix``."""
    room = size - len(prefix.encode()) - len(suffix.encode())
    return prefix + unit * (room // len(unit.encode())) + suffix


def _value_header(unit: str, size: int) -> str:
    """A real header shape whose one ext field value is made of ``unit``."""
    return _filled(
        '{"code":100,"extFields":{"key":"k","namespace":"ns","value":"',
        unit,
        '"},"flag":0,"language":"JAVA","opaque":1,"version":479}',
        size,
    )


def _structured(units: list[str], size: int) -> str:
    """An object whose ``a`` holds ``units`` (structure), padded by a string value to
    ``size`` bytes."""
    return _filled('{"a":[' + ",".join(units) + '],"pad":"', "x", '"}', size)


def _separators_left(unit: str) -> int:
    """How many ``unit`` fit in the separator limit beside a header's own few."""
    per_unit = sum(unit.count(byte) for byte in "[{,:") + 1
    return (HEADER_SEPARATORS_MAX - 16) // per_unit


def header_shapes() -> list[tuple[str, bytes]]:
    """(name, JSON header) of the costliest headers, at the length the limits allow."""
    full, lenient = HEADER_BYTES_MAX, HEADER_LENIENT_BYTES_MAX
    ext_fields = ",".join(f'"k{index}":1' for index in range(HEADER_EXT_FIELDS_MAX - 1))
    texts = [
        ("value of plain text", _value_header("x", full)),
        ("value of \\n escapes", _value_header("\\n", full)),
        ("value of \\u escapes", _value_header("\\u00e9", full)),
        ("value of escaped quotes", _value_header('\\"', full)),
        ("value of 3-byte characters", _value_header("中", full)),
        (
            "nested lists at the separator limit",
            _structured(["[[]]"] * _separators_left("[[]]"), full),
        ),
        (
            "floats at the separator limit",
            _structured(["1.5e300"] * _separators_left("1.5e300"), full),
        ),
        (
            "ext fields at their limit",
            _filled('{"code":1,"extFields":{' + ext_fields + ',"pad":"', "x", '"}}', full),
        ),
        ("ints past the separator limit", _filled('{"a":[', "1,", "1]}", full)),
        ("quotes past the string limit", '"' * full),
        ("a 4000-digit number", _structured(["9" * 4000], full)),
        ("single-quoted ints", _filled("{'code':105,'a':[", "1,", "1]}", lenient)),
        ("single-quoted \\x escapes", _filled("{code:105,v:'", "\\x41", "'}", lenient)),
        ("both quote kinds, nested", _filled("{c:1,a:'\"',b:\"'\",v:['", "\"','", "']}", lenient)),
        ("unquoted keys", _filled("{", "a:1,", "b:1}", lenient)),
        ("leading zeros", _filled("{a:[", "007,", "7]}", lenient)),
        ("single-quoted past the lenient limit", _filled("{'code':105,'v':'", "x", "'}", full)),
    ]
    return [(name, text.encode()) for name, text in texts]


def body_shapes(size: int) -> list[tuple[str, bytes]]:
    """(name, body) of the costliest bodies of ``size`` bytes."""
    texts = [
        ("ints (standard JSON)", _filled("[", "1,", "1]", size)),
        ("empty lists (standard JSON)", _filled("[", "[],", "[]]", size)),
        ("single-quoted ints", _filled("{'code':105,'a':[", "1,", "1]}", size)),
        ("single-quoted strings", _filled("[", "'ab',", "'ab']", size)),
        ("both quote kinds, nested", _filled("['x',", "\"'\",'\"',", "1]", size)),
        ("unquoted keys", _filled("[", "{a:1},", "{}]", size)),
        ("leading zeros", _filled("[", "01,", "1]", size)),
        ("fastjson escapes", _filled("'", "\\x41", "'", size)),
        ("unquoted keys nested past the depth limit", _filled("", "{k:", "", size)),
    ]
    return [(name, text.encode()) for name, text in texts]


# -------------------------------------------------------- REGISTER_BROKER bodies

_REGISTER_VERSION = 500  # a 5.x broker's: the static-topic mappings are read too
_WRAPPER_START = (
    '{"filterServerList":[],"topicConfigSerializeWrapper":'
    '{"dataVersion":{"counter":1,"stateVersion":0,"timestamp":1},'
)


def _names() -> Iterator[str]:
    """Distinct short names: a, b, ..., 9, aa, ab, ..."""
    alphabet = string.ascii_letters + string.digits
    for length in itertools.count(1):
        for letters in itertools.product(alphabet, repeat=length):
            yield "".join(letters)


def _at_limits(unit: str, size: int, names: Iterator[str] | None = None) -> str:
    """Copies of ``unit`` (``{n}`` takes a new name in each, from ``names`` or
    :func:`_names`), joined by commas, each padded with spaces to the fewest bytes the
    register body limits allow it: its separators and brackets as dense as they may be,
    about ``size`` bytes in all."""
    per_separator = register_body.REGISTER_BODY_BYTES_PER_SEPARATOR_MIN
    per_opener = register_body.REGISTER_BODY_BYTES_PER_OPENER_MIN + 1
    parts: list[str] = []
    total = 0
    for name in _names() if names is None else names:
        text = unit.replace("{n}", name)
        separators = sum(text.count(mark) for mark in "[{,:") + 1  # and its comma
        openers = text.count("{") + text.count("[")
        width = max(separators * per_separator, openers * per_opener) - 1
        parts.append(text.ljust(width))
        total += max(width, len(text)) + 1
        if total >= size:
            return ",".join(parts)
    raise AssertionError("unreachable")


def _in_table(key: str, entries: str) -> bytes:
    return (_WRAPPER_START + f'"{key}":{{' + entries + "}}}").encode()


def _in_filter_list(items: str) -> bytes:
    return ('{"filterServerList":[' + items + '],"topicConfigSerializeWrapper":{}}').encode()


def register_shapes_within(size: int) -> list[tuple[str, bytes]]:
    """(name, body) of the costliest JSON register bodies within the limits."""
    return [
        (
            "tiny topic entries, one object per 33 bytes",
            _in_table("topicConfigTable", _at_limits('"{n}":{"perm":6}', size)),
        ),
        (
            "one topic of attributes",
            _in_table(
                "topicConfigTable", '"t":{"attributes":{' + _at_limits('"{n}":1', size) + "}}"
            ),
        ),
        ("filter server list of ints", _in_filter_list(_at_limits("1", size))),
        ("filter server list of leading zeros", _in_filter_list(_at_limits("01", size))),
        ("filter server list of floats", _in_filter_list(_at_limits("1.5e300", size))),
        (
            "static-topic currIdMap, unquoted int keys",
            _in_table(
                "topicQueueMappingInfoMap",
                '"t":{"currIdMap":{'
                + _at_limits("{n}:1", size, map(str, itertools.count()))
                + "}}",
            ),
        ),
        (
            "ints, then a leniency at the end",
            _in_filter_list(_at_limits("1", size))[:-1] + b',"x":01}',
        ),
    ]


def register_shapes_past(size: int) -> list[tuple[str, bytes]]:
    """(name, body) of hostile JSON register bodies past the limits (the costliest
    before them)."""
    dense = size // 12
    return [
        (
            "tiny topic entries, one per 8 bytes",
            _in_table(
                "topicConfigTable",
                ",".join(f'"{name}":{{}}' for name in itertools.islice(_names(), dense)),
            ),
        ),
        (
            "tiny static-topic mappings",
            _in_table(
                "topicQueueMappingInfoMap",
                ",".join(f'"{name}":{{}}' for name in itertools.islice(_names(), dense)),
            ),
        ),
        ("filter server list of ints, no spaces", _in_filter_list(_filled("", "1,", "1", size))),
        ("both quote kinds, nested", _filled("['x',", "\"'\",'\"',", "1]", size).encode()),
        ("4300-digit ints", _in_filter_list(_filled("", "9" * 4300 + ",", "1", size))),
        ("nested 500 deep", _in_filter_list(_filled("", "[" * 500 + "]" * 500 + ",", "1", size))),
    ]


def _static_wrapper(topics: int, queues: int) -> TopicConfigSerializeWrapper:
    names = list(itertools.islice(_names(), topics))
    return TopicConfigSerializeWrapper(
        data_version=DataVersion(1_700_000_000_000, 1, 7),
        topic_config_table={name: TopicConfig(name, queues, queues) for name in names},
        mapping_data_version=DataVersion(1, 1, 1),
        topic_queue_mapping_info_map={
            name: TopicQueueMappingInfo(
                topic=name,
                total_queues=queues,
                bname="broker-a",
                epoch=1,
                curr_id_map={i: i for i in range(queues)},
            )
            for name in names
        },
    )


def _payload(
    topic_texts: list[bytes], mappings: tuple[bytes, ...] = (), filters: bytes = b"[]"
) -> bytes:
    """The inflated form of a compressed register body (5.x: with its mapping block)."""

    def block(raw: bytes) -> bytes:
        return struct.pack(">i", len(raw)) + raw

    return (
        block(b'{"counter":1,"stateVersion":0,"timestamp":1}')
        + struct.pack(">i", len(topic_texts))
        + b"".join(map(block, topic_texts))
        + block(filters)
        + struct.pack(">i", len(mappings))
        + b"".join(map(block, mappings))
    )


def _within_compressed_limits(payload: bytes, blocks: int) -> bytes:
    """``payload`` deflated, then padded with random bytes after the stream (the
    decoder ignores them) to the fewest bytes the limits let that payload have."""
    stream = zlib.compress(payload, zlib.Z_BEST_COMPRESSION)
    length = max(
        len(stream),
        -(-len(payload) // register_body.REGISTER_BODY_INFLATION_MAX),
        blocks - register_body.REGISTER_BODY_BLOCKS_FREE,
    )
    return stream + random.Random(0).randbytes(length - len(stream))


def compressed_shapes(size: int) -> list[tuple[str, bytes]]:
    """(name, compressed body) of the costliest hostile compressed register bodies
    within the limits (``size``: about how far they inflate), then zip bombs past them."""
    # The same block again and again: the fewest compressed bytes, one a block.
    tiny = [b"a 0 0 0 SINGLE_TAG"] * (size // 22)
    lenient_max = register_body.REGISTER_BODY_LENIENT_PARTS_MAX
    lenient = [b"a 0 0 0 SINGLE_TAG {a:1}"] * lenient_max
    mappings = (b'{topic:"a"}',) * lenient_max
    repeated_map = b'{"topic":"t","currIdMap":{' + b",".join([b"0:0"] * (size // 4)) + b"}}"
    json_block = register_body.REGISTER_BODY_JSON_BLOCK_BYTES_MAX
    filters = _filled("[", "1,", "1]", json_block).encode()
    bomb = [b"a 0 0 0 SINGLE_TAG"] * (size // 22)
    return [
        ("tiny topics", _within_compressed_limits(_payload(tiny), len(tiny))),
        (
            f"{lenient_max:,} tiny topics, attributes not standard JSON",
            _within_compressed_limits(_payload(lenient), len(lenient)),
        ),
        (
            f"{lenient_max:,} tiny mappings, not standard JSON",
            _within_compressed_limits(_payload([], mappings), len(mappings)),
        ),
        (
            "one currIdMap of repeated keys",
            _within_compressed_limits(_payload([], (repeated_map,)), 1),
        ),
        (
            f"filter server list of ints, {json_block:,} bytes",
            _within_compressed_limits(_payload([], filters=filters), 0),
        ),
        ("past: a zip bomb of tiny topics", zlib.compress(_payload(bomb), zlib.Z_BEST_COMPRESSION)),
        (
            "past: a zip bomb of tiny topics, attributes not standard JSON",
            zlib.compress(_payload(lenient * (size // 28 // lenient_max + 1)), 9),
        ),
        (
            "past: tiny topics, attributes not standard JSON, one byte each",
            _within_compressed_limits(_payload(lenient + lenient), 2 * lenient_max),
        ),
        (
            "past: tiny topics in one byte each",
            zlib.compress(_payload(bomb), zlib.Z_BEST_COMPRESSION).ljust(
                len(_payload(bomb)) // register_body.REGISTER_BODY_INFLATION_MAX + 1, b"\0"
            ),
        ),
    ]


def _decode_register(body: bytes, compressed: bool) -> str:
    try:
        register_body.decode_register_broker_request_body(
            body, compressed=compressed, version=_REGISTER_VERSION
        )
    except BodyDecodeError as exc:
        kind = "refused" if isinstance(exc, register_body.RegisterBodyRefused) else "failed"
        return f"{kind}: {exc}"[:110]
    return "read"


_LIMITS_OFF = {
    "REGISTER_BODY_INFLATION_MAX": 1 << 40,
    "REGISTER_BODY_BLOCKS_FREE": 1 << 40,
    "REGISTER_BODY_JSON_BLOCK_BYTES_MAX": 1 << 40,
    "REGISTER_BODY_LENIENT_PARTS_MAX": 1 << 40,
}


@contextlib.contextmanager
def register_limits_off() -> Iterator[None]:
    """The register body limits turned off (what decoding cost before them)."""
    saved = {name: getattr(register_body, name) for name in _LIMITS_OFF}
    check = register_body.check_json_body
    register_body.check_json_body = lambda data: None
    for name, value in _LIMITS_OFF.items():
        setattr(register_body, name, value)
    try:
        yield
    finally:
        register_body.check_json_body = check
        for name, value in saved.items():
            setattr(register_body, name, value)


def _real_bodies(scale: Scale) -> list[tuple[str, bytes, bool]]:
    tables = [
        (f"{topics:,} topics", _util.topic_wrapper([f"topic-{i:06d}" for i in range(topics)]))
        for topics in scale.real_tables
    ]
    first = scale.real_tables[0]
    tables.append((f"{first:,} static topics of 64 queues", _static_wrapper(first, 64)))
    bodies = []
    for label, wrapper in tables:
        for compressed in (False, True):
            body = register_body.encode_register_broker_body(
                RegisterBrokerBody(topic_config_wrapper=wrapper),
                compressed=compressed,
                version=_REGISTER_VERSION,
            )
            kind = "compressed" if compressed else "JSON"
            bodies.append((f"real: {label}, {kind}", body, compressed))
    return bodies


def register_rows(scale: Scale, *, register_limits: bool = True) -> list[RegisterRow]:
    """The REGISTER_BROKER table: real bodies, then hostile ones within and past the limits
    (``register_limits`` False: all decoded with the limits turned off)."""
    size = scale.body_bytes
    bodies = _real_bodies(scale)
    bodies += [(f"within: {name}", body, False) for name, body in register_shapes_within(size)]
    bodies += [(f"past: {name}", body, False) for name, body in register_shapes_past(size)]
    bodies += [(f"compressed: {name}", body, True) for name, body in compressed_shapes(size)]
    measured = []
    with contextlib.nullcontext() if register_limits else register_limits_off():
        for name, body, compressed in bodies:
            call = functools.partial(_decode_register, body, compressed)
            cpu_ms = _util.least_cpu_s(call, scale.body_repeats + 1) * _MS_PER_S
            measured.append((name, body, compressed, cpu_ms, cpu_ms * 1e6 / len(body), call()))
    # ns a byte of the largest real table, JSON and compressed
    reference = {
        compressed: per_byte
        for name, _, compressed, _, per_byte, _ in measured
        if name.startswith(f"real: {scale.real_tables[-1]:,} topics")
    }
    return [
        RegisterRow(name, len(body), cpu_ms, per_byte, per_byte / reference[compressed], outcome)
        for name, body, compressed, cpu_ms, per_byte, outcome in measured
    ]


def _header_frame(header: bytes) -> bytes:
    return struct.pack(">iI", 4 + len(header), len(header)) + header


# ---------------------------------------------------------------------- measuring


def _timed(fn: Callable[[], str], repeats: int) -> tuple[float, float, str]:
    """Best and median milliseconds of ``fn`` over ``repeats`` calls, and its outcome."""
    times, outcome = [], ""
    for _ in range(repeats):
        start = time.perf_counter()
        outcome = fn()
        times.append((time.perf_counter() - start) * _MS_PER_S)
    return min(times), _util.median(times), outcome


def _feed(frame: bytes) -> str:
    try:
        FrameDecoder().feed(frame)
    except ProtocolError as exc:
        return f"refused: {exc}"[:90]
    return "read"


def _load(body: bytes) -> str:
    try:
        fastjson.loads(body)
    except BodyDecodeError as exc:
        return f"refused: {exc}"[:90]
    return "read"


def _peak_mib(fn: Callable[[], object]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / _BYTES_PER_MIB
    finally:
        tracemalloc.stop()


def header_rows(scale: Scale) -> list[Row]:
    """The header table: the baselines, the issue's frame, then each hostile shape."""
    route = encode_frame(
        RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
    )
    kv = encode_frame(
        RemotingCommand.request(
            RequestCode.PUT_KV_CONFIG,
            {"namespace": "ns", "key": "k", "value": "é" * CONSOLE_KV_VALUE_CHARS},
        )
    )
    issue = _header_frame(_filled("{'code':105,'a':[", "1,", "1]}", ISSUE_30_HEADER_BYTES).encode())
    frames = [
        ("baseline: a route query", route),
        ("baseline: PUT_KV_CONFIG of 32,768 é", kv),
        ("the 8 MiB single-quoted header of issue 30", issue),
        *((name, _header_frame(header)) for name, header in header_shapes()),
    ]
    rows = []
    for name, frame in frames:
        best, median, outcome = _timed(functools.partial(_feed, frame), scale.header_repeats)
        rows.append(Row(name, len(frame), best, median, outcome))
    return rows


def body_rows(scale: Scale) -> list[Row]:
    """The body table: the C decoder alone, then ``fastjson.loads`` on each shape."""
    baseline = _filled("[", "1,", "1]", scale.body_bytes)
    best, median, _ = _timed(lambda: str(json.loads(baseline) and ""), scale.body_repeats)
    peak = _peak_mib(lambda: json.loads(baseline))
    rows = [Row("baseline: json.loads of ints", len(baseline), best, median, "read", peak)]
    for name, body in body_shapes(scale.body_bytes):
        best, median, outcome = _timed(functools.partial(_load, body), scale.body_repeats)
        peak = _peak_mib(functools.partial(_load, body))
        rows.append(Row(name, len(body), best, median, outcome, peak))
    return rows


def run(scale: Scale, *, register_limits: bool = True) -> Report:
    """Measure everything at ``scale`` (``register_limits`` False: the REGISTER_BROKER
    bodies with the register body limits turned off)."""
    headers, bodies = header_rows(scale), body_rows(scale)
    registers = register_rows(scale, register_limits=register_limits)
    return Report(scale.name, headers, bodies, registers, register_limits)


def print_report(report: Report) -> None:
    """Markdown tables of a report."""
    _util.print_table(
        f"one header fed to a server's decoder ({report.scale})",
        ["header", "frame bytes", "best ms", "median ms", "outcome"],
        [(r.name, r.input_bytes, r.best_ms, r.median_ms, r.outcome) for r in report.headers],
    )
    _util.print_table(
        f"one body through fastjson.loads ({report.scale})",
        ["body", "bytes", "best ms", "median ms", "peak MiB (tracemalloc)", "outcome"],
        [
            (r.name, r.input_bytes, r.best_ms, r.median_ms, r.peak_mib, r.outcome)
            for r in report.bodies
        ],
    )
    limits = "" if report.register_limits else ", limits off"
    _util.print_table(
        "one REGISTER_BROKER body through decode_register_broker_request_body "
        f"({report.scale}{limits})",
        ["body", "bytes", "CPU ms", "ns a byte", "x real", "outcome"],
        [
            (r.name, r.input_bytes, r.cpu_ms, r.ns_per_byte, r.times_real, r.outcome)
            for r in report.registers
        ],
    )


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scale", choices=sorted(SCALES), default="full", help="small: a quick check run"
    )
    parser.add_argument(
        "--without-register-limits",
        action="store_true",
        help="decode the REGISTER_BROKER bodies with the register body limits turned off",
    )
    args = parser.parse_args(argv)
    print(f"# bench/header_decode.py --scale {args.scale}\n{_util.machine_notes()}")
    print_report(run(SCALES[args.scale], register_limits=not args.without_register_limits))
    return 0


if __name__ == "__main__":
    sys.exit(main())
