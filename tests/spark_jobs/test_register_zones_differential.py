"""Four deciders agree on thousands of small random histories whose writes have unique
values: the value zones (``spark_jobs.register_zones``), the precedence graph of value
blocks (``spark_jobs.register_precedence``), the Wing-Gong-Lowe search
(``spark_jobs.checker.search_register``) and, up to six operations, the brute force over
every order (``test_checker_against_brute_force``).

The histories are real register runs (linearizable by construction), half of them with
one read spoiled, and free draws; pending writes (read and unread), overlapping and
touching intervals, stale reads, reads of values never written or written later, and an
initial value other than the absent route all occur (the test counts them). Seeded: a
failure names the seed and the case, and ``random.Random(SEED * CASE_STRIDE + case)``
draws that history again.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

from spark_jobs.checker import check_register, search_register
from spark_jobs.register_ops import (
    ABSENT_VALUE,
    LINEARIZABLE,
    NOT_LINEARIZABLE,
    RegisterOp,
    removable,
)
from spark_jobs.register_precedence import check_precedence, is_linearization, order_blocks
from spark_jobs.register_zones import (
    BACKWARD_IN_FORWARD,
    FORWARD_ZONES_MEET,
    FROM_THE_FUTURE,
    NEVER_WRITTEN,
    check_unique_register,
    find_violation,
    unique_write_values,
)
from tests.spark_jobs.register_histories import NEVER_WRITTEN_VALUE, Shape, random_history
from tests.spark_jobs.test_checker_against_brute_force import brute_force_linearizable

SEED = 20_260_611
CASE_STRIDE = 1_000_003
CASES = 8_000
BRUTE_FORCE_OPS_MAX = 6
SHAPE = Shape(ops_max=9)


def _verdict(linearizable: bool) -> str:
    return LINEARIZABLE if linearizable else NOT_LINEARIZABLE


def _kept(ops: Sequence[RegisterOp], ids: Sequence[int]) -> list[RegisterOp]:
    return [op for op in ops if op.op_id in ids]


def _shapes(ops: Sequence[RegisterOp], initial: str) -> set[str]:
    """Which of the shapes the test must cover this history has."""
    read_values = {op.value for op in ops if not op.is_write}
    written = {op.value: op for op in ops if op.is_write}
    shapes = set()
    for op in ops:
        if op.is_write and op.complete_us is None:
            shapes.add("pending write read" if op.value in read_values else "pending write unread")
        if not op.is_write and op.value == initial:
            shapes.add("read of the initial value")
        if not op.is_write and op.value == NEVER_WRITTEN_VALUE:
            shapes.add("read of a value never written")
        source = None if op.is_write else written.get(op.value)
        end = op.complete_us
        if source is not None and end is not None and end < source.invoke_us:
            shapes.add("read before its write was called")
    if initial != ABSENT_VALUE:
        shapes.add("initial value not absent")
    if any(
        a.op_id < b.op_id
        and a.complete_us is not None
        and b.complete_us is not None
        and a.invoke_us <= b.complete_us
        and b.invoke_us <= a.complete_us
        for a in ops
        for b in ops
    ):
        shapes.add("overlapping operations")
    return shapes


def test_zones_precedence_search_and_brute_force_agree_on_every_history() -> None:
    shapes: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for case in range(CASES):
        ops, initial = random_history(random.Random(SEED * CASE_STRIDE + case), SHAPE)
        where = f"seed {SEED}, case {case}: initial {initial!r}, {ops}"
        assert unique_write_values(ops, initial), where
        zones = check_unique_register(ops, initial)
        precedence = check_precedence(ops, initial)
        searched = search_register(ops, initial)
        assert zones.verdict == precedence.verdict == searched.verdict, where
        assert check_unique_register(ops[::-1], initial) == zones, f"input order: {where}"
        assert check_register(ops, initial).verdict == zones.verdict, where
        if len(ops) <= BRUTE_FORCE_OPS_MAX:
            assert _verdict(brute_force_linearizable(ops, initial)) == zones.verdict, where
        shapes.update(_shapes(ops, initial))
        shapes[zones.verdict] += 1
        if zones.verdict == LINEARIZABLE:
            found = order_blocks(ops, initial).order
            assert found is not None and is_linearization(found, ops, initial), where
            continue
        # The rule that caught it, before minimizing (which often turns two forward
        # zones into a backward one inside a forward one).
        caught = find_violation(ops, initial)
        assert caught is not None, where
        reasons[caught.reason] += 1
        _assert_counterexamples_fail(ops, initial, zones.counterexample, where)
        _assert_counterexamples_fail(ops, initial, precedence.counterexample, where)
        _assert_one_minimal(_kept(ops, zones.counterexample), initial, where)
    for shape in (
        LINEARIZABLE,
        NOT_LINEARIZABLE,
        "pending write read",
        "pending write unread",
        "read of the initial value",
        "read of a value never written",
        "read before its write was called",
        "initial value not absent",
        "overlapping operations",
    ):
        assert shapes[shape] >= CASES // 50, (shape, shapes)
    for reason in (NEVER_WRITTEN, FROM_THE_FUTURE, FORWARD_ZONES_MEET, BACKWARD_IN_FORWARD):
        assert reasons[reason] >= CASES // 200, (reason, reasons)


def _assert_counterexamples_fail(
    ops: Sequence[RegisterOp], initial: str, ids: Sequence[int], where: str
) -> None:
    witness = _kept(ops, ids)
    assert witness, where
    assert search_register(witness, initial).verdict == NOT_LINEARIZABLE, (ids, where)
    if len(witness) <= BRUTE_FORCE_OPS_MAX:
        assert not brute_force_linearizable(witness, initial), (ids, where)


def _assert_one_minimal(witness: Sequence[RegisterOp], initial: str, where: str) -> None:
    """Removing any operation a counterexample may soundly lose makes it linearizable."""
    for op in witness:
        if removable(op, witness):
            smaller = [o for o in witness if o is not op]
            assert search_register(smaller, initial).verdict == LINEARIZABLE, (op, where)
