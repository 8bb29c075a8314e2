"""The one bounded decoder of bodies (remoting/body_limits.py; docs/SECURITY.md, "Hostile
clients", "Body limits"): every limit of a kind refuses a body just past it and accepts
one just under it, at a CPU cost bounded by what the refusal needs (a few C passes), and
every decode function of remoting/bodies.py and remoting/properties.py reads through its
kind's budget. The REGISTER_BROKER parts are in test_register_body_parts.py, broker_app's
kinds in tests/broker_app/test_body_limits.py.

Before, a 15 MiB QUERY_DATA_VERSION body of single-quoted text (a DataVersion is ~60
bytes) was decoded whole: 1.6 to 2.5 s of the gateway's event loop."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import pytest

from bench._util import least_cpu_s
from bench.body_decode import issue_single_quoted
from remoting import bodies, body_limits, fastjson, properties
from remoting.body_limits import (
    DATA_VERSION,
    PROPERTIES,
    BodyLimits,
    Written,
    check_json,
    longest_string_over,
    read_json,
)
from remoting.errors import BodyDecodeError, BodyRefused
from remoting.frame import FRAME_BYTES_MAX
from remoting.model import DataVersion

MIB = 1024 * 1024
REFUSAL_S_MAX = 0.050
"""What refusing any of the attacks may cost at most (measured: under 0.01 ms)."""
# A kind small enough to put a body at each of its limits, as dense as the register's.
TINY = BodyLimits(
    what="tiny body",
    body_bytes_max=64 * 1024,
    string_bytes_max=100,
    single_quotes_bytes_max=50,
    lenient_bytes_max=8 * 1024,
    depth_max=5,
    int_digits_max=20,
    bytes_per_separator_min=3,
    bytes_per_opener_min=32,
    unchecked_bytes_max=1024,
    written=Written("tester", 6, 69, 3, "a name"),
)


def refusal(data: bytes, limits: BodyLimits = TINY) -> str:
    """The refusal's message; fails when the body is not refused."""
    with pytest.raises(BodyRefused) as refused:
        check_json(data, limits)
    return str(refused.value)


def padded(items: list[str], width: int) -> str:
    return ",".join(item.ljust(width) for item in items)


# ---------------------------------------------------------------- one per limit


def test_the_whole_body() -> None:
    at = b"[" + b" " * (TINY.body_bytes_max - 2) + b"]"
    check_json(at, TINY)
    assert refusal(at + b" ") == (
        f"tiny body of {TINY.body_bytes_max + 1} bytes refused: longer than the limit of "
        f"{TINY.body_bytes_max} bytes"
    )


def test_one_string_counted_as_written() -> None:
    at = '{"a":"' + "x" * TINY.string_bytes_max + '"}'
    check_json(at.encode(), TINY)
    message = refusal(('{"a":"' + "x" * (TINY.string_bytes_max + 1) + '"}').encode())
    assert message.endswith(
        "a string of 101 bytes, more than 100 (the longest a tester writes is a name)"
    )
    # Escaped quotes are part of their string, not its end.
    check_json(('{"a":"' + '\\"' * 50 + '"}').encode(), TINY)
    assert "a string of 102 bytes" in refusal(('{"a":"' + '\\"' * 51 + '"}').encode())
    # Keys are strings too; text outside strings is not (a list of 200 digits' worth of ints).
    assert "a string of 101 bytes" in refusal(('{"' + "k" * 101 + '":1}').encode())
    check_json(("[" + ",".join(["1"] * 100) + "]").encode(), TINY)


@pytest.mark.parametrize("seed", range(200))
def test_the_longest_string_is_found_as_splitting_at_every_quote_finds_it(seed: int) -> None:
    rng = random.Random(seed)
    text = "".join(rng.choice('xxxxxxxx"\\,{') for _ in range(rng.randrange(0, 3000))).encode()
    bytes_max = rng.randrange(1, 200)
    neutral = text.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    strings = neutral.split(b'"')[1::2]
    expected = next((len(s) for s in strings if len(s) > bytes_max), 0)

    assert longest_string_over(text, bytes_max) == expected


def test_single_quotes_only_in_short_bodies() -> None:
    short = ("{'a':'" + "x" * 42 + "'}").encode()
    assert len(short) == TINY.single_quotes_bytes_max
    check_json(short, TINY)
    message = refusal(short[:-2] + b"x'}")
    assert "single-quoted strings (no tester writes them; read only in bodies of 50" in message
    # A quote inside a double-quoted string is no single-quoted string.
    check_json(('{"a":"' + "it's " * 19 + '"}').encode(), TINY)


def test_separators_and_objects_counted_in_bodies_past_the_unchecked_length() -> None:
    ints = padded(["1"] * 500, 2)
    check_json(f"[{ints}]".encode(), TINY)  # one separator per 3 bytes
    denser = f"[{ints}]".replace("1 ,", "1,,", 10).encode()
    assert "of { [ , : outside strings, more than one per 3 bytes" in refusal(denser)
    objects = padded(["{}"] * 100, 32)
    check_json(f"[{objects}]".encode(), TINY)
    assert "objects and arrays, more than one per 32 bytes" in refusal(
        f"[{padded(['{}'] * 100, 31)}]".encode()
    )
    # Short bodies are not counted: decoding them costs a millisecond at most.
    check_json(("[" + ",".join(["[1]"] * 200) + "]").encode(), TINY)


def test_digits_and_nesting() -> None:
    pad = " " * TINY.unchecked_bytes_max
    check_json(f"[{'9' * 20}{pad}]".encode(), TINY)
    assert "a number of more than 20 digits" in refusal(f"[{'9' * 21}{pad}]".encode())
    check_json(("[" * 5 + pad + "]" * 5).encode(), TINY)
    assert "nested deeper than 5" in refusal(("[" * 6 + pad + "]" * 6).encode())


def test_leniencies_only_in_bodies_as_short_as_the_kind_says() -> None:
    # DataVersion: any leniency within its 256 bytes.
    assert read_json(b"{counter:007,'timestamp':1}", DATA_VERSION) == {
        "counter": 7,
        "timestamp": 1,
    }
    heart_beat = body_limits.HEART_BEAT
    lenient = "{clientID:1" + " " * (heart_beat.lenient_bytes_max - 12) + "}"
    assert len(lenient) == heart_beat.lenient_bytes_max
    assert read_json(lenient, heart_beat) == {"clientID": 1}
    with pytest.raises(BodyDecodeError, match="leniencies are read up to 4096"):
        read_json(lenient[:-1] + " }", heart_beat)


def test_text_and_bytes_read_alike() -> None:
    for text in ('{"a":"é"}', "{'a':1}", "[1,2]", '{"a":"\\u00e9"}'):
        assert read_json(text, DATA_VERSION) == read_json(text.encode(), DATA_VERSION)
        assert read_json(text, DATA_VERSION) == fastjson.loads(text)


def test_a_kind_may_not_read_single_quotes_past_its_longest_string() -> None:
    with pytest.raises(ValueError, match="single quotes"):
        BodyLimits(
            "odd",
            10,
            string_bytes_max=5,
            single_quotes_bytes_max=6,
            lenient_bytes_max=10,
            depth_max=2,
        )


# -------------------------------------------------------------- QUERY_DATA_VERSION


def test_a_data_version_body_of_its_longest_passes_and_one_byte_more_is_refused() -> None:
    long_min = b"-9223372036854775808"
    longest = b'{"counter":%s,"stateVersion":%s,"timestamp":%s}' % (long_min, long_min, long_min)
    assert bodies.decode_data_version(longest.ljust(256)) == DataVersion(
        -(2**63), -(2**63), -(2**63)
    )
    with pytest.raises(BodyRefused, match="DataVersion body of 257 bytes refused: longer than"):
        bodies.decode_data_version(longest.ljust(257))


def test_the_issue_s_query_data_version_body_is_refused_at_once() -> None:
    attack = issue_single_quoted(15 * MIB)

    def refuse() -> None:
        with pytest.raises(BodyRefused, match="longer than the limit of 256 bytes"):
            bodies.decode_data_version(attack)

    assert least_cpu_s(refuse) < REFUSAL_S_MAX


# ------------------------------------------------------------- every other kind

ANSWER_DECODERS: dict[str, Callable[[bytes], object]] = {
    "TopicRouteData body": bodies.decode_topic_route_data,
    "ClusterInfo body": bodies.decode_cluster_info,
    "KVTable body": bodies.decode_kv_table,
    "TopicList body": bodies.decode_topic_list,
    "TopicConfig body": bodies.decode_topic_config,
    "TopicQueueMappingInfo body": bodies.decode_topic_queue_mapping_info,
    "GetBrokerMemberGroupResponseBody": bodies.decode_broker_member_group,
    "TopicConfigSerializeWrapper body": bodies.decode_topic_config_serialize_wrapper,
    "KVConfigSerializeWrapper": bodies.decode_kv_config_wrapper,
}


@pytest.mark.parametrize("what", sorted(ANSWER_DECODERS))
def test_every_decoder_reads_through_its_kind(what: str) -> None:
    decode = ANSWER_DECODERS[what]
    try:
        decode(b"{}".ljust(4096))
    except BodyRefused:
        raise
    except BodyDecodeError:
        pass  # an empty object is no value of some kinds: read, not refused
    with pytest.raises(BodyRefused, match=f"^{re.escape(what)} of {FRAME_BYTES_MAX + 1} bytes"):
        decode(b"{}".ljust(FRAME_BYTES_MAX + 1))
    with pytest.raises(BodyRefused, match="a number of more than 32 digits"):
        decode(b'{"a":' + b"1" * 33 + b"}".ljust(5000))


# ------------------------------------------------------------------- properties


def test_properties_of_the_longest_text_pass_and_one_byte_more_is_refused() -> None:
    at = b"k=" + b"v" * (PROPERTIES.body_bytes_max - 2)
    assert properties.decode_properties(at) == {"k": "v" * (PROPERTIES.body_bytes_max - 2)}
    with pytest.raises(BodyRefused, match="properties text of 65537 bytes refused"):
        bodies.decode_properties(at + b"v")


def old_logical_lines(text: str) -> list[str]:
    """The line reader before it was made linear: the reference."""
    lines: list[str] = []
    natural = re.split(r"\r\n|\r|\n", text)
    index = 0
    while index < len(natural):
        line = natural[index].lstrip(" \t\f")
        index += 1
        if not line or line[0] in "#!":
            continue
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            line = line[:-1]
            if index >= len(natural):
                break
            line += natural[index].lstrip(" \t\f")
            index += 1
        lines.append(line)
    return lines


@pytest.mark.parametrize("seed", range(300))
def test_continued_lines_read_as_before(seed: int) -> None:
    rng = random.Random(seed)
    text = "".join(rng.choice("ab \\\\\\\n\r\t#=") for _ in range(rng.randrange(0, 80)))

    assert properties._logical_lines(text) == old_logical_lines(text)


def test_continued_lines_cost_linear_time() -> None:
    # 1 MiB of one line continued on every line took 3.8 s (quadratic).
    short, long = "a\\\n" * 20_000, "a\\\n" * 320_000
    short_s = least_cpu_s(lambda: properties._logical_lines(short))
    long_s = least_cpu_s(lambda: properties._logical_lines(long))

    assert long_s < 16 * 3 * short_s, (short_s, long_s)
