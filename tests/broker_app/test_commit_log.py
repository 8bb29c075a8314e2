"""The segmented commit log: appends, segment files, reads and crash recovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_app.store.commitlog import CommitLog, CommitLogError
from broker_app.store.message_store import MessageInput, MessageStore, StoreConfig
from broker_app.store.record import Scan, scan_record

SEGMENT_BYTES = 4096
RECORD_MAX = 1024


def make_store(root: Path) -> MessageStore:
    return MessageStore(
        StoreConfig(
            root,
            segment_bytes=SEGMENT_BYTES,
            record_bytes_max=RECORD_MAX,
            cq_entries_per_segment=16,
        )
    )


def fill(store: MessageStore, count: int, body_bytes: int = 100) -> list[int]:
    return [
        store.put_message(
            MessageInput(
                "TopicA", i % 2, bytes([i % 251]) * body_bytes, properties="TAGS\x01tag\x02"
            ),
            1_000 + i,
        ).physical_offset
        for i in range(count)
    ]


def test_it_names_segments_by_their_start_offset_in_20_digits(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    fill(store, 100)
    names = [p.name for p in store.commit_log.segment_paths()]
    assert names[:3] == ["00000000000000000000", "00000000000000004096", "00000000000000008192"]
    assert all(len(name) == 20 for name in names)
    for path in store.commit_log.segment_paths()[:-1]:
        assert path.stat().st_size == SEGMENT_BYTES


def test_it_reads_back_every_message_through_its_consume_queue(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    offsets = fill(store, 60)
    message = store.get_message("TopicA", 1, 10)
    assert message is not None
    assert message.physical_offset == offsets[21]
    assert message.body == bytes([21]) * 100
    assert message.tags == "tag"
    assert store.queue_max_offset("TopicA", 0) == 30


def test_a_record_never_spans_two_segments(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    for offset in fill(store, 80, body_bytes=700):
        assert offset // SEGMENT_BYTES == (offset + 700) // SEGMENT_BYTES


def test_recovery_truncates_a_garbage_tail(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    fill(store, 50)
    end = store.max_offset
    store.close()
    last = sorted((tmp_path / "commitlog").iterdir())[-1]
    with last.open("ab") as handle:
        handle.write(b"\x00\x00\x00\x80RMQ1" + b"\xab" * 300)
    reopened = make_store(tmp_path)
    assert reopened.max_offset == end
    assert reopened.recovery.truncated_bytes == 308
    assert reopened.put_message(MessageInput("TopicA", 0, b"next"), 5).physical_offset == end


def test_recovery_truncates_a_torn_last_record_and_its_queue_entry(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    offsets = fill(store, 21)
    store.close()
    last = sorted((tmp_path / "commitlog").iterdir())[-1]
    size = last.stat().st_size
    with last.open("r+b") as handle:
        handle.truncate(size - 10)
    reopened = make_store(tmp_path)
    assert reopened.max_offset == offsets[-1]
    assert reopened.queue_max_offset("TopicA", 0) == 10
    assert reopened.get_message("TopicA", 0, 10) is None


def test_recovery_stops_at_a_record_with_a_bad_crc(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    offsets = fill(store, 10)
    store.close()
    first = sorted((tmp_path / "commitlog").iterdir())[0]
    data = bytearray(first.read_bytes())
    data[offsets[5] + 80] ^= 0xFF
    first.write_bytes(bytes(data))
    reopened = make_store(tmp_path)
    assert reopened.max_offset == offsets[5]


def test_recovery_rebuilds_lost_consume_queues_from_the_log(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    fill(store, 40)
    store.close()
    for path in (tmp_path / "consumequeue" / "TopicA" / "1").iterdir():
        path.unlink()
    reopened = make_store(tmp_path)
    assert reopened.queue_max_offset("TopicA", 1) == 20
    message = reopened.get_message("TopicA", 1, 19)
    assert message is not None and message.body == bytes([39]) * 100


def test_recovery_removes_a_segment_that_does_not_follow_the_last_one(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    fill(store, 5)
    end = store.max_offset
    store.close()
    (tmp_path / "commitlog" / f"{SEGMENT_BYTES * 7:020d}").write_bytes(b"junk")
    reopened = make_store(tmp_path)
    assert reopened.max_offset == end
    assert len(reopened.commit_log.segment_paths()) == 1


def test_raw_appends_must_continue_the_log_exactly(tmp_path: Path) -> None:
    log = CommitLog(tmp_path, segment_bytes=SEGMENT_BYTES, record_bytes_max=RECORD_MAX)
    with pytest.raises(CommitLogError):
        log.append_raw(100, b"x")
    log.append_raw(SEGMENT_BYTES, b"")
    assert log.max_offset == 0


def test_a_scan_reports_fillers_at_segment_ends(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    fill(store, 60)
    first = store.commit_log.segment_paths()[0].read_bytes()
    kinds = []
    position = 0
    while position < len(first):
        result = scan_record(
            first,
            position,
            physical_offset=position,
            segment_remaining=SEGMENT_BYTES - position,
            record_bytes_max=RECORD_MAX,
        )
        kinds.append(result.kind)
        position += result.size
    assert kinds[-1] is Scan.FILLER
    assert set(kinds[:-1]) == {Scan.MESSAGE}
