"""What a frame's header may cost before anyone is authenticated (issue 30).

A server's decoder refuses, with the :class:`ProtocolError` that closes the connection,
a header longer than ``HEADER_BYTES_MAX`` as soon as its length arrives, a JSON header
past ``HEADER_JSON_LIMITS`` before the JSON decoder makes a value, and a header of
either type with more than ``HEADER_EXT_FIELDS_MAX`` ext fields. Within the limits the
costliest header an attacker can write is read or refused in a couple of milliseconds
(``bench/header_decode.py``); the bound here is a generous one that the old reader,
which took 14.7 s for the 8 MiB header of the issue, misses by far.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from bench._util import least_cpu_s
from remoting.codes import RequestCode, SerializeType
from remoting.command import RemotingCommand, make_response
from remoting.errors import ProtocolError
from remoting.frame import (
    FRAME_BYTES_MAX,
    HEADER_BYTES_MAX,
    HEADER_EXT_FIELDS_MAX,
    HEADER_INT_DIGITS_MAX,
    HEADER_LENIENT_BYTES_MAX,
    HEADER_SEPARATORS_MAX,
    FrameDecoder,
    encode_frame,
)
from tests.remoting.fastjson_documents import documents, mutated

MIB = 1024 * 1024
# Measured at most 2.6 ms here (bench/header_decode.py); the old reader took about
# 0.5 s for a quarter MiB of single-quoted JSON.
HEADER_DECODE_S_MAX = 0.05
FUZZ_SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
JSON, BINARY = 0, 1


def frame_of(header: bytes, kind: int = JSON, body: bytes = b"") -> bytes:
    """A frame around a hand-made header of serialize type ``kind``."""
    prefix = struct.pack(">iI", 4 + len(header) + len(body), (kind << 24) | len(header))
    return prefix + header + body


def decode(frame: bytes, decoder: FrameDecoder | None = None) -> RemotingCommand:
    """The one command of ``frame``, through a server's decoder unless one is given."""
    (cmd,) = (decoder or FrameDecoder()).feed(frame)
    return cmd


def kv_put(value: str) -> RemotingCommand:
    """The console's PUT_KV_CONFIG of ``value``."""
    return RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": value}
    )


def header_of(cmd: RemotingCommand) -> bytes:
    """The JSON header ``encode_frame`` writes for ``cmd``."""
    return encode_frame(cmd)[8:]


def filled(prefix: str, unit: str, suffix: str, size: int) -> bytes:
    """``prefix``, as many ``unit`` as fit in ``size`` bytes, ``suffix``."""
    room = size - len(prefix.encode()) - len(suffix.encode())
    return (prefix + unit * (room // len(unit.encode())) + suffix).encode()


def outcome_of(frame: bytes) -> str:
    """ "read", or the name of the exception a server's decoder let out."""
    try:
        FrameDecoder().feed(frame)
    except Exception as exc:
        return type(exc).__name__
    return "read"


def binary_header(ext_fields: int, remark: bytes = b"") -> bytes:
    """A ROCKETMQ header with ``ext_fields`` one-byte fields."""
    entry = struct.pack(">h", 1) + b"k" + struct.pack(">i", 1) + b"v"
    entries = entry * ext_fields
    fixed = struct.pack(">hBhii", 105, 0, 479, 0, 0)
    return (
        fixed + struct.pack(">i", len(remark)) + remark + struct.pack(">i", len(entries)) + entries
    )


def test_it_refuses_a_header_past_its_limit_as_soon_as_the_length_arrives() -> None:
    decoder = FrameDecoder()
    words = struct.pack(">iI", 8 * MIB + 4, 8 * MIB)

    with pytest.raises(ProtocolError) as refused:
        decoder.feed(words)

    assert str(refused.value) == (
        f"header of {8 * MIB} bytes exceeds the limit of {HEADER_BYTES_MAX} bytes"
    )
    assert decoder.buffered_bytes == 0


def test_the_8_mib_single_quoted_header_of_the_issue_is_refused_unparsed() -> None:
    frame = frame_of(filled("{'code':105,'a':[", "1,", "1]}", 8 * MIB))

    def refuse() -> None:
        with pytest.raises(ProtocolError, match="exceeds the limit"):
            FrameDecoder().feed(frame)

    assert least_cpu_s(refuse) < HEADER_DECODE_S_MAX


@pytest.mark.parametrize("kind", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_a_header_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(
    kind: SerializeType,
) -> None:
    empty = kv_put("")
    overhead = len(encode_frame(empty, kind)) - 8
    value = "x" * (HEADER_BYTES_MAX - overhead)

    assert decode(encode_frame(kv_put(value), kind)).ext_fields == {
        "namespace": "ns",
        "key": "k",
        "value": value,
    }
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        decode(encode_frame(kv_put(value + "x"), kind))


def test_the_console_s_longest_kv_value_fits_in_a_header() -> None:
    value = "é" * 65_536  # namesrv_app.web.forms.KV_VALUE_CHARS_MAX characters
    assert decode(encode_frame(kv_put(value))).ext_fields == {
        "namespace": "ns",
        "key": "k",
        "value": value,
    }


def test_a_json_header_holds_as_many_ext_fields_as_the_limit_and_no_more() -> None:
    def header(count: int) -> bytes:
        fields = ",".join(f'"k{index}":"v"' for index in range(count))
        return ('{"code":105,"extFields":{' + fields + "}}").encode()

    cmd = decode(frame_of(header(HEADER_EXT_FIELDS_MAX)))
    assert cmd.ext_fields is not None and len(cmd.ext_fields) == HEADER_EXT_FIELDS_MAX
    with pytest.raises(ProtocolError, match=f"{HEADER_EXT_FIELDS_MAX + 1} ext fields"):
        decode(frame_of(header(HEADER_EXT_FIELDS_MAX + 1)))


def test_a_binary_header_holds_as_many_ext_fields_as_the_limit_and_no_more() -> None:
    assert decode(frame_of(binary_header(HEADER_EXT_FIELDS_MAX), BINARY)).ext_fields == {"k": "v"}
    with pytest.raises(ProtocolError, match=f"{HEADER_EXT_FIELDS_MAX + 1} ext fields"):
        decode(frame_of(binary_header(HEADER_EXT_FIELDS_MAX + 1), BINARY))


def test_separators_inside_a_long_value_are_no_structure() -> None:
    value = "broker-a:8;{b},[c]," * 10_000
    assert decode(encode_frame(kv_put(value))).ext_fields == {
        "namespace": "ns",
        "key": "k",
        "value": value,
    }


def test_it_refuses_more_separators_outside_strings_than_the_limit() -> None:
    header = ('{"code":105,"a":[' + "1," * HEADER_SEPARATORS_MAX + "1]}").encode()
    with pytest.raises(ProtocolError, match="separators outside strings"):
        decode(frame_of(header))


def test_a_long_header_may_not_hold_an_integer_longer_than_a_long_could_need() -> None:
    # Shorter headers cannot hold enough of Python's longest integers to matter.
    longest, pad = "9" * HEADER_INT_DIGITS_MAX, "p" * 16 * 1024
    header = '{"code":105,"extFields":{"n":%s,"pad":"%s"}}'
    assert decode(frame_of((header % (longest, pad)).encode())).ext_fields == {
        "n": longest,
        "pad": pad,
    }
    with pytest.raises(ProtocolError, match=f"more than {HEADER_INT_DIGITS_MAX}"):
        decode(frame_of((header % (longest + "9", pad)).encode()))


def test_fastjson_s_leniencies_are_read_in_short_headers_only() -> None:
    short = "{code:105,extFields:{'topic':'TopicTest'}}"
    assert decode(frame_of(short.encode())).ext_fields == {"topic": "TopicTest"}
    long = filled("{code:105,extFields:{'topic':'", "T", "'}}", HEADER_LENIENT_BYTES_MAX + 1)
    with pytest.raises(ProtocolError, match="leniencies are read up to"):
        decode(frame_of(long))


def costliest_headers() -> list[tuple[str, bytes]]:
    """Headers of the costliest shapes, each as long as the limits let it be."""
    full, lenient = HEADER_BYTES_MAX, HEADER_LENIENT_BYTES_MAX
    value = '{"code":100,"extFields":{"value":"'
    units = (HEADER_SEPARATORS_MAX - 16) // 5
    return [
        ("plain value", filled(value, "x", '"}}', full)),
        ("escaped value", filled(value, "\\n", '"}}', full)),
        ("escaped quotes", filled(value, '\\"', '"}}', full)),
        ("nested lists", filled('{"a":[' + "[[]]," * units + '0],"v":"', "x", '"}', full)),
        ("floats", filled('{"a":[' + "1.5e300," * units + '0],"v":"', "x", '"}', full)),
        ("ints past the separators", filled('{"a":[', "1,", "1]}", full)),
        ("quotes", b'"' * full),
        ("single-quoted past the lenient limit", filled("{'v':'", "x", "'}", full)),
        ("single-quoted ints", filled("{'code':105,'a':[", "1,", "1]}", lenient)),
        ("single-quoted escapes", filled("{code:105,v:'", "\\x41", "'}", lenient)),
        ("both quote kinds", filled("{a:'\"',b:\"'\",v:['", "\"','", "']}", lenient)),
        ("unquoted keys", filled("{", "a:1,", "b:1}", lenient)),
    ]


@pytest.mark.parametrize(
    ("shape", "header"), costliest_headers(), ids=[shape for shape, _ in costliest_headers()]
)
def test_the_costliest_headers_within_the_limits_are_read_or_refused_at_once(
    shape: str, header: bytes
) -> None:
    frame = frame_of(header)
    assert outcome_of(frame) in ("read", "ProtocolError"), shape
    assert least_cpu_s(lambda: outcome_of(frame), times=3) < HEADER_DECODE_S_MAX, shape


def test_a_client_reads_an_answer_header_as_long_as_the_frame() -> None:
    answer = make_response(
        RemotingCommand.request(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"}),
        0,
        ext_fields={"value": "v" * MIB},  # stored by a version without the limit
    )
    frame = encode_frame(answer)

    assert decode(frame, FrameDecoder(header_bytes_max=FRAME_BYTES_MAX)).ext_fields == {
        "value": "v" * MIB
    }
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        decode(frame)


@FUZZ_SETTINGS
@given(st.binary(max_size=600), st.sampled_from([JSON, BINARY]))
def test_any_header_bytes_give_a_command_or_a_protocol_error(header: bytes, kind: int) -> None:
    assert outcome_of(frame_of(header, kind)) in ("read", "ProtocolError")


@FUZZ_SETTINGS
@given(
    documents() | mutated(), st.dictionaries(st.sampled_from(["code", "extFields"]), documents())
)
def test_any_dialect_document_as_a_header_gives_a_command_or_a_protocol_error(
    document: str, members: dict[str, str]
) -> None:
    as_object = "{" + ",".join(f"{key}:{value}" for key, value in members.items()) + "}"
    for header in (document, as_object):
        assert outcome_of(frame_of(header.encode())) in ("read", "ProtocolError")
