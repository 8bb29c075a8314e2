"""Decoding of the first log-entry format (JSON), kept so old journals replay.

Entries written before the msgpack format are ``MAGIC + b"j" + JSON`` (or ``b"z"``
for zlib-compressed JSON). The JSON body is ``{"v": 1, "id": proposal id, "t":
command type, "c": fields}``; a dict field is a list of ``[key, value]`` pairs so int
keys survive, a nested dataclass an object of its fields. Nothing writes this format
any more; :mod:`raftstore.raft.codec` hands these bodies here.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Union, get_args, get_origin, get_type_hints

JSON_VERSION = 1


class LegacyFormatError(ValueError):
    """A JSON body that is not an entry of the first format."""


def decode_json_body(body: bytes, commands: Mapping[str, type[Any]]) -> tuple[str, Any]:
    """(proposal id, command) of a JSON entry body; ``commands`` names the command
    types an entry may hold."""
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise LegacyFormatError(f"not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("v") != JSON_VERSION:
        raise LegacyFormatError("unsupported entry version")
    name = doc.get("t")
    if not isinstance(name, str) or name not in commands:
        raise LegacyFormatError(f"unknown command type {name!r}")
    return str(doc.get("id", "")), _decode_dataclass(commands[name], doc.get("c"))


_Fn = Callable[[Any], Any]
_HINTS: dict[type[Any], dict[str, Any]] = {}
_DECODERS: dict[Any, _Fn] = {}
_FIELD_DECODERS: dict[type[Any], tuple[tuple[str, frozenset[type[Any]], _Fn], ...]] = {}
_MISSING = object()
_NONE = type(None)
_NO_SHORTCUT: frozenset[type[Any]] = frozenset()


def _shortcut(hint: Any) -> frozenset[type[Any]]:
    """Value types a field of type ``hint`` takes unchanged: the scalar itself (and
    None when optional). Anything else takes the full walk."""
    args = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
    plain = [arg for arg in args if arg is not _NONE]
    if len(plain) != 1 or plain[0] not in (str, int, bool):
        return _NO_SHORTCUT
    return frozenset({plain[0], *([_NONE] if _NONE in args else [])})


def _hints(cls: type[Any]) -> dict[str, Any]:
    # get_type_hints resolves the postponed annotations once per class.
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def _non_null(args: tuple[Any, ...]) -> Any:
    candidates = [arg for arg in args if arg is not type(None)]
    if len(candidates) != 1:
        raise LegacyFormatError(f"ambiguous union {args}")
    return candidates[0]


def _identity(value: Any) -> Any:
    return value


def _decode_dataclass(cls: type[Any], raw: Any) -> Any:
    decoders = _FIELD_DECODERS.get(cls)
    if decoders is None:
        hints = _hints(cls)
        decoders = tuple(
            (f.name, _shortcut(hints[f.name]), _decoder(hints[f.name]))
            for f in dataclasses.fields(cls)
        )
        _FIELD_DECODERS[cls] = decoders
    if not isinstance(raw, dict):
        raise LegacyFormatError(f"{cls.__name__}: expected an object")
    kwargs = {}
    for name, same, decode in decoders:
        item = raw.get(name, _MISSING)
        if item is not _MISSING:
            kwargs[name] = item if type(item) in same else decode(item)
    return cls(**kwargs)


def _decoder(hint: Any) -> _Fn:
    found = _DECODERS.get(hint)
    if found is None:
        found = _DECODERS[hint] = _build_decoder(hint)
    return found


def _build_decoder(hint: Any) -> _Fn:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        args = get_args(hint)
        nullable = type(None) in args
        inner: list[_Fn] = []

        def decode_union(raw: Any) -> Any:
            if raw is None:
                if nullable:
                    return None
                raise LegacyFormatError("unexpected null")
            if not inner:
                inner.append(_decoder(_non_null(args)))
            return inner[0](raw)

        return decode_union
    if hint is typing.Any or hint is object:
        return _identity
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        # Hints come from our own annotations, never from the data.
        return lambda raw: _decode_dataclass(hint, raw)
    if origin is tuple or origin is list:
        item_hint = get_args(hint)[0]
        build = tuple if origin is tuple else list

        def decode_sequence(raw: Any) -> Any:
            decode = _decoder(item_hint)
            return build([decode(item) for item in _as_list(raw)])

        return decode_sequence
    if origin is dict:
        key_hint, value_hint = get_args(hint)

        def decode_mapping(raw: Any) -> Any:
            decode_key, decode_value = _decoder(key_hint), _decoder(value_hint)
            return {decode_key(k): decode_value(v) for k, v in _as_list(raw)}

        return decode_mapping
    check = _SCALARS.get(hint)
    if check is None:

        def undecodable(_raw: Any) -> Any:
            raise LegacyFormatError(f"undecodable field type {hint!r}")

        return undecodable
    name = hint.__name__
    exact = _EXACT.get(hint)

    def decode_scalar(raw: Any) -> Any:
        if type(raw) is exact:
            return raw
        if not check(raw):
            raise LegacyFormatError(f"expected {name}, got {type(raw).__name__}")
        return raw

    return decode_scalar


_SCALARS: dict[type[Any], Callable[[Any], bool]] = {
    bool: lambda raw: raw is True or raw is False,
    int: lambda raw: isinstance(raw, int) and not isinstance(raw, bool),
    str: lambda raw: isinstance(raw, str),
    float: lambda raw: isinstance(raw, int | float) and not isinstance(raw, bool),
}


_EXACT: dict[type[Any], type[Any]] = {bool: bool, int: int, str: str, float: float}
"""The type JSON gives for each scalar hint: accepted without further checks."""


def _as_list(raw: Any) -> list[Any]:
    if not isinstance(raw, list):
        raise LegacyFormatError("expected a list")
    return raw
