"""REGISTER_BROKER bodies: the compressed binary form and the version rules.

Upstream: ``RegisterBrokerBody.encode(true)`` and ``DefaultRequestProcessor.registerBroker``."""

from __future__ import annotations

import struct
import zlib

import pytest

from remoting import bodies, register_body
from remoting.errors import BodyDecodeError
from remoting.model import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicQueueMappingInfo,
)

DATA_VERSION = DataVersion(state_version=2, timestamp=1700000000000, counter=3)
TOPIC_TEST = TopicConfig(topic_name="TopicTest", read_queue_nums=8, write_queue_nums=8)
ORDERED = TopicConfig(
    topic_name="Orders", perm=7, topic_sys_flag=1, order=True, attributes={"+a": "b"}
)
MAPPING = TopicQueueMappingInfo(
    topic="Static", total_queues=2, bname="broker-a", curr_id_map={0: 0}
)
BODY = RegisterBrokerBody(
    TopicConfigSerializeWrapper(
        data_version=DATA_VERSION,
        topic_config_table={"TopicTest": TOPIC_TEST, "Orders": ORDERED},
        topic_queue_mapping_info_map={"Static": MAPPING},
    ),
    filter_server_list=["127.0.0.1:7001"],
)


def payload_of(compressed: bytes) -> bytes:
    """The inflated payload of a compressed body."""
    return zlib.decompress(compressed)


def blocks(*parts: bytes) -> bytes:
    """Length-prefixed blocks as the Java encoder writes them."""
    return b"".join(struct.pack(">i", len(part)) + part for part in parts)


def test_it_writes_the_space_separated_topic_config_text() -> None:
    assert bodies.encode_topic_config_text(TOPIC_TEST) == "TopicTest 8 8 6 SINGLE_TAG {}"
    assert bodies.encode_topic_config_text(ORDERED) == 'Orders 16 16 7 SINGLE_TAG {"+a":"b"}'


def test_the_text_form_drops_sys_flag_and_order_like_upstream() -> None:
    decoded = bodies.decode_topic_config_text(bodies.encode_topic_config_text(ORDERED))
    assert decoded == TopicConfig(topic_name="Orders", perm=7, attributes={"+a": "b"})


def test_it_reads_4x_text_without_attributes_and_ignores_bad_attribute_json() -> None:
    assert bodies.decode_topic_config_text("T 4 4 6 MULTI_TAG") == TopicConfig(
        topic_name="T", read_queue_nums=4, write_queue_nums=4, topic_filter_type="MULTI_TAG"
    )
    assert bodies.decode_topic_config_text("T 4 4 6 SINGLE_TAG {oops").attributes == {}


@pytest.mark.parametrize("text", ["T 4 4 6", "T x 4 6 SINGLE_TAG", "T 4 4 6 NO_SUCH_TYPE", ""])
def test_it_refuses_topic_config_text_upstream_cannot_read(text: str) -> None:
    with pytest.raises(BodyDecodeError):
        bodies.decode_topic_config_text(text)


def test_it_writes_the_compressed_layout_of_a_5x_broker() -> None:
    payload = payload_of(
        register_body.encode_register_broker_body(BODY, compressed=True, version=479)
    )
    assert payload == blocks(bodies.encode_data_version(DATA_VERSION)) + struct.pack(
        ">i", 2
    ) + blocks(
        b'Orders 16 16 7 SINGLE_TAG {"+a":"b"}',
        b"TopicTest 8 8 6 SINGLE_TAG {}",
        b'["127.0.0.1:7001"]',
    ) + struct.pack(">i", 1) + blocks(bodies.encode_topic_queue_mapping_info(MAPPING))


def test_it_uses_zlib_best_compression() -> None:
    assert register_body.encode_register_broker_body(BODY, compressed=True)[:2] == b"\x78\xda"


def test_it_leaves_out_the_mapping_block_before_5_0_0() -> None:
    payload = payload_of(
        register_body.encode_register_broker_body(BODY, compressed=True, version=412)
    )
    assert payload.endswith(blocks(b'["127.0.0.1:7001"]'))


def test_it_reads_the_compressed_form_back_per_version() -> None:
    encoded = register_body.encode_register_broker_body(BODY, compressed=True, version=479)
    decoded = register_body.decode_register_broker_body(encoded, compressed=True, version=479)
    wrapper = decoded.topic_config_wrapper
    assert wrapper.data_version == DATA_VERSION
    assert wrapper.topic_config_table["TopicTest"] == TOPIC_TEST
    assert wrapper.topic_queue_mapping_info_map == {"Static": MAPPING}
    assert wrapper.mapping_data_version is None
    assert decoded.filter_server_list == ["127.0.0.1:7001"]
    old = register_body.encode_register_broker_body(BODY, compressed=True, version=409)
    legacy = register_body.decode_register_broker_body(old, compressed=True, version=409)
    assert legacy.topic_config_wrapper.topic_queue_mapping_info_map == {}


def test_a_5x_reader_fails_on_a_4x_payload_without_the_mapping_block() -> None:
    old = register_body.encode_register_broker_body(BODY, compressed=True, version=409)
    with pytest.raises(BodyDecodeError):
        register_body.decode_register_broker_body(old, compressed=True, version=479)


@pytest.mark.parametrize(
    "data",
    [
        b"not zlib",
        zlib.compress(b"\x00\x00"),
        zlib.compress(struct.pack(">i", -1)),
        zlib.compress(blocks(b"{}") + struct.pack(">i", 1) + struct.pack(">i", 99) + b"x"),
        zlib.compress(blocks(b"[1]")),
    ],
)
def test_it_refuses_broken_compressed_bodies(data: bytes) -> None:
    with pytest.raises(BodyDecodeError):
        register_body.decode_register_broker_body(data, compressed=True, version=479)


def test_it_refuses_a_body_that_inflates_beyond_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(register_body, "REGISTER_BODY_INFLATED_BYTES_MAX", 4096)
    bomb = zlib.compress(b"\0" * 4097, 9)
    with pytest.raises(BodyDecodeError, match="limit"):
        register_body.decode_register_broker_body(bomb, compressed=True, version=479)


def test_it_ignores_an_unreadable_filter_server_list_like_upstream() -> None:
    data = zlib.compress(blocks(b"{}") + struct.pack(">i", 0) + blocks(b"oops"))
    decoded = register_body.decode_register_broker_body(data, compressed=True, version=409)
    assert decoded.filter_server_list == []


def test_a_missing_body_registers_an_empty_table_with_a_zero_version() -> None:
    body = register_body.decode_register_broker_request_body(None, compressed=False, version=479)
    assert body == RegisterBrokerBody()
    assert body.topic_config_wrapper.data_version == DataVersion(0, 0, 0)


def test_a_versionless_request_reads_a_register_body_as_a_bare_wrapper_with_no_topics() -> None:
    json_body = register_body.encode_register_broker_body(BODY, compressed=False)
    body = register_body.decode_register_broker_request_body(json_body, compressed=False, version=0)
    assert body.topic_config_wrapper.topic_config_table == {}
    bare = bodies.encode_topic_config_serialize_wrapper(BODY.topic_config_wrapper)
    body = register_body.decode_register_broker_request_body(bare, compressed=False, version=0)
    assert set(body.topic_config_wrapper.topic_config_table) == {"TopicTest", "Orders"}


def test_a_json_register_body_round_trips_with_static_topic_mapping() -> None:
    wrapper = TopicConfigSerializeWrapper(
        data_version=DATA_VERSION,
        topic_config_table={"TopicTest": TOPIC_TEST},
        mapping_data_version=DataVersion(0, 5, 1),
        topic_queue_mapping_info_map={"Static": MAPPING},
        topic_queue_mapping_detail_map={"Static": {"bname": "broker-a", "hostedQueues": {}}},
    )
    body = RegisterBrokerBody(wrapper)
    encoded = register_body.encode_register_broker_body(body, compressed=False)
    assert b'"currIdMap":{0:0}' in encoded
    assert register_body.decode_register_broker_body(encoded, compressed=False, version=479) == body
