"""RocketMQ's classic HA wire format, sans-IO (4.x ``HAService`` / 5.x ``DefaultHAService``).

Two byte streams share one TCP connection:

* slave -> master: 8-byte big-endian int64 values, each the slave's max
  commit-log offset (``REPORT_HEADER_SIZE = 8``). The master reads them in
  8-byte multiples and takes the last complete one.
* master -> slave: ``[int64 phyOffset][int32 bodySize][bodySize raw bytes]``
  (``TRANSFER_HEADER_SIZE = 12``); a header with size 0 is a heartbeat.

The decoders own no socket. They bound their buffers and raise
:class:`HAProtocolError` for values no honest peer sends, so an adapter can
close the connection before anything reaches the store.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

REPORT = struct.Struct(">q")
REPORT_HEADER_BYTES = REPORT.size  # 8
TRANSFER_HEADER = struct.Struct(">qi")
TRANSFER_HEADER_BYTES = TRANSFER_HEADER.size  # 12


class HAProtocolError(ValueError):
    """A value on the HA stream that no honest peer sends."""


def encode_report(offset: int) -> bytes:
    """The slave's report of its max offset."""
    return REPORT.pack(offset)


def encode_transfer(offset: int, body: bytes) -> bytes:
    """One master -> slave transfer: header plus body (an empty body is a heartbeat)."""
    return TRANSFER_HEADER.pack(offset, len(body)) + body


class ReportDecoder:
    """Master side: turns the slave's byte stream into its latest reported offset."""

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, data: bytes) -> int | None:
        """Consume ``data``; return the last complete report in it, or None.

        Only the last report matters (RocketMQ keeps only the newest ack), so
        the buffer never holds more than one partial value.
        """
        buf = self._partial + data
        whole = len(buf) - len(buf) % REPORT_HEADER_BYTES
        self._partial = buf[whole:]
        if whole == 0:
            return None
        (offset,) = REPORT.unpack_from(buf, whole - REPORT_HEADER_BYTES)
        if offset < 0:
            raise HAProtocolError(f"negative slave offset {offset}")
        return int(offset)


@dataclass(frozen=True, slots=True)
class Transfer:
    """One decoded master -> slave transfer."""

    offset: int
    body: bytes

    @property
    def is_heartbeat(self) -> bool:
        """True for a header-only transfer."""
        return not self.body


class TransferDecoder:
    """Slave side: splits the master's stream into transfers of bounded size."""

    def __init__(self, body_bytes_max: int) -> None:
        self.body_bytes_max = body_bytes_max
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Transfer]:
        """Consume ``data``; return the transfers it completes, in order."""
        self._buf += data
        transfers: list[Transfer] = []
        position = 0
        while len(self._buf) - position >= TRANSFER_HEADER_BYTES:
            offset, size = TRANSFER_HEADER.unpack_from(self._buf, position)
            if offset < 0 or size < 0 or size > self.body_bytes_max:
                raise HAProtocolError(f"bad transfer header offset={offset} size={size}")
            end = position + TRANSFER_HEADER_BYTES + size
            if len(self._buf) < end:
                break
            transfers.append(Transfer(offset, bytes(self._buf[end - size : end])))
            position = end
        del self._buf[:position]
        return transfers

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for an unfinished transfer (bounded by one header plus one body)."""
        return len(self._buf)
