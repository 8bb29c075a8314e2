"""The fastjson 1.x dialect: escaping, key order and the lenient reader."""

from __future__ import annotations

import pytest

from remoting import fastjson
from remoting.errors import BodyDecodeError


def test_it_writes_compact_json_with_sorted_keys_and_no_nulls() -> None:
    value = {"b": [1, None, True], "a": None, "c": {"y": False, "x": 2}}
    assert fastjson.dumps(value) == '{"b":[1,null,true],"c":{"x":2,"y":false}}'


def test_it_writes_int_keys_unquoted_in_plain_and_quoted_in_standard_style() -> None:
    addrs = {10: "c", 1: "b", 0: "a"}
    assert fastjson.dumps(addrs) == '{0:"a",1:"b",10:"c"}'
    assert fastjson.dumps(addrs, standard=True) == '{"0":"a","1":"b","10":"c"}'


def test_it_sorts_string_keys_in_java_utf16_order() -> None:
    # U+FF01 sorts after an astral character in Java (surrogates are 0xD800..).
    keys = {"\uff01": 1, "\U0001f600": 2, "a": 3}
    assert fastjson.sorted_keys(keys) == ["a", "\U0001f600", "\uff01"]


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("a/b", '"a/b"'),
        ('q"b\\', '"q\\"b\\\\"'),
        ("\b\t\n\f\r", '"\\b\\t\\n\\f\\r"'),
        ("\x00\x0b\x1f", '"\\u0000\\u000B\\u001F"'),
        ("\x7f\x9f\xa0", '"\\u007F\\u009F\xa0"'),
        ("\u2028\u2029", '"\\u2028\\u2029"'),
        ("brokér😀", '"brokér😀"'),
    ],
)
def test_it_escapes_strings_like_fastjson_plain_style(text: str, plain: str) -> None:
    assert fastjson.quote(text) == plain
    assert fastjson.loads(plain) == text


@pytest.mark.parametrize(
    ("text", "standard"),
    [
        ("a/b", '"a\\/b"'),
        ("brokér", '"brok\\u00E9r"'),
        ("😀", '"\\uD83D\\uDE00"'),
        ("\x01\x7f\n", '"\\u0001\\u007F\\n"'),
    ],
)
def test_it_escapes_strings_like_fastjson_browser_compatible_style(
    text: str, standard: str
) -> None:
    assert fastjson.quote(text, standard=True) == standard
    assert fastjson.loads(standard) == text


def test_standard_style_output_is_pure_ascii() -> None:
    assert fastjson.dumps({"ключ": ["значение", "\u2028"]}, standard=True).isascii()


def test_it_reads_unquoted_numeric_and_identifier_keys_and_single_quotes() -> None:
    text = "{0:'a',-1:\"b\",name : 'it''s', nested: {x: [1, 2.5, true, null]}}".replace("''", "\\'")
    assert fastjson.loads(text) == {
        "0": "a",
        "-1": "b",
        "name": "it's",
        "nested": {"x": [1, 2.5, True, None]},
    }


def test_it_reads_fastjson_escapes() -> None:
    assert fastjson.loads(r"'\x41\v\0\'\/'") == "A\x0b\x00'/"


@pytest.mark.parametrize(
    "garbage",
    ["", "{", "{]", "[1,]", "{'a' 1}", "{a:}", "NaN", "tru", "{1:2,}", "[1] 2", '"\\q"', "\x00"],
)
def test_it_refuses_garbage_with_body_decode_error(garbage: str) -> None:
    with pytest.raises(BodyDecodeError):
        fastjson.loads(garbage)


@pytest.mark.parametrize("lenient", [False, True])
def test_it_refuses_nesting_beyond_the_limit(lenient: bool) -> None:
    depth = fastjson.NESTING_DEPTH_MAX + 1
    opener = "{k:" if lenient else '{"k":'
    with pytest.raises(BodyDecodeError, match="nested"):
        fastjson.loads(opener * depth + "1" + "}" * depth)


def test_it_accepts_nesting_up_to_the_limit() -> None:
    depth = fastjson.NESTING_DEPTH_MAX
    assert fastjson.loads("[" * depth + "]" * depth) is not None
    deep: object = 1
    for _ in range(depth):
        deep = [deep]
    assert fastjson.loads(fastjson.dumps(deep)) == deep


def test_it_refuses_to_write_what_fastjson_cannot_represent() -> None:
    with pytest.raises(ValueError):
        fastjson.dumps({(1, 2): "tuple key"})
    with pytest.raises(ValueError):
        fastjson.dumps(object())


def test_it_writes_nan_as_null_like_fastjson() -> None:
    assert fastjson.dumps([float("nan"), 1.5]) == "[null,1.5]"


def test_it_reads_bytes_as_utf8() -> None:
    assert fastjson.loads('{"k":"é"}'.encode()) == {"k": "é"}
