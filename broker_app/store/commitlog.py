"""A segmented, append-only commit log on disk (RocketMQ's ``CommitLog``).

The log is a sequence of fixed-capacity segment files named by their start
offset, 20 digits zero-padded (``00000000000001048576``), so the file holding
any offset is found by arithmetic. A segment is written sequentially; when the
next record does not fit, the rest of the segment is closed with a filler
record and writing moves on to the next segment, exactly as RocketMQ's
``MappedFileQueue`` does. Files grow as they are written instead of being
pre-allocated, so a file's length is always its written length.

Writes use ``os.pwrite`` on descriptors kept open per segment and are visible
to ``os.pread`` at once (the page cache); durability is the job of
:meth:`CommitLog.flush`, which the store calls per its fsync policy.

On open, :meth:`CommitLog.recover` walks every record, checks its CRC and its
recorded offset, and truncates the log at the first byte that is not a valid
record (a torn write, or garbage), deleting any later segment.
"""

from __future__ import annotations

import logging
import mmap
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from broker_app.store.record import (
    FILLER_MIN_BYTES,
    RecordError,
    Scan,
    ScanResult,
    encode_filler,
    scan_record,
)

log = logging.getLogger(__name__)

SEGMENT_NAME_DIGITS = 20
_SEGMENT_NAME = re.compile(r"^\d{20}$")


class CommitLogError(Exception):
    """A write the log refuses (wrong offset, record too large, bad alignment)."""


def segment_name(start_offset: int) -> str:
    """The file name of the segment starting at ``start_offset``."""
    return f"{start_offset:0{SEGMENT_NAME_DIGITS}d}"


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What recovery found: the valid end, and how much was cut off."""

    max_offset: int
    truncated_bytes: int
    removed_segments: int


@dataclass(frozen=True, slots=True)
class ScannedRecord:
    """A record met while walking the log: its offset and what it is."""

    offset: int
    result: ScanResult


class _Segment:
    """One segment file and its write position."""

    def __init__(self, path: Path, start_offset: int) -> None:
        self.path = path
        self.start_offset = start_offset
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.written = os.fstat(self.fd).st_size
        self.dirty = False

    def write(self, data: bytes) -> None:
        """Append ``data`` at the write position."""
        done = 0
        view = memoryview(data)
        while done < len(data):
            done += os.pwrite(self.fd, view[done:], self.written + done)
        self.written += len(data)
        self.dirty = True

    def read(self, position: int, size: int) -> bytes:
        """Up to ``size`` written bytes from ``position`` within the segment."""
        size = max(0, min(size, self.written - position))
        return os.pread(self.fd, size, position) if size else b""

    def truncate(self, length: int) -> None:
        """Cut the file to ``length`` bytes and make the cut durable."""
        os.ftruncate(self.fd, length)
        os.fsync(self.fd)
        self.written = length

    def flush(self) -> None:
        """fsync the file if anything was written since the last flush."""
        if self.dirty:
            self.dirty = False
            os.fsync(self.fd)

    def close(self) -> None:
        """Close the descriptor."""
        os.close(self.fd)


class CommitLog:
    """The segmented commit log of one broker.

    ``segment_bytes`` is each file's capacity; ``record_bytes_max`` bounds a
    single record (it must leave room for a filler in an empty segment).
    """

    def __init__(self, directory: Path, *, segment_bytes: int, record_bytes_max: int) -> None:
        if record_bytes_max + FILLER_MIN_BYTES > segment_bytes:
            raise ValueError("record_bytes_max must leave room for a filler in one segment")
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.record_bytes_max = record_bytes_max
        directory.mkdir(parents=True, exist_ok=True)
        self._segments: list[_Segment] = []
        for path in sorted(p for p in directory.iterdir() if _SEGMENT_NAME.match(p.name)):
            self._segments.append(_Segment(path, int(path.name)))

    # -- positions -----------------------------------------------------------

    @property
    def min_offset(self) -> int:
        """The first offset the log holds (0 when empty)."""
        return self._segments[0].start_offset if self._segments else 0

    @property
    def max_offset(self) -> int:
        """The offset the next byte will be written at (RocketMQ's max physical offset)."""
        if not self._segments:
            return 0
        last = self._segments[-1]
        return last.start_offset + last.written

    def segment_start(self, offset: int) -> int:
        """The start offset of the segment that holds ``offset``."""
        return offset - offset % self.segment_bytes

    def last_segment_start(self) -> int:
        """Where a slave that reports 0 starts: the beginning of the last segment."""
        return self.segment_start(self.max_offset) if self._segments else 0

    # -- writing -------------------------------------------------------------

    def append_record(self, size: int, encode_at: Callable[[int], bytes]) -> int:
        """Append one record of ``size`` bytes; ``encode_at(offset)`` builds it.

        Rolls to a new segment (closing the current one with a filler) when the
        record plus a minimal filler would not fit. Returns the record's offset.
        """
        if size <= 0 or size > self.record_bytes_max:
            raise CommitLogError(f"record of {size} bytes exceeds the bounds")
        segment = self._writable_segment(size)
        offset = segment.start_offset + segment.written
        data = encode_at(offset)
        if len(data) != size:
            raise CommitLogError("encoded record size differs from the announced size")
        segment.write(data)
        return offset

    def append_raw(self, offset: int, data: bytes) -> None:
        """Append bytes copied from a master at exactly ``offset`` (the slave path).

        The caller has already checked that ``data`` holds whole records. An
        empty log may start at any segment boundary, since a new slave is sent
        the master's last segment onward.
        """
        if self._segments and offset != self.max_offset:
            raise CommitLogError(f"raw append at {offset}, log ends at {self.max_offset}")
        if not self._segments and offset % self.segment_bytes:
            raise CommitLogError(f"an empty log cannot start at {offset}")
        view = memoryview(data)
        while view:
            segment = self._segment_for_raw(offset)
            room = self.segment_bytes - segment.written
            chunk = view[:room]
            segment.write(bytes(chunk))
            offset += len(chunk)
            view = view[len(chunk) :]

    def _writable_segment(self, size: int) -> _Segment:
        if not self._segments:
            return self._new_segment(0)
        last = self._segments[-1]
        room = self.segment_bytes - last.written
        if size + FILLER_MIN_BYTES <= room:
            return last
        last.write(encode_filler(room))
        return self._new_segment(last.start_offset + self.segment_bytes)

    def _segment_for_raw(self, offset: int) -> _Segment:
        if not self._segments:
            return self._new_segment(offset)
        last = self._segments[-1]
        if last.written < self.segment_bytes:
            return last
        return self._new_segment(last.start_offset + self.segment_bytes)

    def _new_segment(self, start_offset: int) -> _Segment:
        segment = _Segment(self.directory / segment_name(start_offset), start_offset)
        self._segments.append(segment)
        return segment

    # -- reading -------------------------------------------------------------

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` written bytes from ``offset``, never crossing a segment."""
        segment = self._segment_holding(offset)
        if segment is None:
            return b""
        return segment.read(offset - segment.start_offset, max_bytes)

    def _segment_holding(self, offset: int) -> _Segment | None:
        if not self._segments or offset < self.min_offset or offset >= self.max_offset:
            return None
        index = (offset - self.min_offset) // self.segment_bytes
        return self._segments[index]

    def scan(self, from_offset: int) -> Iterator[ScannedRecord]:
        """Walk the records from ``from_offset`` (a record boundary) to the end.

        Raises :class:`RecordError` on the first invalid byte. The walk reads
        one segment at a time through a read-only mmap, so memory stays bounded.
        """
        offset = from_offset
        while offset < self.max_offset:
            segment = self._segment_holding(offset)
            assert segment is not None
            for scanned in self._scan_segment(segment, offset - segment.start_offset):
                yield scanned
                offset = scanned.offset + scanned.result.size
            offset = max(offset, segment.start_offset + segment.written)

    def _scan_segment(self, segment: _Segment, position: int) -> Iterator[ScannedRecord]:
        if segment.written == 0:
            return
        with mmap.mmap(segment.fd, segment.written, access=mmap.ACCESS_READ) as view:
            while position < segment.written:
                offset = segment.start_offset + position
                result = scan_record(
                    view,
                    position,
                    physical_offset=offset,
                    segment_remaining=self.segment_bytes - position,
                    record_bytes_max=self.record_bytes_max,
                )
                if result.kind in (Scan.END, Scan.INCOMPLETE):
                    raise RecordError(f"torn record at offset {offset}")
                yield ScannedRecord(offset, result)
                position += result.size

    # -- recovery, durability, shutdown --------------------------------------

    def recover(self, on_record: Callable[[ScannedRecord], None] | None = None) -> RecoveryReport:
        """Truncate the log after its last valid record; report what was cut.

        ``on_record`` sees every valid record in order during the same pass.
        """
        before = self._total_bytes()
        removed = self._drop_misplaced_segments()
        valid_end = self.min_offset
        try:
            for scanned in self.scan(self.min_offset):
                valid_end = scanned.offset + scanned.result.size
                if on_record is not None:
                    on_record(scanned)
        except RecordError as exc:
            log.warning("commit log recovery: %s; truncating at %d", exc, valid_end)
        removed += self._truncate_to(valid_end)
        report = RecoveryReport(self.max_offset, before - self._total_bytes(), removed)
        if report.truncated_bytes:
            log.warning("commit log recovery cut %d bytes", report.truncated_bytes)
        return report

    def _drop_misplaced_segments(self) -> int:
        """Keep the run of contiguous, aligned segments; remove the rest."""
        keep = 0
        for index, segment in enumerate(self._segments):
            expected = self._segments[0].start_offset + index * self.segment_bytes
            aligned = segment.start_offset % self.segment_bytes == 0
            full_before = index == 0 or self._segments[index - 1].written == self.segment_bytes
            if segment.start_offset != expected or not aligned or not full_before:
                break
            if segment.written > self.segment_bytes:
                segment.truncate(self.segment_bytes)
            keep = index + 1
        return self._remove_from(keep)

    def _truncate_to(self, end_offset: int) -> int:
        keep = 0
        for index, segment in enumerate(self._segments):
            if segment.start_offset <= end_offset or index == 0:
                keep = index + 1
                length = max(0, min(segment.written, end_offset - segment.start_offset))
                if length != segment.written:
                    segment.truncate(length)
        removed = self._remove_from(keep)
        if len(self._segments) > 1 and self._segments[-1].written == 0:
            removed += self._remove_from(len(self._segments) - 1)
        if len(self._segments) == 1 and self._segments[0].written == 0:
            removed += self._remove_from(0)
        return removed

    def _remove_from(self, index: int) -> int:
        doomed = self._segments[index:]
        del self._segments[index:]
        for segment in doomed:
            segment.close()
            segment.path.unlink(missing_ok=True)
        return len(doomed)

    def _total_bytes(self) -> int:
        return sum(segment.written for segment in self._segments)

    def flush(self) -> None:
        """fsync every segment written since the last flush."""
        for segment in list(self._segments):
            segment.flush()

    def segment_paths(self) -> list[Path]:
        """The segment files, oldest first (tests compare them byte for byte)."""
        return [segment.path for segment in self._segments]

    def close(self) -> None:
        """Flush and close every segment."""
        self.flush()
        for segment in self._segments:
            segment.close()
        self._segments.clear()
