"""Command <-> bytes for the Raft log: deterministic, versioned, no pickle.

An entry in the PySyncObj log is ``MAGIC + format byte + body``. The body is the
UTF-8 JSON of ``{"v": version, "id": proposal id, "t": command type, "c": fields}``
with sorted keys and no spaces, so the same command always gives the same bytes.
Bodies above ``compress_threshold_bytes`` are zlib-compressed (format byte ``z``):
the proposer compresses once and every node stores and decodes those same bytes.

Values are encoded by walking the dataclass field types of ``raftstore.commands``
and ``remoting.model``: a dict becomes a list of ``[key, value]`` pairs so int keys
(broker ids) survive, a nested dataclass becomes an object of its fields. Only the
types named in :data:`_TYPES` can be decoded; anything else is a
:class:`CodecError`, never an arbitrary object.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
import zlib
from collections.abc import Callable
from typing import Any, Union, get_args, get_origin, get_type_hints

from raftstore import commands
from raftstore.commands import Command
from remoting import model

MAGIC = b"RQ"
FORMAT_PLAIN = b"j"
FORMAT_ZLIB = b"z"
CODEC_VERSION = 1
compress_threshold_bytes = 4096
ZLIB_LEVEL = 6

_COMMAND_TYPES: tuple[type[Any], ...] = (
    commands.RegisterBroker,
    commands.UnregisterRequest,
    commands.UnregisterBrokers,
    commands.BrokerHeartbeat,
    commands.QueryDataVersion,
    commands.ExpireBrokers,
    commands.ChannelDestroyed,
    commands.PutKV,
    commands.DeleteKV,
    commands.WipeWritePerm,
    commands.AddWritePerm,
    commands.DeleteTopic,
    commands.RegisterTopic,
    commands.UpdateNamesrvConfig,
    commands.Barrier,
)
_MODEL_TYPES: tuple[type[Any], ...] = (
    model.DataVersion,
    model.TopicConfig,
    model.QueueData,
    model.TopicQueueMappingInfo,
    model.TopicConfigSerializeWrapper,
)
_TYPES: dict[str, type[Any]] = {cls.__name__: cls for cls in _COMMAND_TYPES + _MODEL_TYPES}
_TOP_LEVEL: frozenset[str] = frozenset(
    cls.__name__ for cls in _COMMAND_TYPES if cls is not commands.UnregisterRequest
)


class CodecError(ValueError):
    """Bytes that are not a log entry this version can decode."""


@dataclasses.dataclass(frozen=True, slots=True)
class LogEntry:
    """One decoded log entry: who proposed it (unique id) and what."""

    proposal_id: str
    command: Command


def encode_entry(proposal_id: str, command: Command) -> bytes:
    """The log bytes of ``command`` proposed under ``proposal_id``."""
    name = type(command).__name__
    if name not in _TOP_LEVEL:
        raise CodecError(f"not a command: {name}")
    doc = {"v": CODEC_VERSION, "id": proposal_id, "t": name, "c": _encode_fields(command)}
    body = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    if len(body) > compress_threshold_bytes:
        return MAGIC + FORMAT_ZLIB + zlib.compress(body, ZLIB_LEVEL)
    return MAGIC + FORMAT_PLAIN + body


def decode_entry(data: bytes) -> LogEntry:
    """Inverse of :func:`encode_entry`; :class:`CodecError` on anything unknown."""
    if data[: len(MAGIC)] != MAGIC:
        raise CodecError("missing entry magic")
    fmt, body = data[len(MAGIC) : len(MAGIC) + 1], data[len(MAGIC) + 1 :]
    if fmt == FORMAT_ZLIB:
        body = zlib.decompress(body)
    elif fmt != FORMAT_PLAIN:
        raise CodecError(f"unknown entry format {fmt!r}")
    doc = json.loads(body)
    if not isinstance(doc, dict) or doc.get("v") != CODEC_VERSION:
        raise CodecError("unsupported entry version")
    name = doc.get("t")
    if name not in _TOP_LEVEL:
        raise CodecError(f"unknown command type {name!r}")
    command = _decode_dataclass(_TYPES[name], doc["c"])
    return LogEntry(proposal_id=str(doc["id"]), command=command)


def encode_command(command: Command) -> bytes:
    """A command alone (no proposal id), for tests and tools."""
    return encode_entry("", command)


def decode_command(data: bytes) -> Command:
    """Inverse of :func:`encode_command`."""
    return decode_entry(data).command


# ---------------------------------------------------------------- encoding


def _encode_fields(value: Any) -> dict[str, Any]:
    hints = _hints(type(value))
    return {
        f.name: _encode(hints[f.name], getattr(value, f.name)) for f in dataclasses.fields(value)
    }


def _encode(hint: Any, value: Any) -> Any:
    # Type-directed, like decoding: an ``object`` field holds already-parsed JSON
    # and is written as is; every other dict becomes [key, value] pairs.
    if value is None or hint is object or hint is typing.Any:
        return value
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return _encode(_non_null(get_args(hint)), value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if type(value).__name__ not in _TYPES:
            raise CodecError(f"unencodable type {type(value).__name__}")
        return _encode_fields(value)
    if origin in (tuple, list):
        return [_encode(get_args(hint)[0], item) for item in value]
    if origin is dict:
        key_hint, value_hint = get_args(hint)
        return [[_encode(key_hint, k), _encode(value_hint, v)] for k, v in value.items()]
    if isinstance(value, bool | int | str | float):
        return value
    raise CodecError(f"unencodable value of type {type(value).__name__}")


def _non_null(args: tuple[Any, ...]) -> Any:
    candidates = [arg for arg in args if arg is not type(None)]
    if len(candidates) != 1:
        raise CodecError(f"ambiguous union {args}")
    return candidates[0]


# ---------------------------------------------------------------- decoding

_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    # get_type_hints resolves the postponed annotations once per class.
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def _decode_dataclass(cls: type[Any], raw: Any) -> Any:
    if not isinstance(raw, dict):
        raise CodecError(f"{cls.__name__}: expected an object")
    hints = _hints(cls)
    kwargs = {
        f.name: _decode(hints[f.name], raw[f.name])
        for f in dataclasses.fields(cls)
        if f.name in raw
    }
    return cls(**kwargs)


def _decode(hint: Any, raw: Any) -> Any:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return _decode_union(get_args(hint), raw)
    if hint is typing.Any or hint is object:
        return raw
    if isinstance(hint, type) and hint.__name__ in _TYPES and dataclasses.is_dataclass(hint):
        return _decode_dataclass(hint, raw)
    if origin is tuple:
        args = get_args(hint)
        return tuple(_decode(args[0], item) for item in _as_list(raw))
    if origin is list:
        return [_decode(get_args(hint)[0], item) for item in _as_list(raw)]
    if origin is dict:
        key_hint, value_hint = get_args(hint)
        return {_decode(key_hint, k): _decode(value_hint, v) for k, v in _as_list(raw)}
    return _decode_scalar(hint, raw)


def _decode_union(args: tuple[Any, ...], raw: Any) -> Any:
    if raw is None:
        if type(None) in args:
            return None
        raise CodecError("unexpected null")
    return _decode(_non_null(args), raw)


_SCALARS: dict[type[Any], Callable[[Any], bool]] = {
    bool: lambda raw: isinstance(raw, bool),
    int: lambda raw: isinstance(raw, int) and not isinstance(raw, bool),
    str: lambda raw: isinstance(raw, str),
    float: lambda raw: isinstance(raw, int | float) and not isinstance(raw, bool),
}


def _decode_scalar(hint: Any, raw: Any) -> Any:
    check = _SCALARS.get(hint)
    if check is None:
        raise CodecError(f"undecodable field type {hint!r}")
    if not check(raw):
        raise CodecError(f"expected {hint.__name__}, got {type(raw).__name__}")
    return raw


def _as_list(raw: Any) -> list[Any]:
    if not isinstance(raw, list):
        raise CodecError("expected a list")
    return raw
