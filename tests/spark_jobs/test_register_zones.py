"""The value-zone checker of unique-value register histories, one shape of failure at a
time; its place in ``check_register``; and a topic of 100,000 operations decided.

Times are microseconds; ``w``/``r`` build writes and reads, ``None`` as a completion is a
pending write (it timed out).
"""

from __future__ import annotations

import random

import pytest

from spark_jobs import checker
from spark_jobs.checker import (
    CROSS_CHECK_OPS_MAX,
    SEARCH_AGREES,
    SEARCH_RAN_OUT,
    CheckBudget,
    check_register,
    check_rows,
    search_register,
)
from spark_jobs.register_ops import (
    ABSENT_VALUE,
    LINEARIZABLE,
    NOT_LINEARIZABLE,
    UNKNOWN,
    CheckResult,
    RegisterOp,
)
from spark_jobs.register_precedence import check_precedence, is_linearization, order_blocks
from spark_jobs.register_zones import (
    BACKWARD_IN_FORWARD,
    DECIDED,
    FORWARD_ZONES_MEET,
    FROM_THE_FUTURE,
    NEVER_WRITTEN,
    check_unique_register,
    unique_write_values,
)
from tests.spark_jobs.register_histories import long_register_run

LONG_OPS = 100_000


def w(op_id: int, value: str, invoke: int, complete: int | None) -> RegisterOp:
    return RegisterOp(op_id, True, value, invoke, complete)


def r(op_id: int, value: str, invoke: int, complete: int) -> RegisterOp:
    return RegisterOp(op_id, False, value, invoke, complete)


def _fails(ops: list[RegisterOp], initial: str = ABSENT_VALUE) -> CheckResult:
    """The zones' failure, which the precedence graph and the search must share, with a
    counterexample the search rejects on its own."""
    result = check_unique_register(ops, initial)
    assert result.verdict == NOT_LINEARIZABLE
    assert check_precedence(ops, initial).verdict == NOT_LINEARIZABLE
    assert search_register(ops, initial).verdict == NOT_LINEARIZABLE
    witness = [op for op in ops if op.op_id in result.counterexample]
    assert search_register(witness, initial).verdict == NOT_LINEARIZABLE
    return result


def _passes(ops: list[RegisterOp], initial: str = ABSENT_VALUE) -> None:
    assert check_unique_register(ops, initial).verdict == LINEARIZABLE
    assert check_precedence(ops, initial).verdict == LINEARIZABLE
    assert search_register(ops, initial).verdict == LINEARIZABLE


# ----------------------------------------------------------------- rules 1 and 2


def test_a_read_of_a_value_never_written_fails_on_its_own() -> None:
    result = _fails([w(1, "a", 0, 10), r(2, "a", 20, 30), r(3, "z", 40, 50)])
    assert result.counterexample == (3,)
    assert result.reason.startswith(NEVER_WRITTEN)


def test_a_read_answered_before_its_write_was_called_fails_with_that_write() -> None:
    result = _fails([r(1, "a", 0, 10), w(2, "a", 20, 30)])
    assert (result.counterexample, result.reason.startswith(FROM_THE_FUTURE)) == ((1, 2), True)
    # The same for a write that timed out: it may take effect late, never early.
    assert _fails([r(1, "a", 0, 10), w(2, "a", 20, None)]).counterexample == (1, 2)


def test_a_read_answered_the_microsecond_its_write_was_called_is_concurrent() -> None:
    _passes([r(1, "a", 0, 20), w(2, "a", 20, 30)])


# ----------------------------------------------------------------- rule 3: the zones


def test_two_values_each_read_after_the_other_was_written_fail() -> None:
    """Both writes were acknowledged before both reads; the reads overlap each other, so
    each value must stay in place across the other's read: two forward zones meet."""
    ops = [w(1, "a", 0, 10), w(2, "b", 0, 10), r(3, "a", 20, 25), r(4, "b", 15, 30)]
    result = _fails(ops)
    assert (result.counterexample, result.reason.startswith(FORWARD_ZONES_MEET)) == (
        (1, 2, 3, 4),
        True,
    )


def test_a_stale_read_puts_a_backward_zone_inside_a_forward_one() -> None:
    ops = [w(1, "a", 0, 10), w(2, "b", 20, 30), r(3, "b", 32, 35), r(4, "a", 40, 50)]
    result = _fails(ops)
    assert result.counterexample == (1, 2, 4)
    assert result.reason.startswith(BACKWARD_IN_FORWARD)


def test_a_read_overlapping_the_next_write_may_return_either_value() -> None:
    for seen in ("a", "b"):
        _passes([w(1, "a", 0, 10), w(2, "b", 20, 40), r(3, seen, 25, 30)])


def test_reads_flipping_back_between_two_overlapping_writes_fail() -> None:
    ops = [w(1, "a", 0, 100), w(2, "b", 10, 90), r(3, "a", 20, 30), r(4, "b", 40, 50)]
    _passes(ops)
    assert _fails([*ops, r(5, "a", 60, 70)]).counterexample == (1, 2, 3, 4, 5)


# ----------------------------------------------------------------- the initial value


def test_the_initial_value_read_after_a_write_was_acknowledged_fails() -> None:
    result = _fails([w(1, "a", 0, 10), r(2, ABSENT_VALUE, 20, 30)])
    assert result.counterexample == (1, 2)


def test_the_initial_value_may_be_read_until_the_first_write_is_acknowledged() -> None:
    _passes([w(1, "a", 0, 10), r(2, ABSENT_VALUE, 5, 30), r(3, "a", 40, 50)])
    _passes([r(1, "old", 0, 5), w(2, ABSENT_VALUE, 10, 20), r(3, ABSENT_VALUE, 30, 40)], "old")


def test_a_read_of_the_initial_value_after_another_was_read_fails() -> None:
    ops = [w(1, "a", 0, 100), r(2, "a", 10, 20), r(3, ABSENT_VALUE, 30, 40)]
    assert _fails(ops).counterexample == (1, 2, 3)


# ----------------------------------------------------------------- pending writes


def test_a_pending_write_that_a_read_returned_took_effect() -> None:
    """Once "b" was read, the write that timed out happened: "a" cannot come back."""
    ops = [w(1, "a", 0, 10), w(2, "b", 20, None), r(3, "b", 30, 40)]
    _passes(ops)
    assert _fails([*ops, r(4, "a", 50, 60)]).counterexample == (1, 2, 3, 4)


def test_a_pending_write_nobody_read_may_never_have_happened() -> None:
    ops = [w(1, "a", 0, 10), w(2, "b", 20, None), r(3, "a", 30, 40), r(4, "a", 500, 510)]
    _passes(ops)
    found = order_blocks(ops, ABSENT_VALUE).order
    assert found is not None and [op.op_id for op in found] == [1, 3, 4]


def test_a_pending_write_may_take_effect_long_after_its_call() -> None:
    _passes([w(1, "a", 0, None), r(2, ABSENT_VALUE, 10, 20), r(3, "a", 500, 510)])


# ----------------------------------------------------------------- the counterexample


def test_the_earliest_violation_is_reported() -> None:
    stale = [w(1, "a", 0, 10), w(2, "b", 20, 30), r(3, "a", 40, 50)]
    assert _fails([*stale, r(4, "z", 60, 70)]).counterexample == (1, 2, 3)
    assert _fails([*stale, r(4, "z", 5, 8)]).counterexample == (4,)


def test_the_counterexample_does_not_depend_on_the_order_of_the_operations() -> None:
    ops = [
        w(1, "a", 0, 10),
        w(2, "b", 20, 30),
        r(3, "a", 40, 50),
        r(4, "a", 41, 52),
        r(5, "b", 32, 35),
        w(6, "c", 60, 70),
        r(7, "b", 80, 90),
    ]
    expected = check_unique_register(ops).counterexample
    rng = random.Random(5)
    for _ in range(20):
        rng.shuffle(ops)
        assert check_unique_register(ops).counterexample == expected


def test_only_histories_of_unique_write_values_are_taken() -> None:
    assert unique_write_values([w(1, "a", 0, 1), w(2, "b", 0, None), r(3, "a", 0, 1)])
    assert not unique_write_values([w(1, "a", 0, 1), w(2, "a", 5, 6)])
    assert not unique_write_values([w(1, ABSENT_VALUE, 0, 1)])
    assert unique_write_values([w(1, ABSENT_VALUE, 0, 1)], initial="old")
    with pytest.raises(ValueError):
        check_unique_register([w(1, "a", 0, 1), w(2, "a", 5, 6)])
    with pytest.raises(ValueError):
        check_precedence([w(1, "a", 0, 1), w(2, "a", 5, 6)])


# ----------------------------------------------------------------- the cross-check's order


def test_the_precedence_order_is_checked_by_a_verifier_that_rejects_wrong_orders() -> None:
    ops = [w(1, "a", 0, 10), w(2, "b", 20, 30), r(3, "b", 40, 50), w(4, "c", 45, None)]
    found = order_blocks(ops, ABSENT_VALUE).order
    assert found is not None and is_linearization(found, ops, ABSENT_VALUE)
    one, two, three, four = ops
    assert not is_linearization([two, one, three], ops, ABSENT_VALUE), "real time"
    assert not is_linearization([one, three, two], ops, ABSENT_VALUE), "a wrong read"
    assert not is_linearization([one, two], ops, ABSENT_VALUE), "a read left out"
    assert is_linearization([one, two, three, four], ops, ABSENT_VALUE), "pending, late"


# ----------------------------------------------------------------- check_register


def test_check_register_decides_unique_values_by_zones_and_searches_them_as_a_cross_check() -> None:
    ops = [w(1, "a", 0, 10), w(2, "b", 20, 30), r(3, "a", 40, 50)]
    result = check_register(ops, budget=CheckBudget(max_ops=2))
    assert (result.verdict, result.counterexample) == (NOT_LINEARIZABLE, (1, 2, 3))
    assert result.steps > 0, "the search ran as the cross-check"
    passed = check_register([*ops[:2], r(3, "b", 40, 50)])
    assert (passed.verdict, passed.reason) == (LINEARIZABLE, f"{DECIDED}; {SEARCH_AGREES}")
    assert passed.steps > 0


def test_a_cross_check_that_runs_out_of_budget_leaves_the_zones_verdict() -> None:
    """Forty concurrent writes and a read of a value none wrote: the search would try
    every order of the writes; the zones need none."""
    ops = [w(i, f"v{i}", 0, 1000) for i in range(40)] + [r(99, "nobody", 1001, 1002)]
    result = check_register(ops, budget=CheckBudget(max_steps=500))
    assert (result.verdict, result.counterexample) == (NOT_LINEARIZABLE, (99,))
    assert result.reason.endswith(SEARCH_RAN_OUT)
    assert result.steps > 500


def test_check_register_searches_when_write_values_repeat() -> None:
    ops = [w(1, "a", 0, 10), w(2, "b", 20, 30), w(3, "a", 40, 50), r(4, "a", 60, 70)]
    result = check_register(ops)
    assert (result.verdict, result.reason) == (LINEARIZABLE, "")
    assert result.steps > 0
    assert check_register(ops, budget=CheckBudget(max_ops=3)).verdict == UNKNOWN


def test_check_register_answers_unknown_when_the_zones_and_the_search_disagree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def wrong(ops: list[RegisterOp], initial: str) -> CheckResult:
        return CheckResult(LINEARIZABLE, len(ops), 0, reason=DECIDED)

    monkeypatch.setattr(checker, "check_unique_register", wrong)
    result = check_register([w(1, "a", 0, 10), r(2, "z", 20, 30)])
    assert result.verdict == UNKNOWN
    assert "disagree" in result.reason


def test_check_rows_reads_a_not_found_as_the_initial_value_of_a_unique_history() -> None:
    def row(op_id: int, kind: str, outcome: str, value: str, start_ms: int) -> dict[str, object]:
        return {
            "op_id": op_id,
            "kind": kind,
            "outcome": outcome,
            "value": value,
            "invoke_ms": start_ms,
            "complete_ms": start_ms + 5,
        }

    rows = [
        row(1, "register", "ok", "a", 0),
        row(2, "route_read", "ok", "a", 10),
        row(3, "route_read", "not_found", "", 20),
        row(4, "register", "timeout", "b", 30),
    ]
    result = check_rows(rows)
    # The absent route read after "a" was acknowledged; the read of "a" is beside the point.
    assert (result.verdict, result.counterexample) == (NOT_LINEARIZABLE, (1, 3))
    assert result.reason.startswith(BACKWARD_IN_FORWARD)


# ----------------------------------------------------------------- scale


def test_a_topic_of_100000_operations_is_decided_and_a_stale_read_in_it_caught() -> None:
    """No cap: the verdict is never unknown, whatever the budget says. (Its time is in
    ``bench/checker.py``; tests assert behaviour, not wall time.)"""
    rng = random.Random(100_000)
    ops = long_register_run(rng, LONG_OPS)
    assert len(ops) > CROSS_CHECK_OPS_MAX
    assert sum(op.complete_us is None for op in ops) > 100
    budget = CheckBudget(max_ops=10, max_steps=10, max_seconds=0.001)
    assert check_register(ops, budget=budget).verdict == LINEARIZABLE
    # A late read returns the value of a write acknowledged 5 ms before it was called:
    # dozens of acknowledged writes came in between.
    read = next(op for op in reversed(ops) if not op.is_write)
    old = next(
        op
        for op in ops
        if op.is_write and op.complete_us is not None and op.complete_us < read.invoke_us - 5_000
    )
    stale = r(read.op_id, old.value, read.invoke_us, read.complete_us or read.invoke_us)
    spoiled = [stale if op is read else op for op in ops]
    result = check_register(spoiled, budget=budget)
    assert result.verdict == NOT_LINEARIZABLE
    assert read.op_id in result.counterexample and old.op_id in result.counterexample
    assert len(result.counterexample) <= 6
    witness = [op for op in spoiled if op.op_id in result.counterexample]
    assert search_register(witness).verdict == NOT_LINEARIZABLE
