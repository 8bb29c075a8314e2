"""Malformed frames: each one is a ProtocolError, as upstream NettyDecoder closes the channel."""

from __future__ import annotations

import struct

import pytest

from remoting.codes import SerializeType
from remoting.command import RemotingCommand
from remoting.errors import ProtocolError
from remoting.frame import FRAME_BYTES_MAX, FrameDecoder, decode_frame, encode_frame

LARGEST_LEGAL_LENGTH = FRAME_BYTES_MAX - 4


def frame_with(length: int, type_and_header: int, rest: bytes = b"") -> bytes:
    """A frame with a hand-made length word and header word."""
    return struct.pack(">iI", length, type_and_header) + rest


def binary_frame(header: bytes) -> bytes:
    """A ROCKETMQ-typed frame around a hand-made binary header."""
    return frame_with(4 + len(header), (1 << 24) | len(header), header)


def test_it_accepts_the_largest_legal_length_word() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(struct.pack(">i", LARGEST_LEGAL_LENGTH)) == []
    assert decoder.buffered_bytes == 4


def test_it_refuses_a_length_one_past_the_maximum() -> None:
    with pytest.raises(ProtocolError, match="exceeds"):
        FrameDecoder().feed(struct.pack(">i", LARGEST_LEGAL_LENGTH + 1))


def test_it_refuses_a_two_gib_claim_before_buffering_anything() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError):
        decoder.feed(struct.pack(">i", 2**31 - 1) + b"x" * 1000)
    assert decoder.buffered_bytes == 0


def test_it_honours_a_smaller_configured_maximum() -> None:
    decoder = FrameDecoder(frame_bytes_max=64)
    with pytest.raises(ProtocolError):
        decoder.feed(struct.pack(">i", 61))


def test_it_refuses_a_negative_length() -> None:
    with pytest.raises(ProtocolError, match="negative"):
        FrameDecoder().feed(struct.pack(">i", -1))


def test_it_refuses_a_frame_too_short_for_its_header_word() -> None:
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(struct.pack(">i", 2) + b"ab")


def test_it_refuses_a_header_longer_than_the_frame() -> None:
    with pytest.raises(ProtocolError, match="header length"):
        decode_frame(frame_with(4 + 10, 11, b"{}" + b" " * 8))


@pytest.mark.parametrize("type_byte", [2, 0x7F, 0xFF])
def test_it_refuses_an_unknown_serialize_type(type_byte: int) -> None:
    with pytest.raises(ProtocolError, match="serialize type"):
        decode_frame(frame_with(6, (type_byte << 24) | 2, b"{}"))


@pytest.mark.parametrize("header", [b"{nope", b"[1,2]", b"null", b"\xff\xfe", b'{"code":"x"}'])
def test_it_refuses_a_json_header_that_is_not_a_command(header: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_frame(frame_with(4 + len(header), len(header), header))


def test_it_refuses_a_json_header_whose_numbers_overflow_a_java_int() -> None:
    header = b'{"code":105,"opaque":2147483648}'
    with pytest.raises(ProtocolError):
        decode_frame(frame_with(4 + len(header), len(header), header))


FIXED = struct.pack(">hBhii", 105, 0, 479, 0, 0)


def test_it_refuses_a_binary_header_shorter_than_its_fixed_part() -> None:
    with pytest.raises(ProtocolError):
        decode_frame(binary_frame(FIXED))


def test_it_refuses_a_binary_remark_longer_than_the_header() -> None:
    header = FIXED + struct.pack(">i", 1000) + b"abc" + struct.pack(">i", 0)
    with pytest.raises(ProtocolError, match="length"):
        decode_frame(binary_frame(header))


def test_it_refuses_a_binary_string_that_runs_past_the_header() -> None:
    header = FIXED + struct.pack(">i", 20) + b"abc" + struct.pack(">i", 0)
    with pytest.raises(ProtocolError):
        decode_frame(binary_frame(header))


def test_it_refuses_a_binary_ext_block_longer_than_the_header() -> None:
    header = FIXED + struct.pack(">ii", 0, 500)
    with pytest.raises(ProtocolError):
        decode_frame(binary_frame(header))


def test_it_refuses_a_binary_ext_entry_with_a_negative_key_length() -> None:
    entry = struct.pack(">h", -3) + b"abc"
    header = FIXED + struct.pack(">ii", 0, len(entry)) + entry
    with pytest.raises(ProtocolError):
        decode_frame(binary_frame(header))


def test_it_reads_empty_binary_strings_as_null_like_upstream() -> None:
    entry = struct.pack(">h", 1) + b"k" + struct.pack(">i", 0)
    header = FIXED + struct.pack(">ii", 0, len(entry)) + entry
    cmd = decode_frame(binary_frame(header))
    assert cmd.remark is None
    assert cmd.ext_fields == {}


def test_it_stays_failed_after_a_protocol_error() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError):
        decoder.feed(struct.pack(">i", -5))
    good = encode_frame(RemotingCommand.request(105, {"topic": "T"}))
    with pytest.raises(ProtocolError):
        decoder.feed(good)


def test_decode_frame_refuses_missing_or_extra_bytes() -> None:
    good = encode_frame(RemotingCommand.request(105, {"topic": "T"}))
    with pytest.raises(ProtocolError):
        decode_frame(good[:-1])
    with pytest.raises(ProtocolError):
        decode_frame(good + b"x")


def test_it_refuses_to_encode_a_frame_over_the_maximum() -> None:
    cmd = RemotingCommand.request(10, body=b"\0" * FRAME_BYTES_MAX)
    with pytest.raises(ProtocolError):
        encode_frame(cmd)


def test_it_refuses_to_encode_a_code_that_does_not_fit_a_binary_short() -> None:
    cmd = RemotingCommand.request(40000, serialize_type=SerializeType.ROCKETMQ)
    with pytest.raises(ProtocolError):
        encode_frame(cmd)
    assert encode_frame(cmd, SerializeType.JSON)[8:].startswith(b'{"code":40000,')


def test_the_error_carries_the_commands_completed_before_the_fault() -> None:
    good = encode_frame(RemotingCommand.request(105, {"topic": "TopicTest"}, opaque=3))
    with pytest.raises(ProtocolError) as caught:
        FrameDecoder().feed(good + struct.pack(">i", -1))
    assert [cmd.opaque for cmd in caught.value.decoded] == [3]
