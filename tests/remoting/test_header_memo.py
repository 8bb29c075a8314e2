"""The decoder's header memo: a header seen before with another opaque decodes from
memory, and the result is always what the full decode gives, for every header a
peer may send (escapes, nested or repeated opaque keys, strings, overflow)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from remoting import frame
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, make_response
from remoting.errors import ProtocolError
from remoting.frame import FrameDecoder, decode_frame, encode_frame


def json_frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), len(header)) + header + body


def both_ways(header: bytes) -> tuple[object, object]:
    """The full decode and the memo's, after the memo has seen the header once with
    opaque 1 (so a memo would answer from memory); an error stands for itself."""
    decoder = FrameDecoder()
    primer = header.replace(b"@", b"1").replace(b"#", b"12")
    try:
        decoder.feed(json_frame(primer))
    except ProtocolError:
        decoder = FrameDecoder()
    target = header.replace(b"@", b"77").replace(b"#", b"3456789")

    def outcome(decode: object) -> object:
        try:
            return decode(json_frame(target))  # type: ignore[operator]
        except ProtocolError as exc:
            return type(exc)

    return outcome(decode_frame), outcome(lambda f: decoder.feed(f)[0])


def test_a_repeated_route_query_decodes_from_memory_and_equals_the_full_decode() -> None:
    decoder = FrameDecoder()
    for opaque in (5, 6, 2**31 - 1, -(2**31), 0):
        request = RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, opaque=opaque
        )
        data = encode_frame(request)
        (got,) = decoder.feed(data)
        assert got == decode_frame(data) == request
    assert len(decoder._memo._entries) == 1


def test_the_memo_keys_on_every_byte_but_the_opaque() -> None:
    decoder = FrameDecoder()
    for opaque, crc in ((5, "1"), (6, "4294967295"), (7, "1"), (8, "123456")):
        request = RemotingCommand.request(
            RequestCode.REGISTER_BROKER,
            {"brokerName": "b", "brokerAddr": "127.0.0.1:10911", "bodyCrc32": crc},
            opaque=opaque,
        )
        data = encode_frame(request)
        (got,) = decoder.feed(data)
        assert got == decode_frame(data) == request
    # Headers that differ in an ext field's value are different headers.
    assert len(decoder._memo._entries) == 3


def test_the_memo_hands_out_its_own_ext_fields_to_no_one() -> None:
    decoder = FrameDecoder()
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "A"}, opaque=1)
    (first,) = decoder.feed(encode_frame(request))
    assert first.ext_fields is not None
    first.ext_fields["topic"] = "changed"
    (second,) = decoder.feed(
        encode_frame(
            RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "A"}, opaque=2)
        )
    )
    assert second.ext_fields == {"topic": "A"}
    assert second.ext_fields is not None
    second.ext_fields["topic"] = "again"
    (third,) = decoder.feed(
        encode_frame(
            RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "A"}, opaque=3)
        )
    )
    assert third.ext_fields == {"topic": "A"} and third.opaque == 3


def test_the_memo_keeps_a_bounded_number_of_headers() -> None:
    decoder = FrameDecoder()
    for index in range(frame.HEADER_MEMO_ENTRIES * 3):
        decoder.feed(
            encode_frame(
                RemotingCommand.request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": f"T{index}"}, opaque=index
                )
            )
        )
    assert len(decoder._memo._entries) == frame.HEADER_MEMO_ENTRIES


@pytest.mark.parametrize(
    "header",
    [
        # The only "opaque": is an ext field's: the command's opaque is 0 whatever it says.
        b'{"code":105,"extFields":{"opaque":@},"flag":0}',
        b'{"code":105,"extFields":{"x":{"opaque":@}},"flag":0}',
        b'{"code":105,"remark":{"opaque":@},"flag":0}',
        # Two keys: JSON keeps the last.
        b'{"code":105,"opaque":@,"opaque":9}',
        b'{"code":105,"opaque":9,"opaque":@}',
        # An escaped key is the same key.
        b'{"code":105,"opaq\\u0075e":9,"opaque":@}',
        b'{"code":105,"opaque":@,"opaq\\u0075e":9}',
        # Not a plain integer.
        b'{"code":105,"opaque":"@"}',
        b'{"code":105,"opaque":@.0}',
        b'{"code":105,"opaque":0@}',
        b'{"code":105,"opaque":@e1}',
        b'{"code":105,"opaque": @}',
        b'{"code":105,"opaque":-@}',
        b'{"code":105,"opaque":@}',
        b'{"code":105,"opaque":@,"remark":"a,\\"opaque\\":5"}',
        # Out of range on the second decode only.
        b'{"code":105,"opaque":@00000000}',
        b'{"code":105,"opaque":21474836@}',
        # Broken JSON around a well-formed opaque.
        b'{"code":105,"opaque":@,}',
        b'{"code":105,"opaque":@',
        b'{"code":"x","opaque":@}',
    ],
)
def test_every_odd_header_decodes_as_the_full_decode_does(header: bytes) -> None:
    full, memo = both_ways(header)
    assert memo == full


HEADER_TEXT = st.text(
    alphabet=st.sampled_from(list('{}[]":,-0123456789 \\uopaquecodeextFields@#')), max_size=60
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        HEADER_TEXT,
        st.builds(lambda a, b: '{"code":1,' + a + '"opaque":@' + b, HEADER_TEXT, HEADER_TEXT),
    )
)
def test_fuzzed_headers_decode_as_the_full_decode_does(text: str) -> None:
    full, memo = both_ways(text.encode())
    assert memo == full


def test_an_answer_without_ext_fields_encodes_as_fastjson_writes_it() -> None:
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, opaque=9)
    for opaque in (9, -3):
        answer = make_response(
            RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {}, opaque=opaque),
            ResponseCode.TOPIC_NOT_EXIST,
            remark='No topic route info in name server "T" é',
        )
        header = frame.encode_frame_prefix(answer)[8:]
        assert header == (
            b'{"code":17,"flag":1,"language":"JAVA","opaque":%d,'
            b'"remark":"No topic route info in name server \\"T\\" \xc3\xa9",'
            b'"serializeTypeCurrentRPC":"JSON","version":%d}' % (opaque, answer.version)
        )
        assert decode_frame(encode_frame(answer)) == answer
    with pytest.raises(ProtocolError):
        encode_frame(make_response(request, 2**31))
    with pytest.raises(ProtocolError):
        encode_frame(RemotingCommand(code=0, opaque=2**31))
