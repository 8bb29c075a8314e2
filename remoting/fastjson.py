"""The JSON dialect of fastjson 1.x, as RocketMQ puts it on the wire.

Writing (:func:`dumps`) reproduces the two styles the Java side emits:

* plain (``JSON.toJSONString``): non-string map keys unquoted (``{0:"a"}``), non-ASCII
  written raw, control characters and U+007F..U+009F, U+2028, U+2029 escaped;
* standard (``BrowserCompatible``...): every key quoted, every character outside
  printable ASCII escaped as ``\\uXXXX`` with upper-case hex, ``/`` escaped as ``\\/``.

Both styles are compact, omit ``None`` map values and sort map keys (ints numerically,
strings in Java ``String.compareTo`` order) so the same value always gives the same
bytes. Reading (:func:`loads`) accepts standard JSON plus what fastjson tolerates:
unquoted numeric or identifier keys, single-quoted strings, its extra escapes (``\\x41``,
``\\v``, ``\\0``..``\\7``, ``\\F``, ``\\'``), form feeds and backspaces between tokens, and
numbers with leading zeros. It takes time linear in the text, about what Python's C JSON
decoder takes, and :class:`ReadLimits` bound it further for text from anyone.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
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
#
# Standard JSON goes straight to the C decoder. The rest of the dialect is rewritten into
# standard JSON and read by the same decoder, so a document costs about what the decoder
# costs, never the seconds a tokenizer in Python took. The rewrite is a fixed number of
# passes of string operations implemented in C (replace, split, join, translate), each
# linear and a few tens of nanoseconds per occurrence. A regular expression substitution
# costs about ten times that per match, so one runs only per unquoted key and per number
# with leading zeros; Python loops only over the quotes of a document that mixes both
# kinds of strings and puts quotes of one kind inside the other (_quote_roles).
#
# The passes work on the UTF-8 bytes of the text seen as latin-1 (one character per byte):
# str.join copies, where bytes.join also allocates a buffer descriptor per item.


def _reject_constant(name: str) -> object:
    # Python's json accepts NaN/Infinity; fastjson does not.
    raise ValueError(f"unexpected constant {name}")


_standard_loads: Callable[[str], object] = json.JSONDecoder(
    strict=False, parse_constant=_reject_constant
).decode

# Joins the parts of the text outside strings; never in UTF-8, so never in the text.
_SEP = "\xff"
# Stands for a double quote inside a single-quoted string until it becomes an escape.
_INNER_DOUBLE_QUOTE = "\xfe"
# Stands for the colon after a string key while the other colons get their quote.
_STRING_KEY_COLON = "\x01"
# A document whose strings hold quotes of the other kind is rebuilt this much at a time.
_REBUILD_CHUNK_CHARS = 64 * 1024

# fastjson escapes that JSON lacks, each rewritten into a JSON escape of the same
# character. Every rewrite keeps its backslash, so text outside strings stays exactly as
# invalid as it was. Escaped backslashes go first: after them every backslash starts an
# escape, and once escaped quotes are rewritten every quote character is a real one.
_ESCAPE_REWRITES: tuple[tuple[str, str], ...] = (
    ("\\\\", "\\u005c"),
    ('\\"', "\\u0022"),
    ("\\'", "\\u0027"),
    ("\\x", "\\u00"),  # \xHH; a bad HH fails as a bad \u escape, as it failed before
    ("\\v", "\\u000b"),
    ("\\F", "\\f"),
    *((f"\\{digit}", f"\\u000{digit}") for digit in "01234567"),
)


def _byte_table(default: int | None, classes: dict[bytes, bytes]) -> bytes:
    """A ``bytes.translate`` table: each byte of a key to that key's byte, the others to
    ``default`` (None: to themselves)."""
    table = bytearray(range(256)) if default is None else bytearray([default] * 256)
    for members, label in classes.items():
        for byte in members:
            table[byte] = label[0]
    return bytes(table)


_ALL_BYTES = bytes(range(256))
_NOT_QUOTES = _ALL_BYTES.translate(None, b"\"'")
_SPACES = b" \t\n\r"
_EACH_SPACE = (" ", "\t", "\n", "\r")
_KEY_END_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_$"
# Everything the dialect allows outside strings; any other byte there is an error.
_STRUCTURE_BYTES = b"{}[],:.+-\f\b\xff" + _SPACES + _KEY_END_BYTES
# What comes before each colon: a word (an unquoted key), a string (S) or anything else.
_BEFORE_COLON = _byte_table(ord("p"), {_KEY_END_BYTES: b"w", b"\xff": b"S", b":": b":"})
# An unquoted key, fastjson's number or identifier token, once its closing quote is in.
_KEY = r'(?:-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|[A-Za-z_$][A-Za-z0-9_$]*)":'
_OPENER_BEFORE_KEY = re.compile(r"\{(?=" + _KEY + r")")
_COMMA_BEFORE_KEY = re.compile(r",(?=" + _KEY + r")")
# A number with leading zeros (fastjson reads 007 as 7, JSON refuses it): a value starts
# after [ , : or a space, possibly with a minus; after a letter or a dot a 0 is in a word
# or an exponent, where JSON takes leading zeros.
_ZERO_CLASSES = _byte_table(
    ord("a"), {b"0": b"0", b"123456789": b"1", b"-": b"-", b"[,:\f\b" + _SPACES: b" "}
)
_LEADING_ZERO_SHAPES = (b" 00", b" 01", b" -00", b" -01")
_LEADING_ZEROS = re.compile(r"0(?:(?<=[\[,: \t\n\r]0)|(?<=[\[,: \t\n\r]-0))0*(?=[0-9])")
_NOT_BRACKETS = _ALL_BYTES.translate(None, b"[]{}")
# What the decoder makes a value for: each value or key needs one of these before it.
_NOT_SEPARATORS = _ALL_BYTES.translate(None, b"[{,:")
_NOT_OPENERS = _ALL_BYTES.translate(None, b"[{")
_BRACKETS_AS_PARENS = _byte_table(None, {b"[{": b"(", b"]}": b")"})
# Peeling pays while a pass removes at least this share of the brackets.
_PEEL_SHRINK_MIN = 0.05
# Shorter text holds at most three integers of the 4,300 digits Python converts at most
# (0.4 ms): its integers go to the C decoder unchecked, without a call per integer.
_INT_CHECK_BYTES_MIN = 16 * 1024


def _latin1(data: bytes | bytearray) -> str:
    return data.decode("latin-1")


def _check_strings(quotes: int, separators_max: int) -> None:
    # Between two strings there is a separator (or the document is no JSON).
    if quotes > 2 * separators_max + 2:
        raise BodyDecodeError(
            f"{quotes} quotes: more strings than {separators_max} separators hold"
        )


def _check_separators(separators: int, separators_max: int) -> None:
    if separators > separators_max:
        raise BodyDecodeError(
            f"{separators} separators outside strings, more than the limit of {separators_max}"
        )


def _outside_strings(data: str) -> str:
    """The text of JSON ``data`` (latin-1 view) outside its double-quoted strings."""
    # Escaped backslashes and quotes end no string (what remains of them is no quote).
    strings = data.replace("\\\\", "").replace('\\"', "")
    return "".join(strings.split('"')[0::2])


def outside_strings(data: bytes) -> bytes:
    """The bytes of JSON ``data`` outside its double-quoted strings (escapes taken into
    account), in linear time, with C string operations only.

    This is the decoder's own view of the text only when no single-quoted string holds a
    double quote; a caller that relies on it checks that no ``'`` is left in it."""
    return _outside_strings(_latin1(data)).encode("latin-1")


def check_separators(data: bytes, separators_max: int) -> bytes:
    """Refuse (:class:`BodyDecodeError`) JSON with more than ``separators_max`` of
    ``{ [ , :`` outside its double-quoted strings; return those of the whole text.

    The decoder makes a value or key after each of them, so they bound what it costs
    beyond a linear scan. One pass counts them in the whole text, strings included;
    only when that count is over the limit are the strings taken out to count again.
    """
    separators = data.translate(None, _NOT_SEPARATORS)
    if len(separators) > separators_max:
        _check_strings(data.count(b'"') - data.count(b'\\"'), separators_max)
        outside = _outside_strings(_latin1(data)).encode("latin-1")
        _check_separators(len(outside.translate(None, _NOT_SEPARATORS)), separators_max)
    return separators


def _quote_roles(quotes: bytes) -> str:
    """What each quote becomes: ``"`` where it opens or closes a string, ``'`` for an
    apostrophe in a double-quoted string, :data:`_INNER_DOUBLE_QUOTE` for a double quote
    in a single-quoted one."""
    roles = bytearray(b'"' * len(quotes))
    inside = 0
    for index, quote in enumerate(quotes):
        if not inside:
            inside = quote
        elif quote == inside:
            inside = 0
        else:
            roles[index] = quote if quote == 0x27 else 0xFE
    if inside:
        raise BodyDecodeError("unterminated string in JSON")
    return _latin1(roles)


def _double_quoted(data: str, separators_max: int | None) -> str:
    """``data`` with its single-quoted strings double-quoted."""
    quotes = data.encode("latin-1").translate(None, _NOT_QUOTES)
    if len(quotes) % 2 == 0 and quotes[0::2] == quotes[1::2]:
        # Each string closes at the next quote: no string holds the other quote.
        return data.replace("'", '"')
    if '"' not in "".join(data.split("'")[0::2]):
        # No double-quoted strings: every double quote is inside a single-quoted one.
        return data.replace('"', "\\u0022").replace("'", '"')
    if separators_max is not None:
        _check_strings(len(quotes), separators_max)
    # Both kinds of strings, and some hold the other quote: put each quote's role back
    # between the text around the quotes, a chunk at a time (each chunk's lists are
    # as long as its quotes).
    roles = _quote_roles(quotes)
    done = 0
    chunks = []
    for start in range(0, len(data), _REBUILD_CHUNK_CHARS):
        between = data[start : start + _REBUILD_CHUNK_CHARS].replace("'", '"').split('"')
        pieces = [""] * (2 * len(between) - 1)
        pieces[0::2] = between
        pieces[1::2] = roles[done : done + len(between) - 1]
        done += len(between) - 1
        chunks.append("".join(pieces))
    return "".join(chunks).replace(_INNER_DOUBLE_QUOTE, "\\u0022")


def _quote_keys(outside: str) -> str:
    """Unquoted keys quoted: a quote before each colon that follows a word, and one
    after the ``{`` or ``,`` before each such key. A word before a colon that is no key
    keeps a quote with no partner, right after a token, where JSON fails, as it should."""
    if any(space in outside for space in _EACH_SPACE):
        # The passes below expect no whitespace after { and , and before colons. (The
        # text outside strings holds no other character str.split() takes for space.)
        outside = " ".join(outside.split())
        outside = outside.replace("{ ", "{").replace(", ", ",").replace(" :", ":")
    outside = outside.replace(_SEP + ":", _STRING_KEY_COLON).replace(":", '":')
    outside = outside.replace(_STRING_KEY_COLON, _SEP + ":")
    outside = _OPENER_BEFORE_KEY.sub('{"', outside)
    return _COMMA_BEFORE_KEY.sub(',"', outside)


def _fix_outside(outside: str, structure: bytes) -> str | None:
    """The text outside strings (``structure`` is its bytes) rewritten into standard
    JSON; None when it already is. Regular expressions run on the text: a substitution
    on bytes joins its pieces with a buffer descriptor each."""
    if structure.translate(None, _STRUCTURE_BYTES):
        raise BodyDecodeError("unexpected character in JSON")
    changed = False
    if "\f" in outside or "\b" in outside:
        # fastjson skips form feeds and backspaces between tokens; JSON does not.
        outside = outside.replace("\f", " ").replace("\b", " ")
        changed = True
    before_colons = b"p" + structure.translate(_BEFORE_COLON, _SPACES + b"\f\b")
    if b"w:" in before_colons:
        if b"p:" in before_colons:
            raise BodyDecodeError("colon after no key in JSON")
        outside = _quote_keys(outside)
        changed = True
    # The leading space stands for the start of the document.
    zeros = b" " + structure.translate(_ZERO_CLASSES)
    if any(shape in zeros for shape in _LEADING_ZERO_SHAPES):
        outside = _LEADING_ZEROS.sub("", " " + outside)[1:]
        changed = True
    return outside if changed else None


def _standardized(data: str, separators_max: int | None) -> str:
    """``data`` (latin-1 view), with every quote character a real one, as standard JSON."""
    if separators_max is not None:
        _check_strings(data.count('"'), separators_max)
    parts = data.split('"')
    outside = _SEP.join(parts[0::2])
    if "'" in outside:
        data = _double_quoted(data, separators_max)
        parts = data.split('"')
        outside = _SEP.join(parts[0::2])
    if len(parts) % 2 == 0:
        raise BodyDecodeError("unterminated string in JSON")
    structure = outside.encode("latin-1")
    if separators_max is not None:
        _check_separators(len(structure.translate(None, _NOT_SEPARATORS)), separators_max)
    if _nested_too_deep(structure):
        raise BodyDecodeError(f"JSON nested deeper than {NESTING_DEPTH_MAX}")
    fixed = _fix_outside(outside, structure)
    if fixed is None:
        return data
    parts[0::2] = fixed.split(_SEP)
    return '"'.join(parts)


def _lenient_loads(
    text: str, decode: Callable[[str], object], separators_max: int | None
) -> object:
    """fastjson's leniencies: unquoted keys, single quotes, its extra escapes and
    whitespace, leading zeros."""
    data = _latin1(text.encode("utf-8", "surrogatepass"))
    if "\\" in data:
        for escape, rewritten in _ESCAPE_REWRITES:
            data = data.replace(escape, rewritten)
    standard = _standardized(data, separators_max).encode("latin-1")
    try:
        return decode(standard.decode("utf-8", "surrogatepass"))
    except RecursionError as exc:
        raise BodyDecodeError("JSON nested too deeply") from exc
    except BodyDecodeError:
        raise
    except ValueError as exc:
        raise BodyDecodeError(f"not JSON: {getattr(exc, 'msg', exc)}") from exc


def _deepest(brackets: bytes) -> int:
    """The deepest nesting of ``brackets`` (only parentheses), counted per mountain: a run
    of ( then a run of ), found by splitting at each )( in C."""
    deepest = level = 0
    for index, mountain in enumerate(brackets.split(b")(")):
        ups = mountain.count(b"(") + (index > 0)
        deepest = max(deepest, level + ups)
        level += ups - (len(mountain) + (index > 0) - ups) - 1
    return deepest


def _nested_too_deep(structure: bytes) -> bool:
    """Whether the brackets of ``structure``, the text outside strings, nest deeper than
    :data:`NESTING_DEPTH_MAX` (exact when they are balanced; a document whose brackets
    are not fails to parse anyway)."""
    brackets = structure.translate(_BRACKETS_AS_PARENS, _NOT_BRACKETS)
    peeled = 0
    # Each pass drops the innermost pairs, which lowers the deepest nesting by one; a
    # flat document is gone after a pass or two.
    while len(brackets) > 2 * (NESTING_DEPTH_MAX - peeled):
        if peeled >= NESTING_DEPTH_MAX:
            return True
        shorter = brackets.replace(b"()", b"")
        peeled += 1
        slow = len(shorter) > len(brackets) * (1 - _PEEL_SHRINK_MIN)
        brackets = shorter
        if slow:
            return _deepest(brackets) + peeled > NESTING_DEPTH_MAX
    return False


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """What :func:`loads` may do for text from anyone, checked before it makes a value.

    None leaves a limit to a caller that checked it before (``remoting.body_limits``
    counts separators and digits in its own passes over a body)."""

    separators_max: int | None
    """Most ``{ [ , :`` outside strings: the decoder makes a value or key per separator."""
    int_digits_max: int | None
    """Most digits in an integer, whose conversion costs the square of its length (in
    text over 16 KiB: shorter text cannot hold enough long integers to matter)."""
    lenient_bytes_max: int
    """Longest text read with fastjson's leniencies; longer text must be standard JSON
    (the rewrite costs several times what the C decoder does)."""
    nesting_checked: bool = False
    """The caller found the text nested no deeper than :data:`NESTING_DEPTH_MAX` (its
    brackets paired), so :func:`loads` skips its own count of them."""


class LenientReadsSpent(Exception):
    """Raised by :func:`loads` inside :func:`lenient_reads_at_most` for a text that is not
    standard JSON once the allowance is spent. Not a :class:`BodyDecodeError` on purpose:
    a caller that ignores JSON it cannot read (a topic's attributes) lets it through."""


# What is left of the innermost lenient_reads_at_most allowance (a one-item list).
_LENIENT_READS_LEFT: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "fastjson_lenient_reads_left", default=None
)


@contextlib.contextmanager
def lenient_reads_at_most(count: int) -> Iterator[None]:
    """Within the block, :func:`loads` reads at most ``count`` texts that are not standard
    JSON, and raises :class:`LenientReadsSpent` for the next. A text with fastjson's
    leniencies costs some microseconds more than the C decoder, however short it is:
    this bounds what many short ones cost (a compressed REGISTER_BROKER body holds one
    per topic). Standard JSON costs nothing more."""
    token = _LENIENT_READS_LEFT.set([count])
    try:
        yield
    finally:
        _LENIENT_READS_LEFT.reset(token)


def lenient_reads_left() -> int | None:
    """What is left of the innermost :func:`lenient_reads_at_most` allowance; None
    outside one. A caller compares it before and after a read to learn whether the text
    was standard JSON."""
    left = _LENIENT_READS_LEFT.get()
    return None if left is None else left[0]


def _take_lenient_read() -> None:
    left = _LENIENT_READS_LEFT.get()
    if left is not None:
        if left[0] <= 0:
            raise LenientReadsSpent("no lenient reads left")
        left[0] -= 1


def _bounded_int(digits_max: int) -> Callable[[str], int]:
    def bounded_int(literal: str) -> int:
        # Refused before int() spends the square of its length on it.
        digits = len(literal) - literal.startswith("-")
        if digits > digits_max:
            raise BodyDecodeError(f"a number of {digits} digits, more than {digits_max}")
        return int(literal)

    return bounded_int


@functools.lru_cache(maxsize=4)
def _bounded_loads(int_digits_max: int) -> Callable[[str], object]:
    """The C decoder of :func:`loads`, with integers of at most ``int_digits_max`` digits."""
    return json.JSONDecoder(
        strict=False, parse_constant=_reject_constant, parse_int=_bounded_int(int_digits_max)
    ).decode


def loads(text: str | bytes | bytearray | memoryview, limits: ReadLimits | None = None) -> object:
    """Parse fastjson-dialect JSON; object keys are always returned as ``str``.

    Bytes are read as UTF-8 with replacement characters for bad sequences (as Java's
    decoder does). Raises :class:`BodyDecodeError` for anything that is not JSON in
    the dialect, for nesting deeper than :data:`NESTING_DEPTH_MAX`, and for text past
    ``limits``. Time is linear in the length of ``text``, about what the C decoder
    costs; ``limits`` bound it further for text from anyone. Inside
    :func:`lenient_reads_at_most`, raises :class:`LenientReadsSpent` for a text that is
    not standard JSON once the allowance is spent.
    """
    if isinstance(text, str):
        data = text.encode("utf-8", "surrogatepass")
    else:
        data = bytes(text)
        text = data.decode("utf-8", "replace")
    # A text of n bytes has at most n separators, of which at most n are brackets.
    separators_max = None if limits is None else limits.separators_max
    nesting_checked = limits is not None and limits.nesting_checked
    if separators_max is not None and len(data) > separators_max:
        openers = len(check_separators(data, separators_max).translate(None, b",:"))
    elif len(data) > NESTING_DEPTH_MAX and not nesting_checked:
        openers = len(data.translate(None, _NOT_OPENERS))
    else:
        openers = 0
    if nesting_checked:
        openers = 0
    decode = _standard_loads
    digits_max = None if limits is None else limits.int_digits_max
    if digits_max is not None and len(data) >= _INT_CHECK_BYTES_MIN:
        decode = _bounded_loads(digits_max)
    try:
        value = decode(text)
    except RecursionError as exc:
        raise BodyDecodeError("JSON nested too deeply") from exc
    except BodyDecodeError:
        raise
    except ValueError as exc:
        if limits is not None and len(data) > limits.lenient_bytes_max:
            raise BodyDecodeError(
                f"not standard JSON ({getattr(exc, 'msg', exc)}), and {len(data)} bytes: "
                f"fastjson's leniencies are read up to {limits.lenient_bytes_max}"
            ) from exc
        _take_lenient_read()
        return _lenient_loads(text, decode, separators_max)
    # Only a document with many brackets can be too deep; skip the rest otherwise.
    if openers > NESTING_DEPTH_MAX and _nested_too_deep(
        _outside_strings(_latin1(data)).encode("latin-1")
    ):
        raise BodyDecodeError(f"JSON nested deeper than {NESTING_DEPTH_MAX}")
    return value
