"""Hostile REGISTER_BROKER bodies, for ``bench/body_decode.py`` (which measures them
beside shapes of its own), ``bench/register_offload.py`` and the tests of the limits.

A REGISTER_BROKER body is decoded before anyone is authenticated (a white-listed
address registers unsigned). Here: the costliest JSON bodies within every limit of
:mod:`remoting.body_limits`, each as dense as the limits let it be; hostile JSON bodies
past them (the costliest before them); and compressed bodies within the limits, then
past them (zip bombs among them). Every ``within`` body is read, every ``past`` one
refused.

These shapes were ``bench/header_decode.py``'s until the per-part limits of
:mod:`remoting.body_limits` came, which refuse some of its ``within`` shapes. Of those:

* dropped: ``one topic of attributes`` (a topic has ``TOPIC_ATTRIBUTES_MAX`` attributes
  at most; one key repeated over the body is read, at less than a real table's cost a
  byte, so the costliest attributes are body_decode's ``tiny topics of 8 attributes``);
  the filter server lists of ints, of leading zeros and of floats, and the compressed
  one of ints (``FILTER_SERVERS_MAX`` addresses at most: no longer a body's worth of
  anything); the compressed ``one currIdMap of repeated keys`` (a mapping block is
  ``MAPPING_BLOCK_BYTES_MAX`` at most: its densest form is body_decode's ``static-topic
  mappings of 32,768 bytes of repeated unquoted keys``);
* made the densest the limits admit: the static-topic ``currIdMap`` of unquoted int keys
  is now static topics of ``MAPPING_QUEUES_MAX`` queues each, and ``ints, then a
  leniency at the end`` is now tiny topic entries then one leniency at the end (the C
  decoder reads the whole body, then the lenient one reads it again).
"""

from __future__ import annotations

import itertools
import random
import string
import struct
import zlib
from collections.abc import Iterable, Iterator

from remoting import body_limits, register_body

_WRAPPER_START = (
    '{"filterServerList":[],"topicConfigSerializeWrapper":'
    '{"dataVersion":{"counter":1,"stateVersion":0,"timestamp":1},'
)


def names() -> Iterator[str]:
    """Distinct short names: a, b, ..., 9, aa, ab, ..."""
    alphabet = string.ascii_letters + string.digits
    for length in itertools.count(1):
        for letters in itertools.product(alphabet, repeat=length):
            yield "".join(letters)


def _filled(prefix: str, unit: str, suffix: str, size: int) -> str:
    """``prefix`` + as many ``unit`` as fit in ``size`` bytes + ``suffix``."""
    room = size - len(prefix.encode()) - len(suffix.encode())
    return prefix + unit * (room // len(unit.encode())) + suffix


def _at_limits(unit: str, size: int) -> str:
    """Copies of ``unit`` (``{n}`` takes a new name in each, from :func:`names`), joined
    by commas, each padded with spaces to the fewest bytes the register body limits allow
    it: its separators and brackets as dense as they may be, as many as fit in ``size``
    bytes."""
    per_separator = register_body.REGISTER_BODY_BYTES_PER_SEPARATOR_MIN
    per_opener = register_body.REGISTER_BODY_BYTES_PER_OPENER_MIN + 1
    parts: list[str] = []
    total = 0
    for name in names():
        text = unit.replace("{n}", name)
        separators = sum(text.count(mark) for mark in "[{,:") + 1  # and its comma
        openers = text.count("{") + text.count("[")
        width = max(separators * per_separator, openers * per_opener, len(text) + 1) - 1
        if total + width + 1 > size:
            return ",".join(parts)
        parts.append(text.ljust(width))
        total += width + 1
    raise AssertionError("unreachable")


def _in_table(key: str, entries: str) -> bytes:
    return (_WRAPPER_START + f'"{key}":{{' + entries + "}}}").encode()


def _in_filter_list(items: str) -> bytes:
    return ('{"filterServerList":[' + items + '],"topicConfigSerializeWrapper":{}}').encode()


def register_shapes_within(size: int) -> list[tuple[str, bytes]]:
    """(name, body) of the costliest JSON register bodies within every limit."""
    per_object = register_body.REGISTER_BODY_BYTES_PER_OPENER_MIN + 1
    tiny = _in_table("topicConfigTable", _at_limits('"{n}":{"perm":6}', size))
    queues = body_limits.MAPPING_QUEUES_MAX
    curr_id_map = ",".join(f"{queue}:1" for queue in range(queues))
    return [
        (f"tiny topic entries, one object per {per_object} bytes", tiny),
        (
            f"static-topic mappings of {queues:,} queues, unquoted int keys",
            _in_table(
                "topicQueueMappingInfoMap",
                _at_limits('"{n}":{"currIdMap":{' + curr_id_map + "}}", size),
            ),
        ),
        ("tiny topic entries, then a leniency at the end", tiny[:-1] + b',"x":01}'),
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
                ",".join(f'"{name}":{{}}' for name in itertools.islice(names(), dense)),
            ),
        ),
        (
            "tiny static-topic mappings",
            _in_table(
                "topicQueueMappingInfoMap",
                ",".join(f'"{name}":{{}}' for name in itertools.islice(names(), dense)),
            ),
        ),
        ("filter server list of ints, no spaces", _in_filter_list(_filled("", "1,", "1", size))),
        ("both quote kinds, nested", _filled("['x',", "\"'\",'\"',", "1]", size).encode()),
        ("4300-digit ints", _in_filter_list(_filled("", "9" * 4300 + ",", "1", size))),
        ("nested 500 deep", _in_filter_list(_filled("", "[" * 500 + "]" * 500 + ",", "1", size))),
    ]


def payload(
    topic_texts: Iterable[bytes], mappings: Iterable[bytes] = (), filters: bytes = b"[]"
) -> bytes:
    """The inflated form of a compressed register body (5.x: with its mapping block)."""

    def block(raw: bytes) -> bytes:
        return struct.pack(">i", len(raw)) + raw

    topics, maps = list(topic_texts), list(mappings)
    return (
        block(b'{"counter":1,"stateVersion":0,"timestamp":1}')
        + struct.pack(">i", len(topics))
        + b"".join(map(block, topics))
        + block(filters)
        + struct.pack(">i", len(maps))
        + b"".join(map(block, maps))
    )


def within_compressed_limits(inflated: bytes, blocks: int) -> bytes:
    """``inflated`` deflated, then padded with random bytes after the stream (the
    decoder ignores them) to the fewest bytes the limits let that payload have."""
    stream = zlib.compress(inflated, zlib.Z_BEST_COMPRESSION)
    length = max(
        len(stream),
        -(-len(inflated) // register_body.REGISTER_BODY_INFLATION_MAX),
        blocks - register_body.REGISTER_BODY_BLOCKS_FREE,
    )
    return stream + random.Random(0).randbytes(length - len(stream))


def compressed_shapes(size: int) -> list[tuple[str, bytes]]:
    """(name, compressed body) of the costliest hostile compressed register bodies
    within the limits (``size``: about how far they inflate), then bodies past them
    (named ``past: ...``), zip bombs among them."""
    # The same block again and again: the fewest compressed bytes, one a block.
    tiny = [b"a 0 0 0 SINGLE_TAG"] * (size // 22)
    lenient_max = register_body.REGISTER_BODY_LENIENT_PARTS_MAX
    lenient = [b"a 0 0 0 SINGLE_TAG {a:1}"] * lenient_max
    mappings = [b'{topic:"a"}'] * lenient_max
    bomb = payload(tiny)
    return [
        ("tiny topics", within_compressed_limits(bomb, len(tiny))),
        (
            f"{lenient_max:,} tiny topics, attributes not standard JSON",
            within_compressed_limits(payload(lenient), len(lenient)),
        ),
        (
            f"{lenient_max:,} tiny mappings, not standard JSON",
            within_compressed_limits(payload([], mappings), len(mappings)),
        ),
        ("past: a zip bomb of tiny topics", zlib.compress(bomb, zlib.Z_BEST_COMPRESSION)),
        (
            "past: a zip bomb of tiny topics, attributes not standard JSON",
            zlib.compress(payload(lenient * (size // 28 // lenient_max + 1)), 9),
        ),
        (
            "past: tiny topics, attributes not standard JSON, one byte each",
            within_compressed_limits(payload(lenient + lenient), 2 * lenient_max),
        ),
        (
            "past: tiny topics in one byte each",
            zlib.compress(bomb, zlib.Z_BEST_COMPRESSION).ljust(
                len(bomb) // register_body.REGISTER_BODY_INFLATION_MAX + 1, b"\0"
            ),
        ),
    ]
