"""The JSON dialect of fastjson 1.x, as RocketMQ puts it on the wire.

Writing (:func:`dumps`) reproduces the two styles the Java side emits:

* plain (``JSON.toJSONString``): non-string map keys unquoted (``{0:"a"}``), non-ASCII
  written raw, control characters and U+007F..U+009F, U+2028, U+2029 escaped;
* standard (``BrowserCompatible``...): every key quoted, every character outside
  printable ASCII escaped as ``\\uXXXX`` with upper-case hex, ``/`` escaped as ``\\/``.

Both styles are compact, omit ``None`` map values and sort map keys (ints numerically,
strings in Java ``String.compareTo`` order) so the same value always gives the same
bytes. Reading (:func:`loads`) accepts standard JSON plus what fastjson tolerates:
unquoted numeric or identifier keys and single-quoted strings.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import TypeVar

from remoting.errors import BodyDecodeError

_K = TypeVar("_K")

# Deeper documents are refused: parsing and writing must not exhaust the Python stack.
NESTING_DEPTH_MAX = 512

# Short escapes shared by both styles (fastjson ``IOUtils.replaceChars``).
_SHORT_ESCAPES = {
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
    '"': '\\"',
    "\\": "\\\\",
}

# Plain style: C0 controls, quote, backslash, U+007F..U+009F, U+2028 and U+2029.
_PLAIN_SPECIAL = re.compile(r'[\x00-\x1f"\\\x7f-\x9f\u2028\u2029]')
# Standard style: everything but printable ASCII other than '"', '/' and '\'.
_STANDARD_SPECIAL = re.compile(r"[^\x20\x21\x23-\x2e\x30-\x5b\x5d-\x7e]")
# Code points from here up sort differently in UTF-16 (Java) and code-point (Python) order.
_UTF16_ORDER_DIVERGES = re.compile("[\ue000-\U0010ffff]")


def _unicode_escape(char: str) -> str:
    """``\\uXXXX`` with upper-case hex; astral characters become a surrogate pair."""
    point = ord(char)
    if point > 0xFFFF:
        point -= 0x10000
        return f"\\u{0xD800 + (point >> 10):04X}\\u{0xDC00 + (point & 0x3FF):04X}"
    return f"\\u{point:04X}"


def _plain_escape(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT_ESCAPES.get(char) or _unicode_escape(char)


def _standard_escape(match: re.Match[str]) -> str:
    char = match.group()
    if char == "/":
        return "\\/"
    return _SHORT_ESCAPES.get(char) or _unicode_escape(char)


def quote(text: str, *, standard: bool = False) -> str:
    """``text`` as a double-quoted JSON string in the chosen fastjson style."""
    if standard:
        if _STANDARD_SPECIAL.search(text) is None:
            return '"' + text + '"'
        return '"' + _STANDARD_SPECIAL.sub(_standard_escape, text) + '"'
    if _PLAIN_SPECIAL.search(text) is None:
        return '"' + text + '"'
    return '"' + _PLAIN_SPECIAL.sub(_plain_escape, text) + '"'


def _utf16_key(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def sorted_keys(mapping: Mapping[_K, object]) -> list[_K]:
    """Keys in the order ``MapSortField`` writes them: ints numerically, then strings.

    Strings compare like Java's ``String.compareTo`` (UTF-16 code units).
    """
    keys = list(mapping)
    strings = [k for k in keys if isinstance(k, str)]
    if len(strings) == len(keys):
        if _UTF16_ORDER_DIVERGES.search("".join(strings)) is None:
            return sorted(keys)  # type: ignore[type-var]
        return sorted(keys, key=_utf16_key)  # type: ignore[arg-type]
    numbers = [k for k in keys if isinstance(k, int) and not isinstance(k, bool)]
    if len(strings) + len(numbers) != len(keys):
        raise ValueError("fastjson maps need str or int keys")
    numbers.sort()
    strings.sort(key=_utf16_key)
    return [*numbers, *strings]


def _format_float(value: float) -> str:
    # fastjson writes NaN and the infinities as null; finite values as the shortest repr.
    if math.isfinite(value):
        return repr(value)
    return "null"


def _dump_map(mapping: Mapping[object, object], standard: bool, depth: int, out: list[str]) -> None:
    out.append("{")
    first = True
    for key in sorted_keys(mapping):
        item = mapping[key]
        if item is None:
            continue
        if not first:
            out.append(",")
        first = False
        if isinstance(key, str):
            out.append(quote(key, standard=standard))
        elif standard:
            out.append(f'"{key:d}"')
        else:
            out.append(f"{key:d}")
        out.append(":")
        _dump(item, standard, depth, out)
    out.append("}")


def _dump(value: object, standard: bool, depth: int, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(quote(value, standard=standard))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(f"{value:d}")
    elif isinstance(value, float):
        out.append(_format_float(value))
    elif depth >= NESTING_DEPTH_MAX:
        raise ValueError(f"value nested deeper than {NESTING_DEPTH_MAX}")
    elif isinstance(value, Mapping):
        _dump_map(value, standard, depth + 1, out)
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _dump(item, standard, depth + 1, out)
        out.append("]")
    else:
        raise ValueError(f"cannot write {type(value).__name__} as fastjson")


def dumps(value: object, *, standard: bool = False) -> str:
    """Serialize ``value`` (str, int, float, bool, None, list, tuple, Mapping) compactly.

    Raises ``ValueError`` for unsupported types, map keys that are neither str nor int,
    and nesting deeper than :data:`NESTING_DEPTH_MAX`.
    """
    out: list[str] = []
    _dump(value, standard, 0, out)
    return "".join(out)


# ---------------------------------------------------------------------------- reading


def _reject_constant(name: str) -> object:
    # Python's json accepts NaN/Infinity; fastjson does not.
    raise ValueError(f"unexpected constant {name}")


def _nesting_depth(value: object) -> int:
    """Deepest container nesting of a parsed value, without recursion."""
    if not isinstance(value, dict | list):
        return 0
    deepest = 0
    # Only containers go on the stack: a large body is mostly scalars.
    stack: list[tuple[dict[str, object] | list[object], int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > deepest:
            deepest = depth
        for child in item.values() if isinstance(item, dict) else item:
            if type(child) is dict or type(child) is list:
                stack.append((child, depth + 1))
    return deepest


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


# A double-quoted string (kept as is) or an unquoted object key (to be quoted).
_STRING_OR_BARE_KEY = re.compile(
    r'("(?:[^"\\]|\\.)*")|([{,][ \t\n\r]*)(-?[0-9]+|[A-Za-z_$][A-Za-z0-9_$]*)([ \t\n\r]*:)',
    re.DOTALL,
)


def _quote_bare_key(match: re.Match[str]) -> str:
    string = match.group(1)
    if string is not None:
        return string
    return match.group(2) + '"' + match.group(3) + '"' + match.group(4)


def _lenient_loads(text: str) -> object:
    # Fast path for the usual non-standard form, unquoted Long keys ({0:"addr"}): quote
    # the keys and let the C parser do the rest. Single quotes need the full parser.
    if "'" not in text:
        try:
            value = _standard_loads(_STRING_OR_BARE_KEY.sub(_quote_bare_key, text))
        except RecursionError as exc:
            raise BodyDecodeError("JSON nested too deeply") from exc
        except ValueError:
            pass
        else:
            _check_depth(text, value)
            return value
    return _LenientParser(_tokens(text)).parse()


def _check_depth(text: str, value: object) -> None:
    # Only a document with many brackets can be too deep; skip the walk otherwise.
    many_brackets = text.count("{") + text.count("[") > NESTING_DEPTH_MAX
    if many_brackets and _nesting_depth(value) > NESTING_DEPTH_MAX:
        raise BodyDecodeError(f"JSON nested deeper than {NESTING_DEPTH_MAX}")


_standard_loads: Callable[[str], object] = json.JSONDecoder(
    strict=False, parse_constant=_reject_constant
).decode


def loads(text: str | bytes | bytearray | memoryview) -> object:
    """Parse fastjson-dialect JSON; object keys are always returned as ``str``.

    Bytes are read as UTF-8 with replacement characters for bad sequences (as Java's
    decoder does). Raises :class:`BodyDecodeError` for anything that is not JSON in
    the dialect, and for nesting deeper than :data:`NESTING_DEPTH_MAX`.
    """
    if not isinstance(text, str):
        text = bytes(text).decode("utf-8", "replace")
    try:
        value = _standard_loads(text)
    except RecursionError as exc:
        raise BodyDecodeError("JSON nested too deeply") from exc
    except ValueError:
        # Not standard JSON: try fastjson's leniencies (unquoted keys, single quotes).
        return _lenient_loads(text)
    _check_depth(text, value)
    return value
