"""Linearizability of one register whose writes all have unique values, in O(n log n).

Searching for a linearization (Wing & Gong, Lowe; ``spark_jobs.checker``) is exponential
in the worst case. When every write carries a value no other write (nor the initial value)
has, each read names the one write it returned, and the question becomes polynomial:
Gibbons & Korach, "Testing shared memories" (SIAM J. Computing 26(4), 1997), verifying
linearizability with a read-mapping, decided by the zones below.

**Clusters.** A value's cluster is its write and the reads that returned it. In any
linearization a value's reads come after its write and before the next write (no other
write leaves that value), so each cluster is one contiguous block, and the blocks are
ordered. Two numbers summarize a cluster C: ``done(C)``, the earliest completion among
its operations, and ``called(C)``, the latest invocation. An operation of A precedes one
of B in real time (``a.complete < b.invoke``; touching intervals are concurrent) for some
pair exactly when ``done(A) < called(B)``, and then block A must come before block B.

**The rule.** The history is linearizable if and only if

1. every read returns the initial value or a written one (else: *never written*);
2. no read completes before its write is called (else: *from the future*: the write
   must come first in its own block);
3. no two clusters A != B have ``done(A) < called(B)`` and ``done(B) < called(A)``.

Rule 3 is Gibbons & Korach's zones: a cluster with ``done < called`` has the *forward
zone* [done, called] (it must stay open across it), the others the *backward zone*
[called, done]; rule 3 says no two forward zones intersect and no backward zone lies
inside a forward one. The "must come before" relation ``done(A) < called(B)`` is a
Ferrers relation (if A→B and C→D then A→D or C→B), so any cycle of blocks through
distinct clusters implies one of length two, which rule 3 excludes; with no cycle, any
topological order of the blocks, each its write then its reads by call time, is a
linearization. ``spark_jobs.register_precedence`` builds that order explicitly, as an
independent cross-check of this module.

**Pending operations and the initial value.** A pending write (``complete_us`` None: it
timed out) that some read returned must have taken effect: it joins its cluster with an
unbounded completion, so only its call time counts. A pending write nobody read is
dropped: it may never have taken effect (kept, it could not matter either: with no
completion it never has to precede another block, so it is in no crossing pair). A
pending read (not produced by ``register_role``, which drops failed reads) must take
effect somewhere after its call, as in the search. The initial value is an implicit
write before every operation: its cluster is ``done = -inf``, ``called`` = the latest
call of a read of it, so any cluster that must precede one of those reads is a violation.
A completion stamped before its call is read as instantaneous, as
``experiment_history.schema.interval_us`` does.

**Counterexample.** Of all violations, the one whose operations were all called earliest
(the two clusters, binary-searched over call times, whose later ``called`` is smallest);
its at most six operations (each cluster's earliest completion and latest call, and the
two writes) are then reduced greedily with the sound removals of
``spark_jobs.register_ops.removable``, so the ids reported fail on their own and removing
any further removable one makes them linearizable.

**Cost.** Building the clusters is O(n), rule 3 one sort and one binary search per
cluster: O(n log n); a failure adds O(log n) more passes to find the earliest violation
(O(n log^2 n)). No cap on the operations. Measured with ``python -m bench.checker``
(CPython 3.11, 2 cores, docs/BENCHMARKS.md): one topic of 100,000 operations (25,000
writes, 3 % of them timed out) in 104 to 114 ms when linearizable, 327 to 465 ms with
one stale read, three-operation counterexample included; 0.7 and 1.6 µs per operation
at 5,000 operations, where the search takes 33 ms on the linearizable history and gives
up on the other after 2.1 s (out of steps).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from spark_jobs.register_ops import (
    ABSENT_VALUE,
    LINEARIZABLE,
    MINIMIZE_CHECKS_MAX,
    NOT_LINEARIZABLE,
    CheckResult,
    RegisterOp,
    removable,
    removal_order,
)

BEFORE_ALL_US = -(2**63)
"""The call and completion of the implicit initial write."""
NEVER_US = 2**63
"""The completion of a pending operation: after every stamp."""

NEVER_WRITTEN = "a read returned a value no write wrote"
FROM_THE_FUTURE = "a read returned a value before its write was called"
FORWARD_ZONES_MEET = "two values' forward zones intersect: each was read after the other"
BACKWARD_IN_FORWARD = "a value's backward zone lies inside another value's forward zone"
DECIDED = "decided by value zones (Gibbons-Korach)"


def unique_write_values(ops: Sequence[RegisterOp], initial: str = ABSENT_VALUE) -> bool:
    """True when no two writes of ``ops`` write the same value and none writes
    ``initial``: the histories this module decides."""
    seen = {initial}
    for op in ops:
        if op.is_write:
            if op.value in seen:
                return False
            seen.add(op.value)
    return True


def _end(op: RegisterOp) -> int:
    """An operation's completion: unbounded when pending, never before its call."""
    return NEVER_US if op.complete_us is None else max(op.complete_us, op.invoke_us)


@dataclass(slots=True)
class _Cluster:
    """One value's write and the reads that returned it, summarized by the earliest
    completion (``done_us``) and the latest call (``called_us``), with the operations
    that set them (None for the implicit initial write)."""

    write: RegisterOp | None
    done_us: int
    done_op: RegisterOp | None
    called_us: int
    called_op: RegisterOp | None

    def add(self, op: RegisterOp) -> None:
        # Ties go to the smaller op id so the counterexample does not depend on input order.
        # The implicit initial write's completion (BEFORE_ALL_US) is never beaten.
        done_id = self.done_op.op_id if self.done_op is not None else 0
        if (_end(op), op.op_id) < (self.done_us, done_id):
            self.done_us, self.done_op = _end(op), op
        called_id = self.called_op.op_id if self.called_op is not None else 0
        if self.called_op is None or (op.invoke_us, -op.op_id) > (self.called_us, -called_id):
            self.called_us, self.called_op = op.invoke_us, op

    def tie_break(self) -> int:
        """The write's op id (-1 for the initial value): orders clusters whose times are
        equal, so the pair reported does not depend on the order of the input."""
        return -1 if self.write is None else self.write.op_id

    def ops(self) -> list[RegisterOp]:
        """The operations that witness this cluster's zone."""
        found = [self.write, self.done_op, self.called_op]
        return [op for op in found if op is not None]


@dataclass(frozen=True, slots=True)
class Violation:
    """Why a history is not linearizable: the rule broken, the operations that break it
    (a non-linearizable history on their own, not yet minimal), and the latest call
    among them (the earliest violation is the one reported)."""

    reason: str
    ops: tuple[RegisterOp, ...]
    called_us: int


def _clusters(ops: Sequence[RegisterOp], initial: str) -> tuple[list[_Cluster], list[Violation]]:
    """The value clusters of ``ops`` (pending writes nobody read left out), and the reads
    that break rules 1 and 2 (left out of the clusters: each is a violation of its own)."""
    writes: dict[str, RegisterOp] = {}
    for op in ops:
        if op.is_write:
            if op.value in writes or op.value == initial:
                raise ValueError(f"write value {op.value!r} is not unique")
            writes[op.value] = op
    by_value: dict[str, _Cluster] = {}
    broken: list[Violation] = []
    for op in ops:
        if op.is_write:
            continue
        write = writes.get(op.value)
        if write is None and op.value != initial:
            broken.append(Violation(NEVER_WRITTEN, (op,), op.invoke_us))
            continue
        if write is not None and _end(op) < write.invoke_us:
            broken.append(Violation(FROM_THE_FUTURE, (write, op), write.invoke_us))
            continue
        cluster = by_value.get(op.value)
        if cluster is None:
            cluster = _new_cluster(write)
            by_value[op.value] = cluster
        cluster.add(op)
    for value, write in writes.items():
        # A pending write nobody read may never have happened: it constrains nothing.
        if value not in by_value and write.complete_us is not None:
            by_value[value] = _new_cluster(write)
    return list(by_value.values()), broken


def _new_cluster(write: RegisterOp | None) -> _Cluster:
    if write is None:
        return _Cluster(None, BEFORE_ALL_US, None, BEFORE_ALL_US, None)
    return _Cluster(write, _end(write), write, write.invoke_us, write)


def _crossing_pair(clusters: Sequence[_Cluster]) -> tuple[_Cluster, _Cluster] | None:
    """Two clusters each of which must precede the other (rule 3), or None.

    Sorted by ``done``, the clusters that must precede B (``done < called(B)``) are a
    prefix; B is in a crossing pair exactly when the prefix's largest ``called`` other
    than B's own exceeds ``done(B)``. Keeping the two largest per prefix excludes B."""
    order = sorted(clusters, key=lambda c: (c.done_us, c.called_us, c.tie_break()))
    dones = [c.done_us for c in order]
    best: list[int] = []  # index in ``order`` of the prefix's largest ``called``
    second: list[int] = []  # ... and of the next largest, -1 when none
    top, runner = -1, -1
    for index, cluster in enumerate(order):
        if top < 0 or cluster.called_us > order[top].called_us:
            top, runner = index, top
        elif runner < 0 or cluster.called_us > order[runner].called_us:
            runner = index
        best.append(top)
        second.append(runner)
    for index, cluster in enumerate(order):
        size = bisect_left(dones, cluster.called_us)
        if size == 0:
            continue
        other = best[size - 1]
        if other == index:
            other = second[size - 1]
        if other >= 0 and order[other].called_us > cluster.done_us:
            return order[other], cluster
    return None


def _earliest_crossing(clusters: Sequence[_Cluster]) -> Violation | None:
    """The crossing pair whose later ``called`` is smallest: a pair exists among the
    clusters called by T or it does not, monotonically in T, so binary-search T over the
    clusters' call times."""
    pair = _crossing_pair(clusters)
    if pair is None:
        return None
    order = sorted(clusters, key=lambda c: (c.called_us, c.done_us, c.tie_break()))
    calls = [c.called_us for c in order]
    low, high = 0, len(order) - 1
    while low < high:
        middle = (low + high) // 2
        found = _crossing_pair(order[: bisect_right(calls, calls[middle])])
        if found is None:
            low = middle + 1
        else:
            high, pair = middle, found
    first, second = pair
    both_forward = first.done_us < first.called_us and second.done_us < second.called_us
    reason = FORWARD_ZONES_MEET if both_forward else BACKWARD_IN_FORWARD
    witness: dict[int, RegisterOp] = {}
    for op in (*first.ops(), *second.ops()):
        witness.setdefault(id(op), op)
    return Violation(reason, tuple(witness.values()), max(first.called_us, second.called_us))


def find_violation(ops: Sequence[RegisterOp], initial: str = ABSENT_VALUE) -> Violation | None:
    """The earliest violation of the three rules, None when ``ops`` is linearizable.
    Raises ValueError when two writes (or a write and ``initial``) share a value."""
    clusters, broken = _clusters(ops, initial)
    crossing = _earliest_crossing(clusters)
    found = [*broken, *([crossing] if crossing is not None else [])]
    if not found:
        return None
    rank = {reason: i for i, reason in enumerate((NEVER_WRITTEN, FROM_THE_FUTURE))}
    return min(
        found,
        key=lambda v: (v.called_us, rank.get(v.reason, 2), sorted(o.op_id for o in v.ops)),
    )


def _minimize(violation: Violation, initial: str) -> tuple[list[RegisterOp], str]:
    """Drop operations from a violation's witness while it still fails, to a fixpoint."""
    best = list(violation.ops)
    reason = violation.reason
    checks = 0
    changed = True
    while changed and checks < MINIMIZE_CHECKS_MAX:
        changed = False
        for op in removal_order(best):
            if checks >= MINIMIZE_CHECKS_MAX or not removable(op, best):
                continue
            candidate = [o for o in best if o is not op]
            checks += 1
            still = find_violation(candidate, initial)
            if still is not None:
                best, reason, changed = candidate, still.reason, True
    return best, reason


def check_unique_register(ops: Sequence[RegisterOp], initial: str = ABSENT_VALUE) -> CheckResult:
    """The verdict for one topic whose write values are unique (see
    :func:`unique_write_values`), with a minimal counterexample by op id when not
    linearizable; never ``unknown``. Raises ValueError when values repeat."""
    violation = find_violation(ops, initial)
    if violation is None:
        return CheckResult(LINEARIZABLE, len(ops), 0, reason=DECIDED)
    witness, reason = _minimize(violation, initial)
    ids = tuple(sorted(op.op_id for op in witness))
    return CheckResult(NOT_LINEARIZABLE, len(ops), 0, ids, f"{reason}; minimal counterexample")
