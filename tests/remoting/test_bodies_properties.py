"""Java Properties text: GET_NAMESRV_CONFIG answers and UPDATE_NAMESRV_CONFIG requests."""

from __future__ import annotations

import pytest

from remoting.bodies import decode_properties, encode_properties
from remoting.errors import BodyDecodeError
from remoting.properties import config_boolean, java_boolean


def test_it_writes_sorted_raw_key_value_lines_like_mix_all() -> None:
    props = {"rocketmqHome": "/opt/rocketmq", "clusterTest": "false", "b": "x=y"}
    assert encode_properties(props) == b"b=x=y\nclusterTest=false\nrocketmqHome=/opt/rocketmq\n"


def test_it_writes_nothing_for_no_properties() -> None:
    assert encode_properties({}) == b""


def test_it_reads_every_separator_form() -> None:
    text = b"a=1\nb:2\nc 3\nd = 4\ne\t:\t5\nf\ng==6\n"
    assert decode_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4",
        "e": "5",
        "f": "",
        "g": "=6",
    }


def test_it_skips_comments_and_blank_lines() -> None:
    text = b"# comment\n  ! also a comment \\\n\n   \nkey=value\n#x=y\n"
    assert decode_properties(text) == {"key": "value"}


def test_it_joins_continuation_lines_and_drops_their_leading_blanks() -> None:
    text = b"list=a,\\\n    b,\\\r\n\tc\nnext=1\\\\\nlast=end\\"
    assert decode_properties(text) == {"list": "a,b,c", "next": "1\\", "last": "end"}


def test_it_reads_escapes_in_keys_and_values() -> None:
    text = b"my\\ key\\=x=tab\\there\\nnew \\u00e9\\uD83D\\uDE00 \\q\n"
    assert decode_properties(text) == {"my key=x": "tab\there\nnew é😀 q"}


def test_it_lets_the_last_duplicate_win() -> None:
    assert decode_properties(b"k=1\r\nk=2\r") == {"k": "2"}


@pytest.mark.parametrize("text", [b"k=\\u12", b"k=\\uZZZZ", b"k=\\uD800"])
def test_it_refuses_malformed_unicode_escapes(text: bytes) -> None:
    with pytest.raises(BodyDecodeError):
        decode_properties(text)


def test_the_escaped_form_round_trips_awkward_text() -> None:
    props = {" lead key:=#!": " lead value\\ with = and\nnewline", "é": "😀\t"}
    encoded = encode_properties(props, escape=True)
    assert encoded.isascii()
    assert decode_properties(encoded) == props


@pytest.mark.parametrize(
    ("text", "absent", "expected"),
    [(None, True, True), (None, False, False), ("TRUE", False, True), ("yes", True, False)],
)
def test_wire_booleans_read_like_boolean_parse_boolean(
    text: str | None, absent: bool, expected: bool
) -> None:
    assert java_boolean(text, absent) is expected


@pytest.mark.parametrize("text", ["yes", "1", "on", "", "truee"])
def test_a_config_boolean_is_true_or_false_or_a_named_error(text: str) -> None:
    assert config_boolean("k", " False ") is False
    assert config_boolean("k", "TRUE") is True
    with pytest.raises(ValueError, match="k must be true or false"):
        config_boolean("k", text)
