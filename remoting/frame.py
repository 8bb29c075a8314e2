"""Sans-IO framing of RocketMQ remoting commands (``RemotingCommand.encode``/``decode``).

A frame is ``int32 length | int32 (type << 24 | headerLen) | header | body``, all
big-endian, where ``length`` counts everything after itself. The header is either
fastjson JSON (type 0) or the ROCKETMQ binary layout (type 1). Both are decoded on
every frame, whatever the connection used before, because 5.x servers answer in their
own configured type.

:class:`FrameDecoder` owns no socket: the adapter feeds it bytes as they arrive and
gets whole commands back. It checks a frame's length word before it buffers a single
byte of that frame, so a peer claiming 2 GiB costs nothing.

Headers are bounded before they are parsed: :data:`HEADER_BYTES_MAX` as
soon as the header-length word arrives, then, for JSON, :data:`HEADER_JSON_LIMITS`, and
:data:`HEADER_EXT_FIELDS_MAX` for both types. At these limits the worst header an
attacker can write costs a couple of milliseconds (``bench/header_decode.py``). A
decoder of answers may raise the byte limit up to the frame's (a GET_KV_CONFIG answer
carries a value an older version may have stored larger than any request now).
"""

from __future__ import annotations

import functools
import re
import struct

from remoting import fastjson
from remoting.codes import LanguageCode, SerializeType
from remoting.command import RemotingCommand
from remoting.errors import BodyDecodeError, ProtocolError

# Netty's LengthFieldBasedFrameDecoder compares length + 4 with this maximum.
FRAME_BYTES_MAX = 16 * 1024 * 1024

# Real RocketMQ headers take a few hundred bytes. The largest this project sends is the
# console's PUT_KV_CONFIG, whose value may have 32,768 characters: at most 192 KiB even
# when every one is written as a 6-byte escape. At this limit the costliest header is
# read or refused in about 2 ms.
HEADER_BYTES_MAX = 256 * 1024
# A header holds a few dozen separators (two per ext field); the limit bounds the values
# the JSON decoder makes, and lets 512 ext fields (HEADER_EXT_FIELDS_MAX) through.
HEADER_SEPARATORS_MAX = 2048
# Header numbers are Java ints and longs (19 digits); converting n digits costs n squared
# (checked in headers over 16 KiB: shorter ones cannot hold enough long numbers to matter).
HEADER_INT_DIGITS_MAX = 64
# Every client writes standard JSON headers; fastjson's leniencies (single quotes,
# unquoted keys) cost several times more to read, so only short headers may use them.
HEADER_LENIENT_BYTES_MAX = 32 * 1024
HEADER_JSON_LIMITS = fastjson.ReadLimits(
    separators_max=HEADER_SEPARATORS_MAX,
    int_digits_max=HEADER_INT_DIGITS_MAX,
    lenient_bytes_max=HEADER_LENIENT_BYTES_MAX,
)
# Ext fields of one header, JSON or binary; real requests carry at most a few dozen.
HEADER_EXT_FIELDS_MAX = 512

_LENGTH_FIELD_BYTES = 4
_HEADER_LENGTH_MASK = 0x00FFFFFF
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_INT16_MIN = -(2**15)
_INT16_MAX = 2**15 - 1

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_PREFIX = struct.Struct(">iI")
# code, language byte, version, opaque, flag (the fixed part before the remark).
_BINARY_FIXED = struct.Struct(">hBhii")
_BINARY_FIXED_BYTES = _BINARY_FIXED.size + 2 * _INT32.size

_LANGUAGE_BY_NAME = LanguageCode.__members__
_LANGUAGE_BY_CODE = {language.value: language for language in LanguageCode}
_SERIALIZE_TYPE_BY_BYTE = {kind.value: kind for kind in SerializeType}

# The decode memo (_HeaderMemo): headers per stream, and the largest one kept.
HEADER_MEMO_ENTRIES = 32
HEADER_MEMO_BYTES_MAX = 1024
# An opaque written as JSON writes an integer (no leading zero), then , or }.
_OPAQUE_VALUE = re.compile(rb'"opaque":(-?(?:0|[1-9][0-9]{0,9}))(?=[,}])')


# ------------------------------------------------------------------------------ encode


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ProtocolError(f"{name} {value} does not fit the wire field ({low}..{high})")


def _utf8(text: str) -> bytes:
    # Java's String.getBytes(UTF_8) writes '?' for a lone surrogate; 'replace' does the same.
    return text.encode("utf-8", "replace")


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    """The header exactly as fastjson writes a RemotingCommand: sorted keys, nulls omitted."""
    _check_range("opaque", cmd.opaque, _INT32_MIN, _INT32_MAX)
    fields = (cmd.code, cmd.flag, cmd.language, cmd.remark, cmd.version)
    ext = cmd.ext_fields
    # Route answers differ only by opaque and their routes version, which stays the same
    # until a route changes, so their headers repeat (docs/BENCHMARKS.md, "route answers
    # carry their routes version").
    items = None if ext is None else tuple(ext.items())
    before, after = _cached_json_header_around_opaque(*fields, items)
    return b"%b%d%b" % (before, cmd.opaque, after)


def _json_header_around_opaque(
    code: int,
    flag: int,
    language: LanguageCode | None,
    remark: str | None,
    version: int,
    ext_items: tuple[tuple[str, str], ...] | None = None,
) -> tuple[bytes, bytes]:
    """A JSON header cut where its opaque goes: the bytes before it and after it."""
    _check_range("code", code, _INT32_MIN, _INT32_MAX)
    _check_range("version", version, _INT32_MIN, _INT32_MAX)
    _check_range("flag", flag, _INT32_MIN, _INT32_MAX)
    before = f'{{"code":{code:d}'
    if ext_items is not None:
        before += ',"extFields":' + fastjson.dumps(dict(ext_items))
    before += f',"flag":{flag:d}'
    if language is not None:
        before += f',"language":"{language.name}"'
    after = ""
    if remark is not None:
        after = ',"remark":' + fastjson.quote(remark)
    after += f',"serializeTypeCurrentRPC":"JSON","version":{version:d}}}'
    return _utf8(before + ',"opaque":'), _utf8(after)


_cached_json_header_around_opaque = functools.lru_cache(maxsize=256)(_json_header_around_opaque)


def _encode_binary_string(text: str | None, length: struct.Struct) -> bytes:
    if not text:
        return length.pack(0)
    raw = _utf8(text)
    if length is _INT16:
        _check_range("ext field key length", len(raw), 0, _INT16_MAX)
    return length.pack(len(raw)) + raw


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
    """``RocketMQSerializable.rocketMQProtocolEncode``: fixed part, remark, ext map."""
    _check_range("code", cmd.code, _INT16_MIN, _INT16_MAX)
    _check_range("version", cmd.version, _INT16_MIN, _INT16_MAX)
    _check_range("opaque", cmd.opaque, _INT32_MIN, _INT32_MAX)
    _check_range("flag", cmd.flag, _INT32_MIN, _INT32_MAX)
    # Java cannot encode a null language (NPE); write JAVA, the value every Java peer sends.
    language = cmd.language.value if cmd.language is not None else LanguageCode.JAVA.value
    entries: list[bytes] = []
    for key, value in (cmd.ext_fields or {}).items():
        if key is None or value is None:
            continue
        entries.append(_encode_binary_string(key, _INT16))
        entries.append(_encode_binary_string(value, _INT32))
    ext = b"".join(entries)
    return b"".join(
        (
            _BINARY_FIXED.pack(cmd.code, language, cmd.version, cmd.opaque, cmd.flag),
            _encode_binary_string(cmd.remark, _INT32),
            _INT32.pack(len(ext)),
            ext,
        )
    )


def encode_frame_prefix(cmd: RemotingCommand, serialize_type: SerializeType | None = None) -> bytes:
    """Everything of the frame but the body: length word, type/length word and header.

    Lets an adapter write ``[prefix, body]`` without copying a large body. Raises
    :class:`ProtocolError` when the command cannot be represented on the wire.
    """
    kind = cmd.serialize_type if serialize_type is None else serialize_type
    if kind == SerializeType.ROCKETMQ:
        header = _encode_binary_header(cmd)
    else:
        header = _encode_json_header(cmd)
    body_length = len(cmd.body) if cmd.body else 0
    if len(header) > _HEADER_LENGTH_MASK:
        raise ProtocolError(f"header of {len(header)} bytes does not fit 24 bits")
    length = _LENGTH_FIELD_BYTES + len(header) + body_length
    if length + _LENGTH_FIELD_BYTES > FRAME_BYTES_MAX:
        raise ProtocolError(f"frame of {length} bytes exceeds {FRAME_BYTES_MAX}")
    return _PREFIX.pack(length, (int(kind) << 24) | len(header)) + header


def encode_frame(cmd: RemotingCommand, serialize_type: SerializeType | None = None) -> bytes:
    """The complete frame of ``cmd``; ``serialize_type`` None means ``cmd.serialize_type``."""
    prefix = encode_frame_prefix(cmd, serialize_type)
    if cmd.body:
        return prefix + cmd.body
    return prefix


# ------------------------------------------------------------------------------ decode


def _json_int(header: dict[str, object], name: str) -> int:
    value = header.get(name)
    if value is None:
        return 0
    if isinstance(value, str):
        # fastjson casts numeric strings into int fields.
        text = value
        try:
            value = int(text)
        except ValueError as exc:
            raise ProtocolError(f"header field {name} is not a number: {text[:40]!r}") from exc
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProtocolError(f"header field {name} is not an integer")
    _check_range(name, value, _INT32_MIN, _INT32_MAX)
    return value


def _coerce_text(name: str, value: object) -> str:
    """Java coerces scalars into String fields (C++ sends numbers for some ext fields)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    try:
        return fastjson.dumps(value)
    except ValueError as exc:
        raise ProtocolError(f"header field {name} cannot be read as text") from exc


def _json_language(header: dict[str, object]) -> LanguageCode | None:
    if "language" not in header:
        return LanguageCode.JAVA
    value = header["language"]
    if isinstance(value, str):
        return _LANGUAGE_BY_NAME.get(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return _LANGUAGE_BY_CODE.get(value)
    return None


def _check_ext_field_count(count: int) -> None:
    if count > HEADER_EXT_FIELDS_MAX:
        raise ProtocolError(
            f"header has {count} ext fields, more than the limit of {HEADER_EXT_FIELDS_MAX}"
        )


def _json_ext_fields(header: dict[str, object]) -> dict[str, str] | None:
    value = header.get("extFields")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ProtocolError("header field extFields is not an object")
    _check_ext_field_count(len(value))
    return {key: _coerce_text(key, item) for key, item in value.items() if item is not None}


def _json_header_object(raw: bytes) -> dict[str, object]:
    try:
        header = fastjson.loads(raw, HEADER_JSON_LIMITS)
    except BodyDecodeError as exc:
        raise ProtocolError(f"undecodable JSON header: {exc}") from exc
    if not isinstance(header, dict):
        raise ProtocolError("JSON header is not an object")
    return header


def _json_command(header: dict[str, object]) -> RemotingCommand:
    remark = header.get("remark")
    return RemotingCommand(
        code=_json_int(header, "code"),
        language=_json_language(header),
        version=_json_int(header, "version"),
        opaque=_json_int(header, "opaque"),
        flag=_json_int(header, "flag"),
        remark=None if remark is None else _coerce_text("remark", remark),
        ext_fields=_json_ext_fields(header),
        serialize_type=SerializeType.JSON,
    )


def _decode_json_header(raw: bytes) -> RemotingCommand:
    return _json_command(_json_header_object(raw))


class _BinaryReader:
    """Bounds-checked reads over one binary header (never past its declared length)."""

    __slots__ = ("_end", "_position", "_view")

    def __init__(self, view: memoryview) -> None:
        self._view = view
        self._position = 0
        self._end = len(view)

    def fixed(self) -> tuple[int, int, int, int, int]:
        if self._end < _BINARY_FIXED_BYTES:
            raise ProtocolError(f"binary header of {self._end} bytes is shorter than 21")
        fields: tuple[int, int, int, int, int] = _BINARY_FIXED.unpack_from(self._view, 0)
        self._position = _BINARY_FIXED.size
        return fields

    def length(self, word: struct.Struct) -> int:
        if self._position + word.size > self._end:
            raise ProtocolError("binary header ends inside a length field")
        (value,) = word.unpack_from(self._view, self._position)
        self._position += word.size
        if value < 0 or value > self._end:
            raise ProtocolError(f"binary header string length {value} is out of range")
        return int(value)

    def string(self, word: struct.Struct) -> str | None:
        size = self.length(word)
        if size == 0:
            return None  # upstream decodes an empty string as null
        start = self._position
        if start + size > self._end:
            raise ProtocolError("binary header string runs past the header")
        self._position = start + size
        return bytes(self._view[start : start + size]).decode("utf-8", "replace")

    def ext_fields(self) -> dict[str, str] | None:
        size = self.length(_INT32)
        if size == 0:
            return None
        stop = self._position + size
        if stop > self._end:
            raise ProtocolError("binary ext fields run past the header")
        fields: dict[str, str] = {}
        entries = 0
        while self._position < stop:
            entries += 1
            _check_ext_field_count(entries)
            key = self.string(_INT16)
            value = self.string(_INT32)
            if key is not None and value is not None:
                fields[key] = value
        if self._position != stop:
            raise ProtocolError("binary ext field entry crosses the ext block end")
        return fields

    def finish(self) -> None:
        if self._position != self._end:
            raise ProtocolError(f"{self._end - self._position} stray bytes after binary header")


def _decode_binary_header(view: memoryview) -> RemotingCommand:
    reader = _BinaryReader(view)
    code, language_byte, version, opaque, flag = reader.fixed()
    remark = reader.string(_INT32)
    ext_fields = reader.ext_fields()
    reader.finish()
    return RemotingCommand(
        code=code,
        language=_LANGUAGE_BY_CODE.get(language_byte),
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext_fields,
        serialize_type=SerializeType.ROCKETMQ,
    )


# code, language, version, flag, remark, ext fields: a decoded header but its opaque.
_Template = tuple[int, LanguageCode | None, int, int, str | None, dict[str, str] | None]


class _HeaderMemo:
    """The JSON headers one stream decoded lately, keyed by their bytes without the
    opaque: a client sends the same header again and again with a new opaque (a
    route query, a heartbeat), and decoding JSON was most of what a cached route
    answer cost the read front.

    Used only for headers with no backslash (so no escapes, and every ``"`` opens or
    closes a string) and exactly one ``"opaque":`` followed by a plain integer: in
    JSON that parsed, that is then the top-level opaque key, so two headers that
    differ only in those digits decode to the same command but for its opaque.
    Anything else takes the full decode, as does every header the first time."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[bytes, _Template] = {}

    def decode(self, raw: bytes) -> RemotingCommand:
        if len(raw) > HEADER_MEMO_BYTES_MAX or b"\\" in raw:
            return _decode_json_header(raw)
        found = _OPAQUE_VALUE.search(raw)
        if found is None or raw.count(b'"opaque":') != 1:
            return _decode_json_header(raw)
        start, end = found.span(1)
        key = raw[:start] + raw[end:]
        opaque = int(found.group(1))
        entries = self._entries
        known = entries.get(key)
        if known is not None and _INT32_MIN <= opaque <= _INT32_MAX:
            code, language, version, flag, remark, ext_fields = known
            ext = None if ext_fields is None else dict(ext_fields)
            return RemotingCommand(
                code=code,
                language=language,
                version=version,
                opaque=opaque,
                flag=flag,
                remark=remark,
                ext_fields=ext,
                serialize_type=SerializeType.JSON,
            )
        header = _json_header_object(raw)
        cmd = _json_command(header)
        # The one "opaque": is the top-level key.
        if "opaque" in header:
            if len(entries) >= HEADER_MEMO_ENTRIES:
                del entries[next(iter(entries))]  # the oldest
            # A copy of the ext fields: the caller may change its command's.
            ext = None if cmd.ext_fields is None else dict(cmd.ext_fields)
            entries[key] = (cmd.code, cmd.language, cmd.version, cmd.flag, cmd.remark, ext)
        return cmd


def _check_header_length(header_length: int, header_bytes_max: int) -> None:
    if header_length > header_bytes_max:
        raise ProtocolError(
            f"header of {header_length} bytes exceeds the limit of {header_bytes_max} bytes"
        )


def _decode_payload(
    view: memoryview, header_bytes_max: int, memo: _HeaderMemo | None = None
) -> RemotingCommand:
    """Decode what follows the length word: type/length word, header, body."""
    if len(view) < _LENGTH_FIELD_BYTES:
        raise ProtocolError(f"frame of {len(view)} bytes has no header length")
    (word,) = _INT32.unpack_from(view, 0)
    kind = _SERIALIZE_TYPE_BY_BYTE.get((word >> 24) & 0xFF)
    if kind is None:
        raise ProtocolError(f"unknown serialize type {(word >> 24) & 0xFF}")
    header_length = word & _HEADER_LENGTH_MASK
    _check_header_length(header_length, header_bytes_max)
    header_end = _LENGTH_FIELD_BYTES + header_length
    if header_end > len(view):
        raise ProtocolError(f"header length {header_length} exceeds frame length {len(view)} - 4")
    header = view[_LENGTH_FIELD_BYTES:header_end]
    if kind == SerializeType.JSON:
        raw = bytes(header)
        cmd = _decode_json_header(raw) if memo is None else memo.decode(raw)
    else:
        cmd = _decode_binary_header(header)
    if header_end < len(view):
        cmd.body = bytes(view[header_end:])
    return cmd


def _check_length(length: int, frame_bytes_max: int) -> None:
    if length < 0:
        raise ProtocolError(f"negative frame length {length}")
    if length + _LENGTH_FIELD_BYTES > frame_bytes_max:
        raise ProtocolError(f"frame length {length} exceeds the maximum {frame_bytes_max}")


def decode_frame(
    frame: bytes | bytearray | memoryview, header_bytes_max: int = HEADER_BYTES_MAX
) -> RemotingCommand:
    """Decode exactly one complete frame, length word included; ``header_bytes_max`` as
    for :class:`FrameDecoder`."""
    view = memoryview(frame)
    if len(view) < _LENGTH_FIELD_BYTES:
        raise ProtocolError("frame shorter than its length word")
    (length,) = _INT32.unpack_from(view, 0)
    _check_length(length, FRAME_BYTES_MAX)
    if length != len(view) - _LENGTH_FIELD_BYTES:
        raise ProtocolError(f"length word {length} but {len(view) - 4} bytes follow it")
    return _decode_payload(view[_LENGTH_FIELD_BYTES:], header_bytes_max)


class FrameDecoder:
    """Incremental decoder: feed bytes split anywhere, get whole commands back.

    The internal buffer never holds more than one incomplete frame, and that frame's
    length was checked against ``frame_bytes_max`` first, its header length against
    ``header_bytes_max`` as soon as it arrived. After a :class:`ProtocolError` the
    decoder stays failed and raises it again on every feed: the stream position is
    lost, so the connection has to be closed.
    """

    def __init__(
        self,
        frame_bytes_max: int = FRAME_BYTES_MAX,
        header_bytes_max: int = HEADER_BYTES_MAX,
    ) -> None:
        """Create a decoder refusing frames whose length + 4 exceeds ``frame_bytes_max``,
        headers longer than ``header_bytes_max`` and headers past the other limits.

        Clients reading answers pass ``header_bytes_max=frame_bytes_max``: a
        GET_KV_CONFIG answer carries the value, which an older version may have stored
        larger than any request may now be. The other limits hold for every decoder.
        """
        self._frame_bytes_max = frame_bytes_max
        self._header_bytes_max = header_bytes_max
        self._buffer = bytearray()
        self._error: ProtocolError | None = None
        self._memo = _HeaderMemo()

    @property
    def buffered_bytes(self) -> int:
        """Bytes held back because they do not yet form a complete frame."""
        return len(self._buffer)

    def take_buffered(self) -> bytes:
        """The bytes held back (the start of an unfinished frame), removed from the
        decoder: whoever continues the stream elsewhere starts with them."""
        taken, self._buffer = bytes(self._buffer), bytearray()
        return taken

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """Add received bytes; return every command they complete, in order."""
        if self._error is not None:
            raise self._error
        if not data:
            return []
        if self._buffer:
            self._buffer += data
            source: bytes | bytearray | memoryview = self._buffer
        else:
            # Common case: decode straight from the received chunk, no copy.
            source = data
        try:
            commands, consumed = self._decode_all(memoryview(source))
        except ProtocolError as exc:
            self._error = exc
            self._buffer = bytearray()
            raise
        if source is self._buffer:
            del self._buffer[:consumed]
        else:
            self._buffer = bytearray(memoryview(source)[consumed:])
        return commands

    def _decode_all(self, view: memoryview) -> tuple[list[RemotingCommand], int]:
        commands: list[RemotingCommand] = []
        position = 0
        available = len(view)
        try:
            while available - position >= _LENGTH_FIELD_BYTES:
                (length,) = _INT32.unpack_from(view, position)
                _check_length(length, self._frame_bytes_max)
                end = position + _LENGTH_FIELD_BYTES + length
                if end > available:
                    self._check_unfinished_header(view, position, available)
                    break
                payload = view[position + _LENGTH_FIELD_BYTES : end]
                commands.append(_decode_payload(payload, self._header_bytes_max, self._memo))
                position = end
        except ProtocolError as exc:
            exc.decoded = list(commands)
            raise
        finally:
            view.release()
        return commands, position

    def _check_unfinished_header(self, view: memoryview, position: int, available: int) -> None:
        # Refuse a header over the limit as soon as its length arrives, before the peer
        # has the rest of the frame buffered.
        word_at = position + _LENGTH_FIELD_BYTES
        if available - word_at >= _INT32.size:
            (word,) = _INT32.unpack_from(view, word_at)
            _check_header_length(word & _HEADER_LENGTH_MASK, self._header_bytes_max)
