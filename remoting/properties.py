"""Java ``Properties`` text: what ``Properties.load`` reads and ``Properties.store`` writes.

NameServer config (GET/UPDATE_NAMESRV_CONFIG) and the KV config bodies travel as
this text; the decoder follows ``Properties.load`` line by line (continuations,
escapes, ``\\uXXXX``), the encoder writes what ``MixAll.properties2String`` sends.
Text longer than :data:`remoting.body_limits.PROPERTIES` allows is refused before a line
of it is read, and reading costs linear time however lines are continued.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from remoting import body_limits, fastjson
from remoting.errors import BodyDecodeError

# ---------------------------------------------------------------------- Properties

_PROPERTY_LINE_END = re.compile(r"\r\n|\r|\n")
_PROPERTY_BLANKS = " \t\f"
_PROPERTY_KEY = re.compile(r"(?:[^\\=: \t\f]|\\.|\\\Z)*", re.DOTALL)
_PROPERTY_SEPARATOR = re.compile(r"[ \t\f]*[=:]?[ \t\f]*")
_PROPERTY_ESCAPE = re.compile(r"\\(?:u+([0-9a-fA-F]{4})|(u)|(.)|\Z)", re.DOTALL)
_PROPERTY_UNESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_SURROGATE = re.compile("[\ud800-\udfff]")
_STORE_KEY_SPECIAL = re.compile("[^\x21-\x7e]|[\\\\=:#!]")
_STORE_VALUE_SPECIAL = re.compile("^ |[^\x20-\x7e]|[\\\\=:#!]")
_STORE_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f", " ": "\\ "}


def _properties_unescape_one(match: re.Match[str]) -> str:
    hex4, bad_u, other = match.group(1, 2, 3)
    if hex4 is not None:
        return chr(int(hex4, 16))
    if bad_u is not None:
        raise BodyDecodeError("Malformed \\uxxxx encoding in properties")
    if other is None:
        return ""  # a lone backslash at the very end is dropped
    return _PROPERTY_UNESCAPES.get(other, other)


def _properties_unescape(text: str) -> str:
    """``Properties.loadConvert``: \\t \\n \\r \\f, \\uXXXX, and backslash-anything."""
    if "\\" not in text:
        return text
    result = _PROPERTY_ESCAPE.sub(_properties_unescape_one, text)
    if _SURROGATE.search(result) is not None:
        try:
            result = result.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
        except UnicodeDecodeError as exc:
            raise BodyDecodeError("lone surrogate escape in properties") from exc
    return result


def _ends_with_odd_backslashes(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _logical_lines(text: str) -> list[str]:
    """``Properties.LineReader``: skip blanks and comments, join continued lines."""
    lines: list[str] = []
    natural = _PROPERTY_LINE_END.split(text)
    index = 0
    while index < len(natural):
        piece = natural[index].lstrip(_PROPERTY_BLANKS)
        index += 1
        if not piece or piece[0] in "#!":
            continue
        # A line ending in an odd number of backslashes continues on the next one. Only
        # the last piece is looked at: what is left of the line before it ends in an
        # even number of backslashes (one of an odd number was dropped), so the line's
        # count is odd exactly when the piece's is. The pieces are joined once: adding
        # to the line and counting its backslashes each time took quadratic time.
        pieces = [piece]
        while _ends_with_odd_backslashes(piece):
            pieces[-1] = piece[:-1]
            if index >= len(natural):
                break
            piece = natural[index].lstrip(_PROPERTY_BLANKS)
            pieces.append(piece)
            index += 1
        lines.append(pieces[0] if len(pieces) == 1 else "".join(pieces))
    return lines


def decode_properties(data: bytes) -> dict[str, str]:
    """Parse Java ``Properties`` text (read as UTF-8) into a dict; later keys win.

    :class:`~remoting.errors.BodyRefused` for text longer than
    :data:`remoting.body_limits.PROPERTIES` allows."""
    body_limits.check_length(data, body_limits.PROPERTIES)
    text = bytes(data).decode("utf-8", "replace")
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        key_match = _PROPERTY_KEY.match(line)
        assert key_match is not None  # the pattern also matches the empty string
        separator = _PROPERTY_SEPARATOR.match(line, key_match.end())
        assert separator is not None
        key = _properties_unescape(key_match.group())
        result[key] = _properties_unescape(line[separator.end() :])
    return result


def _store_escape(char: str) -> str:
    escaped = _STORE_ESCAPES.get(char)
    if escaped is not None:
        return escaped
    if char in "\\=:#!":
        return "\\" + char
    point = ord(char)
    if point > 0xFFFF:
        point -= 0x10000
        return f"\\u{0xD800 + (point >> 10):04X}\\u{0xDC00 + (point & 0x3FF):04X}"
    return f"\\u{point:04X}"


def _store_value_escape(match: re.Match[str]) -> str:
    return _store_escape(match.group())


def encode_properties(props: Mapping[str, str], *, escape: bool = False) -> bytes:
    """Properties text ``key=value\\n`` with keys sorted (``MixAll.properties2String``).

    Upstream writes keys and values raw, so by default so do we (GET_NAMESRV_CONFIG must
    match byte for byte). ``escape=True`` escapes like ``Properties.store`` (ASCII
    output, any text round-trips through :func:`decode_properties`).
    """
    lines = []
    for key in fastjson.sorted_keys(props):
        value = props[key]
        if value is None:
            continue
        if escape:
            key = _STORE_KEY_SPECIAL.sub(_store_value_escape, key)
            value = _STORE_VALUE_SPECIAL.sub(_store_value_escape, value)
        lines.append(f"{key}={value}\n")
    return "".join(lines).encode("utf-8", "replace")


# ---------------------------------------------------------------------- booleans


def java_boolean(text: str | None, absent: bool) -> bool:
    """Java ``Boolean.parseBoolean`` of a value a peer sent: "true" in any case is True,
    any other text False; ``absent`` when there is no value. For wire values only, where
    a real client's meaning must be kept (a header, a message property)."""
    if text is None:
        return absent
    return text.lower() == "true"


def config_boolean(key: str, text: str) -> bool:
    """A boolean setting of a config file or flag: "true" or "false" in any case, with
    blanks around. Anything else is a ValueError naming ``key``: Java's
    ``Boolean.parseBoolean`` would silently read "yes" or "1" as false, and a
    NameServer or broker started on a misread setting is worse than one that refuses."""
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"{key} must be true or false, got {text!r}")
    return lowered == "true"
