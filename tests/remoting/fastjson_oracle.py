"""``fastjson.loads`` as it was before issue 30: the C decoder for standard JSON, else a
pure-Python tokenizer and iterative parser, and a walk of the parsed value for its depth.

Kept only as the oracle of tests/remoting/test_fastjson_lenient.py, which checks that the
reader in :mod:`remoting.fastjson` gives the same value (or a refusal where this one
refused) on generated fastjson-dialect documents. Never imported by the product.
"""

from __future__ import annotations

import json
import re

from remoting.errors import BodyDecodeError
from remoting.fastjson import NESTING_DEPTH_MAX

_TOKEN = re.compile(
    r"""[ \t\n\r\f\b]*(?:
        (?P<punct>[{}\[\]:,])
      | "(?P<dq>(?:[^"\\]|\\.)*)"
      | '(?P<sq>(?:[^'\\]|\\.)*)'
      | (?P<num>-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
      | (?P<word>[A-Za-z_$][A-Za-z0-9_$]*)
    )""",
    re.VERBOSE | re.DOTALL,
)
_SPACE_CHARS = " \t\n\r\f\b"
_STRING_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|(.))", re.DOTALL)
_SIMPLE_UNESCAPES = {
    '"': '"',
    "'": "'",
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "F": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\x0b",
}
_SURROGATE = re.compile("[\ud800-\udfff]")
_WORDS: dict[str, object] = {"true": True, "false": False, "null": None}


def _unescape_one(match: re.Match[str]) -> str:
    hex4, hex2, other = match.group(1, 2, 3)
    if hex4 is not None:
        return chr(int(hex4, 16))
    if hex2 is not None:
        return chr(int(hex2, 16))
    if other in "01234567":
        return chr(int(other))
    simple = _SIMPLE_UNESCAPES.get(other)
    if simple is None:
        raise BodyDecodeError(f"invalid escape \\{other} in JSON string")
    return simple


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    text = _STRING_ESCAPE.sub(_unescape_one, raw)
    if _SURROGATE.search(text) is not None:
        # Join escaped surrogate pairs into one character; lone halves stay as they are.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def _number(literal: str) -> object:
    try:
        if "." in literal or "e" in literal or "E" in literal:
            return float(literal)
        return int(literal)
    except ValueError as exc:  # e.g. more digits than int() converts
        raise BodyDecodeError(f"bad number {literal[:40]!r}") from exc


def _tokens(text: str) -> list[tuple[str, object]]:
    """Split ``text`` into (kind, value) tokens; kind is a punctuation char or a type."""
    tokens: list[tuple[str, object]] = []
    position = 0
    limit = len(text.rstrip(_SPACE_CHARS))
    match_token = _TOKEN.match
    while position < limit:
        match = match_token(text, position)
        if match is None:
            raise BodyDecodeError(f"unexpected character at offset {position} in JSON")
        kind = match.lastgroup
        value = match.group(kind)  # type: ignore[arg-type]
        if kind == "punct":
            tokens.append((value, None))
        elif kind == "dq" or kind == "sq":
            tokens.append(("str", _unescape(value)))
        elif kind == "num":
            tokens.append(("num", value))
        else:
            tokens.append(("word", value))
        position = match.end()
    return tokens


class _LenientParser:
    """An iterative (stack-based) parser over the token list: no recursion at all."""

    def __init__(self, tokens: list[tuple[str, object]]) -> None:
        self._tokens = tokens
        self._index = 0

    def _next(self) -> tuple[str, object]:
        if self._index >= len(self._tokens):
            raise BodyDecodeError("unexpected end of JSON")
        token = self._tokens[self._index]
        self._index += 1
        return token

    def _scalar(self, kind: str, value: object) -> object:
        if kind == "str":
            return value
        if kind == "num":
            return _number(str(value))
        if kind == "word" and value in _WORDS:
            return _WORDS[str(value)]
        raise BodyDecodeError(f"unexpected token {value!r} in JSON")

    def _key(self) -> str:
        kind, value = self._next()
        if kind in ("str", "num", "word"):
            self._expect(":")
            return str(value)
        raise BodyDecodeError(f"expected an object key, got {kind!r}")

    def _expect(self, punct: str) -> None:
        kind, _ = self._next()
        if kind != punct:
            raise BodyDecodeError(f"expected {punct!r} in JSON, got {kind!r}")

    def parse(self) -> object:
        stack: list[tuple[dict[str, object] | list[object], str]] = []
        result: object = None
        while True:
            kind, value = self._next()
            # Open a container, or produce one finished value.
            if kind == "{" or kind == "[":
                if len(stack) >= NESTING_DEPTH_MAX:
                    raise BodyDecodeError(f"JSON nested deeper than {NESTING_DEPTH_MAX}")
                container: dict[str, object] | list[object] = {} if kind == "{" else []
                closer = "}" if kind == "{" else "]"
                if self._peek() == closer:
                    self._index += 1
                    finished: object = container
                else:
                    key = self._key() if kind == "{" else ""
                    stack.append((container, key))
                    continue
            else:
                finished = self._scalar(kind, value)
            # Attach finished values to their parents, closing containers as they end.
            while True:
                if not stack:
                    result = finished
                    if self._index != len(self._tokens):
                        raise BodyDecodeError("trailing data after JSON value")
                    return result
                parent, key = stack[-1]
                if isinstance(parent, dict):
                    parent[key] = finished
                else:
                    parent.append(finished)
                sep, _ = self._next()
                if sep == ",":
                    if isinstance(parent, dict):
                        stack[-1] = (parent, self._key())
                    break
                if sep != ("}" if isinstance(parent, dict) else "]"):
                    raise BodyDecodeError(f"expected ',' or a closing bracket, got {sep!r}")
                stack.pop()
                finished = parent

    def _peek(self) -> str | None:
        if self._index < len(self._tokens):
            return self._tokens[self._index][0]
        return None


def _reject_constant(name: str) -> object:
    raise ValueError(f"unexpected constant {name}")


_standard_loads = json.JSONDecoder(strict=False, parse_constant=_reject_constant).decode


def _nesting_depth(value: object) -> int:
    if not isinstance(value, dict | list):
        return 0
    deepest = 0
    stack: list[tuple[dict[str, object] | list[object], int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        for child in item.values() if isinstance(item, dict) else item:
            if type(child) is dict or type(child) is list:
                stack.append((child, depth + 1))
    return deepest


def old_loads(text: str | bytes) -> object:
    """The old reader's value for ``text`` (bytes read as UTF-8 with replacement)."""
    if not isinstance(text, str):
        text = text.decode("utf-8", "replace")
    try:
        value = _standard_loads(text)
    except RecursionError as exc:
        raise BodyDecodeError("JSON nested too deeply") from exc
    except ValueError:
        return _LenientParser(_tokens(text)).parse()
    if _nesting_depth(value) > NESTING_DEPTH_MAX:
        raise BodyDecodeError(f"JSON nested deeper than {NESTING_DEPTH_MAX}")
    return value
