"""The checker's power: stale reads injected just after a write's ack, and the share caught."""

from __future__ import annotations

import random

from spark_jobs.checker import NOT_LINEARIZABLE, RegisterOp, check_register
from spark_jobs.power import (
    STALE_READ_GAP_US,
    PowerResult,
    inject_stale_reads,
    measure_power,
    stale_read_targets,
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


def test_each_target_is_an_acknowledged_write_and_the_value_it_replaced() -> None:
    targets = stale_read_targets(acknowledged_history(4))
    assert [(w.value, older) for w, older in targets] == [
        ("a,churn", "a"),
        ("a", "a,churn"),
        ("a,churn", "a"),
    ]


def test_an_injected_read_returns_the_old_value_just_after_the_ack() -> None:
    ops = acknowledged_history(3)
    injections = inject_stale_reads(ops, 5, random.Random(3))
    assert len(injections) == 5
    writes = {op.op_id: op for op in ops if op.is_write}
    for injection in injections:
        stale = next(op for op in injection.history if op.op_id == injection.replaced_read)
        ack = writes[injection.after_write].complete_us
        assert ack is not None and stale.invoke_us == ack + STALE_READ_GAP_US
        assert stale.value == injection.value != writes[injection.after_write].value
        assert len(injection.history) == len(ops)
        assert check_register(injection.history).verdict == NOT_LINEARIZABLE


def test_every_stale_read_after_an_acknowledged_write_is_caught() -> None:
    result = measure_power(acknowledged_history(6), 20, random.Random(1))
    assert result == PowerResult(injected=20, caught=20, unknown=0)


def test_writes_that_timed_out_hide_the_stale_reads_of_their_values() -> None:
    """A registration and an unregistration that got no answer may each take effect at
    any later time, so a read of either route fits anywhere: the history, not the
    checker, lacks the power."""
    timed_out = [
        RegisterOp(900, True, ROUTES[0], 1_000, None),
        RegisterOp(901, True, ROUTES[1], 1_000, None),
    ]
    result = measure_power([*acknowledged_history(6), *timed_out], 20, random.Random(1))
    assert (result.injected, result.caught) == (20, 0)


def test_a_history_that_already_fails_gets_no_injection() -> None:
    ops = [*acknowledged_history(3), RegisterOp(999, False, "never-written", 100_000, 101_000)]
    result = measure_power(ops, 10, random.Random(1))
    assert (result.injected, result.skipped) == (0, "the history itself is not_linearizable")


def test_a_history_without_a_second_write_has_nothing_to_inject_at() -> None:
    result = measure_power(acknowledged_history(1), 10, random.Random(1))
    assert result.injected == 0 and result.skipped.startswith("no read, or no write")
