"""Bodies of the wrong wire type fail with BodyDecodeError and nothing else."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from remoting import bodies, register_body
from remoting.errors import BodyDecodeError

DECODERS: list[Callable[[bytes], object]] = [
    bodies.decode_topic_route_data,
    bodies.decode_cluster_info,
    bodies.decode_kv_table,
    bodies.decode_topic_list,
    bodies.decode_data_version,
    bodies.decode_topic_config,
    bodies.decode_topic_queue_mapping_info,
    bodies.decode_broker_member_group,
    bodies.decode_topic_config_serialize_wrapper,
    bodies.decode_kv_config_wrapper,
    lambda data: register_body.decode_register_broker_body(data, compressed=False, version=479),
    lambda data: register_body.decode_register_broker_body(data, compressed=True, version=479),
]
BAD_BODIES = [
    b"garbage",
    b"[]",
    b'"text"',
    b'{"queueDatas":{},"brokerDatas":3,"table":[],"topicList":{},"counter":"x"}',
    b'{"brokerDatas":[{"brokerAddrs":{"zero":"a"},"cluster":"c","brokerName":"b"}]}',
    b'{"queueDatas":[{"perm":6}]}',
    b'{"brokerMemberGroup":null}',
    b'{"brokerAddrTable":{"b":[]},"timestamp":1.5,"currIdMap":{"0":"x"}}',
    b'{"topicConfigTable":{"T":{"perm":true}},"configTable":{"ns":3}}',
    b'{"topicConfigSerializeWrapper":[],"filterServerList":{}}',
    b"\xff\xfe\x00",
]


def outcome_of(decode: Callable[[bytes], object], data: bytes) -> str:
    """ "decoded", or the name of the exception type the decoder let escape."""
    try:
        decode(data)
    except Exception as exc:
        return type(exc).__name__
    return "decoded"


@pytest.mark.parametrize("decode", DECODERS)
@pytest.mark.parametrize("data", BAD_BODIES)
def test_every_decoder_raises_only_body_decode_error(
    decode: Callable[[bytes], object], data: bytes
) -> None:
    # Some bodies are legal for some decoders (unknown keys are ignored upstream).
    assert outcome_of(decode, data) in ("decoded", "BodyDecodeError")


@pytest.mark.parametrize(
    ("decode", "data"),
    [
        (bodies.decode_topic_route_data, b'{"queueDatas":{}}'),
        (bodies.decode_topic_route_data, b'{"brokerDatas":[{"brokerAddrs":{"x":"a"}}]}'),
        (bodies.decode_topic_route_data, b'{"queueDatas":[{"perm":6}]}'),
        (bodies.decode_cluster_info, b'{"clusterAddrTable":{"c":"broker-a"}}'),
        (bodies.decode_data_version, b'{"counter":"many"}'),
        (bodies.decode_data_version, b'{"counter":99999999999999999999}'),
        (bodies.decode_topic_config, b'{"order":"maybe"}'),
        (bodies.decode_kv_table, b'{"table":{"k":{"nested":1}}}'),
        (bodies.decode_broker_member_group, b"{}"),
        (bodies.decode_topic_queue_mapping_info, b'{"currIdMap":{"0":"zero"}}'),
    ],
)
def test_it_names_the_wrong_wire_type(decode: Callable[[bytes], object], data: bytes) -> None:
    with pytest.raises(BodyDecodeError):
        decode(data)


def test_it_accepts_what_fastjson_casts_numeric_strings_and_scalar_values() -> None:
    version = bodies.decode_data_version(b'{"counter":"3","timestamp":4}')
    assert version is not None and version.counter == 3
    assert bodies.decode_kv_table(b'{"table":{"n":8,"b":true}}').table == {"n": "8", "b": "true"}
