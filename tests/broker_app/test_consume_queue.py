"""Consume queues: fixed 20-byte entries per (topic, queue id), segmented."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_app.store.consume_queue import CQ_ENTRY_BYTES, ConsumeQueue, ConsumeQueueError, CQEntry


def test_each_entry_takes_twenty_bytes_in_segment_files(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path, entries_per_segment=4)
    for index in range(10):
        cq.put(index, CQEntry(index * 100, 100, index))
    cq.close()
    files = sorted(tmp_path.iterdir())
    assert [f.name for f in files] == [f"{n * 4 * CQ_ENTRY_BYTES:020d}" for n in range(3)]
    assert [f.stat().st_size for f in files] == [80, 80, 40]


def test_it_reads_entries_back_after_a_reopen(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path, entries_per_segment=4)
    for index in range(6):
        cq.put(index, CQEntry(index * 50, 50, 7))
    cq.close()
    reopened = ConsumeQueue(tmp_path, entries_per_segment=4)
    assert reopened.max_offset == 6
    assert reopened.get(5) == CQEntry(250, 50, 7)
    assert reopened.get(6) is None


def test_it_refuses_an_entry_out_of_order(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path, entries_per_segment=4)
    cq.put(0, CQEntry(0, 10, 0))
    with pytest.raises(ConsumeQueueError):
        cq.put(0, CQEntry(10, 10, 0))
    with pytest.raises(ConsumeQueueError):
        cq.put(5, CQEntry(10, 10, 0))


def test_a_queue_may_start_above_zero_like_a_new_slave(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path, entries_per_segment=4)
    cq.put(9, CQEntry(4096, 10, 0))
    cq.put(10, CQEntry(4106, 10, 0))
    cq.close()
    reopened = ConsumeQueue(tmp_path, entries_per_segment=4)
    assert (reopened.min_offset, reopened.max_offset) == (9, 11)


def test_it_drops_entries_that_point_past_the_commit_log(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path, entries_per_segment=4)
    for index in range(9):
        cq.put(index, CQEntry(index * 100, 100, 0))
    cq.truncate_dirty_tail(commit_log_max_offset=450)
    assert cq.max_offset == 4
    assert cq.last_entry_end() == 400
    assert f"{160:020d}" not in {p.name for p in tmp_path.iterdir()}
    cq.close()
    assert ConsumeQueue(tmp_path, entries_per_segment=4).max_offset == 4
