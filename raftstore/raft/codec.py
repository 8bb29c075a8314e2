"""Command <-> bytes for the Raft log: versioned, typed, no pickle.

An entry in the PySyncObj log is ``MAGIC + format byte + body``. The body is the
msgpack array ``[version, proposal id, command type, fields]``, where the fields are
the command dataclass as a msgpack map (nested dataclasses as maps, int dict keys
kept as ints). Decoding is typed by the named command class: a field of the wrong
type, a missing required field or an unknown command type is a :class:`CodecError`,
never an arbitrary object. The same command always gives the same bytes.

Bodies above ``compress_threshold_bytes`` are zlib-compressed (format byte ``c``):
the proposer compresses once and every node stores and decodes those same bytes.
A batch entry (format ``b``) holds several entries, applied in order.

Entries written by the first format (JSON, bytes ``j`` and ``z``) still decode,
through :mod:`raftstore.raft.codec_legacy`, so old journals replay unchanged.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from collections.abc import Sequence
from typing import Any

import msgspec

from raftstore import commands
from raftstore.commands import Command
from raftstore.raft.codec_legacy import LegacyFormatError, decode_json_body

MAGIC = b"RQ"
FORMAT_MSGPACK = b"m"
FORMAT_MSGPACK_ZLIB = b"c"
FORMAT_BATCH = b"b"
FORMAT_JSON = b"j"
FORMAT_JSON_ZLIB = b"z"
_COUNT = struct.Struct(">I")
BATCH_PART_BYTES = _COUNT.size
"""What each part adds to a batch entry (its length prefix)."""
BATCH_OVERHEAD_BYTES = len(MAGIC) + len(FORMAT_BATCH) + _COUNT.size
"""A batch entry's own header."""
CODEC_VERSION = 1
compress_threshold_bytes = 65_536
"""Only entries above this are compressed. A 100-topic registration is about 15 KB
of msgpack: compressing it saves bytes on a link that is rarely the limit, and costs
the proposer a compression and every node a decompression, each a release and
re-acquisition of the GIL on a thread that the event loop competes with."""
ZLIB_LEVEL = 6

_COMMAND_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        commands.RegisterBroker,
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
}
_HEADER = MAGIC + FORMAT_MSGPACK
_BATCH_HEADER = MAGIC + FORMAT_BATCH
_ENCODER = msgspec.msgpack.Encoder()
_ENVELOPE = msgspec.msgpack.Decoder(tuple[int, str, str, msgspec.Raw])
_DECODERS: dict[str, msgspec.msgpack.Decoder[Any]] = {
    name: msgspec.msgpack.Decoder(cls) for name, cls in _COMMAND_TYPES.items()
}


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
    if _COMMAND_TYPES.get(name) is not type(command):
        raise CodecError(f"not a command: {name}")
    try:
        body = _ENCODER.encode((CODEC_VERSION, proposal_id, name, command))
    except (TypeError, OverflowError, msgspec.EncodeError) as exc:
        raise CodecError(f"{name} cannot be encoded: {exc}") from exc
    if len(body) > compress_threshold_bytes:
        return MAGIC + FORMAT_MSGPACK_ZLIB + zlib.compress(body, ZLIB_LEVEL)
    return _HEADER + body


def decode_entry(data: bytes | memoryview) -> LogEntry:
    """Inverse of :func:`encode_entry`; :class:`CodecError` on anything unknown."""
    head = bytes(data[: len(MAGIC) + 1])
    body = memoryview(data)[len(MAGIC) + 1 :]
    try:
        if head == _HEADER:
            return _decode_msgpack(body)
        if head == MAGIC + FORMAT_MSGPACK_ZLIB:
            return _decode_msgpack(zlib.decompress(body))
        if head == MAGIC + FORMAT_JSON:
            return LogEntry(*decode_json_body(bytes(body), _COMMAND_TYPES))
        if head == MAGIC + FORMAT_JSON_ZLIB:
            return LogEntry(*decode_json_body(zlib.decompress(body), _COMMAND_TYPES))
    except (msgspec.DecodeError, LegacyFormatError, zlib.error) as exc:
        raise CodecError(str(exc)) from exc
    if head[: len(MAGIC)] != MAGIC:
        raise CodecError("missing entry magic")
    raise CodecError(f"unknown entry format {head[len(MAGIC) :]!r}")


def _decode_msgpack(body: bytes | memoryview) -> LogEntry:
    version, proposal_id, name, fields = _ENVELOPE.decode(body)
    if version != CODEC_VERSION:
        raise CodecError(f"unsupported entry version {version}")
    decoder = _DECODERS.get(name)
    if decoder is None:
        raise CodecError(f"unknown command type {name!r}")
    return LogEntry(proposal_id, decoder.decode(fields))


def encode_command(command: Command) -> bytes:
    """A command alone (no proposal id), for tests and tools."""
    return encode_entry("", command)


def decode_command(data: bytes) -> Command:
    """Inverse of :func:`encode_command`."""
    return decode_entry(data).command


# ---------------------------------------------------------------- batches


def encode_batch(entries: Sequence[bytes]) -> bytes:
    """One log entry holding several encoded entries, applied in this order.

    Each part is an entry as :func:`encode_entry` made it (its own proposal id,
    compressed or not); a batch never nests another batch.
    """
    if not entries:
        raise CodecError("an empty batch")
    parts = [_BATCH_HEADER, _COUNT.pack(len(entries))]
    for entry in entries:
        if entry[: len(MAGIC)] != MAGIC or entry[len(MAGIC) : len(MAGIC) + 1] == FORMAT_BATCH:
            raise CodecError("a batch holds plain entries only")
        parts.append(_COUNT.pack(len(entry)))
        parts.append(entry)
    return b"".join(parts)


def decode_entries(data: bytes) -> list[LogEntry]:
    """Every entry in ``data`` (one for a plain entry, the parts in order for a batch)."""
    if data[: len(_BATCH_HEADER)] != _BATCH_HEADER:
        return [decode_entry(data)]
    view = memoryview(data)
    offset = len(_BATCH_HEADER)
    (count,) = _read_count(view, offset)
    offset += _COUNT.size
    decoded: list[LogEntry] = []
    for _ in range(count):
        (size,) = _read_count(view, offset)
        offset += _COUNT.size
        if offset + size > len(data):
            raise CodecError("truncated batch")
        part = view[offset : offset + size]
        if part[: len(_BATCH_HEADER)] == _BATCH_HEADER:
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
