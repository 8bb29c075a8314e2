"""The limits of the parts of a REGISTER_BROKER body (remoting/body_limits.py;
docs/SECURITY.md, "Hostile clients", "Body limits"): a topic's text, name and
attributes, a static topic's mapping and queues, the DataVersion, in the compressed form
and where the JSON form has the same part. Each refuses just past its limit and accepts
just under it, before the part is decoded, at a bounded CPU cost.

Before, a 0.5 MB compressed body with one topic of 60 MB of single-quoted attributes
(and a random 720 KB topic name to meet the inflation limit) was accepted after 11.2 s of
the gateway's event loop."""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from bench._util import least_cpu_s
from bench.body_decode import issue_register_body
from remoting import register_body
from remoting.body_limits import (
    DATA_VERSION,
    FILTER_SERVERS_MAX,
    MAPPING_BLOCK_BYTES_MAX,
    MAPPING_QUEUES_MAX,
    TOPIC_ATTRIBUTES_CHARS_MAX,
    TOPIC_ATTRIBUTES_MAX,
    TOPIC_NAME_CHARS_MAX,
    TOPIC_TEXT_BYTES_MAX,
)
from remoting.errors import RegisterBodyRefused
from remoting.model import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper

V5 = 500
PART_REFUSAL_S_MAX = 0.005
"""A part past its limit is refused before it is read: microseconds (measured)."""
ATTACK_REFUSAL_S_MAX = 0.050
"""The issue's body: refused after inflating its first MiB (measured: 3 ms)."""


def block(raw: bytes) -> bytes:
    return struct.pack(">i", len(raw)) + raw


def compressed(
    topics: list[bytes],
    mappings: tuple[bytes, ...] = (),
    data_version: bytes = b'{"counter":1}',
) -> bytes:
    payload = (
        block(data_version)
        + struct.pack(">i", len(topics))
        + b"".join(map(block, topics))
        + block(b"[]")
        + struct.pack(">i", len(mappings))
        + b"".join(map(block, mappings))
    )
    return zlib.compress(payload, 9)


def decode(body: bytes, *, is_compressed: bool = True) -> RegisterBrokerBody:
    return register_body.decode_register_broker_request_body(
        body, compressed=is_compressed, version=V5
    )


def refused(body: bytes, *, is_compressed: bool = True) -> str:
    """The refusal's message, and that the refusal is cheap."""
    with pytest.raises(RegisterBodyRefused) as refusal:
        decode(body, is_compressed=is_compressed)

    def again() -> None:
        with pytest.raises(RegisterBodyRefused):
            decode(body, is_compressed=is_compressed)

    assert least_cpu_s(again) < PART_REFUSAL_S_MAX
    return str(refusal.value)


def topic_text(name: str, attributes: str = "{}", pad: int = 0) -> bytes:
    # Trailing spaces are no part (Java's split drops trailing empty strings).
    return f"{name} 8 8 6 SINGLE_TAG {attributes}".encode() + b" " * pad


def attributes_json(entries: int, value_chars: int = 1) -> str:
    return json.dumps({f"k{i}": "v" * value_chars for i in range(entries)}, separators=(",", ":"))


# ------------------------------------------------------------------ compressed


def test_the_issue_s_body_is_refused_at_once() -> None:
    attack = issue_register_body()
    message = refused_cost = None

    def refuse() -> None:
        nonlocal message
        with pytest.raises(RegisterBodyRefused) as refusal:
            decode(attack)
        message = str(refusal.value)

    refused_cost = least_cpu_s(refuse)
    assert refused_cost < ATTACK_REFUSAL_S_MAX
    assert message == (
        f"compressed register body of {len(attack)} bytes refused: a topic config of 720020 "
        f"bytes, more than {TOPIC_TEXT_BYTES_MAX}"
    )


def test_a_topic_s_text() -> None:
    at = topic_text("t", pad=TOPIC_TEXT_BYTES_MAX - len(topic_text("t")))
    assert len(at) == TOPIC_TEXT_BYTES_MAX
    assert list(decode(compressed([at])).topic_config_wrapper.topic_config_table) == ["t"]
    assert f"a topic config of {TOPIC_TEXT_BYTES_MAX + 1} bytes, more than" in refused(
        compressed([at + b" "])
    )


def test_a_topic_s_name() -> None:
    name = "n" * TOPIC_NAME_CHARS_MAX
    table = decode(compressed([topic_text(name)])).topic_config_wrapper.topic_config_table
    assert list(table) == [name]
    assert refused(compressed([topic_text(name + "n")])).endswith(
        f"a topic name of {TOPIC_NAME_CHARS_MAX + 1} characters, more than {TOPIC_NAME_CHARS_MAX}"
    )


def test_a_topic_s_attribute_text() -> None:
    one = attributes_json(1, TOPIC_ATTRIBUTES_CHARS_MAX - len(attributes_json(1, 0)))
    assert len(one) == TOPIC_ATTRIBUTES_CHARS_MAX
    config = decode(compressed([topic_text("t", one)])).topic_config_wrapper.topic_config_table
    assert config["t"].attributes == json.loads(one)
    longer = one.replace('"v', '"vv')
    assert refused(compressed([topic_text("t", longer)])).endswith(
        f"a topic's attributes of {TOPIC_ATTRIBUTES_CHARS_MAX + 1} characters, more than "
        f"{TOPIC_ATTRIBUTES_CHARS_MAX}"
    )


def test_a_topic_s_attributes_count_in_both_forms() -> None:
    at, past = attributes_json(TOPIC_ATTRIBUTES_MAX), attributes_json(TOPIC_ATTRIBUTES_MAX + 1)
    table = decode(compressed([topic_text("t", at)])).topic_config_wrapper.topic_config_table
    assert len(table["t"].attributes) == TOPIC_ATTRIBUTES_MAX
    problem = f"a topic of {TOPIC_ATTRIBUTES_MAX + 1} attributes, more than {TOPIC_ATTRIBUTES_MAX}"
    assert refused(compressed([topic_text("t", past)])).endswith(problem)

    def json_body(attributes: str) -> bytes:
        entry = '{"attributes":' + attributes + ',"perm":6,"topicName":"t"}'
        return ('{"topicConfigSerializeWrapper":{"topicConfigTable":{"t":' + entry + "}}}").encode()

    table = decode(json_body(at), is_compressed=False).topic_config_wrapper.topic_config_table
    assert len(table["t"].attributes) == TOPIC_ATTRIBUTES_MAX
    message = refused(json_body(past), is_compressed=False)
    assert message.startswith("REGISTER_BROKER body of ") and message.endswith(problem)


def test_attributes_of_single_quotes_are_refused_however_short() -> None:
    assert "single-quoted strings (no broker writes them" in refused(
        compressed([topic_text("t", "{'a':'b'}")])
    )
    # Other leniencies are read as fastjson reads them (and counted as lenient parts).
    table = decode(compressed([topic_text("t", "{a:01}")])).topic_config_wrapper
    assert table.topic_config_table["t"].attributes == {"a": "1"}


def test_every_topic_gets_its_own_attributes_when_texts_repeat() -> None:
    attributes = {"+message.type": "NORMAL"}
    wrapper = TopicConfigSerializeWrapper(
        DataVersion(1, 2, 3),
        {f"t{i}": TopicConfig(f"t{i}", 8, 8, 6, attributes=dict(attributes)) for i in range(50)},
    )
    body = register_body.encode_register_broker_body(
        RegisterBrokerBody(topic_config_wrapper=wrapper), compressed=True
    )
    table = decode(body).topic_config_wrapper.topic_config_table
    assert table == wrapper.topic_config_table
    table["t0"].attributes["x"] = "y"
    assert table["t1"].attributes == attributes


def mapping(queues: int, pad: int = 0) -> bytes:
    curr = ",".join(f"{q}:{q}" for q in range(queues))
    return ('{"topic":"t","currIdMap":{' + curr + "}}").encode() + b" " * pad


def test_a_static_topic_s_mapping_block() -> None:
    at = mapping(1, MAPPING_BLOCK_BYTES_MAX - len(mapping(1)))
    infos = decode(compressed([], (at,))).topic_config_wrapper.topic_queue_mapping_info_map
    assert infos["t"].curr_id_map == {0: 0}
    assert refused(compressed([], (at + b" ",))).endswith(
        f"a static-topic mapping of {MAPPING_BLOCK_BYTES_MAX + 1} bytes, more than "
        f"{MAPPING_BLOCK_BYTES_MAX}"
    )


def test_a_static_topic_s_queues_in_both_forms() -> None:
    problem = f"a static topic's currIdMap of {MAPPING_QUEUES_MAX + 1} queues, more than"
    infos = decode(compressed([], (mapping(MAPPING_QUEUES_MAX),))).topic_config_wrapper
    assert len(infos.topic_queue_mapping_info_map["t"].curr_id_map or {}) == MAPPING_QUEUES_MAX
    assert problem in refused(compressed([], (mapping(MAPPING_QUEUES_MAX + 1),)))

    def json_body(info: bytes) -> bytes:
        return b'{"topicConfigSerializeWrapper":{"topicQueueMappingInfoMap":{"t":%s}}}' % info

    infos = decode(json_body(mapping(MAPPING_QUEUES_MAX)), is_compressed=False).topic_config_wrapper
    assert len(infos.topic_queue_mapping_info_map["t"].curr_id_map or {}) == MAPPING_QUEUES_MAX
    assert problem in refused(json_body(mapping(MAPPING_QUEUES_MAX + 1)), is_compressed=False)


def test_a_filter_server_list_in_both_forms() -> None:
    def servers(count: int) -> bytes:
        return json.dumps([f"10.0.0.{i % 250}:3000{i // 250}" for i in range(count)]).encode()

    def with_servers(count: int) -> bytes:
        payload = zlib.decompress(compressed([])).replace(block(b"[]"), block(servers(count)))
        return zlib.compress(payload, 9)

    problem = f"a filter server list of {FILTER_SERVERS_MAX + 1} addresses, more than"
    assert len(decode(with_servers(FILTER_SERVERS_MAX)).filter_server_list) == FILTER_SERVERS_MAX
    assert problem in refused(with_servers(FILTER_SERVERS_MAX + 1))

    def json_body(count: int) -> bytes:
        return b'{"filterServerList":%s,"topicConfigSerializeWrapper":{}}' % servers(count)

    listed = decode(json_body(FILTER_SERVERS_MAX), is_compressed=False).filter_server_list
    assert len(listed) == FILTER_SERVERS_MAX
    assert problem in refused(json_body(FILTER_SERVERS_MAX + 1), is_compressed=False)


def test_the_data_version() -> None:
    at = b'{"counter":7}'.ljust(DATA_VERSION.body_bytes_max)
    version = decode(compressed([], data_version=at)).topic_config_wrapper.data_version
    assert version == DataVersion(counter=7)
    assert refused(compressed([], data_version=at + b" ")).endswith(
        f"a DataVersion of {DATA_VERSION.body_bytes_max + 1} bytes, more than "
        f"{DATA_VERSION.body_bytes_max}"
    )


def test_bytes_after_the_parts_still_count_against_the_inflation_limit() -> None:
    parts = zlib.decompress(compressed([topic_text("t")]))
    body = zlib.compress(parts + b"\0" * 200_000, 9)
    assert len(parts) + 200_000 > register_body.inflated_bytes_max(len(body))
    assert "inflates beyond the limit" in refused(body)
    within = zlib.compress(parts + b"\0" * 1000, 9)
    assert list(decode(within).topic_config_wrapper.topic_config_table) == ["t"]


# ------------------------------------------------------------------------ JSON


def json_table(name: str) -> bytes:
    return ('{"topicConfigSerializeWrapper":{"topicConfigTable":{"' + name + '":{}}}}').encode()


def test_a_topic_name_in_a_json_body() -> None:
    name = "n" * TOPIC_NAME_CHARS_MAX
    table = decode(json_table(name), is_compressed=False).topic_config_wrapper.topic_config_table
    assert list(table) == [name]
    assert refused(json_table(name + "n"), is_compressed=False).endswith(
        f"a string of {TOPIC_NAME_CHARS_MAX + 1} bytes, more than {TOPIC_NAME_CHARS_MAX} "
        "(the longest a broker writes is a topic name)"
    )


def test_single_quotes_only_in_a_json_body_as_short_as_a_topic_name() -> None:
    at = ("{'topicConfigSerializeWrapper':{}}").ljust(TOPIC_NAME_CHARS_MAX).encode()
    assert decode(at, is_compressed=False) == RegisterBrokerBody()
    assert "single-quoted strings (no broker writes them" in refused(at + b" ", is_compressed=False)


def test_a_table_inflating_past_several_chunks_decodes_as_its_json() -> None:
    wrapper = TopicConfigSerializeWrapper(
        DataVersion(1, 2, 3),
        {f"topic-{i:06d}": TopicConfig(f"topic-{i:06d}", 8, 8, 6) for i in range(60_000)},
    )
    body = RegisterBrokerBody(topic_config_wrapper=wrapper)
    packed = register_body.encode_register_broker_body(body, compressed=True)
    assert len(zlib.decompress(packed)) > 2 * 1024 * 1024  # three chunks of inflation
    plain = register_body.encode_register_broker_body(body, compressed=False)

    table = decode(packed).topic_config_wrapper.topic_config_table
    assert table == decode(plain, is_compressed=False).topic_config_wrapper.topic_config_table
    assert len(table) == 60_000
