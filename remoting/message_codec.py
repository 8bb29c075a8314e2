"""Messages as a PULL_MESSAGE answer carries them (RocketMQ's ``MessageDecoder``, V1 magic).

A pull answer's body is the stored messages back to back, each in this layout
(big-endian; IPv4 hosts, so the two IPv6 bits of ``sysFlag`` are cleared)::

    int32 totalSize, int32 magic (0xDAA320A7), int32 bodyCRC, int32 queueId, int32 flag,
    int64 queueOffset, int64 commitLogOffset, int32 sysFlag, int64 bornTimestamp,
    4 bytes + int32 bornHost, int64 storeTimestamp, 4 bytes + int32 storeHost,
    int32 reconsumeTimes, int64 preparedTransactionOffset,
    int32 bodyLength + body, int8 topicLength + topic, int16 propertiesLength + properties

Java's, ali-ons' and rocketmq-client-cpp's decoders read exactly this. The
message id a client shows is ``storeHost + commitLogOffset`` in upper hex
(``MessageDecoder.createMessageId``), the same id SEND_MESSAGE answered.
"""

from __future__ import annotations

import ipaddress
import struct
import zlib
from dataclasses import dataclass

MESSAGE_MAGIC_CODE_V1 = 0xDAA320A7
BORNHOST_V6_FLAG = 0x1 << 4
STOREHOSTADDRESS_V6_FLAG = 0x1 << 5
COMPRESSED_FLAG = 0x1

_HEAD = struct.Struct(">iIiiiqqiq4siq4siiqi")
"""totalSize .. body length: everything before the body."""
_TOPIC_LEN = struct.Struct(">b")
_PROPERTIES_LEN = struct.Struct(">h")
HEAD_BYTES = _HEAD.size
TOPIC_BYTES_MAX = 127
PROPERTIES_BYTES_MAX = 32767


UNKNOWN_HOST = ""
"""A host the store does not know (our records keep no born host): four zero bytes and
port 0 on the wire, as a client shows an unset address."""


class MessageDecodeError(ValueError):
    """Bytes that are not a sequence of whole messages."""


@dataclass(frozen=True, slots=True)
class MessageExt:
    """One message as a consumer receives it."""

    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    body: bytes
    properties: str = ""
    flag: int = 0
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    born_host: str = UNKNOWN_HOST
    store_timestamp_ms: int = 0
    store_host: str = UNKNOWN_HOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    @property
    def msg_id(self) -> str:
        """The offset message id (store host, port, commit-log offset; upper hex)."""
        return message_id(self.store_host, self.commit_log_offset)


def _host_bytes(address: str) -> tuple[bytes, int]:
    host, _, port = address.rpartition(":")
    try:
        packed = ipaddress.IPv4Address(host).packed
    except ValueError:
        packed = bytes(4)
    return packed, int(port) if port.isdigit() else 0


def message_id(store_host: str, commit_log_offset: int) -> str:
    """``MessageDecoder.createMessageId`` for an IPv4 store host."""
    packed, port = _host_bytes(store_host)
    return (packed + port.to_bytes(4, "big") + commit_log_offset.to_bytes(8, "big")).hex().upper()


def body_crc(body: bytes) -> int:
    """``UtilAll.crc32``: CRC32 of the body with the sign bit cleared."""
    return zlib.crc32(body) & 0x7FFFFFFF


def encode_message_ext(message: MessageExt) -> bytes:
    """One message in the pull answer's layout."""
    topic = message.topic.encode("utf-8")
    properties = message.properties.encode("utf-8")
    if len(topic) > TOPIC_BYTES_MAX or len(properties) > PROPERTIES_BYTES_MAX:
        raise ValueError("topic or properties too long for a pulled message")
    total = HEAD_BYTES + len(message.body) + _TOPIC_LEN.size + len(topic)
    total += _PROPERTIES_LEN.size + len(properties)
    born, born_port = _host_bytes(message.born_host)
    store, store_port = _host_bytes(message.store_host)
    sys_flag = message.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    head = _HEAD.pack(
        total,
        MESSAGE_MAGIC_CODE_V1,
        body_crc(message.body),
        message.queue_id,
        message.flag,
        message.queue_offset,
        message.commit_log_offset,
        sys_flag,
        message.born_timestamp_ms,
        born,
        born_port,
        message.store_timestamp_ms,
        store,
        store_port,
        message.reconsume_times,
        message.prepared_transaction_offset,
        len(message.body),
    )
    return b"".join(
        (
            head,
            message.body,
            _TOPIC_LEN.pack(len(topic)),
            topic,
            _PROPERTIES_LEN.pack(len(properties)),
            properties,
        )
    )


def decode_messages(body: bytes) -> list[MessageExt]:
    """Every message of a pull answer's body; :class:`MessageDecodeError` on bad bytes."""
    messages: list[MessageExt] = []
    pos = 0
    while pos < len(body):
        if len(body) - pos < HEAD_BYTES:
            raise MessageDecodeError(f"truncated message head at byte {pos}")
        (
            total,
            magic,
            _crc,
            queue_id,
            flag,
            queue_offset,
            commit_log_offset,
            sys_flag,
            born_ms,
            born,
            born_port,
            store_ms,
            store,
            store_port,
            reconsume,
            prepared,
            body_len,
        ) = _HEAD.unpack_from(body, pos)
        if magic != MESSAGE_MAGIC_CODE_V1:
            raise MessageDecodeError(f"bad magic {magic:#x} at byte {pos}")
        if total < HEAD_BYTES or pos + total > len(body) or body_len < 0:
            raise MessageDecodeError(f"bad message size {total} at byte {pos}")
        cursor = pos + HEAD_BYTES
        payload = body[cursor : cursor + body_len]
        cursor += body_len
        (topic_len,) = _TOPIC_LEN.unpack_from(body, cursor)
        cursor += _TOPIC_LEN.size
        topic = body[cursor : cursor + topic_len]
        cursor += topic_len
        (properties_len,) = _PROPERTIES_LEN.unpack_from(body, cursor)
        cursor += _PROPERTIES_LEN.size
        properties = body[cursor : cursor + properties_len]
        cursor += properties_len
        if cursor != pos + total or topic_len <= 0 or properties_len < 0:
            raise MessageDecodeError(f"inconsistent field lengths in the message at byte {pos}")
        try:
            topic_text, properties_text = topic.decode("utf-8"), properties.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MessageDecodeError(f"undecodable text in the message at byte {pos}") from exc
        messages.append(
            MessageExt(
                topic=topic_text,
                queue_id=queue_id,
                queue_offset=queue_offset,
                commit_log_offset=commit_log_offset,
                body=payload,
                properties=properties_text,
                flag=flag,
                sys_flag=sys_flag,
                born_timestamp_ms=born_ms,
                born_host=f"{ipaddress.IPv4Address(born)}:{born_port}",
                store_timestamp_ms=store_ms,
                store_host=f"{ipaddress.IPv4Address(store)}:{store_port}",
                reconsume_times=reconsume,
                prepared_transaction_offset=prepared,
            )
        )
        pos += total
    return messages
