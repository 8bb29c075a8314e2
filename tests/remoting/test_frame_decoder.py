"""The incremental decoder: bytes split anywhere give the same commands as one feed."""

from __future__ import annotations

from remoting.codes import LanguageCode, RequestCode, SerializeType
from remoting.command import RemotingCommand, make_response
from remoting.frame import FrameDecoder, encode_frame, encode_frame_prefix

REQUESTS = [
    RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, opaque=0),
    RemotingCommand.request(
        RequestCode.REGISTER_BROKER,
        {"brokerName": "broker-a", "brokerId": "0", "compressed": "false"},
        body=b'{"filterServerList":[]}',
        opaque=1,
        serialize_type=SerializeType.ROCKETMQ,
    ),
    RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, {}, opaque=2, oneway=True),
]
STREAM = b"".join(encode_frame(cmd) for cmd in REQUESTS)


def test_it_decodes_several_frames_from_one_chunk() -> None:
    assert FrameDecoder().feed(STREAM) == REQUESTS


def test_it_decodes_the_stream_fed_one_byte_at_a_time() -> None:
    decoder = FrameDecoder()
    seen = []
    for index in range(len(STREAM)):
        seen.extend(decoder.feed(STREAM[index : index + 1]))
    assert seen == REQUESTS
    assert decoder.buffered_bytes == 0


def test_it_holds_back_an_incomplete_frame_until_the_rest_arrives() -> None:
    decoder = FrameDecoder()
    first = encode_frame(REQUESTS[0])
    assert decoder.feed(first + STREAM[len(first) : len(first) + 5]) == [REQUESTS[0]]
    assert decoder.buffered_bytes == 5
    assert decoder.feed(STREAM[len(first) + 5 :]) == REQUESTS[1:]


def test_it_keeps_each_frames_serialize_type() -> None:
    kinds = [cmd.serialize_type for cmd in FrameDecoder().feed(STREAM)]
    assert kinds == [SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.JSON]


def test_it_sees_the_oneway_and_response_bits() -> None:
    oneway = FrameDecoder().feed(encode_frame(REQUESTS[2]))[0]
    assert oneway.is_oneway and not oneway.is_response
    response = make_response(REQUESTS[1], 0, ext_fields={})
    decoded = FrameDecoder().feed(encode_frame(response))[0]
    assert decoded.is_response and decoded.opaque == 1
    assert decoded.serialize_type is SerializeType.ROCKETMQ
    assert decoded.language is LanguageCode.JAVA and decoded.version == 479


def test_the_prefix_plus_the_body_is_the_whole_frame() -> None:
    cmd = REQUESTS[1]
    assert cmd.body is not None
    assert encode_frame_prefix(cmd) + cmd.body == encode_frame(cmd)


def test_an_empty_body_decodes_as_none() -> None:
    cmd = RemotingCommand.request(105, {"topic": "T"}, body=b"")
    assert FrameDecoder().feed(encode_frame(cmd))[0].body is None
