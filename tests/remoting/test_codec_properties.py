"""Property tests of the codec: round trips, split-anywhere feeding and fuzzed streams."""

from __future__ import annotations

import zlib

from hypothesis import HealthCheck, given, settings, strategies as st

from remoting import bodies, fastjson, register_body
from remoting.codes import LanguageCode, SerializeType
from remoting.command import RemotingCommand
from remoting.errors import ProtocolError
from remoting.frame import FrameDecoder, decode_frame, encode_frame
from remoting.model import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicQueueMappingInfo,
)

PROPERTY_SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
LONG = st.integers(0, 2**63 - 1)


@st.composite
def commands(draw: st.DrawFn, serialize_type: SerializeType | None = None) -> RemotingCommand:
    """Any command representable in the chosen serialize type (binary: 16-bit code/version)."""
    kind = draw(st.sampled_from(SerializeType)) if serialize_type is None else serialize_type
    number = INT16 if kind is SerializeType.ROCKETMQ else INT32
    return RemotingCommand(
        code=draw(number),
        language=draw(st.sampled_from(LanguageCode)),
        version=draw(number),
        opaque=draw(INT32),
        flag=draw(INT32),
        remark=draw(st.none() | st.text(max_size=20)),
        ext_fields=draw(
            st.none() | st.dictionaries(st.text(max_size=8), st.text(max_size=12), max_size=4)
        ),
        body=draw(st.none() | st.binary(min_size=1, max_size=40)),
        serialize_type=kind,
    )


def binary_normal_form(cmd: RemotingCommand) -> RemotingCommand:
    """What the binary header can carry: empty strings read back as null, like upstream.

    An empty map is not written at all (null); entries with an empty key or value are
    written but read back as null and dropped, leaving a present, possibly empty, map.
    """
    ext = None
    if cmd.ext_fields:
        ext = {k: v for k, v in cmd.ext_fields.items() if k and v}
    return RemotingCommand(
        code=cmd.code,
        language=cmd.language,
        version=cmd.version,
        opaque=cmd.opaque,
        flag=cmd.flag,
        remark=cmd.remark or None,
        ext_fields=ext,
        body=cmd.body,
        serialize_type=SerializeType.ROCKETMQ,
    )


@PROPERTY_SETTINGS
@given(commands(SerializeType.JSON))
def test_a_json_command_round_trips_exactly(cmd: RemotingCommand) -> None:
    assert decode_frame(encode_frame(cmd)) == cmd


@PROPERTY_SETTINGS
@given(commands(SerializeType.ROCKETMQ))
def test_a_binary_command_round_trips_up_to_upstream_null_rules(cmd: RemotingCommand) -> None:
    normal = decode_frame(encode_frame(cmd))
    assert normal == binary_normal_form(cmd)
    # Encoding reaches a fixed point: the normal form re-encodes to stable bytes.
    assert encode_frame(decode_frame(encode_frame(normal))) == encode_frame(normal)


@PROPERTY_SETTINGS
@given(st.lists(commands(), max_size=5), st.lists(st.integers(0, 2000), max_size=8))
def test_feeding_split_anywhere_equals_feeding_at_once(
    cmds: list[RemotingCommand], cuts: list[int]
) -> None:
    stream = b"".join(encode_frame(cmd) for cmd in cmds)
    whole = FrameDecoder().feed(stream)
    decoder = FrameDecoder()
    pieces: list[RemotingCommand] = []
    start = 0
    for cut in [*sorted({min(cut, len(stream)) for cut in cuts}), len(stream)]:
        pieces.extend(decoder.feed(stream[start:cut]))
        start = cut
    assert pieces == whole
    assert len(whole) == len(cmds)
    assert decoder.buffered_bytes == 0


def feed_in_chunks(data: bytes, cuts: list[int]) -> str:
    """Feed ``data`` split at ``cuts``; return "ok" or the name of the escaping exception."""
    decoder = FrameDecoder(frame_bytes_max=4096)
    start = 0
    try:
        for cut in [*sorted({min(cut, len(data)) for cut in cuts}), len(data)]:
            decoder.feed(data[start:cut])
            start = cut
            assert decoder.buffered_bytes <= 4096
    except ProtocolError:
        return "ProtocolError"
    except Exception as exc:
        return type(exc).__name__
    return "ok"


@PROPERTY_SETTINGS
@given(st.binary(max_size=600), st.lists(st.integers(0, 600), max_size=6))
def test_random_bytes_raise_nothing_but_protocol_error(data: bytes, cuts: list[int]) -> None:
    assert feed_in_chunks(data, cuts) in ("ok", "ProtocolError")


@PROPERTY_SETTINGS
@given(commands(), st.integers(0, 10_000), st.integers(0, 255), st.lists(st.integers(0, 300)))
def test_a_corrupted_frame_raises_nothing_but_protocol_error(
    cmd: RemotingCommand, where: int, byte: int, cuts: list[int]
) -> None:
    frame = bytearray(encode_frame(cmd))
    frame[where % len(frame)] = byte
    assert feed_in_chunks(bytes(frame), cuts) in ("ok", "ProtocolError")


JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=6), inner.filter(lambda v: v is not None), max_size=4)
    ),
    max_leaves=20,
)


@PROPERTY_SETTINGS
@given(JSON_VALUES, st.booleans())
def test_fastjson_round_trips_in_both_styles(value: object, standard: bool) -> None:
    text = fastjson.dumps(value, standard=standard)
    assert fastjson.loads(text) == value
    assert fastjson.dumps(fastjson.loads(text), standard=standard) == text
    assert not standard or text.isascii()


@PROPERTY_SETTINGS
@given(st.dictionaries(st.integers(-(2**63), 2**63 - 1), st.text(max_size=8), max_size=5))
def test_long_keyed_maps_read_back_with_decimal_keys(addrs: dict[int, str]) -> None:
    for standard in (False, True):
        assert fastjson.loads(fastjson.dumps(addrs, standard=standard)) == {
            str(key): value for key, value in addrs.items()
        }


@PROPERTY_SETTINGS
@given(st.dictionaries(st.text(max_size=10), st.text(max_size=16), max_size=6))
def test_escaped_properties_round_trip_any_text(props: dict[str, str]) -> None:
    assert bodies.decode_properties(bodies.encode_properties(props, escape=True)) == props


PLAIN_KEYS = st.text(
    st.characters(whitelist_categories=["L", "N"], whitelist_characters="._-"),
    min_size=1,
    max_size=10,
)
PLAIN_VALUES = st.text(
    st.characters(blacklist_characters="\\\r\n", blacklist_categories=["Cs"]), max_size=16
).filter(lambda text: not text[:1].isspace() and text[:1] not in "\f\t ")


@PROPERTY_SETTINGS
@given(st.dictionaries(PLAIN_KEYS, PLAIN_VALUES, max_size=6))
def test_raw_properties_round_trip_plain_config(props: dict[str, str]) -> None:
    assert bodies.decode_properties(bodies.encode_properties(props)) == props


NO_SPACE_TEXT = st.text(
    st.characters(blacklist_characters=" ", blacklist_categories=["Cs"]), min_size=1, max_size=10
)


@st.composite
def register_bodies(draw: st.DrawFn) -> RegisterBrokerBody:
    """Bodies whose topics survive the space-separated text form."""
    names = draw(st.lists(NO_SPACE_TEXT, unique=True, max_size=5))
    table = {
        name: TopicConfig(
            topic_name=name,
            read_queue_nums=draw(INT32),
            write_queue_nums=draw(INT32),
            perm=draw(INT32),
            topic_filter_type=draw(st.sampled_from(sorted(bodies.TOPIC_FILTER_TYPES))),
            attributes=draw(st.dictionaries(NO_SPACE_TEXT, NO_SPACE_TEXT, max_size=2)),
        )
        for name in names
    }
    mapped = draw(st.lists(NO_SPACE_TEXT, unique=True, max_size=3))
    infos = {
        topic: TopicQueueMappingInfo(
            topic=topic,
            total_queues=draw(INT32),
            bname=draw(st.none() | st.text(max_size=6)),
            epoch=draw(LONG),
            dirty=draw(st.booleans()),
            curr_id_map=draw(st.none() | st.dictionaries(INT32, INT32, max_size=3)),
        )
        for topic in mapped
    }
    wrapper = TopicConfigSerializeWrapper(
        data_version=DataVersion(draw(LONG), draw(LONG), draw(LONG)),
        topic_config_table=table,
        topic_queue_mapping_info_map=infos,
    )
    servers = draw(st.lists(st.text(max_size=10), max_size=3))
    return RegisterBrokerBody(topic_config_wrapper=wrapper, filter_server_list=servers)


@PROPERTY_SETTINGS
@given(register_bodies(), st.sampled_from([409, 413, 479]))
def test_the_compressed_register_body_round_trips(body: RegisterBrokerBody, version: int) -> None:
    encoded = register_body.encode_register_broker_body(body, compressed=True, version=version)
    assert zlib.decompress(encoded)
    decoded = register_body.decode_register_broker_body(encoded, compressed=True, version=version)
    wrapper = body.topic_config_wrapper
    expected_infos = wrapper.topic_queue_mapping_info_map if version >= 413 else {}
    assert decoded == RegisterBrokerBody(
        TopicConfigSerializeWrapper(
            data_version=wrapper.data_version,
            topic_config_table=wrapper.topic_config_table,
            topic_queue_mapping_info_map=expected_infos,
        ),
        filter_server_list=body.filter_server_list,
    )
