"""The linearizability checker of a per-topic route register.

Each topic's route is a register: a write sets the route value, a read must return the
value of the latest write linearized before it. A topic whose writes all have unique
values is decided in O(n log n) by value zones (Gibbons & Korach, "Testing shared
memories", 1997; ``spark_jobs.register_zones``), with no cap, and cross-checked by the
search below when small (``check_register``). Any other topic, where the same route is
written again, is searched (``search_register``). The search is Lowe's refinement of
Wing & Gong (as in Porcupine): walk the call/return entries, linearize a call when the
model allows it, backtrack at a return, and memoize (linearized-set bitmask, state) so no
configuration is explored twice. Histories are partitioned per topic and every topic is
checked on its own, inside Spark (``check_topics``) or directly (``check_register``).

The search's work is bounded: more than ``max_ops`` operations, more than ``max_steps``
search steps or ``max_seconds`` of wall time give the verdict ``unknown`` instead of
hanging.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from experiment_history.schema import (
    OUTCOME_ERROR,
    OUTCOME_NOT_FOUND,
    OUTCOME_OK,
    OUTCOME_TIMEOUT,
    READ_KINDS,
    WRITE_KINDS,
    interval_us,
)
from spark_jobs.register_ops import (
    ABSENT_VALUE as ABSENT_VALUE,
    LINEARIZABLE as LINEARIZABLE,
    MINIMIZE_CHECKS_MAX as MINIMIZE_CHECKS_MAX,
    NOT_EXERCISED as NOT_EXERCISED,
    NOT_LINEARIZABLE as NOT_LINEARIZABLE,
    UNKNOWN as UNKNOWN,
    CheckResult as CheckResult,
    RegisterOp as RegisterOp,
    removable,
    removal_order,
)
from spark_jobs.register_zones import check_unique_register, unique_write_values

CROSS_CHECK_OPS_MAX = 200
"""A topic of unique write values with at most this many operations is decided by the
value zones and searched too, as a cross-check (``check_register``)."""
CROSS_CHECK_STEPS_MAX = 200_000
CROSS_CHECK_SECONDS_MAX = 2.0
"""The cross-check's own limits (the caller's budget when smaller): a search that runs
out leaves the zones' verdict as it is."""
# What the reason of a cross-checked verdict ends with.
SEARCH_AGREES = "the search cross-check agrees"
SEARCH_RAN_OUT = "the search cross-check ran out of budget"


@dataclass(frozen=True, slots=True)
class CheckBudget:
    """Limits of one topic's search (a topic whose write values repeat; unique values are
    decided without one); exceeding any gives ``unknown``."""

    max_ops: int = 5_000
    max_steps: int = 2_000_000
    max_seconds: float = 20.0


@dataclass(slots=True)
class _Entry:
    """A call or return in the doubly linked entry list of the search."""

    index: int
    is_call: bool
    prev: _Entry | None = None
    next: _Entry | None = None
    match: _Entry | None = field(default=None, repr=False)


class BudgetExceeded(Exception):
    """Raised inside the search when a step or time limit is reached."""


@dataclass(slots=True)
class _Meter:
    """Counts search steps across the several searches of one topic."""

    budget: CheckBudget
    steps: int = 0
    deadline: float = 0.0

    def tick(self) -> None:
        self.steps += 1
        # Reading the clock every step would dominate; every 4096 steps is enough.
        if self.steps > self.budget.max_steps or (
            self.steps & 4095 == 0 and time.monotonic() > self.deadline
        ):
            raise BudgetExceeded


def _build_entries(ops: Sequence[RegisterOp]) -> _Entry:
    """The sorted entry list behind a sentinel head. Calls sort before returns at equal
    times, so operations that touch (one's return stamped the microsecond of the other's
    call) count as concurrent."""
    events: list[tuple[float, int, int]] = []
    for index, op in enumerate(ops):
        events.append((op.invoke_us, 0, index))
        end = float("inf") if op.complete_us is None else op.complete_us
        events.append((end, 1, index))
    events.sort()
    head = _Entry(index=-1, is_call=False)
    calls: dict[int, _Entry] = {}
    tail = head
    for _, is_return, index in events:
        entry = _Entry(index=index, is_call=not is_return, prev=tail)
        tail.next = entry
        tail = entry
        if is_return:
            call = calls[index]
            call.match = entry
            entry.match = call
        else:
            calls[index] = entry
    return head


def _lift(entry: _Entry) -> None:
    """Unlink a call and its return from the list."""
    assert entry.prev is not None and entry.match is not None
    entry.prev.next = entry.next
    if entry.next is not None:
        entry.next.prev = entry.prev
    ret = entry.match
    assert ret.prev is not None
    ret.prev.next = ret.next
    if ret.next is not None:
        ret.next.prev = ret.prev


def _unlift(entry: _Entry) -> None:
    """Undo :func:`_lift` (in reverse order, so the neighbours are right again)."""
    ret = entry.match
    assert ret is not None and ret.prev is not None and entry.prev is not None
    ret.prev.next = ret
    if ret.next is not None:
        ret.next.prev = ret
    entry.prev.next = entry
    if entry.next is not None:
        entry.next.prev = entry


def _search(ops: Sequence[RegisterOp], initial: str, meter: _Meter) -> bool:
    """True when ``ops`` is linearizable for a register starting at ``initial``."""
    head = _build_entries(ops)
    entry = head.next
    stack: list[tuple[_Entry, str]] = []
    state = initial
    linearized = 0
    seen: set[tuple[int, str]] = set()
    while head.next is not None:
        meter.tick()
        assert entry is not None
        if entry.is_call:
            op = ops[entry.index]
            if op.is_write or op.value == state:
                new_state = op.value if op.is_write else state
                key = (linearized | (1 << entry.index), new_state)
                if key not in seen:
                    seen.add(key)
                    stack.append((entry, state))
                    state, linearized = new_state, key[0]
                    _lift(entry)
                    entry = head.next
                    continue
            entry = entry.next
            continue
        if not stack:
            return False
        top, state = stack.pop()
        linearized &= ~(1 << top.index)
        _unlift(top)
        entry = top.next
    return True


def time_prefix(ops: Sequence[RegisterOp], cut_us: int) -> list[RegisterOp]:
    """The history as seen at ``cut_us``: operations called by then; those still open are
    pending (writes kept, reads dropped, since an unanswered read tells nothing)."""
    result: list[RegisterOp] = []
    for op in ops:
        if op.invoke_us > cut_us:
            continue
        if op.complete_us is not None and op.complete_us <= cut_us:
            result.append(op)
        elif op.is_write:
            result.append(RegisterOp(op.op_id, True, op.value, op.invoke_us, None))
    return result


def _minimize(ops: list[RegisterOp], initial: str, meter: _Meter) -> list[RegisterOp]:
    """The shortest failing time prefix, then greedily drop operations while it fails.

    Linearizability is prefix-closed, so the failing prefixes are monotone in the cut and
    a binary search over the distinct event times finds the shortest one."""
    cuts = sorted(
        {op.invoke_us for op in ops} | {op.complete_us for op in ops if op.complete_us is not None}
    )
    low, high = 0, len(cuts) - 1
    best = ops
    checks = 0
    while low <= high and checks < MINIMIZE_CHECKS_MAX:
        middle = (low + high) // 2
        candidate = time_prefix(ops, cuts[middle])
        checks += 1
        if _search(candidate, initial, meter):
            low = middle + 1
        else:
            best, high = candidate, middle - 1
    changed = True
    while changed and checks < MINIMIZE_CHECKS_MAX:
        changed = False
        for op in removal_order(best):
            if checks >= MINIMIZE_CHECKS_MAX or not removable(op, best):
                continue
            candidate = [o for o in best if o is not op]
            checks += 1
            if not _search(candidate, initial, meter):
                best, changed = candidate, True
    return best


def search_register(
    ops: Sequence[RegisterOp],
    initial: str = ABSENT_VALUE,
    budget: CheckBudget | None = None,
    *,
    minimize: bool = True,
) -> CheckResult:
    """The Wing-Gong-Lowe search alone, within ``budget``: the verdict of a topic whose
    write values repeat; on failure a minimal counterexample by op id, or none when not
    ``minimize`` (minimizing a failure of thousands of operations can take the whole
    budget, and callers that count verdicts need only the verdict)."""
    budget = budget or CheckBudget()
    if len(ops) > budget.max_ops:
        return CheckResult(UNKNOWN, len(ops), 0, reason=f"more than {budget.max_ops} ops")
    meter = _Meter(budget, deadline=time.monotonic() + budget.max_seconds)
    op_list = list(ops)
    try:
        if _search(op_list, initial, meter):
            return CheckResult(LINEARIZABLE, len(ops), meter.steps)
    except BudgetExceeded:
        return CheckResult(UNKNOWN, len(ops), meter.steps, reason="search budget exhausted")
    if not minimize:
        return CheckResult(NOT_LINEARIZABLE, len(ops), meter.steps, reason="not minimized")
    try:
        witness = _minimize(op_list, initial, meter)
        reason = "minimal counterexample"
    except BudgetExceeded:
        witness, reason = op_list, "budget ran out while minimizing; full history reported"
    ids = tuple(sorted(op.op_id for op in witness))
    return CheckResult(NOT_LINEARIZABLE, len(ops), meter.steps, ids, reason)


def check_register(
    ops: Sequence[RegisterOp],
    initial: str = ABSENT_VALUE,
    budget: CheckBudget | None = None,
    *,
    minimize: bool = True,
) -> CheckResult:
    """Check one topic's operations; on failure report a minimal counterexample by op id
    (the search's only when ``minimize``: :func:`search_register`).

    Two deciders, by the shape of the history:

    - every write has a value of its own (and none writes ``initial``): the value zones
      of ``spark_jobs.register_zones`` (Gibbons & Korach), O(n log n), with **no cap** on
      the operations. A topic of at most :data:`CROSS_CHECK_OPS_MAX` operations is
      searched too, as a cross-check, within ``budget`` and the cross-check's own limits
      (``steps`` counts its steps): when it runs out, the zones' verdict stands (the
      reason says so); should the two disagree, the verdict is ``unknown`` with both
      answers in the reason (a bug in one of them, never a verdict to trust). Larger
      topics are never ``unknown``. (``spark_jobs.register_precedence``, a second
      decider written apart, cross-checks the zones in the tests and the bench only.)
    - write values repeat (the same route written again, today's histories): the
      Wing-Gong-Lowe search (:func:`search_register`) within ``budget``, as before.
    """
    if not unique_write_values(ops, initial):
        return search_register(ops, initial, budget, minimize=minimize)
    result = check_unique_register(ops, initial)
    if len(ops) > CROSS_CHECK_OPS_MAX:
        return result
    limits = budget or CheckBudget()
    cross_budget = CheckBudget(
        max_ops=CROSS_CHECK_OPS_MAX,
        max_steps=min(limits.max_steps, CROSS_CHECK_STEPS_MAX),
        max_seconds=min(limits.max_seconds, CROSS_CHECK_SECONDS_MAX),
    )
    meter = _Meter(cross_budget, deadline=time.monotonic() + cross_budget.max_seconds)
    try:
        searched = LINEARIZABLE if _search(list(ops), initial, meter) else NOT_LINEARIZABLE
    except BudgetExceeded:
        reason = f"{result.reason}; {SEARCH_RAN_OUT}"
        return replace(result, steps=meter.steps, reason=reason)
    if searched == result.verdict:
        return replace(result, steps=meter.steps, reason=f"{result.reason}; {SEARCH_AGREES}")
    reason = f"the checkers disagree: value zones {result.verdict}, search {searched}"
    return CheckResult(UNKNOWN, len(ops), meter.steps, reason=reason)


def register_role(row: Mapping[str, Any]) -> tuple[bool, str, bool] | None:
    """What an ``operations`` row is to the topic's register: (is_write, value, complete),
    or None when it is no register operation.

    Reads: ``ok`` returns ``value``, ``not_found`` returns the absent route ``""``, errors
    and timeouts are dropped. Writes: ``ok`` is complete, ``error``/``timeout`` are pending
    (they may or may not have happened), ``not_found`` changed nothing and is dropped.
    Other kinds (sends, allocations) are not register operations.
    """
    kind, outcome = row["kind"], row["outcome"]
    if kind in READ_KINDS:
        if outcome == OUTCOME_OK:
            return False, row["value"] or ABSENT_VALUE, True
        if outcome == OUTCOME_NOT_FOUND:
            return False, ABSENT_VALUE, True
        return None
    if kind in WRITE_KINDS:
        if outcome == OUTCOME_OK:
            return True, row["value"] or ABSENT_VALUE, True
        if outcome in (OUTCOME_ERROR, OUTCOME_TIMEOUT):
            return True, row["value"] or ABSENT_VALUE, False
    return None


def register_rows(
    rows: Iterable[Mapping[str, Any]],
) -> Iterator[tuple[Mapping[str, Any], bool, str, bool, int, int]]:
    """The rows of one topic that count for its register (:func:`register_role`), each as
    (row, is_write, value, complete, invoke µs, complete µs by :func:`interval_us`): the
    one reading of a register operation every class of the analysis starts from."""
    for row in rows:
        role = register_role(row)
        if role is None:
            continue
        is_write, value, complete = role
        invoke, end = interval_us(row)
        yield row, is_write, value, complete, invoke, end


def register_ops_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[RegisterOp]:
    """Turn ``operations`` rows of one topic into register operations (see
    :func:`register_role` for which rows count and how), times from :func:`interval_us`.

    Sorted by (invoke, op id): the search breaks ties by position, so a fixed order keeps
    the steps and the minimal counterexample independent of the order rows arrive in."""
    result: list[RegisterOp] = []
    for row, is_write, value, complete, invoke, end in register_rows(rows):
        result.append(
            RegisterOp(int(row["op_id"]), is_write, value, invoke, end if complete else None)
        )
    result.sort(key=lambda op: (op.invoke_us, op.op_id))
    return result


def check_rows(
    rows: Iterable[Mapping[str, Any]],
    initial: str = ABSENT_VALUE,
    budget: CheckBudget | None = None,
) -> CheckResult:
    """:func:`check_register` over raw ``operations`` rows of one topic."""
    return check_register(register_ops_from_rows(rows), initial, budget)


CHECK_COLUMNS = (
    "op_id",
    "kind",
    "invoke_ms",
    "complete_ms",
    "invoke_us",
    "complete_us",
    "outcome",
    "value",
)
MICRO_COLUMNS = ("invoke_us", "complete_us")
"""Columns a frame not read with the version 2 schema may lack (read as null, so the
``_ms`` ones count)."""
RESULT_DDL = (
    "run_id string, topic string, verdict string, ops long, steps long, "
    "counterexample array<long>, reason string, check_ms double"
)
"""``check_ms``: the task's wall time to decide the topic, ms (how deep the checker went
at this history's size; docs/EXPERIMENTS.md "Checker")."""


def _check_group(
    item: tuple[tuple[str, str], Iterable[tuple[Any, ...]]], budget: CheckBudget
) -> tuple[Any, ...]:
    """Spark task body: the verdict row of one (run, topic) group."""
    (run_id, topic), rows = item
    began = time.perf_counter()
    dict_rows = [dict(zip(CHECK_COLUMNS, row, strict=True)) for row in rows]
    result = check_rows(dict_rows, ABSENT_VALUE, budget)
    check_ms = (time.perf_counter() - began) * 1_000
    return (
        run_id,
        topic,
        result.verdict,
        result.ops,
        result.steps,
        list(result.counterexample),
        result.reason,
        check_ms,
    )


def check_topics(
    operations: Any, budget: CheckBudget | None = None, *, clustered: bool = False
) -> Any:
    """Per-topic verdicts of a Spark ``operations`` DataFrame (with a ``run_id`` column).

    The history is grouped by (run, topic) with :func:`topic_groups` (pandas is not
    needed, unlike ``applyInPandas``; ``clustered`` as there), and each group is checked
    by the pure-Python core. Returns a DataFrame with the columns of ``RESULT_DDL``.
    """
    budget = budget or CheckBudget()
    groups = topic_groups(operations, CHECK_COLUMNS, clustered=clustered)
    verdicts = groups.map(lambda item: _check_group(item, budget))
    return operations.sparkSession.createDataFrame(verdicts, RESULT_DDL)


def topic_groups(operations: Any, columns: Sequence[str], *, clustered: bool = False) -> Any:
    """The register operations of a Spark ``operations`` DataFrame (with ``run_id``) as an
    RDD of ((run_id, topic), rows), each row the tuple of ``columns``; shared by every job
    that looks at one topic's register at a time (the checker, ``spark_jobs.power``,
    ``spark_jobs.anomalies``), each of which orders a group's rows itself.

    ``clustered``: every partition of ``operations`` already holds whole (run, topic)
    groups with each group's rows consecutive (a scan of the dataset, see
    ``spark_jobs.dataset.History.topics_clustered``, through narrow steps only: filters,
    projections, a broadcast join). The groups are then formed inside each scan task,
    with no exchange. Otherwise a DataFrame exchange hash-partitions by (run, topic) into
    the session's ``spark.sql.shuffle.partitions`` and sorts each partition: the rows
    cross the shuffle in the JVM and Python sees each one once, where an RDD
    ``groupByKey`` would pickle every row through a Python shuffle. A ``columns`` entry
    of :data:`MICRO_COLUMNS` the frame lacks is read as null."""
    from pyspark.sql import functions as F

    for name in MICRO_COLUMNS:
        if name in columns and name not in operations.columns:
            operations = operations.withColumn(name, F.lit(None).cast("long"))
    kinds = sorted(READ_KINDS | WRITE_KINDS)
    relevant = operations.filter(F.col("kind").isin(kinds))
    if not clustered:
        partitions = int(operations.sparkSession.conf.get("spark.sql.shuffle.partitions"))
        relevant = relevant.repartition(partitions, "run_id", "topic").sortWithinPartitions(
            "run_id", "topic", "invoke_ms", "op_id"
        )
    return relevant.select("run_id", "topic", *columns).rdd.mapPartitions(_grouped)


def _grouped(rows: Iterable[Any]) -> Iterator[tuple[tuple[str, str], list[tuple[Any, ...]]]]:
    """Spark task body: a sorted partition's rows as one ((run_id, topic), rows) per topic."""
    for key, group in itertools.groupby(rows, key=lambda r: (r[0], r[1])):
        yield key, [tuple(r[2:]) for r in group]


def overall_verdict(verdicts: Iterable[str]) -> str:
    """Not linearizable if any topic fails, unknown if any is unknown, not exercised if no
    topic had the writes to tell, else linearizable."""
    seen = set(verdicts)
    if NOT_LINEARIZABLE in seen:
        return NOT_LINEARIZABLE
    if UNKNOWN in seen:
        return UNKNOWN
    if NOT_EXERCISED in seen and LINEARIZABLE not in seen:
        return NOT_EXERCISED
    return LINEARIZABLE
