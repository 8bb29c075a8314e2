"""The on-disk layout of one commit-log record (sans-IO: bytes in, values out).

Every message is stored as one self-describing record, so that a reader that
only has bytes (recovery after a crash, a slave receiving raw replication
batches) can tell a complete, intact record from a torn or garbage tail.
All integers are big-endian, like RocketMQ's own ``CommitLog`` records.

Layout of a message record::

    0   int32  total_size        (whole record, this field included)
    4   uint32 magic             MESSAGE_MAGIC
    8   uint32 crc32             zlib.crc32 of bytes [12, total_size)
    12  int32  queue_id
    16  int32  flag
    20  int64  queue_offset      position in the (topic, queue_id) consume queue
    28  int64  physical_offset   where the record starts in the commit log
    36  int32  sys_flag
    40  int64  born_timestamp_ms
    48  int64  store_timestamp_ms
    56  int16  topic length, topic bytes (UTF-8)
        int32  properties length, properties bytes (RocketMQ's k\\x01v\\x02 text)
        int32  body length, body bytes

A segment that cannot hold the next record ends with a *filler* record:
``[int32 size][uint32 BLANK_MAGIC]`` followed by zeros up to the segment end,
as RocketMQ's ``BLANK_MAGIC_CODE`` does, so segment files stay fixed-size and a
slave copying raw bytes ends up byte-identical.

Storing the physical offset inside the record is what makes copied garbage
detectable: a valid record placed at the wrong offset still fails to check.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from dataclasses import dataclass
from enum import Enum

from remoting.properties import java_boolean

ReadableBuffer = bytes | bytearray | memoryview | mmap.mmap

MESSAGE_MAGIC = 0x524D5131  # "RMQ1"
BLANK_MAGIC = 0x424C4E4B  # "BLNK"

_FIXED = struct.Struct(">iIIiiqqiqq")
_TOPIC_LEN = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_PREFIX = struct.Struct(">iI")

RECORD_FIXED_BYTES = _FIXED.size  # 56
RECORD_MIN_BYTES = RECORD_FIXED_BYTES + _TOPIC_LEN.size + 2 * _INT32.size
FILLER_MIN_BYTES = _PREFIX.size  # RocketMQ's END_FILE_MIN_BLANK_LENGTH
CRC_START = 12
TOPIC_BYTES_MAX = 127
PROPERTIES_BYTES_MAX = 32767

TAGS_PROPERTY = "TAGS"
PROPERTY_NAME_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


class RecordError(ValueError):
    """Bytes that are not a valid record at the offset they were found at."""


class Scan(Enum):
    """What :func:`scan_record` found at a position."""

    MESSAGE = "message"
    FILLER = "filler"
    INCOMPLETE = "incomplete"
    END = "end"


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One stored message, as decoded from the commit log."""

    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp_ms: int
    store_timestamp_ms: int
    topic: str
    properties: str
    body: bytes

    @property
    def tags(self) -> str | None:
        """The TAGS property, or None when the message has none."""
        return parse_properties(self.properties).get(TAGS_PROPERTY)


@dataclass(frozen=True, slots=True)
class ScanResult:
    """A position's verdict: its kind, size in bytes and the message (MESSAGE only)."""

    kind: Scan
    size: int = 0
    message: MessageRecord | None = None


def parse_properties(text: str) -> dict[str, str]:
    """RocketMQ's ``string2messageProperties``: ``k\\x01v\\x02`` pairs to a dict."""
    result: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(PROPERTY_NAME_SEPARATOR)
        if sep and name:
            result[name] = value
    return result


WAIT_STORE_MSG_OK = "WAIT"
"""The message property a producer sets to false when a SYNC_MASTER need not wait for
its slaves before answering."""


def wait_store_ok(properties: str) -> bool:
    """``MessageExt.isWaitStoreMsgOK``: absent is true, otherwise ``Boolean.parseBoolean``."""
    return java_boolean(parse_properties(properties).get(WAIT_STORE_MSG_OK), True)


def format_properties(properties: dict[str, str]) -> str:
    """RocketMQ's ``messageProperties2String``: the inverse of :func:`parse_properties`."""
    return "".join(
        f"{name}{PROPERTY_NAME_SEPARATOR}{value}{PROPERTY_SEPARATOR}"
        for name, value in properties.items()
    )


def tag_hash(tags: str | None) -> int:
    """A stable 63-bit hash of the tags, stored in consume-queue entries.

    RocketMQ stores ``String.hashCode()``; any stable hash serves the same
    purpose (server-side tag filtering), and CRC32 needs no Java emulation.
    """
    if not tags:
        return 0
    return zlib.crc32(tags.encode("utf-8"))


def message_size(topic: bytes, properties: bytes, body: bytes) -> int:
    """The encoded size of a message record with these variable parts."""
    return RECORD_MIN_BYTES + len(topic) + len(properties) + len(body)


def encode_message(
    *,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp_ms: int,
    store_timestamp_ms: int,
    topic: bytes,
    properties: bytes,
    body: bytes,
) -> bytes:
    """Encode one message record that will start at ``physical_offset``."""
    if len(topic) > TOPIC_BYTES_MAX or len(properties) > PROPERTIES_BYTES_MAX:
        raise RecordError("topic or properties too long")
    size = message_size(topic, properties, body)
    tail = b"".join(
        (
            _TOPIC_LEN.pack(len(topic)),
            topic,
            _INT32.pack(len(properties)),
            properties,
            _INT32.pack(len(body)),
            body,
        )
    )
    fixed_tail = _FIXED.pack(
        size,
        MESSAGE_MAGIC,
        0,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp_ms,
        store_timestamp_ms,
    )[CRC_START:]
    crc = zlib.crc32(tail, zlib.crc32(fixed_tail))
    return _PREFIX.pack(size, MESSAGE_MAGIC) + struct.pack(">I", crc) + fixed_tail + tail


def encode_filler(size: int) -> bytes:
    """A filler record of exactly ``size`` bytes (at least FILLER_MIN_BYTES)."""
    if size < FILLER_MIN_BYTES:
        raise RecordError(f"a filler needs at least {FILLER_MIN_BYTES} bytes")
    return _PREFIX.pack(size, BLANK_MAGIC) + bytes(size - FILLER_MIN_BYTES)


def scan_record(
    buf: ReadableBuffer,
    pos: int,
    *,
    physical_offset: int,
    segment_remaining: int,
    record_bytes_max: int,
) -> ScanResult:
    """Check the record at ``buf[pos:]``, which sits at ``physical_offset`` in the log.

    ``segment_remaining`` is how many bytes are left in the segment from that
    offset: a filler must span exactly that much, a message must fit in it.
    Returns END on a zero size field (the unwritten part of a segment),
    INCOMPLETE when more bytes are needed to decide, and raises
    :class:`RecordError` for anything that can never become valid.
    """
    available = len(buf) - pos
    if available < _PREFIX.size:
        return ScanResult(Scan.INCOMPLETE if available > 0 else Scan.END)
    size, magic = _PREFIX.unpack_from(buf, pos)
    if size == 0 and magic == 0:
        return ScanResult(Scan.END)
    if magic == BLANK_MAGIC:
        # An honest filler is shorter than the record that did not fit plus a
        # minimal filler; the bound also caps what a reader must buffer.
        if size > record_bytes_max + FILLER_MIN_BYTES:
            raise RecordError(f"filler of {size} bytes at offset {physical_offset}")
        return _scan_filler(buf, pos, size, segment_remaining)
    if magic != MESSAGE_MAGIC:
        raise RecordError(f"bad magic {magic:#x} at offset {physical_offset}")
    if size < RECORD_MIN_BYTES or size > min(record_bytes_max, segment_remaining):
        raise RecordError(f"bad record size {size} at offset {physical_offset}")
    if available < size:
        return ScanResult(Scan.INCOMPLETE, size)
    message = _decode_checked(bytes(buf[pos : pos + size]), physical_offset)
    return ScanResult(Scan.MESSAGE, size, message)


def _scan_filler(buf: ReadableBuffer, pos: int, size: int, segment_remaining: int) -> ScanResult:
    if size != segment_remaining:
        raise RecordError(f"filler of {size} bytes where {segment_remaining} remain")
    available = len(buf) - pos
    if available < size:
        return ScanResult(Scan.INCOMPLETE, size)
    if any(buf[pos + FILLER_MIN_BYTES : pos + size]):
        raise RecordError("filler padding is not zero")
    return ScanResult(Scan.FILLER, size)


def _decode_checked(record: bytes, physical_offset: int) -> MessageRecord:
    (
        size,
        _magic,
        crc,
        queue_id,
        flag,
        queue_offset,
        stored_offset,
        sys_flag,
        born_ms,
        store_ms,
    ) = _FIXED.unpack_from(record, 0)
    if zlib.crc32(memoryview(record)[CRC_START:]) != crc:
        raise RecordError(f"crc mismatch at offset {physical_offset}")
    if stored_offset != physical_offset:
        raise RecordError(f"record of offset {stored_offset} found at {physical_offset}")
    if queue_offset < 0 or queue_id < 0:
        raise RecordError(f"negative queue position at offset {physical_offset}")
    pos = RECORD_FIXED_BYTES
    (topic_len,) = _TOPIC_LEN.unpack_from(record, pos)
    pos += _TOPIC_LEN.size
    topic = record[pos : pos + topic_len]
    pos += topic_len
    properties, pos = _read_sized(record, pos)
    body, pos = _read_sized(record, pos)
    if topic_len <= 0 or pos != size:
        raise RecordError(f"inconsistent field lengths at offset {physical_offset}")
    try:
        topic_text = topic.decode("utf-8")
        properties_text = properties.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"undecodable text at offset {physical_offset}") from exc
    return MessageRecord(
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=stored_offset,
        sys_flag=sys_flag,
        born_timestamp_ms=born_ms,
        store_timestamp_ms=store_ms,
        topic=topic_text,
        properties=properties_text,
        body=body,
    )


def _read_sized(record: bytes, pos: int) -> tuple[bytes, int]:
    if pos + _INT32.size > len(record):
        raise RecordError("field length runs past the record")
    (length,) = _INT32.unpack_from(record, pos)
    pos += _INT32.size
    if length < 0 or pos + length > len(record):
        raise RecordError("field runs past the record")
    return record[pos : pos + length], pos + length
