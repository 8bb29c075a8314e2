"""Faults of several kinds, injected into one topic's register history (pure Python).

Each mutation changes or adds reads of a copy of the history, never its writes, so that
what the history's writes say stays what was recorded:

- ``stale_read_1ms``, ``stale_read_100ms``, ``stale_read_1s``: a read is added, called
  1 ms, 100 ms or 1 s after the ack of an acknowledged write, returning the value that
  write replaced (that of the acknowledged write completed just before it). It lasts as
  long as one of the history's reads (1 ms when there is none).
- ``lost_write``: an acknowledged write no read sees. The reads that saw it (reads of its
  value called from its call until the call of the next acknowledged write) return the
  value it replaced instead.
- ``reordered_writes``: two acknowledged writes one after the other (the first answered
  before the second was called), of different values, whose reads see them in the other
  order: the reads of the first (called from its call until the second's call) return
  the second's value, and those of the second (until the next acknowledged write's call)
  the first's.
- ``never_written``: one read returns a value no write made.

**When a mutation counts as injected.** Only when the history's writes contradict it,
decided by :func:`read_contradicted` without the checker (so the power is measured against
an independent rule, and a miss is the checker's): a mutation is *injected* when at least
one read it changed or added is contradicted. Otherwise it is *explained* and not counted
at all (neither injected nor missed): for instance a stale read of a route that a write
which timed out may have written again, or one that the next acknowledged write had
already restored by the lag. The rule looks at writes only: every acknowledged write took
effect inside its interval, a pending (timed-out) write took effect at any time after its
call or never. It ignores the other reads, so it is sound (an injected mutation is never
linearizable, whatever the reads) but conservative: a fault that only the other reads
expose (say, a read that pins a write the prober inferred) is not counted as injected.
A correct checker therefore catches every injected mutation, and the power measured is
what a budget or a checker bug loses (``unknown``, missed), plus, through the injected
counts per kind, how many faults of each kind the history's writes can show at all.

Everything is deterministic given the ``random.Random`` passed in: the same seed gives
the same mutations.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spark_jobs.register_ops import ABSENT_VALUE, RegisterOp

STALE_READ_LAGS_US = {
    "stale_read_1ms": 1_000,
    "stale_read_100ms": 100_000,
    "stale_read_1s": 1_000_000,
}
"""Each stale-read kind and how long after the write's ack the stale read is called
(strictly after it: operations that touch count as concurrent)."""
LOST_WRITE = "lost_write"
REORDERED_WRITES = "reordered_writes"
NEVER_WRITTEN = "never_written"
KINDS = (*STALE_READ_LAGS_US, LOST_WRITE, REORDERED_WRITES, NEVER_WRITTEN)
"""Every kind of mutation, in the order the power job injects them."""
NEVER_WRITTEN_VALUE = "never-written"
"""The value a ``never_written`` read returns (made unique against the history's values)."""
DEFAULT_READ_US = 1_000
"""How long an added stale read lasts when the history has no read to copy."""
FOREVER = float("inf")


@dataclass(frozen=True, slots=True)
class Mutation:
    """One mutated copy of a history."""

    kind: str
    target: int
    """Op id the mutation is built on: the write (stale read, lost write), the first of the
    two writes (reordered), or the read (never written)."""
    changed: tuple[int, ...]
    """Op ids of the reads changed or added."""
    history: tuple[RegisterOp, ...]
    """The mutated history, sorted by (call, op id)."""
    injected: bool
    """The history's writes contradict at least one changed read (:func:`read_contradicted`)."""


def acknowledged_writes(ops: Sequence[RegisterOp]) -> list[RegisterOp]:
    """The writes that answered, by (completion, op id)."""
    return sorted(
        (op for op in ops if op.is_write and op.complete_us is not None),
        key=lambda op: (op.complete_us or 0, op.op_id),
    )


def replaced_values(ops: Sequence[RegisterOp]) -> list[tuple[RegisterOp, str]]:
    """Every acknowledged write after the first, with the value it replaced: that of the
    write acknowledged just before it, when it differs from its own."""
    return [
        (write, older.value)
        for older, write in itertools.pairwise(acknowledged_writes(ops))
        if older.value != write.value
    ]


class WriteRule:
    """:func:`read_contradicted` for many reads of one history: the writes indexed once."""

    def __init__(self, ops: Sequence[RegisterOp], initial: str = ABSENT_VALUE) -> None:
        self.initial = initial
        self.by_value: dict[str, list[RegisterOp]] = {}
        for op in ops:
            if op.is_write:
                self.by_value.setdefault(op.value, []).append(op)
        acked = sorted(
            (op for op in ops if op.is_write and op.complete_us is not None),
            key=lambda op: op.invoke_us,
        )
        self._invokes = [op.invoke_us for op in acked]
        # For each suffix acked[i:], its earliest completion and the earliest completion
        # among its writes of another value than that one: the earliest of any value but
        # v is then one of the two.
        none: tuple[float, str | None] = (FOREVER, None)
        self._best: list[tuple[tuple[float, str | None], tuple[float, str | None]]] = [
            (none, none)
        ] * (len(acked) + 1)
        for i in range(len(acked) - 1, -1, -1):
            first, second = self._best[i + 1]
            done = (float(acked[i].complete_us or 0), acked[i].value)
            if done[0] < first[0]:
                first, second = done, (first if first[1] != done[1] else second)
            elif done[1] != first[1] and done[0] < second[0]:
                second = done
            self._best[i] = (first, second)

    def _earliest_done_after(self, after: float, value: str) -> float:
        """The earliest completion of an acknowledged write of another value than
        ``value`` called strictly after ``after`` (``inf`` when none)."""
        first, second = self._best[bisect.bisect_right(self._invokes, after)]
        return first[0] if first[1] != value else second[0]

    def contradicted(self, read: RegisterOp) -> bool:
        """Whether no write could be the one ``read`` returned, whatever the other reads.

        A write X of the read's value (or the initial value, an implicit write before
        everything) could be it unless X was called after the read answered, or some
        acknowledged write Y of another value must come between them: X answered before Y
        was called and Y answered before the read was called (touching intervals are
        concurrent, as in the checker). A pending X never answered, so only its call
        counts. When every candidate is ruled out, no order of the operations respecting
        real time lets the read return its value: the history is not linearizable."""
        end = FOREVER if read.complete_us is None else read.complete_us
        start = read.invoke_us
        if read.value == self.initial and self._earliest_done_after(-FOREVER, read.value) >= start:
            return False
        for write in self.by_value.get(read.value, []):
            if write.invoke_us > end:
                continue
            if write.complete_us is None:
                return False
            if self._earliest_done_after(write.complete_us, read.value) >= start:
                return False
        return True


def read_contradicted(
    read: RegisterOp, ops: Sequence[RegisterOp], initial: str = ABSENT_VALUE
) -> bool:
    """Whether the writes of ``ops`` rule out every write ``read`` could have returned
    (:meth:`WriteRule.contradicted`)."""
    return WriteRule(ops, initial).contradicted(read)


def _mutation(
    kind: str,
    target: int,
    ops: Sequence[RegisterOp],
    replacements: dict[int, RegisterOp],
    added: Sequence[RegisterOp],
    initial: str,
) -> Mutation:
    history = [replacements.get(op.op_id, op) for op in ops] + list(added)
    history.sort(key=lambda op: (op.invoke_us, op.op_id))
    changed = [*replacements.values(), *added]
    rule = WriteRule(history, initial)
    return Mutation(
        kind,
        target,
        tuple(op.op_id for op in changed),
        tuple(history),
        any(rule.contradicted(op) for op in changed),
    )


def _inside(op: RegisterOp, end_us: float) -> bool:
    return op.complete_us is not None and op.complete_us <= end_us


def _with_value(read: RegisterOp, value: str) -> RegisterOp:
    return RegisterOp(read.op_id, False, value, read.invoke_us, read.complete_us)


def _reads_between(
    reads: Sequence[RegisterOp], value: str, start: float, stop: float
) -> list[RegisterOp]:
    """Reads of ``value`` called in [start, stop)."""
    return [r for r in reads if r.value == value and start <= r.invoke_us < stop]


def _stale_reads(
    ops: Sequence[RegisterOp],
    kind: str,
    count: int,
    rng: random.Random,
    initial: str,
    end_us: float,
) -> list[Mutation]:
    lag = STALE_READ_LAGS_US[kind]
    durations = [
        (r.complete_us or r.invoke_us) - r.invoke_us
        for r in ops
        if not r.is_write and r.complete_us is not None
    ] or [DEFAULT_READ_US]
    new_id = max((op.op_id for op in ops), default=0) + 1
    targets = [
        (write, older)
        for write, older in replaced_values(ops)
        if (write.complete_us or 0) + lag + max(durations) <= end_us
    ]
    result = []
    for write, older in rng.sample(targets, min(count, len(targets))):
        assert write.complete_us is not None
        invoke = write.complete_us + lag
        stale = RegisterOp(new_id, False, older, invoke, invoke + max(0, rng.choice(durations)))
        result.append(_mutation(kind, write.op_id, ops, {}, [stale], initial))
    return result


def _spans(
    ops: Sequence[RegisterOp], end_us: float
) -> list[tuple[RegisterOp, str, list[RegisterOp], float]]:
    """Per acknowledged write that replaced another value: (write, value replaced, its
    reads, the call of the next acknowledged write), reads inside ``end_us`` only."""
    done = acknowledged_writes(ops)
    reads = [op for op in ops if not op.is_write and _inside(op, end_us)]
    spans = []
    for i in range(1, len(done)):
        write, older = done[i], done[i - 1].value
        if older == write.value:
            continue
        stop = done[i + 1].invoke_us if i + 1 < len(done) else FOREVER
        spans.append(
            (write, older, _reads_between(reads, write.value, write.invoke_us, stop), stop)
        )
    return spans


def _lost_writes(
    ops: Sequence[RegisterOp],
    kind: str,
    count: int,
    rng: random.Random,
    initial: str,
    end_us: float,
) -> list[Mutation]:
    targets = [(w, older, seen) for w, older, seen, _ in _spans(ops, end_us) if seen]
    result = []
    for write, older, seen in rng.sample(targets, min(count, len(targets))):
        replacements = {r.op_id: _with_value(r, older) for r in seen}
        result.append(_mutation(kind, write.op_id, ops, replacements, [], initial))
    return result


def _reordered_writes(
    ops: Sequence[RegisterOp],
    kind: str,
    count: int,
    rng: random.Random,
    initial: str,
    end_us: float,
) -> list[Mutation]:
    spans = _spans(ops, end_us)
    targets = []
    for (first, _, first_reads, _), (second, _, second_reads, _) in itertools.pairwise(spans):
        sequential = first.complete_us is not None and first.complete_us < second.invoke_us
        if sequential and first.value != second.value and first_reads and second_reads:
            # The first's reads stop at the second's call (its span reaches further when
            # an acknowledged write of its own value lies between the two).
            early = [r for r in first_reads if r.invoke_us < second.invoke_us]
            if early:
                targets.append((first, second, early, second_reads))
    result = []
    for first, second, early, late in rng.sample(targets, min(count, len(targets))):
        replacements = {r.op_id: _with_value(r, second.value) for r in early}
        replacements |= {r.op_id: _with_value(r, first.value) for r in late}
        result.append(_mutation(kind, first.op_id, ops, replacements, [], initial))
    return result


def _never_written(
    ops: Sequence[RegisterOp],
    kind: str,
    count: int,
    rng: random.Random,
    initial: str,
    end_us: float,
) -> list[Mutation]:
    values = {op.value for op in ops} | {initial}
    value = NEVER_WRITTEN_VALUE
    while value in values:
        value += "'"
    reads = [op for op in ops if not op.is_write and _inside(op, end_us)]
    return [
        _mutation(kind, read.op_id, ops, {read.op_id: _with_value(read, value)}, [], initial)
        for read in rng.sample(reads, min(count, len(reads)))
    ]


_MAKERS: dict[
    str,
    Callable[[Sequence[RegisterOp], str, int, random.Random, str, float], list[Mutation]],
] = {
    **dict.fromkeys(STALE_READ_LAGS_US, _stale_reads),
    LOST_WRITE: _lost_writes,
    REORDERED_WRITES: _reordered_writes,
    NEVER_WRITTEN: _never_written,
}


def mutate(
    ops: Sequence[RegisterOp],
    kind: str,
    count: int,
    rng: random.Random,
    initial: str = ABSENT_VALUE,
    end_us: float = FOREVER,
) -> list[Mutation]:
    """Up to ``count`` mutations of ``kind``, each on its own copy of ``ops``, built on
    distinct targets drawn with ``rng`` (fewer when the history has fewer). Only reads
    that answer by ``end_us`` are changed, and added reads answer by it too (the end of a
    prefix the mutation must stay inside). Each says whether it counts as injected."""
    if kind not in _MAKERS:
        raise ValueError(f"unknown mutation kind {kind!r}; one of {', '.join(KINDS)}")
    if count <= 0:
        return []
    return _MAKERS[kind](ops, kind, count, rng, initial, end_us)
