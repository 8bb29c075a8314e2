"""Consume queues: per (topic, queue id) indexes into the commit log.

Like RocketMQ's ``ConsumeQueue``, each queue is a sequence of fixed 20-byte
entries ``[int64 commit-log offset][int32 size][int64 tag hash]``; the entry
at index *n* describes the message with queue offset *n*. Entries live in
segment files of ``entries_per_segment`` entries, named by their start byte
offset (20 digits), under ``<root>/<topic>/<queue id>/``.

A queue may begin above 0 (a slave that started from the master's last
commit-log segment): the entries before its first real one are left as zeros,
RocketMQ's "pre-blank" fill, and :attr:`ConsumeQueue.min_offset` skips them.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from broker_app.store.commitlog import segment_name

CQ_ENTRY = struct.Struct(">qiq")
CQ_ENTRY_BYTES = CQ_ENTRY.size  # 20
_SEGMENT_NAME = re.compile(r"^\d{20}$")


class ConsumeQueueError(Exception):
    """An entry written out of order."""


@dataclass(frozen=True, slots=True)
class CQEntry:
    """One consume-queue entry."""

    commit_log_offset: int
    size: int
    tag_hash: int


class ConsumeQueue:
    """The index of one (topic, queue id)."""

    def __init__(self, directory: Path, *, entries_per_segment: int) -> None:
        self.directory = directory
        self.segment_bytes = entries_per_segment * CQ_ENTRY_BYTES
        directory.mkdir(parents=True, exist_ok=True)
        self._fds: dict[int, int] = {}
        for path in sorted(p for p in directory.iterdir() if _SEGMENT_NAME.match(p.name)):
            self._fds[int(path.name)] = os.open(path, os.O_RDWR)
        self._end_bytes = self._scan_end()
        self._dirty: set[int] = set()
        self.min_offset = self._first_real_index()

    @property
    def max_offset(self) -> int:
        """The queue offset the next entry gets (RocketMQ's ``getMaxOffsetInQueue``)."""
        return self._end_bytes // CQ_ENTRY_BYTES

    def _scan_end(self) -> int:
        if not self._fds:
            return 0
        start = max(self._fds)
        size = os.fstat(self._fds[start]).st_size
        # A torn entry (crash mid-write) is dropped: round down to whole entries.
        return start + size - size % CQ_ENTRY_BYTES

    def _first_real_index(self) -> int:
        index = (min(self._fds) // CQ_ENTRY_BYTES) if self._fds else 0
        while index < self.max_offset:
            entry = self.get(index)
            if entry is not None and entry.size > 0:
                return index
            index += 1
        return index

    def put(self, queue_offset: int, entry: CQEntry) -> None:
        """Write the entry of ``queue_offset``; it must be the next one (or a first one)."""
        if queue_offset < self.max_offset:
            raise ConsumeQueueError(f"queue offset {queue_offset} below {self.max_offset}")
        if queue_offset > self.max_offset and self.max_offset > self.min_offset:
            raise ConsumeQueueError(f"queue offset {queue_offset} skips {self.max_offset}")
        if self.max_offset == self.min_offset:
            self.min_offset = queue_offset
        position = queue_offset * CQ_ENTRY_BYTES
        start = position - position % self.segment_bytes
        fd = self._fd_for(start)
        os.pwrite(
            fd, CQ_ENTRY.pack(entry.commit_log_offset, entry.size, entry.tag_hash), position - start
        )
        self._dirty.add(start)
        self._end_bytes = position + CQ_ENTRY_BYTES

    def _fd_for(self, start: int) -> int:
        fd = self._fds.get(start)
        if fd is None:
            fd = os.open(self.directory / segment_name(start), os.O_RDWR | os.O_CREAT, 0o644)
            self._fds[start] = fd
        return fd

    def get(self, queue_offset: int) -> CQEntry | None:
        """The entry at ``queue_offset``, or None outside the written range."""
        if queue_offset < 0 or queue_offset >= self.max_offset:
            return None
        position = queue_offset * CQ_ENTRY_BYTES
        start = position - position % self.segment_bytes
        fd = self._fds.get(start)
        if fd is None:
            return None
        raw = os.pread(fd, CQ_ENTRY_BYTES, position - start)
        if len(raw) != CQ_ENTRY_BYTES:
            return None
        return CQEntry(*CQ_ENTRY.unpack(raw))

    def last_entry_end(self) -> int:
        """The commit-log end offset of the last entry (0 when empty)."""
        entry = self.get(self.max_offset - 1)
        return 0 if entry is None else entry.commit_log_offset + entry.size

    def truncate_dirty_tail(self, commit_log_max_offset: int) -> None:
        """Drop entries pointing past the commit log's end (``truncateDirtyLogicFiles``)."""
        end = self.max_offset
        while end > self.min_offset:
            entry = self.get(end - 1)
            if entry is not None and entry.commit_log_offset + entry.size <= commit_log_max_offset:
                break
            end -= 1
        if end != self.max_offset:
            self._truncate_to(end)

    def _truncate_to(self, queue_offset: int) -> None:
        position = queue_offset * CQ_ENTRY_BYTES
        keep_start = position - position % self.segment_bytes
        for start in [s for s in self._fds if s > keep_start]:
            os.close(self._fds.pop(start))
            self._dirty.discard(start)
            (self.directory / segment_name(start)).unlink(missing_ok=True)
        if keep_start in self._fds:
            os.ftruncate(self._fds[keep_start], position - keep_start)
        self._end_bytes = position

    def flush(self) -> None:
        """fsync the segments written since the last flush."""
        # Swap rather than iterate: the writer may add to the set meanwhile.
        dirty, self._dirty = self._dirty, set()
        for start in dirty:
            fd = self._fds.get(start)
            if fd is not None:
                os.fsync(fd)

    def close(self) -> None:
        """Flush and close every segment."""
        self.flush()
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
