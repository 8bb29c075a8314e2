"""Which writes of a register a read could have returned: the one rule, for the harness
and the analysis.

A write is *definitely superseded* before a read when another write was invoked after it
completed and itself completed before the read was invoked (a pending write, one that
failed or timed out, supersedes nothing: it may take effect any time after its call, or
never). A write *could be in effect* during a read when it was invoked by the read's
completion and is not definitely superseded before the read's invocation; those writes
of the read's value are its *possible sources*. The register starts absent: an implicit
write of ``""`` before everything. Intervals that touch count as concurrent, as in the
checker (``spark_jobs.checker``).

Two users: the prober (``experiments.registers.RegisterLog.candidates``) asks whether a
value a node answers is explained by a recorded write before it infers one, and the
anomaly classes (``spark_jobs.anomalies``) find each read's possible sources.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate

ABSENT = ""
"""The register's value before any write: the topic does not exist."""
TIME_MIN_US = -(2**62)
TIME_MAX_US = 2**62
"""Before every operation (the implicit initial write) / never (a pending write's end)."""


@dataclass(frozen=True, slots=True)
class TimedWrite:
    """A write of one topic's route: the value it leaves, its interval in microseconds;
    a pending write (error, timeout) ends at :data:`TIME_MAX_US`."""

    value: str
    invoke_us: int
    complete_us: int


@dataclass(frozen=True, slots=True)
class Sources:
    """A read's possible source writes: the earliest invocation and latest completion
    among them."""

    oldest_invoke_us: int
    newest_complete_us: int


class _ValueWrites:
    """The writes of one value, indexed to answer "possible sources of a read" in log time."""

    def __init__(self, writes: Sequence[TimedWrite], superseded_at: list[int]) -> None:
        paired = zip(writes, superseded_at, strict=True)
        by_complete = sorted(paired, key=lambda p: p[0].complete_us)
        # Superseding is monotone in the completion (a later completion leaves fewer writes
        # invoked after it), so the writes superseded before a read are a prefix here.
        self._superseded = [at for _, at in by_complete]
        invokes = [w.invoke_us for w, _ in by_complete]
        self._oldest_after = list(accumulate(reversed(invokes), min))[::-1]
        by_invoke = sorted(writes, key=lambda w: w.invoke_us)
        self.invokes = [w.invoke_us for w in by_invoke]
        self._newest_before = list(accumulate((w.complete_us for w in by_invoke), max))

    def sources(self, invoke_us: int, complete_us: int) -> Sources | None:
        """The possible sources among these writes of a read in [``invoke_us``,
        ``complete_us``], None when there are none."""
        first = bisect_left(self._superseded, invoke_us)
        if first == len(self._superseded) or self._oldest_after[first] > complete_us:
            return None
        # The newest write invoked by the read's end is never superseded when any is not.
        newest = self._newest_before[bisect_right(self.invokes, complete_us) - 1]
        return Sources(self._oldest_after[first], newest)


class TopicWrites:
    """The writes of one topic, with the implicit initial write of the absent route."""

    def __init__(self, writes: Iterable[TimedWrite]) -> None:
        every = [TimedWrite(ABSENT, TIME_MIN_US, TIME_MIN_US), *writes]
        by_invoke = sorted(every, key=lambda w: w.invoke_us)
        self._invokes = [w.invoke_us for w in by_invoke]
        ends = [w.complete_us for w in by_invoke] + [TIME_MAX_US]
        self._first_end_after = list(accumulate(reversed(ends), min))[::-1]
        grouped: dict[str, list[TimedWrite]] = {}
        for write in every:
            grouped.setdefault(write.value, []).append(write)
        self._by_value = {
            value: _ValueWrites(group, [self.superseded_at(w) for w in group])
            for value, group in grouped.items()
        }

    def superseded_at(self, write: TimedWrite) -> int:
        """The time from which ``write`` is definitely superseded: the earliest completion
        of a write invoked after it completed (:data:`TIME_MAX_US`: never)."""
        return self._first_end_after[bisect_right(self._invokes, write.complete_us)]

    def sources(self, value: str, invoke_us: int, complete_us: int) -> Sources | None:
        """The possible sources of a read of ``value`` in [``invoke_us``, ``complete_us``]:
        writes of that value that could be in effect."""
        found = self._by_value.get(value)
        return None if found is None else found.sources(invoke_us, complete_us)

    def possible_values(self, invoke_us: int, complete_us: int) -> set[str]:
        """Every value a read in [``invoke_us``, ``complete_us``] may return."""
        return {
            value
            for value, writes in self._by_value.items()
            if writes.sources(invoke_us, complete_us) is not None
        }

    def written_by(self, value: str, time_us: int) -> bool:
        """Whether some write of ``value`` was invoked by ``time_us``."""
        found = self._by_value.get(value)
        return found is not None and found.invokes[0] <= time_us
