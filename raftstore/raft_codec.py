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
import struct
import types
import typing
import zlib
from collections.abc import Callable, Sequence
from typing import Any, Union, get_args, get_origin, get_type_hints

from raftstore import commands
from raftstore.commands import Command
from remoting import model

MAGIC = b"RQ"
FORMAT_PLAIN = b"j"
FORMAT_ZLIB = b"z"
FORMAT_BATCH = b"b"
_COUNT = struct.Struct(">I")
BATCH_PART_BYTES = _COUNT.size
"""What each part adds to a batch entry (its length prefix)."""
BATCH_OVERHEAD_BYTES = len(MAGIC) + len(FORMAT_BATCH) + _COUNT.size
"""A batch entry's own header."""
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
#
# Both directions walk the field type hints. The walk is compiled once per hint
# into a closure (cached), so encoding or decoding a value costs one call per
# node instead of re-reading typing metadata every time.

_Fn = Callable[[Any], Any]
_HINTS: dict[type[Any], dict[str, Any]] = {}
_ENCODERS: dict[Any, _Fn] = {}
_DECODERS: dict[Any, _Fn] = {}
_FIELD_ENCODERS: dict[type[Any], tuple[tuple[str, frozenset[type[Any]], _Fn], ...]] = {}
_FIELD_DECODERS: dict[type[Any], tuple[tuple[str, frozenset[type[Any]], _Fn], ...]] = {}
_MISSING = object()
_NONE = type(None)
_NO_SHORTCUT: frozenset[type[Any]] = frozenset()


def _shortcut(hint: Any) -> frozenset[type[Any]]:
    """Value types a field of type ``hint`` passes through unchanged in both directions:
    the scalar itself (and None when optional). Anything else takes the full walk."""
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


def _encode_fields(value: Any) -> dict[str, Any]:
    cls = type(value)
    encoders = _FIELD_ENCODERS.get(cls)
    if encoders is None:
        hints = _hints(cls)
        encoders = tuple(
            (f.name, _shortcut(hints[f.name]), _encoder(hints[f.name]))
            for f in dataclasses.fields(cls)
        )
        _FIELD_ENCODERS[cls] = encoders
    out = {}
    for name, same, encode in encoders:
        item = getattr(value, name)
        out[name] = item if type(item) in same else encode(item)
    return out


def _encoder(hint: Any) -> _Fn:
    found = _ENCODERS.get(hint)
    if found is None:
        found = _ENCODERS[hint] = _build_encoder(hint)
    return found


def _encode_nested(value: Any) -> Any:
    if type(value).__name__ not in _TYPES:
        raise CodecError(f"unencodable type {type(value).__name__}")
    return _encode_fields(value)


def _is_dataclass_value(value: Any) -> bool:
    return hasattr(type(value), "__dataclass_fields__")


def _build_encoder(hint: Any) -> _Fn:
    # Type-directed, like decoding: an ``object`` field holds already-parsed JSON
    # and is written as is; every other dict becomes [key, value] pairs. A
    # dataclass value is written as its fields whatever the hint says.
    if hint is object or hint is typing.Any:
        return _identity
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        args = get_args(hint)
        inner: list[_Fn] = []

        def encode_union(value: Any) -> Any:
            if value is None:
                return None
            if not inner:
                inner.append(_encoder(_non_null(args)))
            return inner[0](value)

        return encode_union
    if origin in (tuple, list):
        item_hint = get_args(hint)[0]

        def encode_sequence(value: Any) -> Any:
            if value is None:
                return None
            if _is_dataclass_value(value):
                return _encode_nested(value)
            encode = _encoder(item_hint)
            return [encode(item) for item in value]

        return encode_sequence
    if origin is dict:
        key_hint, value_hint = get_args(hint)

        def encode_mapping(value: Any) -> Any:
            if value is None:
                return None
            if _is_dataclass_value(value):
                return _encode_nested(value)
            encode_key, encode_value = _encoder(key_hint), _encoder(value_hint)
            return [[encode_key(k), encode_value(v)] for k, v in value.items()]

        return encode_mapping

    def encode_other(value: Any) -> Any:
        if value is None or type(value) in _PLAIN:
            return value
        if _is_dataclass_value(value):
            return _encode_nested(value)
        if isinstance(value, bool | int | str | float):
            return value
        raise CodecError(f"unencodable value of type {type(value).__name__}")

    return encode_other


_PLAIN = frozenset({str, int, bool, float})
"""Exact JSON scalar types, written as they are."""


def _identity(value: Any) -> Any:
    return value


def _non_null(args: tuple[Any, ...]) -> Any:
    candidates = [arg for arg in args if arg is not type(None)]
    if len(candidates) != 1:
        raise CodecError(f"ambiguous union {args}")
    return candidates[0]


# ---------------------------------------------------------------- decoding


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
        raise CodecError(f"{cls.__name__}: expected an object")
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
                raise CodecError("unexpected null")
            if not inner:
                inner.append(_decoder(_non_null(args)))
            return inner[0](raw)

        return decode_union
    if hint is typing.Any or hint is object:
        return _identity
    if isinstance(hint, type) and hint.__name__ in _TYPES and dataclasses.is_dataclass(hint):
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
            raise CodecError(f"undecodable field type {hint!r}")

        return undecodable
    name = hint.__name__
    exact = _EXACT.get(hint)

    def decode_scalar(raw: Any) -> Any:
        if type(raw) is exact:
            return raw
        if not check(raw):
            raise CodecError(f"expected {name}, got {type(raw).__name__}")
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
        raise CodecError("expected a list")
    return raw


# ---------------------------------------------------------------- batches


def encode_batch(entries: Sequence[bytes]) -> bytes:
    """One log entry holding several encoded entries, applied in this order.

    Each part is an entry as :func:`encode_entry` made it (its own proposal id,
    compressed or not); a batch never nests another batch.
    """
    if not entries:
        raise CodecError("an empty batch")
    parts = [MAGIC, FORMAT_BATCH, _COUNT.pack(len(entries))]
    for entry in entries:
        if entry[: len(MAGIC)] != MAGIC or entry[len(MAGIC) : len(MAGIC) + 1] == FORMAT_BATCH:
            raise CodecError("a batch holds plain entries only")
        parts.append(_COUNT.pack(len(entry)))
        parts.append(entry)
    return b"".join(parts)


def decode_entries(data: bytes) -> list[LogEntry]:
    """Every entry in ``data`` (one for a plain entry, the parts in order for a batch)."""
    if data[: len(MAGIC) + 1] != MAGIC + FORMAT_BATCH:
        return [decode_entry(data)]
    view = memoryview(data)
    offset = len(MAGIC) + 1
    (count,) = _read_count(view, offset)
    offset += _COUNT.size
    decoded: list[LogEntry] = []
    for _ in range(count):
        (size,) = _read_count(view, offset)
        offset += _COUNT.size
        if offset + size > len(data):
            raise CodecError("truncated batch")
        part = bytes(view[offset : offset + size])
        if part[: len(MAGIC) + 1] == MAGIC + FORMAT_BATCH:
            raise CodecError("a batch inside a batch")
        decoded.append(decode_entry(part))
        offset += size
    if offset != len(data) or count == 0:
        raise CodecError("malformed batch")
    return decoded


def _read_count(view: memoryview, offset: int) -> tuple[int]:
    if offset + _COUNT.size > len(view):
        raise CodecError("truncated batch")
    return _COUNT.unpack_from(view, offset)
