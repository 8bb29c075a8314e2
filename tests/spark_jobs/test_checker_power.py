"""The checker's power: mutations of every kind injected into a topic's history (the whole
history when it passes, its longest passing prefix when it fails), and the share caught."""

from __future__ import annotations

import random

from spark_jobs.checker import (
    LINEARIZABLE,
    NOT_LINEARIZABLE,
    CheckBudget,
    RegisterOp,
    check_register,
    time_prefix,
)
from spark_jobs.mutations import KINDS
from spark_jobs.power import (
    PASSING_PREFIX,
    WHOLE,
    PowerResult,
    checker_verdict,
    longest_passing_prefix,
    measure_power,
)

ROUTES = ("a", "a,churn")
WRITE_PERIOD_US = 3_000_000
READ_PERIOD_US = 250_000


def acknowledged_history(writes: int) -> list[RegisterOp]:
    """A route that flips every 3 s, each write known to within its own 5 ms RPC, and a
    client reading every 250 ms (each read 2 ms long) the value then current."""
    ops = []
    op_id = 0
    for i in range(writes):
        op_id += 1
        start = i * WRITE_PERIOD_US
        ops.append(RegisterOp(op_id, True, ROUTES[i % 2], start, start + 5_000))
        for t in range(start + 10_000, start + WRITE_PERIOD_US - 10_000, READ_PERIOD_US):
            op_id += 1
            ops.append(RegisterOp(op_id, False, ROUTES[i % 2], t, t + 2_000))
    return ops


def by_kind(results: list[PowerResult]) -> dict[str, PowerResult]:
    return {r.kind: r for r in results}


def test_every_kind_injected_into_an_acknowledged_history_is_caught() -> None:
    results = by_kind(measure_power(acknowledged_history(6), 4, "p1/P"))
    assert list(results) == list(KINDS)
    for result in results.values():
        assert result.region == WHOLE
        assert result.injected == result.drawn == result.caught > 0 and result.unknown == 0


def test_writes_that_timed_out_explain_the_stale_reads_so_none_is_injected() -> None:
    """A registration and an unregistration that got no answer may each take effect at
    any later time, so a read of either route fits anywhere: no stale read, lost or
    reordered write is a fault there, and none counts as a miss. A value never written
    is still a fault, and caught."""
    timed_out = [
        RegisterOp(900, True, ROUTES[0], 1_000, None),
        RegisterOp(901, True, ROUTES[1], 1_000, None),
    ]
    results = by_kind(measure_power([*acknowledged_history(6), *timed_out], 4, "p1/Q"))
    for kind, result in results.items():
        assert result.drawn > 0
        if kind == "never_written":
            assert result.injected == result.caught == 4
        else:
            assert (result.injected, result.caught) == (0, 0)


def test_a_failing_history_is_mutated_inside_its_longest_passing_prefix() -> None:
    ops = acknowledged_history(4)
    broken_at = 7_000_000
    ops.append(RegisterOp(999, False, "never-written", broken_at, broken_at + 1_000))
    assert check_register(ops).verdict == NOT_LINEARIZABLE
    found = longest_passing_prefix(ops)
    assert found is not None
    prefix, cut = found
    # The longest passing prefix stops just before the bad read answers.
    assert broken_at <= cut < broken_at + 1_000
    assert check_register(prefix).verdict == LINEARIZABLE
    assert check_register(time_prefix(ops, broken_at + 1_000)).verdict == NOT_LINEARIZABLE
    results = measure_power(ops, 4, "p1/F")
    assert {r.region for r in results} == {PASSING_PREFIX}
    assert all(r.injected == r.caught > 0 for r in results)


def test_operations_open_at_the_cut_are_pending_writes_and_no_reads() -> None:
    ops = [
        RegisterOp(1, True, "a", 0, 10),
        RegisterOp(2, True, "b", 5, 30),
        RegisterOp(3, False, "a", 6, 25),
        RegisterOp(4, False, "b", 40, 41),
    ]
    assert time_prefix(ops, 20) == [ops[0], RegisterOp(2, True, "b", 5, None)]


def test_the_same_seed_injects_the_same() -> None:
    ops = acknowledged_history(5)
    assert measure_power(ops, 3, "r/t") == measure_power(ops, 3, "r/t")


def test_nothing_is_injected_without_a_draw_or_into_an_unknown_history() -> None:
    assert measure_power(acknowledged_history(3), 0, "r/t") == []
    # Repeated values go to the search, which this budget cannot run.
    assert measure_power(acknowledged_history(3), 3, "r/t", budget=CheckBudget(max_ops=1)) == []


def test_the_power_verdict_is_the_checkers() -> None:
    """``checker_verdict`` skips only the counterexample: on seeded random histories
    (repeated values and unique ones, pending writes) it gives ``check_register``'s."""
    rng = random.Random(5)
    for _ in range(400):
        ops = []
        values = "abc" if rng.random() < 0.5 else "abcdefghij"
        for i in range(rng.randint(1, 8)):
            start = rng.randint(0, 30)
            is_write = rng.random() < 0.5
            end = None if is_write and rng.random() < 0.2 else start + rng.randint(0, 10)
            value = values[i] if is_write and len(values) > 3 else rng.choice(values[:4])
            ops.append(RegisterOp(i, is_write, value, start, end))
        assert checker_verdict(ops) == check_register(ops).verdict, ops
