"""Benchmark of decoding one body of every kind a port decodes: real ones, the costliest
within every limit of :mod:`remoting.body_limits`, and hostile ones past them.

For each kind (REGISTER_BROKER as JSON and compressed, QUERY_DATA_VERSION's DataVersion,
broker_app's HEART_BEAT and LOCK_BATCH_MQ, UPDATE_NAMESRV_CONFIG's properties text) it
decodes, through the function the port calls:

* a real body, the baseline of its kind (REGISTER_BROKER: a 5,000-topic table);
* the costliest bodies within every limit, each as dense or as long as the limits let it
  be (for REGISTER_BROKER the shapes of ``bench/register_shapes.py``, once
  ``bench/header_decode.py``'s, and more; those the per-part limits now refuse were
  dropped or made the densest the limits admit, which its docstring lists);
* bodies past a limit, refused (the two attacks of the issue among them: a 0.5 MB
  compressed REGISTER_BROKER with a topic of 60 MB of single-quoted attributes, and a
  15 MiB QUERY_DATA_VERSION of the same text).

CPU time of this thread with the garbage collector held off, the least of a few calls
(``bench._util.least_cpu_s``, as the tests measure it). "x real" is the cost a byte over
the real body's of the same kind (compressed: a compressed byte), measured in the same
run: the machine is shared, so only ratios travel between runs. A second table gives the
costliest single part of each kind on its own (a topic's text, a static topic's mapping,
a subscription expression, a properties line), and the summary the worst ratio a kind.

``--compare-tree DIR`` also decodes the real 50,000-topic table (JSON and compressed,
without and with 5.x attributes) with the code of another tree, in subprocesses
interleaved with this tree's (``git archive HEAD remoting | tar -x -C DIR``: the code
before a change), and prints both and their ratio.

This is the one bench of body decoding for REGISTER_BROKER (``bench/header_decode.py``
measures headers, and ``fastjson.loads`` alone on generic bodies).

Run: ``.venv/bin/python -m bench.body_decode --scale full`` (``small``: 1 MiB bodies).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import random
import string
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench import _util
from bench.register_shapes import (
    compressed_shapes,
    names,
    payload,
    register_shapes_past,
    register_shapes_within,
    within_compressed_limits,
)
from broker_app.clients import decode_heartbeat, decode_lock_body
from raftstore.config import NamesrvConfig
from remoting import bodies, body_limits, register_body
from remoting.body_limits import BodyLimits
from remoting.errors import BodyDecodeError, BodyRefused
from remoting.model import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from tools.cli import ExactArgumentParser

_MS_PER_S = 1_000.0
_NS_PER_S = 1e9
_KIB = 1024
_MIB = 1024 * _KIB
REGISTER_VERSION = 500
"""A 5.x broker's request version: the static-topic mappings are read too."""
REAL_TOPICS = 5_000
COMPARE_TOPICS = 50_000
COMPARE_ROUNDS = 3


@dataclass(frozen=True, slots=True)
class Scale:
    """The sizes of one run."""

    name: str
    register_bytes: int
    """Length of the hostile REGISTER_BROKER bodies (JSON, or inflated)."""
    repeats: int


SCALES = {
    "full": Scale("full", 16 * _MIB - _KIB, 3),
    "small": Scale("small", _MIB, 2),
}


@dataclass(frozen=True, slots=True)
class Shape:
    """One body of a kind: ``role`` is real, within (every limit) or past (one)."""

    kind: str
    role: str
    name: str
    body: bytes


@dataclass(frozen=True, slots=True)
class Row:
    """One measured body."""

    kind: str
    role: str
    name: str
    input_bytes: int
    cpu_ms: float
    ns_per_byte: float
    times_real: float
    outcome: str


@dataclass(frozen=True, slots=True)
class Report:
    """Everything one run measured."""

    scale: str
    rows: list[Row]
    parts: list[tuple[str, int, float]]
    comparison: list[tuple[str, float, float]] = field(default_factory=list)


# --------------------------------------------------------------------- decoders


def _register_json(body: bytes) -> object:
    return register_body.decode_register_broker_request_body(
        body, compressed=False, version=REGISTER_VERSION
    )


def _register_compressed(body: bytes) -> object:
    return register_body.decode_register_broker_request_body(
        body, compressed=True, version=REGISTER_VERSION
    )


DECODERS: dict[str, Callable[[bytes], object]] = {
    "REGISTER_BROKER JSON": _register_json,
    "REGISTER_BROKER compressed": _register_compressed,
    "QUERY_DATA_VERSION": bodies.decode_data_version,
    "HEART_BEAT": decode_heartbeat,
    "LOCK_BATCH_MQ": decode_lock_body,
    "UPDATE_NAMESRV_CONFIG": bodies.decode_properties,
}
"""Each kind and the function its port decodes it with."""


def outcome_of(decode: Callable[[bytes], object], body: bytes) -> str:
    """ "read", or what refused or failed the body."""
    try:
        decode(body)
    except BodyDecodeError as exc:
        kind = "refused" if isinstance(exc, BodyRefused) else "failed"
        return f"{kind}: {exc}"[:120]
    return "read"


# ---------------------------------------------------------------------- shapes


def dense(units: Iterator[str], limits: BodyLimits, size: int, joiner: str = ",") -> str:
    """``units`` joined by ``joiner``, each padded with spaces to the fewest bytes the
    density limits of ``limits`` allow it, as many as fit in ``size`` bytes."""
    parts: list[str] = []
    total = 0
    for unit in units:
        separators = sum(unit.count(mark) for mark in "[{,:") + joiner.count(",")
        openers = unit.count("{") + unit.count("[")
        width = max(
            separators * limits.bytes_per_separator_min,
            openers * (limits.bytes_per_opener_min + 1),
            len(unit) + len(joiner),
        )
        if total + width > size:
            break
        parts.append(unit.ljust(width - len(joiner)))
        total += width
    return joiner.join(parts)


def repeated_keys(chars: int) -> str:
    """An object of one unquoted key repeated (``{a:01,a:01,...}``), ``chars`` long at most:
    fastjson's leniencies in every key and value, one attribute once read."""
    return "{" + ",".join(["a:01"] * ((chars - 2) // 5)) + "}"


def repeated_mapping(block_bytes: int) -> bytes:
    """A TopicQueueMappingInfo of ``block_bytes`` at most whose currIdMap repeats one
    unquoted key: fastjson's leniency in every key, one queue once read."""
    prefix = '{"topic":"t","currIdMap":{'
    return (prefix + ",".join(["0:0"] * ((block_bytes - len(prefix) - 2) // 4)) + "}}").encode()


def expression(bytes_max: int) -> str:
    """A subscription expression of distinct tags of two characters or more, ``||``
    between them, ``bytes_max`` long at most."""
    tags = "||".join(itertools.islice(names(), 62, 62 + bytes_max // 4 + 1))
    return tags[: tags.rfind("||", 0, bytes_max + 1)]


def issue_register_body() -> bytes:
    """The issue's compressed REGISTER_BROKER: a random 720 KB topic name (to meet the
    inflation limit) and a topic whose attributes are 60 MB of ``{"a":'"',...}``."""
    rng = random.Random(30)
    name = "".join(rng.choice(string.ascii_letters) for _ in range(720_000)).encode()
    unit = b'"a":\'"\','
    attributes = b"{" + unit * (60_000_000 // len(unit)) + b'"a":\'"\'}'
    inflated = payload([name + b" 8 8 6 SINGLE_TAG {}", b"t 8 8 6 SINGLE_TAG " + attributes])
    return zlib.compress(inflated, zlib.Z_BEST_COMPRESSION)


def issue_single_quoted(size: int, prefix: bytes = b"{") -> bytes:
    """The issue's lenient text: ``{"a":'"',"a":'"',...}`` of about ``size`` bytes."""
    unit, last = b'"a":\'"\',', b'"a":\'"\'}'
    return prefix + unit * ((size - len(prefix) - len(last)) // len(unit)) + last


def _table(names: list[str], attributes: dict[str, str] | None = None) -> RegisterBrokerBody:
    wrapper = TopicConfigSerializeWrapper(
        data_version=DataVersion(1_700_000_000_000, 42, 7),
        topic_config_table={
            name: TopicConfig(name, 8, 8, 6, attributes=dict(attributes or {})) for name in names
        },
    )
    return RegisterBrokerBody(topic_config_wrapper=wrapper)


def _real_table(compressed: bool) -> bytes:
    names = [f"topic-{i:06d}" for i in range(REAL_TOPICS)]
    return register_body.encode_register_broker_body(
        _table(names), compressed=compressed, version=REGISTER_VERSION
    )


def _of(kind: str, rows: list[tuple[str, str, bytes]]) -> list[Shape]:
    return [Shape(kind, role, name, body) for role, name, body in rows]


def register_json_shapes(size: int) -> list[Shape]:
    """REGISTER_BROKER as JSON: the shapes of ``bench/register_shapes.py`` and more."""
    limits, name_chars = body_limits.REGISTER_BROKER, body_limits.TOPIC_NAME_CHARS_MAX
    long_names = (("x" * name_chars)[: -len(n)] + n for n in names())
    attributes = ",".join(f'"+k{i}":"v"' for i in range(body_limits.TOPIC_ATTRIBUTES_MAX))
    with_attributes = (f'"{n}":{{"attributes":{{{attributes}}}}}' for n in names())
    tiny = dense(map('"{}":{{}}'.format, names()), limits, size - 2 * _KIB)
    too_long = ',"' + "x" * (name_chars + 1) + '":{}'
    table = '{"filterServerList":[],"topicConfigSerializeWrapper":{"topicConfigTable":{%s}}}'
    rows = [("real", f"{REAL_TOPICS:,} topics", _real_table(False))]
    rows += [("within", n, b) for n, b in register_shapes_within(size)]
    rows += [
        (
            "within",
            f"topic names of {name_chars:,} characters",
            (table % dense((f'"{n}":{{"perm":6}}' for n in long_names), limits, size)).encode(),
        ),
        (
            "within",
            f"tiny topics of {body_limits.TOPIC_ATTRIBUTES_MAX} attributes",
            (table % dense(with_attributes, limits, size)).encode(),
        ),
    ]
    rows += [("past", n, b) for n, b in register_shapes_past(size)]
    rows.append(
        (
            "past",
            "a string past the longest topic name, at the end",
            (table % (tiny + too_long)).encode(),
        )
    )
    return _of("REGISTER_BROKER JSON", rows)


def register_compressed_shapes(size: int) -> list[Shape]:
    """REGISTER_BROKER in its compressed form (``size``: about how far it inflates)."""
    lenient_max = register_body.REGISTER_BODY_LENIENT_PARTS_MAX
    chars = body_limits.TOPIC_ATTRIBUTES_CHARS_MAX
    lenient = [f"a 0 0 0 SINGLE_TAG {repeated_keys(chars)}".encode()] * lenient_max
    block_bytes = body_limits.MAPPING_BLOCK_BYTES_MAX
    mappings = [repeated_mapping(block_bytes)] * max(1, size // block_bytes)
    long_name = "x" * body_limits.TOPIC_NAME_CHARS_MAX
    named = [f"{long_name[: -len(n)]}{n} 8 8 6 SINGLE_TAG".encode() for n in _names_up_to(size)]
    within = within_compressed_limits  # the same padding as register_shapes' own
    too_long = b't 8 8 6 SINGLE_TAG {"a":"' + b"x" * chars + b'"}'
    rows = [("real", f"{REAL_TOPICS:,} topics", _real_table(True))]
    for name, body in compressed_shapes(size):
        rows.append(
            (
                "past" if name.startswith("past: ") else "within",
                name[6:] if name.startswith("past: ") else name,
                body,
            )
        )
    rows += [
        (
            "within",
            f"{lenient_max:,} topics, attributes of {chars} characters of repeated unquoted keys",
            within(payload(lenient), len(lenient)),
        ),
        (
            "within",
            f"static-topic mappings of {block_bytes:,} bytes of repeated unquoted keys",
            within(payload([], mappings), len(mappings)),
        ),
        (
            "within",
            f"topic names of {body_limits.TOPIC_NAME_CHARS_MAX:,} characters",
            within(payload(named), len(named)),
        ),
        ("past", "the issue's 60 MB attributes and 720 KB name", issue_register_body()),
        ("past", f"attributes of {chars + 9} characters", zlib.compress(payload([too_long]), 9)),
        (
            "past",
            "attributes of single quotes",
            zlib.compress(payload([b"t 8 8 6 SINGLE_TAG {'a':'b'}"]), 9),
        ),
    ]
    return _of("REGISTER_BROKER compressed", rows)


def _names_up_to(size: int) -> list[str]:
    """Enough distinct names for topic texts of about 1 KiB to make ``size`` bytes."""
    return list(itertools.islice(names(), size // (body_limits.TOPIC_NAME_CHARS_MAX + 24)))


def _json_list(unit: str, size: int) -> bytes:
    """A JSON list of ``unit`` as long as fits in ``size`` bytes."""
    return ("[" + ",".join([unit] * ((size - 1) // (len(unit) + 1))) + "]").encode()


def data_version_shapes() -> list[Shape]:
    """QUERY_DATA_VERSION's body."""
    size = body_limits.DATA_VERSION.body_bytes_max
    real = bodies.encode_data_version(DataVersion(0, 1_700_000_000_000, 42))
    rows = [
        ("real", "a broker's DataVersion", real),
        ("within", f"{size} bytes of single quotes", issue_single_quoted(size)),
        ("within", f"{size} bytes of unquoted keys", repeated_keys(size).encode()),
        ("within", f"{size} bytes of ints", b'{"a":' + _json_list("1", size - 6) + b"}"),
        ("past", "the issue's 15 MiB of single quotes", issue_single_quoted(15 * _MIB)),
        ("past", f"{size + 1} bytes", b" " * (size - 1) + b"{}"),
    ]
    return _of("QUERY_DATA_VERSION", rows)


def _heartbeat(groups: list[str], *, client: str = "c") -> str:
    return '{"clientID":"' + client + '","consumerDataSet":[' + ",".join(groups) + "]}"


def _subscription(topic: str, expression: str = "*") -> str:
    return (
        '{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"'
        + expression
        + '","subVersion":1700000000000,"tagsSet":[],"topic":"'
        + topic
        + '"}'
    )


def real_heartbeat(groups: int = 500) -> bytes:
    """A Java client's heartbeat: ``groups`` consumer groups of two topics and their
    retry topic, 50 producer groups (fastjson's sorted keys, as the Java client writes)."""
    consumers = []
    for index in range(groups):
        group = f"order-service-consumer-group-{index:04d}"
        topics = (f"order-events-{index:04d}-a", f"order-events-{index:04d}-b", "%RETRY%" + group)
        consumers.append(
            '{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY",'
            f'"groupName":"{group}","messageModel":"CLUSTERING","subscriptionDataSet":['
            + ",".join(map(_subscription, topics))
            + '],"unitMode":false}'
        )
    producers = ",".join(f'{{"groupName":"order-producer-{i:03d}"}}' for i in range(50))
    return (
        '{"clientID":"192.168.100.101@12345#1700000000000123","consumerDataSet":['
        + ",".join(consumers)
        + '],"heartbeatFingerprint":0,"producerDataSet":['
        + producers
        + '],"withoutSub":false}'
    ).encode()


def heart_beat_shapes() -> list[Shape]:
    """broker_app's HEART_BEAT body."""
    limits = body_limits.HEART_BEAT
    size = limits.body_bytes_max - _KIB
    tags = expression(limits.string_bytes_max)
    subscriptions = ",".join(_subscription(f"t{i}", tags) for i in range(size // (len(tags) + 150)))
    expressions = '{"groupName":"g","subscriptionDataSet":[' + subscriptions + "]}"
    ints = dense(iter(["1"] * size), limits, size - 100)
    codes = '{"groupName":"g","subscriptionDataSet":[{"topic":"t","codeSet":[' + ints + "]}]}"
    groups_max = body_limits.HEART_BEAT_GROUPS_MAX
    per_group = body_limits.HEART_BEAT_SUBSCRIPTIONS_MAX // groups_max
    group = (
        '{"groupName":"g%d","subscriptionDataSet":['
        + ",".join(['{"topic":"t"}'] * per_group)
        + "]}"
    )
    tiny = dense((group % g for g in range(groups_max)), limits, size)
    client = b'{"clientID":"c",'
    rows = [
        ("real", "500 consumer groups, 1,500 subscriptions", real_heartbeat()),
        (
            "within",
            f"subscription expressions of {len(tags):,} bytes, 2-character tags",
            _heartbeat([expressions]).encode(),
        ),
        ("within", "a codeSet of ints at the separator limit", _heartbeat([codes]).encode()),
        (
            "within",
            f"{groups_max:,} groups of {per_group} tiny subscriptions",
            _heartbeat([tiny]).encode(),
        ),
        ("within", "4 KiB of single quotes", issue_single_quoted(4 * _KIB, client)),
        ("past", "the issue's 15 MiB of single quotes", issue_single_quoted(15 * _MIB, client)),
        ("past", "1 MiB of single quotes", issue_single_quoted(size, client)),
        (
            "past",
            f"{groups_max + 1:,} consumer groups",
            _heartbeat(['{"groupName":"g"}'] * (groups_max + 1)).encode(),
        ),
        (
            "past",
            "a codeSet of ints past the separator limit",
            _heartbeat([codes.replace("1 ", "1,")]).encode(),
        ),
    ]
    return _of("HEART_BEAT", rows)


def _lock(queues: str) -> bytes:
    return ('{"clientId":"c","consumerGroup":"g","mqSet":[' + queues + "]}").encode()


def lock_shapes() -> list[Shape]:
    """broker_app's LOCK_BATCH_MQ body."""
    limits, queues_max = body_limits.LOCK_BATCH_MQ, body_limits.LOCK_QUEUES_MAX
    real = ",".join(
        f'{{"brokerName":"broker-a","queueId":{q},"topic":"%RETRY%order-consumer-group-{t:03d}"}}'
        for t in range(512)
        for q in range(16)
    )
    queue = '{"brokerName":"b","queueId":0,"topic":"t"}'
    tiny = dense(iter([queue] * queues_max), limits, limits.body_bytes_max)
    ints = dense(iter(["1"] * limits.body_bytes_max), limits, limits.body_bytes_max - 100)
    rows = [
        ("real", "8,192 queues of one group on one broker", _lock(real)),
        ("within", f"{queues_max:,} tiny queues", _lock(tiny)),
        (
            "within",
            "an unknown list of ints at the separator limit",
            b'{"clientId":"c","consumerGroup":"g","x":[' + ints.encode() + b"]}",
        ),
        ("past", "the issue's 15 MiB of single quotes", issue_single_quoted(15 * _MIB)),
        ("past", f"{queues_max + 1:,} tiny queues", _lock(",".join([queue] * (queues_max + 1)))),
    ]
    return _of("LOCK_BATCH_MQ", rows)


def properties_shapes() -> list[Shape]:
    """UPDATE_NAMESRV_CONFIG's properties text."""
    size = body_limits.PROPERTIES.body_bytes_max
    real = bodies.encode_properties(NamesrvConfig().to_properties())
    rows = [
        ("real", "a NameServer's whole config", real),
        ("within", "key=value lines of one character", b"a=b\n" * (size // 4)),
        ("within", "one line continued on every line", (b"a\\\n" * size)[:size]),
        ("within", "\\u escapes", b"k=" + b"\\u0041" * ((size - 2) // 6)),
        ("within", "blank lines", b"\n" * size),
        (
            "past",
            f"{size + 1:,} bytes of continued lines (1 MiB: 3.8 s before)",
            (b"a\\\n" * size)[: size + 1],
        ),
    ]
    return _of("UPDATE_NAMESRV_CONFIG", rows)


def shapes(scale: Scale) -> list[Shape]:
    """Every body of every kind at ``scale``."""
    return [
        *register_json_shapes(scale.register_bytes),
        *register_compressed_shapes(scale.register_bytes),
        *data_version_shapes(),
        *heart_beat_shapes(),
        *lock_shapes(),
        *properties_shapes(),
    ]


# -------------------------------------------------------------------- measuring


def measure(shape: Shape, repeats: int) -> tuple[float, str]:
    """CPU ms of decoding ``shape`` (the least of ``repeats``) and its outcome."""
    decode = DECODERS[shape.kind]
    call = functools.partial(outcome_of, decode, shape.body)
    return _util.least_cpu_s(call, repeats) * _MS_PER_S, call()


def rows_of(measured: list[tuple[Shape, float, str]]) -> list[Row]:
    """Rows with each body's cost a byte over its kind's real body's."""
    real = {
        shape.kind: cpu_ms / len(shape.body)
        for shape, cpu_ms, _ in measured
        if shape.role == "real"
    }
    return [
        Row(
            shape.kind,
            shape.role,
            shape.name,
            len(shape.body),
            cpu_ms,
            cpu_ms / _MS_PER_S * _NS_PER_S / len(shape.body),
            cpu_ms / len(shape.body) / real[shape.kind],
            outcome,
        )
        for shape, cpu_ms, outcome in measured
    ]


def part_costs(repeats: int) -> list[tuple[str, int, float]]:
    """The costliest single part of each kind, alone in a body: (part, bytes, CPU ms)."""
    name = "x" * body_limits.TOPIC_NAME_CHARS_MAX
    attributes = repeated_keys(body_limits.TOPIC_ATTRIBUTES_CHARS_MAX)
    topic = f"{name} 8 8 6 SINGLE_TAG {attributes}".encode()
    block_bytes = body_limits.MAPPING_BLOCK_BYTES_MAX
    queues = ",".join(f"{q}:{q}" for q in range(body_limits.MAPPING_QUEUES_MAX))
    distinct = '{"topic":"t","currIdMap":{' + queues + "}}"
    tags = expression(body_limits.HEART_BEAT.string_bytes_max)
    heartbeat = _heartbeat(
        ['{"groupName":"g","subscriptionDataSet":[' + _subscription("t", tags) + "]}"]
    )
    parts = [
        (
            "a topic's text at every limit, lenient attributes",
            _register_compressed,
            zlib.compress(payload([topic]), 9),
        ),
        (
            f"a static-topic mapping of {block_bytes:,} bytes, repeated keys",
            _register_compressed,
            zlib.compress(payload([], [repeated_mapping(block_bytes)]), 9),
        ),
        (
            f"a static-topic mapping of {body_limits.MAPPING_QUEUES_MAX:,} queues",
            _register_compressed,
            zlib.compress(payload([], [distinct.encode()]), 9),
        ),
        (
            "a DataVersion of 256 bytes of single quotes",
            bodies.decode_data_version,
            issue_single_quoted(256),
        ),
        ("a subscription expression of 16 KiB", decode_heartbeat, heartbeat.encode()),
        (
            "a properties line continued over 64 KiB",
            bodies.decode_properties,
            (b"a\\\n" * _MIB)[: body_limits.PROPERTIES.body_bytes_max],
        ),
    ]
    costs = []
    for label, decode, body in parts:
        call = functools.partial(outcome_of, decode, body)
        outcome = call()
        assert outcome == "read", (label, outcome)
        costs.append((label, len(body), _util.least_cpu_s(call, repeats) * _MS_PER_S))
    return costs


_CHILD = """
import gc, json, sys, time
from remoting import register_body
from remoting.model import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
def least(call, times):
    gc.disable()
    spent = []
    for _ in range(times):
        started = time.thread_time(); call(); spent.append(time.thread_time() - started)
    gc.enable()
    return min(spent)
out = {}
for label, attributes in (("", {}), (", 5.x attributes", {"+message.type": "NORMAL"})):
    table = {f"topic-{i:06d}": TopicConfig(f"topic-{i:06d}", 8, 8, 6, attributes=dict(attributes))
             for i in range(int(sys.argv[1]))}
    wrapper = TopicConfigSerializeWrapper(DataVersion(1700000000000, 42, 7), table)
    for compressed in (False, True):
        body = register_body.encode_register_broker_body(
            RegisterBrokerBody(topic_config_wrapper=wrapper), compressed=compressed, version=500)
        call = lambda: register_body.decode_register_broker_request_body(
            body, compressed=compressed, version=500)
        out[("compressed" if compressed else "JSON") + label] = least(call, 5)
print(json.dumps(out))
"""


def _child_run(tree: Path, topics: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(topics)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return dict(json.loads(done.stdout))


def compare_trees(other: Path, topics: int = COMPARE_TOPICS) -> list[tuple[str, float, float]]:
    """(table, other tree's CPU ms, this tree's) for a real table of ``topics``, the
    least of :data:`COMPARE_ROUNDS` interleaved rounds of five decodes each."""
    this = Path(__file__).resolve().parents[1]
    runs: dict[Path, list[dict[str, float]]] = {other: [], this: []}
    for _ in range(COMPARE_ROUNDS):
        for tree in runs:
            runs[tree].append(_child_run(tree, topics))
    return [
        (
            f"{topics:,} topics, {key}",
            min(run[key] for run in runs[other]) * _MS_PER_S,
            min(run[key] for run in runs[this]) * _MS_PER_S,
        )
        for key in runs[this][0]
    ]


def run(scale: Scale, compare_tree: Path | None = None) -> Report:
    """Measure every shape at ``scale`` (and the comparison with ``compare_tree``)."""
    measured = []
    for shape in shapes(scale):
        cpu_ms, outcome = measure(shape, scale.repeats)
        measured.append((shape, cpu_ms, outcome))
    comparison = [] if compare_tree is None else compare_trees(compare_tree)
    return Report(scale.name, rows_of(measured), part_costs(scale.repeats), comparison)


def summary(report: Report) -> list[tuple[str, float, float, str, float, float]]:
    """Per kind: real ns a byte, the worst within ns a byte (and which), their ratio,
    and the costliest refusal in ms."""
    out = []
    for kind in DECODERS:
        rows = [row for row in report.rows if row.kind == kind]
        real = next(row for row in rows if row.role == "real")
        read = [row for row in rows if row.role == "within" and row.outcome == "read"]
        worst = max(read, key=lambda row: row.ns_per_byte)
        refusals = [row.cpu_ms for row in rows if row.outcome.startswith("refused")]
        out.append(
            (kind, real.ns_per_byte, worst.ns_per_byte, worst.name, worst.times_real, max(refusals))
        )
    return out


def print_report(report: Report) -> None:
    """Markdown tables of a report."""
    _util.print_table(
        f"one body of each kind through its port's decoder ({report.scale})",
        ["kind", "body", "bytes", "CPU ms", "ns a byte", "x real", "outcome"],
        [
            (
                r.kind,
                f"{r.role}: {r.name}",
                r.input_bytes,
                r.cpu_ms,
                r.ns_per_byte,
                r.times_real,
                r.outcome,
            )
            for r in report.rows
        ],
    )
    _util.print_table(
        "the costliest body within every limit, a byte, against a real one",
        [
            "kind",
            "real ns a byte",
            "worst within ns a byte",
            "worst within",
            "x real",
            "costliest refusal ms",
        ],
        summary(report),
    )
    _util.print_table(
        "the costliest single part within its limits, alone in a body",
        ["part", "body bytes", "CPU ms"],
        report.parts,
    )
    if report.comparison:
        _util.print_table(
            "a real table decoded by the other tree and by this one (least of interleaved rounds)",
            ["table", "other tree CPU ms", "this tree CPU ms", "this / other"],
            [(name, other, this, this / other) for name, other, this in report.comparison],
        )


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scale", choices=sorted(SCALES), default="full", help="small: a quick check run"
    )
    parser.add_argument(
        "--compare-tree",
        type=Path,
        default=None,
        help="a tree of the code before a change (git archive HEAD remoting | tar -x -C DIR); "
        "default: none",
    )
    args = parser.parse_args(argv)
    print(f"# bench/body_decode.py --scale {args.scale}\n{_util.machine_notes()}")
    with contextlib.suppress(BrokenPipeError):
        print_report(run(SCALES[args.scale], args.compare_tree))
    return 0


if __name__ == "__main__":
    sys.exit(main())
