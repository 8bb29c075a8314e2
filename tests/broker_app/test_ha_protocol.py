"""The classic HA wire format, bytes only (no sockets)."""

from __future__ import annotations

import pytest

from broker_app.ha.protocol import (
    HAProtocolError,
    ReportDecoder,
    TransferDecoder,
    encode_report,
    encode_transfer,
)


def test_a_report_is_an_8_byte_big_endian_offset() -> None:
    assert encode_report(0x0102) == b"\x00" * 6 + b"\x01\x02"


def test_the_master_keeps_only_the_last_complete_report() -> None:
    decoder = ReportDecoder()
    stream = encode_report(10) + encode_report(20) + encode_report(30)
    assert decoder.feed(stream[:13]) == 10
    assert decoder.feed(stream[13:15]) is None
    assert decoder.feed(stream[15:]) == 30


def test_a_negative_report_is_a_protocol_error() -> None:
    with pytest.raises(HAProtocolError):
        ReportDecoder().feed(b"\xff" * 8)


def test_transfers_split_at_any_byte_boundary() -> None:
    stream = encode_transfer(100, b"abc") + encode_transfer(103, b"") + encode_transfer(103, b"d")
    decoder = TransferDecoder(body_bytes_max=16)
    found = []
    for index in range(len(stream)):
        found += decoder.feed(stream[index : index + 1])
    assert [(t.offset, t.body) for t in found] == [(100, b"abc"), (103, b""), (103, b"d")]
    assert found[1].is_heartbeat
    assert decoder.buffered_bytes == 0


def test_a_transfer_larger_than_the_batch_bound_is_refused_before_buffering() -> None:
    decoder = TransferDecoder(body_bytes_max=16)
    with pytest.raises(HAProtocolError):
        decoder.feed(encode_transfer(0, b"x" * 17)[:12])


def test_a_negative_offset_or_size_is_refused() -> None:
    with pytest.raises(HAProtocolError):
        TransferDecoder(16).feed(b"\xff" * 12)
