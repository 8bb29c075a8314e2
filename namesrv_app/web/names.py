"""Any stored name as one URL path segment: the ``<name:...>`` converter.

The wire keeps upstream's acceptance, so a topic, broker or cluster name may hold
``/``, ``..``, ``%``, ``?``, ``#``, spaces, markup or control characters. Such a
name cannot simply be put in a path: the server decodes ``%2F`` to ``/`` before
routing, browsers and proxies rewrite ``.``/``..`` segments and merge ``//``, and
``routes/<x>/compare/`` would be ambiguous for a name ending in ``/compare``.
Query parameters would avoid that but give every topic a second URL next to the
path one producers, bookmarks and the docs already use.

So a name that follows RocketMQ's topic rule (``^[%|a-zA-Z0-9_-]+$``) is its own
segment, exactly as before, and any other name is written as ``~`` followed by
the name with every byte of its UTF-8 form outside ``[A-Za-z0-9_.-]`` as ``~XX``
(upper-case hex): ``a/b`` is ``~a~2Fb``, ``..`` is ``~..``, the empty name ``~``.
``~`` is outside the topic rule, so the two forms never collide, the encoding has
no ``/`` and never forms a dot segment, and reverse() round-trips every name.
"""

from __future__ import annotations

import re
import string

from django.urls import register_converter

ESCAPE = "~"
PLAIN_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")
"""Names kept as they are (RocketMQ's topic characters, any length)."""
KEPT = frozenset(string.ascii_letters + string.digits + "_.-")
"""Characters an escaped name keeps; every other byte becomes ``~XX``."""
HEX_DIGITS = frozenset("0123456789ABCDEF")
ENCODING = "utf-8"
# A stored name is a Python str; lone surrogates (never produced by the wire's
# UTF-8 decoding) still round-trip instead of failing the page.
ERRORS = "surrogatepass"


def _escape_char(char: str) -> str:
    if char in KEPT:
        return char
    return "".join(f"{ESCAPE}{byte:02X}" for byte in char.encode(ENCODING, ERRORS))


def name_to_segment(name: str) -> str:
    """The path segment of ``name`` (the name itself when it follows the topic rule)."""
    if PLAIN_NAME.fullmatch(name):
        return name
    return ESCAPE + "".join(_escape_char(char) for char in name)


def _unescape(body: str) -> str:
    raw = bytearray()
    index = 0
    while index < len(body):
        char = body[index]
        if char == ESCAPE:
            digits = body[index + 1 : index + 3]
            if len(digits) != 2 or not set(digits) <= HEX_DIGITS:
                raise ValueError(f"bad escape at {index} in {body!r}")
            raw.append(int(digits, 16))
            index += 3
        elif char in KEPT:
            raw.extend(char.encode("ascii"))
            index += 1
        else:
            raise ValueError(f"{char!r} must be escaped in an escaped name")
    return raw.decode(ENCODING, ERRORS)


def segment_to_name(segment: str) -> str:
    """The name a path segment stands for; ValueError for a malformed escaped one.

    A segment without the leading ``~`` is the name itself (what a person or an
    older link types, ``/api/v1/routes/TopicTest/``). An escaped segment must be
    the one :func:`name_to_segment` writes, so every name has one URL (``~zz``
    and ``~61`` are refused: ``zz`` and ``a`` are their own segments).
    """
    if not segment.startswith(ESCAPE):
        return segment
    name = _unescape(segment[len(ESCAPE) :])
    if name_to_segment(name) != segment:
        raise ValueError(f"{segment!r} is not the canonical segment of its name")
    return name


class NameConverter:
    """``<name:topic>``: one path segment for any name (see the module docstring).

    Django answers 404 when ``to_python`` raises ValueError (a malformed ``~``
    segment); a segment with ``/`` never matches, as with ``<str:...>``.
    """

    regex = "[^/]+"

    def to_python(self, value: str) -> str:
        """The name of a matched segment."""
        return segment_to_name(value)

    def to_url(self, value: str) -> str:
        """The segment of a name (reverse() percent-encodes it further)."""
        return name_to_segment(value)


register_converter(NameConverter, "name")
