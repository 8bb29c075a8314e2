"""Golden frames: a frame worked out by hand and real server answers, byte for byte."""

from __future__ import annotations

from remoting.codes import FLAG_RESPONSE, LanguageCode, RequestCode, SerializeType
from remoting.command import RemotingCommand
from remoting.frame import decode_frame, encode_frame

ROUTE_REQUEST_JSON_HEADER = (
    b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA",'
    b'"opaque":0,"serializeTypeCurrentRPC":"JSON","version":479}'
)
ROUTE_REQUEST_BINARY_FRAME = bytes.fromhex(
    "0000002d 01000029 0069 00 01df 00000000 00000000 00000000 00000014"
    " 0005 746f706963 00000009 546f70696354657374".replace(" ", "")
)


def route_request(serialize_type: SerializeType) -> RemotingCommand:
    """GET_ROUTEINFO_BY_TOPIC as the Java 5.3.3 client of the worked example sends it."""
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, serialize_type=serialize_type
    )


def test_it_writes_the_json_route_request_of_the_worked_example() -> None:
    frame = encode_frame(route_request(SerializeType.JSON))
    assert len(ROUTE_REQUEST_JSON_HEADER) == 131
    assert frame[:8] == bytes.fromhex("0000008700000083")
    assert frame[8:] == ROUTE_REQUEST_JSON_HEADER


def test_it_reads_the_json_route_request_and_writes_it_back_identically() -> None:
    frame = bytes.fromhex("0000008700000083") + ROUTE_REQUEST_JSON_HEADER
    cmd = decode_frame(frame)
    assert cmd == route_request(SerializeType.JSON)
    assert encode_frame(cmd) == frame


def test_it_writes_the_binary_route_request_of_the_worked_example() -> None:
    assert encode_frame(route_request(SerializeType.ROCKETMQ)) == ROUTE_REQUEST_BINARY_FRAME


def test_it_reads_the_binary_route_request_and_writes_it_back_identically() -> None:
    cmd = decode_frame(ROUTE_REQUEST_BINARY_FRAME)
    assert cmd == route_request(SerializeType.ROCKETMQ)
    assert cmd.serialize_type is SerializeType.ROCKETMQ
    assert encode_frame(cmd) == ROUTE_REQUEST_BINARY_FRAME


def test_it_can_answer_a_binary_request_in_json_when_asked() -> None:
    cmd = decode_frame(ROUTE_REQUEST_BINARY_FRAME)
    assert encode_frame(cmd, SerializeType.JSON)[8:] == ROUTE_REQUEST_JSON_HEADER


def json_frame(header: bytes, body: bytes = b"") -> bytes:
    """Wrap a JSON header and body into a frame."""
    length = 4 + len(header) + len(body)
    return length.to_bytes(4, "big") + len(header).to_bytes(4, "big") + header + body


def test_it_writes_a_master_register_answer_like_the_4_9_4_server() -> None:
    header = (
        b'{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":7,'
        b'"serializeTypeCurrentRPC":"JSON","version":401}'
    )
    answer = RemotingCommand(code=0, version=401, opaque=7, flag=FLAG_RESPONSE, ext_fields={})
    assert encode_frame(answer) == json_frame(header)
    assert decode_frame(json_frame(header)) == answer


def test_it_writes_a_missing_kv_answer_with_remark_and_empty_ext_fields() -> None:
    header = (
        b'{"code":22,"extFields":{},"flag":1,"language":"JAVA","opaque":3,'
        b'"remark":"No config item, Namespace: NS Key: K",'
        b'"serializeTypeCurrentRPC":"JSON","version":401}'
    )
    answer = RemotingCommand(
        code=22,
        version=401,
        opaque=3,
        flag=FLAG_RESPONSE,
        remark="No config item, Namespace: NS Key: K",
        ext_fields={},
    )
    assert encode_frame(answer) == json_frame(header)


def test_it_omits_ext_fields_when_the_answer_has_no_custom_header() -> None:
    header = (
        b'{"code":0,"flag":1,"language":"JAVA","opaque":0,'
        b'"serializeTypeCurrentRPC":"JSON","version":401}'
    )
    answer = RemotingCommand(code=0, version=401, flag=FLAG_RESPONSE, body=b"{}")
    assert encode_frame(answer) == json_frame(header, b"{}")
    assert decode_frame(json_frame(header, b"{}")) == answer


def test_it_reads_the_go_client_header_with_its_empty_remark() -> None:
    header = (
        b'{"code":105,"language":"GO","version":317,"opaque":12,"flag":0,'
        b'"remark":"","extFields":{"topic":"T"}}'
    )
    cmd = decode_frame(json_frame(header))
    assert cmd.language is LanguageCode.GO
    assert (cmd.code, cmd.version, cmd.opaque, cmd.remark) == (105, 317, 12, "")
    assert cmd.ext_fields == {"topic": "T"}


def test_it_reads_the_ali_ons_header_without_serialize_type() -> None:
    header = (
        b'{"code":105,"language":"JAVA","opaque":1,"version":121,"flag":0,'
        b'"extFields":{"topic":"T"}}'
    )
    cmd = decode_frame(json_frame(header))
    assert (cmd.code, cmd.opaque, cmd.version, cmd.serialize_type) == (
        105,
        1,
        121,
        SerializeType.JSON,
    )
