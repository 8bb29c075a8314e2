"""The broker's message store: commit log + consume queues + flush policy.

``MessageStore`` plays RocketMQ's ``DefaultMessageStore``: a master appends
messages (:meth:`MessageStore.put_message`), a slave appends the master's raw
bytes through a :class:`ReplicaAppender`; both paths dispatch every stored
message into its consume queue at once (RocketMQ's ``ReputMessageService``,
made synchronous because there is one writer).

The store does no networking and reads no clock: the caller passes the store
timestamp. It is not thread-safe for writers; only :meth:`flush` may run on a
flusher thread next to the single writer.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from broker_app.store.commitlog import CommitLog, RecoveryReport, ScannedRecord
from broker_app.store.consume_queue import ConsumeQueue, CQEntry
from broker_app.store.record import (
    FILLER_MIN_BYTES,
    TAGS_PROPERTY,
    MessageRecord,
    RecordError,
    Scan,
    encode_message,
    message_size,
    parse_properties,
    scan_record,
    tag_hash,
)
from remoting.topic_rule import is_legal_topic

log = logging.getLogger(__name__)

COMMIT_LOG_DIR = "commitlog"
CONSUME_QUEUE_DIR = "consumequeue"
DELETED_TOPICS_FILE = "deleted_topics.json"
"""Deleted topic -> the commit-log offset it was deleted at (:meth:`MessageStore.delete_topic`)."""
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
DEFAULT_RECORD_BYTES_MAX = 4 * 1024 * 1024 + 1024
DEFAULT_CQ_ENTRIES_PER_SEGMENT = 300_000
DEFAULT_FLUSH_INTERVAL_MS = 500
# RocketMQ's TopicValidator: the topic becomes a directory name, so this
# pattern is also what keeps a request from escaping the store directory.
QUEUE_ID_MAX = 65535
FILTER_SCAN_ENTRIES_MAX = 16_000
"""Consume-queue entries one read looks through for matching tags (``maxFilterMessageCount``)."""

ArrivalListener = Callable[[str, int, int], None]
"""Called with (topic, queue id, new max queue offset) for every message indexed."""
TagFilter = Callable[[int], bool]
"""Decides from a consume-queue entry's tag hash whether a message matches."""


class FlushDiskType(StrEnum):
    """RocketMQ's ``FlushDiskType``: fsync before answering, or on a timer."""

    SYNC_FLUSH = "SYNC_FLUSH"
    ASYNC_FLUSH = "ASYNC_FLUSH"


class MessageRejected(ValueError):
    """A message the store will not accept (bad topic, queue id or size)."""


class ReplicaError(Exception):
    """Replicated bytes that do not continue this log (wrong offset or corrupt)."""


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Where and how a store keeps its files."""

    store_dir: Path
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    record_bytes_max: int = DEFAULT_RECORD_BYTES_MAX
    cq_entries_per_segment: int = DEFAULT_CQ_ENTRIES_PER_SEGMENT
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_ms: int = DEFAULT_FLUSH_INTERVAL_MS


@dataclass(frozen=True, slots=True)
class MessageInput:
    """A message as a producer sends it."""

    topic: str
    queue_id: int
    body: bytes
    properties: str = ""
    flag: int = 0
    sys_flag: int = 0
    born_timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class PutResult:
    """Where a message was stored."""

    physical_offset: int
    size: int
    queue_offset: int
    store_timestamp_ms: int

    @property
    def end_offset(self) -> int:
        """The commit-log offset just past the message (what a SYNC_MASTER waits for)."""
        return self.physical_offset + self.size


class GetStatus(StrEnum):
    """What a read of a consume queue found (``GetMessageStatus``)."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"


@dataclass(frozen=True, slots=True)
class GetResult:
    """The answer of :meth:`MessageStore.get_messages` (``GetMessageResult``).

    ``next_begin_offset`` is where the reader goes on (past the entries looked
    at, matched or not). ``suggest_slave`` is True when what is left to read
    behind this read is more than the store keeps in memory: RocketMQ then
    points the consumer at a slave.
    """

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageRecord] = field(default_factory=list)
    suggest_slave: bool = False


def validate_topic(topic: str) -> None:
    """Raise :class:`MessageRejected` unless ``topic`` is a legal RocketMQ topic name."""
    if not is_legal_topic(topic):
        raise MessageRejected(f"the topic {topic!r} is not a legal topic name")


class MessageStore:
    """One broker's commit log and consume queues under ``config.store_dir``."""

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.commit_log = CommitLog(
            config.store_dir / COMMIT_LOG_DIR,
            segment_bytes=config.segment_bytes,
            record_bytes_max=config.record_bytes_max,
        )
        self._cq_root = config.store_dir / CONSUME_QUEUE_DIR
        self._cqs: dict[tuple[str, int], ConsumeQueue] = {}
        self._queue_ids: dict[str, set[int]] = {}
        """Topic -> its queue ids here (the schedule loop asks every 100 ms)."""
        self._deleted_path = config.store_dir / DELETED_TOPICS_FILE
        self._deleted = self._load_deleted()
        # Serialises the flusher thread with close(); writers never take it.
        self._flush_lock = threading.Lock()
        self._closed = False
        self.on_arrival: ArrivalListener | None = None
        """Long polling's hook (set by the broker): told of every message indexed."""
        self.recovery = self._recover()

    # -- recovery ------------------------------------------------------------

    def _recover(self) -> RecoveryReport:
        self._open_existing_queues()

        def redispatch(scanned: ScannedRecord) -> None:
            # Queues already hold what was dispatched before a stop; this fills
            # in whatever a crash left out, in the same single pass as the CRC check.
            message = scanned.result.message
            if message is not None and not self._deleted_before(message):
                self._dispatch(message, scanned.result.size, skip_present=True)

        report = self.commit_log.recover(redispatch)
        for cq in self._cqs.values():
            cq.truncate_dirty_tail(self.commit_log.max_offset)
        return report

    def _open_existing_queues(self) -> None:
        if not self._cq_root.is_dir():
            return
        for topic_dir in self._cq_root.iterdir():
            if not topic_dir.is_dir() or not is_legal_topic(topic_dir.name):
                continue
            for queue_dir in topic_dir.iterdir():
                if queue_dir.is_dir() and queue_dir.name.isdigit():
                    self._cq(topic_dir.name, int(queue_dir.name))

    # -- positions -----------------------------------------------------------

    @property
    def max_offset(self) -> int:
        """The commit log's max physical offset."""
        return self.commit_log.max_offset

    @property
    def min_offset(self) -> int:
        """The commit log's first offset."""
        return self.commit_log.min_offset

    def queue_max_offset(self, topic: str, queue_id: int) -> int:
        """The next queue offset of (topic, queue id); 0 for an unknown queue."""
        cq = self._cqs.get((topic, queue_id))
        return 0 if cq is None else cq.max_offset

    def queue_min_offset(self, topic: str, queue_id: int) -> int:
        """The first queue offset still readable in (topic, queue id); 0 for an unknown queue."""
        cq = self._cqs.get((topic, queue_id))
        return 0 if cq is None else cq.min_offset

    def queues_of(self, topic: str) -> list[int]:
        """The queue ids of ``topic`` that hold (or held) messages here."""
        return sorted(self._queue_ids.get(topic, ()))

    # -- writing -------------------------------------------------------------

    def put_message(self, message: MessageInput, store_timestamp_ms: int) -> PutResult:
        """Append one message to the commit log and its consume queue (the master path)."""
        validate_topic(message.topic)
        if not 0 <= message.queue_id <= QUEUE_ID_MAX:
            raise MessageRejected(f"queue id {message.queue_id} out of range")
        topic = message.topic.encode("utf-8")
        properties = message.properties.encode("utf-8")
        size = message_size(topic, properties, message.body)
        if size > self.config.record_bytes_max:
            raise MessageRejected(f"message of {size} bytes exceeds the store's limit")
        cq = self._cq(message.topic, message.queue_id)
        queue_offset = cq.max_offset

        def encode_at(offset: int) -> bytes:
            return encode_message(
                queue_id=message.queue_id,
                flag=message.flag,
                queue_offset=queue_offset,
                physical_offset=offset,
                sys_flag=message.sys_flag,
                born_timestamp_ms=message.born_timestamp_ms,
                store_timestamp_ms=store_timestamp_ms,
                topic=topic,
                properties=properties,
                body=message.body,
            )

        offset = self.commit_log.append_record(size, encode_at)
        tags = _tags_of(message.properties)
        cq.put(queue_offset, CQEntry(offset, size, tag_hash(tags)))
        if self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            self.flush()
        if self.on_arrival is not None:
            self.on_arrival(message.topic, message.queue_id, cq.max_offset)
        return PutResult(offset, size, queue_offset, store_timestamp_ms)

    def _dispatch(self, message: MessageRecord, size: int, *, skip_present: bool) -> None:
        cq = self._cq(message.topic, message.queue_id)
        if skip_present and message.queue_offset < cq.max_offset:
            return
        cq.put(message.queue_offset, CQEntry(message.physical_offset, size, tag_hash(message.tags)))
        if self.on_arrival is not None:
            self.on_arrival(message.topic, message.queue_id, cq.max_offset)

    def _cq(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self._cqs.get(key)
        if cq is None:
            cq = ConsumeQueue(
                self._cq_root / topic / str(queue_id),
                entries_per_segment=self.config.cq_entries_per_segment,
            )
            self._cqs[key] = cq
            self._queue_ids.setdefault(topic, set()).add(queue_id)
        return cq

    def append_replicated(
        self, offset: int, data: bytes, messages: list[tuple[MessageRecord, int]]
    ) -> None:
        """Commit whole, already-checked records from a master and index them.

        ``messages`` pairs each message record inside ``data`` with its size.
        """
        self.commit_log.append_raw(offset, data)
        for message, size in messages:
            if not self._deleted_before(message):
                self._dispatch(message, size, skip_present=True)
        if self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            self.flush()

    # -- deleting a topic ----------------------------------------------------

    def delete_topic(self, topic: str) -> int:
        """Drop the consume queues of ``topic`` (5.x ``deleteTopics``); the number dropped.

        The commit log keeps the topic's messages until its segments go, so the
        store remembers the offset the topic was deleted at: recovery and
        replication never index the topic's older messages again (a topic
        created again later starts its queues at offset 0, as upstream).
        """
        validate_topic(topic)
        # The tombstone first: a crash before the files are gone must not let
        # recovery index the topic again.
        deleted = {t: o for t, o in self._deleted.items() if o > self.min_offset}
        deleted[topic] = self.max_offset
        self._save_deleted(deleted)
        self._deleted = deleted
        with self._flush_lock:
            doomed = [(topic, queue_id) for queue_id in self._queue_ids.pop(topic, ())]
            for key in doomed:
                self._cqs.pop(key).close()
        shutil.rmtree(self._cq_root / topic, ignore_errors=True)
        return len(doomed)

    def _deleted_before(self, message: MessageRecord) -> bool:
        """True for a message of a topic deleted after the message was stored."""
        offset = self._deleted.get(message.topic)
        return offset is not None and message.physical_offset < offset

    def _load_deleted(self) -> dict[str, int]:
        try:
            raw = json.loads(self._deleted_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", self._deleted_path, exc)
            return {}
        if not isinstance(raw, dict):
            return {}
        return {
            str(topic): offset
            for topic, offset in raw.items()
            if isinstance(offset, int) and not isinstance(offset, bool)
        }

    def _save_deleted(self, deleted: dict[str, int]) -> None:
        """Write the tombstones atomically and durably."""
        temporary = self._deleted_path.with_suffix(".tmp")
        with temporary.open("w", encoding="utf-8") as handle:
            json.dump(deleted, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        temporary.replace(self._deleted_path)

    # -- reading -------------------------------------------------------------

    def read_raw(self, offset: int, max_bytes: int) -> bytes:
        """Raw commit-log bytes from ``offset`` within one segment (the HA transfer read)."""
        return self.commit_log.read(offset, max_bytes)

    def is_record_boundary(self, offset: int) -> bool:
        """True when a record (or the log's end, or a segment start) begins at ``offset``."""
        if offset == self.max_offset or offset % self.config.segment_bytes == 0:
            return self.min_offset <= offset <= self.max_offset
        head = self.commit_log.read(offset, FILLER_MIN_BYTES)
        try:
            result = scan_record(
                head,
                0,
                physical_offset=offset,
                segment_remaining=self.config.segment_bytes - offset % self.config.segment_bytes,
                record_bytes_max=self.config.record_bytes_max,
            )
        except RecordError:
            return False
        return result.kind in (Scan.INCOMPLETE, Scan.FILLER)

    def get_message(self, topic: str, queue_id: int, queue_offset: int) -> MessageRecord | None:
        """The message at ``queue_offset`` of (topic, queue id), or None."""
        cq = self._cqs.get((topic, queue_id))
        entry = None if cq is None else cq.get(queue_offset)
        return self._read_entry(entry)

    def _read_entry(self, entry: CQEntry | None) -> MessageRecord | None:
        """The message a consume-queue entry points at (None for an empty entry);
        :class:`RecordError` when the bytes there are not that message."""
        if entry is None or entry.size <= 0:
            return None
        return self._read_record(entry.commit_log_offset, entry.size)

    def _read_record(self, physical_offset: int, size: int) -> MessageRecord | None:
        raw = self.commit_log.read(physical_offset, size)
        result = scan_record(
            raw,
            0,
            physical_offset=physical_offset,
            segment_remaining=self.config.segment_bytes
            - physical_offset % self.config.segment_bytes,
            record_bytes_max=self.config.record_bytes_max,
        )
        return result.message

    def message_at(self, physical_offset: int) -> MessageRecord | None:
        """The message stored at commit-log ``physical_offset`` (CONSUMER_SEND_MSG_BACK)."""
        if not self.min_offset <= physical_offset < self.max_offset:
            return None
        head = self.commit_log.read(physical_offset, FILLER_MIN_BYTES)
        if len(head) < FILLER_MIN_BYTES:
            return None
        size = int.from_bytes(head[:4], "big", signed=True)
        if not 0 < size <= self.config.record_bytes_max:
            return None
        try:
            return self._read_record(physical_offset, size)
        except RecordError:
            return None

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_count: int,
        max_bytes: int,
        accept: TagFilter | None = None,
        memory_bytes: int | None = None,
    ) -> GetResult:
        """Read up to ``max_count`` matching messages from ``offset`` (``getMessage``).

        ``accept`` filters on the consume queue's tag hash before the commit log is
        read (None: every message). ``memory_bytes`` is how much of the commit
        log's tail counts as in memory for ``suggest_slave``.
        """
        cq = self._cqs.get((topic, queue_id))
        if cq is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        low, high = cq.min_offset, cq.max_offset
        if high == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, low, high)
        if offset < low:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, low, low, high)
        if offset == high:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, low, high)
        if offset > high:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, low if low == 0 else high, low, high)
        messages: list[MessageRecord] = []
        taken_bytes = 0
        position = offset
        last_physical = 0
        end = min(high, offset + max(FILTER_SCAN_ENTRIES_MAX, max_count))
        while position < end and len(messages) < max_count:
            entry = cq.get(position)
            if entry is None or entry.size <= 0:
                position += 1
                continue
            if messages and taken_bytes + entry.size > max_bytes:
                break
            last_physical = entry.commit_log_offset
            if accept is None or accept(entry.tag_hash):
                message = self._read_entry(entry)
                if message is not None:
                    messages.append(message)
                    taken_bytes += entry.size
            position += 1
        suggest = False
        if memory_bytes is not None and last_physical:
            suggest = self.max_offset - last_physical > memory_bytes
        if messages:
            return GetResult(GetStatus.FOUND, position, low, high, messages, suggest)
        status = GetStatus.NO_MATCHED_MESSAGE if position > offset else GetStatus.OFFSET_FOUND_NULL
        return GetResult(status, position, low, high, [], suggest)

    def store_time_at(self, topic: str, queue_id: int, queue_offset: int) -> int | None:
        """The store timestamp of the message at ``queue_offset``, or None."""
        message = self.get_message(topic, queue_id, queue_offset)
        return None if message is None else message.store_timestamp_ms

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset stored at or after ``timestamp_ms`` (``getOffsetInQueueByTime``).

        The max offset when every message is older; the min offset when all are newer.
        """
        low, high = self.queue_min_offset(topic, queue_id), self.queue_max_offset(topic, queue_id)
        first, last = low, high
        while first < last:
            middle = (first + last) // 2
            stored = self.store_time_at(topic, queue_id, middle)
            if stored is None or stored < timestamp_ms:
                first = middle + 1
            else:
                last = middle
        return first

    # -- durability ----------------------------------------------------------

    def flush(self) -> None:
        """fsync the commit log and the consume queues (safe from a flusher thread)."""
        with self._flush_lock:
            if self._closed:
                return
            self.commit_log.flush()
            for cq in list(self._cqs.values()):
                cq.flush()

    def close(self) -> None:
        """Flush and close every file (waits for a flush running on another thread)."""
        with self._flush_lock:
            self._closed = True
            for cq in self._cqs.values():
                cq.close()
            self._cqs.clear()
            self._queue_ids.clear()
            self.commit_log.close()


def _tags_of(properties: str) -> str | None:
    return parse_properties(properties).get(TAGS_PROPERTY)


class ReplicaAppender:
    """Turns a master's raw transfer batches into checked appends (the slave side).

    Batches may cut records anywhere; the appender keeps the unfinished tail
    in a bounded buffer and commits only whole records that pass the CRC and
    offset checks, so whatever a peer sends, the log only ever gains bytes that
    are valid records at their own offsets. Any violation raises
    :class:`ReplicaError`; the caller then drops the connection and
    :meth:`reset` forgets the partial tail.
    """

    def __init__(self, store: MessageStore, *, batch_bytes_max: int) -> None:
        self.store = store
        self.pending_bytes_max = store.config.record_bytes_max + FILLER_MIN_BYTES + batch_bytes_max
        self._pending = bytearray()
        self._pending_offset = store.max_offset

    @property
    def expected_offset(self) -> int:
        """The offset the next transferred byte must have."""
        return self._pending_offset + len(self._pending)

    def is_empty_log(self) -> bool:
        """True while nothing is committed or pending (any aligned start is accepted)."""
        return self.store.max_offset == 0 and not self._pending

    def check_offset(self, offset: int) -> None:
        """Raise unless ``offset`` continues this log (RocketMQ's slave offset check)."""
        if self.is_empty_log():
            if offset < 0 or offset % self.store.config.segment_bytes:
                raise ReplicaError(f"master starts an empty log at unaligned offset {offset}")
            return
        if offset != self.expected_offset:
            raise ReplicaError(f"master sent offset {offset}, slave is at {self.expected_offset}")

    def feed(self, offset: int, data: bytes) -> int:
        """Accept one transfer batch; returns the committed max offset afterwards."""
        self.check_offset(offset)
        if self.is_empty_log():
            self._pending_offset = offset
        if len(self._pending) + len(data) > self.pending_bytes_max:
            raise ReplicaError("replication tail exceeds its bound")
        self._pending += data
        self._commit_whole_records()
        return self.store.max_offset

    def _commit_whole_records(self) -> None:
        segment_bytes = self.store.config.segment_bytes
        position = 0
        messages: list[tuple[MessageRecord, int]] = []
        while True:
            offset = self._pending_offset + position
            try:
                result = scan_record(
                    self._pending,
                    position,
                    physical_offset=offset,
                    segment_remaining=segment_bytes - offset % segment_bytes,
                    record_bytes_max=self.store.config.record_bytes_max,
                )
            except RecordError as exc:
                raise ReplicaError(str(exc)) from exc
            if result.kind in (Scan.END, Scan.INCOMPLETE):
                if result.kind is Scan.END and position < len(self._pending):
                    raise ReplicaError(f"zero bytes where a record should start at {offset}")
                break
            if result.message is not None:
                messages.append((result.message, result.size))
            position += result.size
        if position:
            committed = bytes(self._pending[:position])
            self.store.append_replicated(self._pending_offset, committed, messages)
            del self._pending[:position]
            self._pending_offset += position

    def reset(self) -> None:
        """Forget the partial tail (after a disconnect); resume from the committed end."""
        self._pending.clear()
        self._pending_offset = self.store.max_offset
