"""Benchmark of what one hostile header, or generic body, costs the process that decodes it.

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

REGISTER_BROKER bodies, and every other body kind read through the bounded decoder of
:mod:`remoting.body_limits`, are measured by ``bench/body_decode.py`` alone (the bodies
this bench once measured for REGISTER_BROKER are in ``bench/register_shapes.py``).

Run: ``.venv/bin/python -m bench.header_decode --scale full`` (``small``: 1 MiB bodies).
"""

from __future__ import annotations

import functools
import gc
import json
import struct
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

from bench import _util
from remoting import fastjson
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


SCALES = {
    "full": Scale("full", 16 * _BYTES_PER_MIB - 1024, 15, 2),
    "small": Scale("small", _BYTES_PER_MIB, 5, 1),
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
class Report:
    """Everything one run measured."""

    scale: str
    headers: list[Row]
    bodies: list[Row]


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


def run(scale: Scale) -> Report:
    """Measure everything at ``scale``."""
    return Report(scale.name, header_rows(scale), body_rows(scale))


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


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scale", choices=sorted(SCALES), default="full", help="small: a quick check run"
    )
    args = parser.parse_args(argv)
    print(f"# bench/header_decode.py --scale {args.scale}\n{_util.machine_notes()}")
    print_report(run(SCALES[args.scale]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
