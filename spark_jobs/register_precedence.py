"""A second, deliberately plain decision of unique-value register histories: the
precedence graph of value blocks, ordered topologically. Used only as a cross-check of
``spark_jobs.register_zones`` (the tests and ``bench/checker.py``), never for a verdict
of the analysis.

It shares no code with the zone checker but the operation and result types, and reaches
the answer another way (Gibbons & Korach, "Testing shared memories", 1997, give the
argument both rest on): with unique write values every linearization lays each value out
as one contiguous *block*, its write then the reads that returned it. So

- every read must name a write of its value, or the initial value;
- inside a block, the write must not be preceded in real time by one of its own reads;
- between blocks, one edge per pair of operations from different blocks where the first
  completed strictly before the second was called (touching is concurrent): the first
  block must come before the second. The initial value's block is an implicit write
  before everything, so it precedes every block.

A pending write that a read returned joins its block with no completion; one nobody
read is left out (it may never have taken effect); a pending read has no completion
either. Kahn's algorithm orders the blocks. When it cannot, the blocks left over all
have a predecessor among themselves, and walking predecessors finds a cycle; its edges'
operations and its blocks' writes are the counterexample (not minimized). When it can,
the blocks in that order, each its write then its reads by call time, are laid out as a
linearization, and that order is replayed on a register and checked against real time
before the answer is given.

Cost: O(n^2) for the edges (every pair of operations), so keep it to a few thousand
operations.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from spark_jobs.register_ops import (
    ABSENT_VALUE,
    LINEARIZABLE,
    NOT_LINEARIZABLE,
    CheckResult,
    RegisterOp,
)

_NEVER = float("inf")


def _finish(op: RegisterOp) -> float:
    """When ``op`` answered; a pending one never did; an answer stamped before the call is
    read as instantaneous."""
    if op.complete_us is None:
        return _NEVER
    return float(max(op.complete_us, op.invoke_us))


@dataclass(slots=True)
class _Block:
    """One value: its write (None for the initial value's implicit write) and reads."""

    value: str
    write: RegisterOp | None
    reads: list[RegisterOp] = field(default_factory=list)
    before: dict[int, tuple[RegisterOp | None, RegisterOp]] = field(default_factory=dict)
    """Blocks that must come first: their index -> a pair of operations showing why
    (None stands for the implicit initial write)."""

    def members(self) -> list[RegisterOp]:
        return ([self.write] if self.write is not None else []) + self.reads


@dataclass(frozen=True, slots=True)
class Ordering:
    """Either a linearization (``order``) or why there is none (``reason``, ``culprits``)."""

    order: tuple[RegisterOp, ...] | None
    reason: str = ""
    culprits: tuple[RegisterOp, ...] = ()


def _blocks(ops: Sequence[RegisterOp], initial: str) -> tuple[list[_Block], Ordering | None]:
    """The blocks of ``ops``, or the early failure of a read no block explains."""
    blocks: dict[str, _Block] = {}
    for op in ops:
        if op.is_write:
            if op.value in blocks or op.value == initial:
                raise ValueError(f"two writes of {op.value!r}: not a unique-value history")
            blocks[op.value] = _Block(op.value, op)
    for op in sorted((o for o in ops if not o.is_write), key=lambda o: (o.invoke_us, o.op_id)):
        if op.value not in blocks:
            if op.value != initial:
                return [], Ordering(None, "a read of a value never written", (op,))
            blocks[initial] = _Block(initial, None)
        blocks[op.value].reads.append(op)
    kept = [b for b in blocks.values() if b.reads or (b.write and b.write.complete_us is not None)]
    for block in kept:
        for read in block.reads:
            if block.write is not None and _finish(read) < block.write.invoke_us:
                why = "a read answered before its write was called"
                return [], Ordering(None, why, (block.write, read))
    return kept, None


def _add_edges(blocks: list[_Block]) -> None:
    """Every pair of operations in different blocks, first answered before second called."""
    owner = [(op, index) for index, block in enumerate(blocks) for op in block.members()]
    for index, block in enumerate(blocks):
        if block.write is None:
            # The implicit initial write comes before every other block.
            for other_index, other in enumerate(blocks):
                if other_index != index:
                    other.before.setdefault(index, (None, other.members()[0]))
    for first, first_block in owner:
        finished = _finish(first)
        for second, second_block in owner:
            if first_block != second_block and finished < second.invoke_us:
                blocks[second_block].before.setdefault(first_block, (first, second))


def _cycle(blocks: list[_Block], left: set[int]) -> list[int]:
    """A cycle among ``left``, blocks that all still have a predecessor in ``left``:
    walk predecessors until a block repeats. Returned in precedence order."""
    path: list[int] = []
    seen: dict[int, int] = {}
    current = min(left)
    while current not in seen:
        seen[current] = len(path)
        path.append(current)
        current = min(b for b in blocks[current].before if b in left)
    loop = path[seen[current] :]
    loop.reverse()  # we walked against the edges
    return loop


def _kahn(blocks: list[_Block]) -> list[int]:
    """Kahn's algorithm: the blocks that can be placed, in a topological order (the
    lowest index first among the ready ones); fewer than all when there is a cycle."""
    waiting = [len(b.before) for b in blocks]
    after: list[list[int]] = [[] for _ in blocks]
    for index, block in enumerate(blocks):
        for predecessor in block.before:
            after[predecessor].append(index)
    ready = [index for index, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    placed: list[int] = []
    while ready:
        index = heapq.heappop(ready)
        placed.append(index)
        for follower in after[index]:
            waiting[follower] -= 1
            if waiting[follower] == 0:
                heapq.heappush(ready, follower)
    return placed


def _culprits(blocks: list[_Block], loop: list[int]) -> tuple[RegisterOp, ...]:
    """The operations of a cycle: each edge's pair and each block's write."""
    culprits: dict[int, RegisterOp] = {}
    for position, index in enumerate(loop):
        earlier, later = blocks[index].before[loop[position - 1]]
        for op in (earlier, later, blocks[index].write):
            if op is not None:
                culprits.setdefault(op.op_id, op)
    return tuple(culprits.values())


def order_blocks(ops: Sequence[RegisterOp], initial: str = ABSENT_VALUE) -> Ordering:
    """A linearization of a unique-value history, or why there is none. Raises ValueError
    when write values repeat."""
    blocks, failed = _blocks(ops, initial)
    if failed is not None:
        return failed
    _add_edges(blocks)
    placed = _kahn(blocks)
    if len(placed) < len(blocks):
        loop = _cycle(blocks, set(range(len(blocks))) - set(placed))
        why = "the value blocks must precede each other in a cycle"
        return Ordering(None, why, _culprits(blocks, loop))
    order: list[RegisterOp] = []
    for index in placed:
        order.extend(blocks[index].members())
    return Ordering(tuple(order))


def is_linearization(
    order: Sequence[RegisterOp], ops: Sequence[RegisterOp], initial: str = ABSENT_VALUE
) -> bool:
    """True when ``order`` holds every operation of ``ops`` once (pending writes may be
    left out), replays on a register from ``initial`` and never puts an operation after
    one that was called only after it answered."""
    ids = [op.op_id for op in order]
    needed = {op.op_id for op in ops if not (op.is_write and op.complete_us is None)}
    allowed = {op.op_id for op in ops}
    if len(set(ids)) != len(ids) or not needed <= set(ids) <= allowed:
        return False
    state = initial
    for op in order:
        if op.is_write:
            state = op.value
        elif op.value != state:
            return False
    earliest_finish_after = _NEVER
    for op in reversed(order):
        if earliest_finish_after < op.invoke_us:
            return False
        earliest_finish_after = min(earliest_finish_after, _finish(op))
    return True


def check_precedence(ops: Sequence[RegisterOp], initial: str = ABSENT_VALUE) -> CheckResult:
    """The verdict of :func:`order_blocks`, its culprits as the counterexample. Raises
    RuntimeError if the order it built is not a linearization (a bug here, not in the
    history)."""
    found = order_blocks(ops, initial)
    if found.order is None:
        ids = tuple(sorted(op.op_id for op in found.culprits))
        return CheckResult(NOT_LINEARIZABLE, len(ops), 0, ids, found.reason)
    if not is_linearization(found.order, ops, initial):
        raise RuntimeError("the block order is not a linearization")
    return CheckResult(LINEARIZABLE, len(ops), 0, reason="a topological order of value blocks")
