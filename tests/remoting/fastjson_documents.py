"""Hypothesis strategies for documents in fastjson's dialect, in every spelling it reads.

Keys unquoted (identifiers and numbers), single- or double-quoted; strings of either
kind holding the other quote, fastjson's extra escapes (``\\x41``, ``\\v``, ``\\0``,
``\\F``, ``\\'``), raw control characters and any other character; numbers with leading
zeros, fractions and exponents; form feeds and backspaces between tokens. ``mutated``
breaks a document the way a hostile or careless writer would.
"""

from __future__ import annotations

from hypothesis import strategies as st

SPACES = st.sampled_from(["", "", "", " ", "\t", "\n", "\r", "\f", "\b", "  "])
ESCAPES = st.sampled_from(
    [
        "\\x41",
        "\\v",
        "\\0",
        "\\7",
        "\\'",
        '\\"',
        "\\\\",
        "\\/",
        "\\b",
        "\\f",
        "\\n",
        "\\r",
        "\\t",
        "\\u00e9",
        "\\uD83D\\uDE00",
        "\\uDE00",
        "\\F",
    ]
)
# Characters that matter to the reader, and any other (but lone surrogates, which no
# UTF-8 text holds).
CHARACTERS = st.sampled_from(list("ab ,:{}[]'\"0-é😀\x01\x7f\u2028\t")) | st.characters(
    blacklist_categories=["Cs"]
)
LITERALS = st.sampled_from(["true", "false", "null"])
IDENTIFIERS = st.sampled_from(["a", "$b", "_c1", "true", "null", "NaN", "x9", "Infinity"])
NUMBER_KEYS = st.sampled_from(["0", "-1", "007", "1.5", "2e3", "-0012.5E-07"])
# Pieces that break a document: stray quotes and backslashes, bad escapes, separators.
BREAKERS = st.sampled_from(
    ["'", '"', "\\", "\\x4", "\\u12", "\\q", ",", ":", "{", "]", "\x0b", "0", "-", "e", "$"]
)


@st.composite
def strings(draw: st.DrawFn) -> str:
    """A string literal of either quote kind."""
    quote = draw(st.sampled_from("\"'"))
    pieces = []
    for piece in draw(st.lists(ESCAPES | CHARACTERS, max_size=6)):
        if piece in (quote, "\\"):
            piece = "\\" + piece
        pieces.append(piece)
    return quote + "".join(pieces) + quote


@st.composite
def numbers(draw: st.DrawFn) -> str:
    """A number as fastjson reads it: leading zeros allowed."""
    sign = draw(st.sampled_from(["", "-"]))
    whole = draw(st.sampled_from(["0", "00", "007", "1", "12", "0012", "9" * 25]))
    fraction = draw(st.sampled_from(["", "", ".5", ".05", ".0"]))
    exponent = draw(st.sampled_from(["", "", "e5", "E-07", "e+1", "e999"]))
    return sign + whole + fraction + exponent


def keys() -> st.SearchStrategy[str]:
    """An object key: unquoted identifier or number, or a string."""
    return IDENTIFIERS | NUMBER_KEYS | strings()


@st.composite
def values(draw: st.DrawFn, depth: int = 0) -> str:
    """A value, nested at most four deep."""
    kinds = ["string", "number", "literal"] + (["object", "array"] if depth < 4 else [])
    kind = draw(st.sampled_from(kinds))
    space = SPACES
    if kind == "object":
        members = draw(
            st.lists(st.tuples(space, keys(), space, space, values(depth + 1), space), max_size=3)
        )
        inner = ",".join(a + key + b + ":" + c + value + d for a, key, b, c, value, d in members)
        return "{" + draw(space) + inner + "}"
    if kind == "array":
        items = draw(st.lists(st.tuples(space, values(depth + 1), space), max_size=3))
        return "[" + draw(space) + ",".join(a + value + b for a, value, b in items) + "]"
    if kind == "string":
        return draw(strings())
    if kind == "number":
        return draw(numbers())
    return draw(LITERALS)


@st.composite
def documents(draw: st.DrawFn) -> str:
    """A whole document, possibly surrounded by whitespace."""
    return draw(SPACES) + draw(values()) + draw(SPACES)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A document with a few pieces inserted, dropped, or cut off."""
    text = draw(documents())
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.integers(0, len(text)))
        change = draw(st.sampled_from(["insert", "drop", "cut"]))
        if change == "insert":
            text = text[:where] + draw(BREAKERS | CHARACTERS) + text[where:]
        elif change == "drop":
            text = text[:where] + text[where + 1 :]
        else:
            text = text[:where]
    return text
