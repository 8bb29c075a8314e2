"""Typed reads of extFields with Java semantics, and how JSON header values are coerced."""

from __future__ import annotations

import pytest

from remoting.codes import LanguageCode
from remoting.command import RemotingCommand, make_response
from remoting.errors import HeaderFieldError
from remoting.frame import decode_frame, encode_frame
from remoting.headers import header_bool, header_int, header_str, require_int, require_str


def register_request(**fields: str) -> RemotingCommand:
    """A REGISTER_BROKER request carrying exactly ``fields``."""
    return RemotingCommand.request(103, dict(fields))


def json_frame(header: bytes) -> bytes:
    """Wrap a JSON header into a frame."""
    return (4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header


def test_it_reads_present_and_absent_text_fields() -> None:
    cmd = register_request(brokerName="broker-a")
    assert header_str(cmd, "brokerName") == "broker-a"
    assert header_str(cmd, "clusterName") is None
    assert header_str(RemotingCommand.request(103), "brokerName") is None


def test_require_str_names_the_missing_field() -> None:
    with pytest.raises(HeaderFieldError, match="brokerAddr"):
        require_str(register_request(), "brokerAddr")


@pytest.mark.parametrize(("text", "number"), [("0", 0), ("-7", -7), ("+12", 12)])
def test_it_parses_integers_like_long_parse_long(text: str, number: int) -> None:
    assert header_int(register_request(brokerId=text), "brokerId") == number


@pytest.mark.parametrize("text", ["", "1.5", " 1", "0x10", "9223372036854775808", "abc"])
def test_it_rejects_text_long_parse_long_rejects(text: str) -> None:
    with pytest.raises(HeaderFieldError, match="brokerId"):
        header_int(register_request(brokerId=text), "brokerId")


def test_it_checks_the_int_range_when_asked_for_32_bits() -> None:
    cmd = register_request(bodyCrc32="2147483648")
    assert header_int(cmd, "bodyCrc32") == 2147483648
    with pytest.raises(HeaderFieldError):
        header_int(cmd, "bodyCrc32", bits=32)


def test_require_int_refuses_an_absent_field() -> None:
    assert header_int(register_request(), "brokerId") is None
    with pytest.raises(HeaderFieldError):
        require_int(register_request(), "brokerId")


@pytest.mark.parametrize(
    ("text", "flag"),
    [
        ("true", True),
        ("TRUE", True),
        ("True", True),
        ("false", False),
        ("yes", False),
        ("1", False),
    ],
)
def test_it_parses_booleans_like_boolean_parse_boolean(text: str, flag: bool) -> None:
    assert header_bool(register_request(compressed=text), "compressed") is flag


def test_an_absent_boolean_is_none() -> None:
    assert header_bool(register_request(), "acceptStandardJsonOnly") is None


def test_it_coerces_numbers_and_booleans_sent_by_the_cpp_client_into_text() -> None:
    header = b'{"code":103,"extFields":{"brokerId":1,"compressed":false,"ratio":1.5,"gone":null}}'
    cmd = decode_frame(json_frame(header))
    assert cmd.ext_fields == {"brokerId": "1", "compressed": "false", "ratio": "1.5"}
    assert header_int(cmd, "brokerId") == 1


def test_it_decodes_an_unknown_language_as_none_and_a_numeric_one_by_code() -> None:
    assert decode_frame(json_frame(b'{"code":1,"language":"COBOL"}')).language is None
    assert decode_frame(json_frame(b'{"code":1,"language":9}')).language is LanguageCode.GO
    assert decode_frame(json_frame(b'{"code":1}')).language is LanguageCode.JAVA


def test_it_accepts_fastjson_leniencies_in_a_header() -> None:
    cmd = decode_frame(json_frame(b"{code:105,extFields:{'topic':'T'},opaque:'4'}"))
    assert (cmd.code, cmd.opaque, cmd.ext_fields) == (105, 4, {"topic": "T"})


def test_each_answer_s_header_carries_its_own_ext_fields_through_the_header_cache() -> None:
    """Headers are kept per (code, remark, ext fields): answers alike but for one ext
    value, or for the order of two, each decode to exactly what was encoded."""
    request = RemotingCommand.request(105, {"topic": "T"})
    variants = [
        {"routesVersion": "7"},
        {"routesVersion": "8"},
        {"routesVersion": "7"},
        {"a": "1", "b": "2"},
        {"b": "2", "a": "1"},
        {},
    ]
    for ext in variants * 2:
        frame = encode_frame(make_response(request, 0, ext_fields=dict(ext), body=b"{}"))
        assert decode_frame(frame).ext_fields == ext
