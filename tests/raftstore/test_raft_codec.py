"""The Raft log codec: deterministic, versioned bytes for every command."""

from __future__ import annotations

import base64
from pathlib import Path

import msgspec
import pytest

from raftstore.commands import (
    AddWritePerm,
    Barrier,
    BrokerHeartbeat,
    ChannelDestroyed,
    Command,
    DeleteKV,
    DeleteTopic,
    ExpireBrokers,
    PutKV,
    QueryDataVersion,
    RegisterBroker,
    RegisterTopic,
    UnregisterBrokers,
    UnregisterRequest,
    UpdateNamesrvConfig,
    WipeWritePerm,
)
from raftstore.raft.codec import (
    FORMAT_MSGPACK,
    MAGIC,
    CodecError,
    decode_command,
    decode_entries,
    decode_entry,
    encode_batch,
    encode_command,
    encode_entry,
)
from remoting.model import (
    DataVersion,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicQueueMappingInfo,
)

WRAPPER = TopicConfigSerializeWrapper(
    data_version=DataVersion(1, 1_700_000_000_000, 3),
    topic_config_table={
        "TopicA": TopicConfig("TopicA", 8, 8, 6, attributes={"+message.type": "NORMAL"}),
        "TopicB": TopicConfig("TopicB", order=True),
    },
    mapping_data_version=DataVersion(0, 5, 1),
    topic_queue_mapping_info_map={"TopicA": TopicQueueMappingInfo("TopicA", curr_id_map={0: 4})},
    topic_queue_mapping_detail_map={"TopicA": {"hostedQueues": {"0": [{"gen": 1}]}}},
)

EVERY_COMMAND: list[Command] = [
    RegisterBroker(
        "DefaultCluster",
        "10.0.0.1:10911",
        "broker-a",
        0,
        "10.0.0.1:10912",
        1_700_000_000_000,
        WRAPPER,
        ("fs1",),
        "zone-a",
        30_000,
        True,
        "chan-1",
    ),
    RegisterBroker("DefaultCluster", "10.0.0.2:10911", "broker-b", 1, "", 5),
    UnregisterBrokers((UnregisterRequest("DefaultCluster", "10.0.0.1:10911", "broker-a", 0),)),
    BrokerHeartbeat("DefaultCluster", "10.0.0.1:10911", 7),
    QueryDataVersion("DefaultCluster", "10.0.0.1:10911", "broker-a", 0, DataVersion(0, 1, 2), 9),
    QueryDataVersion("DefaultCluster", "10.0.0.1:10911", "broker-a", 0, None, 9),
    ExpireBrokers(1_700_000_120_000, 5_000),
    ChannelDestroyed("10.0.0.1:53211"),
    PutKV("ORDER_TOPIC_CONFIG", "TopicB", "broker-a:4"),
    DeleteKV("ORDER_TOPIC_CONFIG", "TopicB"),
    WipeWritePerm("broker-a"),
    AddWritePerm("broker-a"),
    DeleteTopic("TopicA", "DefaultCluster"),
    RegisterTopic("TopicC", (QueueData("broker-a", 4, 4, 6, 0),)),
    UpdateNamesrvConfig((("orderMessageEnable", "true"),)),
    Barrier(),
]


@pytest.mark.parametrize("command", EVERY_COMMAND, ids=lambda c: type(c).__name__)
def test_every_command_survives_a_round_trip(command: Command) -> None:
    assert decode_command(encode_command(command)) == command


def test_the_same_command_always_encodes_to_the_same_bytes() -> None:
    assert encode_entry("n1/a/1", EVERY_COMMAND[0]) == encode_entry("n1/a/1", EVERY_COMMAND[0])


def test_an_entry_carries_its_proposal_id() -> None:
    entry = decode_entry(encode_entry("n2/boot/42", PutKV("ns", "k", "v")))
    assert entry.proposal_id == "n2/boot/42"


def test_a_large_registration_is_compressed() -> None:
    big = TopicConfigSerializeWrapper(
        topic_config_table={f"Topic{i}": TopicConfig(f"Topic{i}") for i in range(500)}
    )
    command = RegisterBroker("c", "a:1", "b", 0, "", 1, big)
    data = encode_command(command)
    assert data[2:3] == b"c"
    assert decode_command(data) == command


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"XX{}",
        b"RQj{}",
        b'RQj{"v":99,"id":"","t":"Barrier","c":{}}',
        b'RQj{"v":1,"id":"","t":"os.system","c":{}}',
        b'RQq{"v":1}',
    ],
)
def test_it_refuses_bytes_it_does_not_know(data: bytes) -> None:
    with pytest.raises((CodecError, ValueError)):
        decode_entry(data)


def test_it_refuses_a_field_of_the_wrong_type() -> None:
    with pytest.raises(CodecError):
        decode_entry(b'RQj{"v":1,"id":"","t":"PutKV","c":{"namespace":1,"key":"k","value":"v"}}')
    with pytest.raises(CodecError, match="namespace"):
        decode_entry(_msgpack_entry(1, "", "PutKV", {"namespace": 1, "key": "k", "value": "v"}))
    with pytest.raises(CodecError, match="broker_id"):
        decode_entry(
            _msgpack_entry(
                1,
                "",
                "RegisterBroker",
                {
                    "cluster_name": "c",
                    "broker_addr": "a:1",
                    "broker_name": "b",
                    "broker_id": True,
                    "ha_server_addr": "",
                    "now_ms": 1,
                },
            )
        )


def _msgpack_entry(*envelope: object) -> bytes:
    return MAGIC + FORMAT_MSGPACK + msgspec.msgpack.encode(envelope)


@pytest.mark.parametrize(
    "envelope",
    [
        (2, "", "Barrier", {}),
        (1, "", "os.system", {}),
        (1, "", "UnregisterRequest", {}),
        (1, "", "PutKV", {"namespace": "n"}),
        (1, "", "Barrier"),
        ("x",),
    ],
    ids=["version", "unknown-type", "not-top-level", "missing-field", "short", "garbage"],
)
def test_it_refuses_a_msgpack_entry_it_does_not_know(envelope: tuple[object, ...]) -> None:
    with pytest.raises(CodecError):
        decode_entry(_msgpack_entry(*envelope))


@pytest.mark.parametrize("data", [b"RQm", b"RQm\x94\x01", b"RQc\x00\x01", b"RQz\x00"])
def test_it_refuses_truncated_or_corrupt_bodies(data: bytes) -> None:
    with pytest.raises(CodecError):
        decode_entry(data)


def test_a_value_msgpack_cannot_hold_is_a_codec_error_at_the_proposer() -> None:
    with pytest.raises(CodecError, match="RegisterBroker"):
        encode_command(RegisterBroker("c", "a:1", "b", 1 << 70, "", 1))


def test_entries_of_the_first_json_format_still_decode() -> None:
    """Journals written before the msgpack format replay to the same commands."""
    lines = (Path(__file__).parent / "data" / "legacy_json_entries.b64").read_text().split()
    big = TopicConfigSerializeWrapper(
        topic_config_table={f"Topic{i}": TopicConfig(f"Topic{i}") for i in range(200)}
    )
    expected = [*EVERY_COMMAND, RegisterBroker("c", "a:1", "b", 0, "", 1, big)]
    decoded = [decode_entry(base64.b64decode(line)) for line in lines]
    assert {base64.b64decode(line)[2:3] for line in lines} == {b"j", b"z"}
    assert [entry.command for entry in decoded] == expected
    assert [entry.proposal_id for entry in decoded] == [f"n1/legacy/{i}" for i in range(len(lines))]


def test_a_batch_holds_several_entries_in_order() -> None:
    parts = [encode_entry(f"n1/b/{i}", command) for i, command in enumerate(EVERY_COMMAND)]
    decoded = decode_entries(encode_batch(parts))
    assert [entry.proposal_id for entry in decoded] == [f"n1/b/{i}" for i in range(len(parts))]
    assert [entry.command for entry in decoded] == EVERY_COMMAND


def test_a_plain_entry_decodes_as_a_list_of_one() -> None:
    entry = encode_entry("n1/b/1", PutKV("ns", "k", "v"))
    assert decode_entries(entry) == [decode_entry(entry)]


@pytest.mark.parametrize(
    "data",
    [
        b"RQb",
        b"RQb\x00\x00\x00\x00",
        b"RQb\x00\x00\x00\x01\x00\x00\x00\x09RQj{}",
        b"RQb\x00\x00\x00\x01\x00\x00\x00\x03RQbXX",
        b"RQb\x00\x00\x00\x02\x00\x00\x00\x00",
    ],
    ids=["no-count", "empty", "truncated", "nested", "short-part"],
)
def test_it_refuses_a_malformed_batch(data: bytes) -> None:
    with pytest.raises((CodecError, ValueError)):
        decode_entries(data)


def test_a_batch_refuses_to_nest_or_to_be_empty() -> None:
    inner = encode_batch([encode_entry("n1/b/1", PutKV("ns", "k", "v"))])
    with pytest.raises(CodecError):
        encode_batch([inner])
    with pytest.raises(CodecError):
        encode_batch([])
