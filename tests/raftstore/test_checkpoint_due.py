"""Checkpoints thin out as the table grows, and nodes that disagree still share some."""

from __future__ import annotations

from raftstore.raft.checkpoints import (
    CHECKPOINT_EVERY_ENTRIES,
    CHECKPOINT_ROWS_PER_STEP,
    checkpoint_due,
)

EVERY = CHECKPOINT_EVERY_ENTRIES
STEP = CHECKPOINT_ROWS_PER_STEP


def _due(rows: int, entries: int) -> list[int]:
    return [i for i in range(1, entries + 1) if checkpoint_due(i, lambda: rows)]


def test_a_small_table_is_digested_every_interval() -> None:
    assert _due(0, 4 * EVERY) == [EVERY, 2 * EVERY, 3 * EVERY, 4 * EVERY]
    assert _due(STEP, 2 * EVERY) == [EVERY, 2 * EVERY]


def test_each_doubling_past_the_step_halves_the_checkpoints() -> None:
    assert _due(STEP + 1, 4 * EVERY) == [2 * EVERY, 4 * EVERY]
    assert _due(4 * STEP, 8 * EVERY) == [4 * EVERY, 8 * EVERY]
    # 100k queue entries (20 brokers sharing 5,000 topics): one every 16 intervals.
    assert _due(100_000, 32 * EVERY) == [16 * EVERY, 32 * EVERY]


def test_nodes_disagreeing_on_the_topic_count_still_share_checkpoints() -> None:
    """A diverged node must still be comparable: the larger table's checkpoints are
    a subset of the smaller one's, so there are common indexes to compare."""
    entries = 64 * EVERY
    for small, large in [(0, STEP + 1), (STEP - 1, 3 * STEP), (100, 140_000), (9_000, 20_000)]:
        sparse, dense = set(_due(large, entries)), set(_due(small, entries))
        assert sparse and sparse <= dense
