"""Typed reads of a request's ``extFields`` with upstream Java semantics.

Upstream ``decodeCommandCustomHeader`` turns each string into the header field's Java
type: ``Integer.parseInt``/``Long.parseLong`` for numbers and ``Boolean.parseBoolean``
for flags. A missing ``@CFNotNull`` field does not fail upstream (the check only logs),
so the plain readers return ``None`` and only the ``require_*`` readers raise.
"""

from __future__ import annotations

import re

from remoting.command import RemotingCommand
from remoting.errors import HeaderFieldError
from remoting.properties import java_boolean

_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_LONG_MIN = -(2**63)
_LONG_MAX = 2**63 - 1
_INT_MIN = -(2**31)
_INT_MAX = 2**31 - 1


def header_str(cmd: RemotingCommand, name: str) -> str | None:
    """The raw text of ext field ``name``, or ``None`` when absent."""
    if cmd.ext_fields is None:
        return None
    return cmd.ext_fields.get(name)


def require_str(cmd: RemotingCommand, name: str) -> str:
    """The text of ext field ``name``; :class:`HeaderFieldError` when it is absent."""
    value = header_str(cmd, name)
    if value is None:
        raise HeaderFieldError(f"the custom field <{name}> is null")
    return value


def _parse_integer(name: str, text: str, low: int, high: int) -> int:
    if _JAVA_INTEGER.fullmatch(text) is None:
        raise HeaderFieldError(f"the custom field <{name}> is not a number: {text[:64]!r}")
    number = int(text)
    if not low <= number <= high:
        raise HeaderFieldError(f"the custom field <{name}> is out of range: {text[:64]!r}")
    return number


def header_int(cmd: RemotingCommand, name: str, *, bits: int = 64) -> int | None:
    """Ext field ``name`` parsed like ``Long.parseLong`` (``bits=32``: ``Integer.parseInt``).

    ``None`` when absent; :class:`HeaderFieldError` naming the field when the text is
    not a decimal integer in range (upstream answers SYSTEM_ERROR in that case).
    """
    value = header_str(cmd, name)
    if value is None:
        return None
    if bits == 32:
        return _parse_integer(name, value, _INT_MIN, _INT_MAX)
    return _parse_integer(name, value, _LONG_MIN, _LONG_MAX)


def require_int(cmd: RemotingCommand, name: str, *, bits: int = 64) -> int:
    """Like :func:`header_int` but :class:`HeaderFieldError` when the field is absent."""
    value = header_int(cmd, name, bits=bits)
    if value is None:
        raise HeaderFieldError(f"the custom field <{name}> is null")
    return value


def header_bool(cmd: RemotingCommand, name: str) -> bool | None:
    """``Boolean.parseBoolean``: "true" in any case is True, other text False, absent None."""
    value = header_str(cmd, name)
    return None if value is None else java_boolean(value, False)
