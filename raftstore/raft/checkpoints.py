"""Digest checkpoints: which applied states are digested, the bounded record of them,
and the comparison across nodes that finds a divergence while the cluster runs.

A checkpoint is the route table's digest after a log index; every node digests the
same indexes (:func:`checkpoint_due` is deterministic), so two nodes whose digests
differ at one index have applied different states.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping

CHECKPOINT_EVERY_ENTRIES = 1024
"""A checkpoint digests the whole table on the apply thread, under the apply lock, so
it must stay rare (see docs/BENCHMARKS.md, "registration storm"). This is the interval
for tables of up to :data:`CHECKPOINT_ROWS_PER_STEP` queue entries; see
:func:`checkpoint_due`."""
CHECKPOINT_ROWS_PER_STEP = 8192
"""Each time the table doubles past this many queue entries (a topic on a broker),
checkpoints come half as often: a digest's cost grows with the table."""
CHECKPOINTS_KEPT = 256


def checkpoint_due(index: int, rows: Callable[[], int]) -> bool:
    """Whether the state after log index ``index``, holding ``rows()`` queue entries
    (counted only at a multiple of :data:`CHECKPOINT_EVERY_ENTRIES`), is digested as
    a checkpoint. Deterministic (the state is the same on every node at
    the same index), and the intervals are powers of two times
    :data:`CHECKPOINT_EVERY_ENTRIES`, so two nodes that disagree on the table's size
    still share every checkpoint of the longer interval."""
    interval = CHECKPOINT_EVERY_ENTRIES
    if index % interval:
        return False
    count = rows()
    while count > CHECKPOINT_ROWS_PER_STEP * (interval // CHECKPOINT_EVERY_ENTRIES):
        interval *= 2
    return index % interval == 0


class Checkpoints:
    """The last :data:`CHECKPOINTS_KEPT` checkpoints of one node, by log index.
    Not locked: its owner holds the apply lock around every call."""

    def __init__(self) -> None:
        self._digests: OrderedDict[int, str] = OrderedDict()

    def record(self, index: int, digest: str) -> None:
        """Keep ``digest`` as the state after ``index``; forget the oldest past the bound."""
        self._digests[index] = digest
        while len(self._digests) > CHECKPOINTS_KEPT:
            self._digests.popitem(last=False)

    def copy(self) -> dict[int, str]:
        """The kept checkpoints, oldest first."""
        return dict(self._digests)


def find_divergence(checkpoints: Mapping[str, Mapping[int, str]]) -> list[str]:
    """Every log index at which two nodes' digests differ, as readable lines."""
    by_index: dict[int, dict[str, str]] = {}
    for node, points in checkpoints.items():
        for index, digest in points.items():
            by_index.setdefault(index, {})[node] = digest
    return [
        f"index {index}: {sorted(digests.items())}"
        for index, digests in sorted(by_index.items())
        if len(set(digests.values())) > 1
    ]
