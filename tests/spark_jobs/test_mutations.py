"""The mutations the power job injects: each kind, the rule that says whether one counts as
injected (the writes contradict it), and that the same seed draws the same."""

from __future__ import annotations

import random

import pytest

from spark_jobs.checker import NOT_LINEARIZABLE, RegisterOp, check_register, search_register
from spark_jobs.mutations import (
    KINDS,
    LOST_WRITE,
    NEVER_WRITTEN,
    REORDERED_WRITES,
    STALE_READ_LAGS_US,
    WriteRule,
    mutate,
    read_contradicted,
)

ROUTES = ("a", "a,churn")


def flipping(writes: int, period_us: int = 3_000_000) -> list[RegisterOp]:
    """A route that flips every ``period_us``, each write acknowledged within 5 ms, and a
    client reading it every 250 ms (2 ms each)."""
    ops = []
    op_id = 0
    for i in range(writes):
        op_id += 1
        start = i * period_us
        ops.append(RegisterOp(op_id, True, ROUTES[i % 2], start, start + 5_000))
        for t in range(start + 10_000, start + period_us - 10_000, 250_000):
            op_id += 1
            ops.append(RegisterOp(op_id, False, ROUTES[i % 2], t, t + 2_000))
    return ops


def by_id(ops: tuple[RegisterOp, ...] | list[RegisterOp]) -> dict[int, RegisterOp]:
    return {op.op_id: op for op in ops}


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_on_a_small_history_is_injected_and_caught(kind: str) -> None:
    ops = flipping(4)
    assert check_register(ops).verdict == "linearizable"
    mutations = mutate(ops, kind, 3, random.Random(7))
    assert mutations and all(m.kind == kind and m.injected for m in mutations)
    for mutation in mutations:
        assert check_register(mutation.history).verdict == NOT_LINEARIZABLE
        assert search_register(mutation.history).verdict == NOT_LINEARIZABLE


@pytest.mark.parametrize("kind", sorted(STALE_READ_LAGS_US))
def test_a_stale_read_returns_the_replaced_value_its_lag_after_the_ack(kind: str) -> None:
    ops = flipping(3)
    writes = by_id([op for op in ops if op.is_write])
    for mutation in mutate(ops, kind, 5, random.Random(3)):
        [added] = mutation.changed
        stale = by_id(mutation.history)[added]
        write = writes[mutation.target]
        assert write.complete_us is not None
        assert stale.invoke_us == write.complete_us + STALE_READ_LAGS_US[kind]
        assert stale.value != write.value and len(mutation.history) == len(ops) + 1


def test_a_lost_write_is_seen_by_no_read() -> None:
    ops = flipping(3)
    for mutation in mutate(ops, LOST_WRITE, 5, random.Random(3)):
        lost = by_id(ops)[mutation.target]
        after = by_id(mutation.history)
        assert mutation.changed and all(after[i].value != lost.value for i in mutation.changed)
        assert all(by_id(ops)[i].value == lost.value for i in mutation.changed)


def test_reordered_writes_are_seen_in_the_other_order() -> None:
    ops = flipping(3)
    [mutation] = mutate(ops, REORDERED_WRITES, 1, random.Random(1))
    before, after = by_id(ops), by_id(mutation.history)
    swapped = {(before[i].value, after[i].value) for i in mutation.changed}
    assert swapped == {(ROUTES[0], ROUTES[1]), (ROUTES[1], ROUTES[0])}


def test_a_never_written_value_is_no_value_of_the_history() -> None:
    ops = flipping(2)
    [mutation] = mutate(ops, NEVER_WRITTEN, 1, random.Random(1))
    [read] = mutation.changed
    assert by_id(mutation.history)[read].value not in {op.value for op in ops}


def test_a_stale_read_a_pending_write_explains_is_not_injected() -> None:
    """A registration that timed out may take effect at any time after its call, so a
    read of its route fits anywhere later: the mutation is no fault, and is neither
    injected nor counted as missed. Without that write the same read is a fault."""
    acked = [RegisterOp(1, True, "a", 0, 1_000), RegisterOp(2, True, "b", 10_000, 11_000)]
    pending = RegisterOp(3, True, "a", 500, None)
    [explained] = mutate([*acked, pending], "stale_read_1ms", 1, random.Random(1))
    stale = by_id(explained.history)[explained.changed[0]]
    assert (stale.value, stale.invoke_us) == ("a", 12_000)
    assert not explained.injected
    assert check_register(explained.history).verdict == "linearizable"
    [fault] = mutate(acked, "stale_read_1ms", 1, random.Random(1))
    assert fault.injected and check_register(fault.history).verdict == NOT_LINEARIZABLE


def test_the_rule_ignores_reads_so_a_fault_only_reads_expose_is_not_injected() -> None:
    """Conservative: with the timed-out write taking effect just before the stale read,
    the later reads of the new route fail the history, but the rule, on writes alone,
    cannot tell, and leaves the mutation out rather than count a miss it cannot prove."""
    ops = [*flipping(4), RegisterOp(900, True, ROUTES[0], 1_000, None)]
    mutations = mutate(ops, "stale_read_1ms", 5, random.Random(1))
    stale_to_a = [m for m in mutations if by_id(m.history)[m.changed[0]].value == ROUTES[0]]
    assert stale_to_a and not any(m.injected for m in stale_to_a)
    assert all(read_contradicted(by_id(m.history)[m.changed[0]], flipping(4)) for m in stale_to_a)


def test_a_stale_read_after_the_next_write_restored_the_value_is_not_injected() -> None:
    """Writes 50 ms apart: 100 ms after an ack the route has flipped back, so a read of
    the replaced route is fresh again."""
    ops = [
        RegisterOp(1, True, "a", 0, 1_000),
        RegisterOp(2, True, "b", 50_000, 51_000),
        RegisterOp(3, True, "a", 100_000, 101_000),
        RegisterOp(4, False, "a", 200_000, 201_000),
    ]
    [late] = mutate(ops, "stale_read_100ms", 1, random.Random(1))
    assert late.target == 2 and not late.injected
    [early] = [m for m in mutate(ops, "stale_read_1ms", 2, random.Random(1)) if m.target == 2]
    assert early.injected and check_register(early.history).verdict == NOT_LINEARIZABLE


def test_the_same_seed_draws_the_same_mutations() -> None:
    ops = flipping(8)
    for kind in KINDS:
        first = mutate(ops, kind, 4, random.Random("run/topic"))
        again = mutate(ops, kind, 4, random.Random("run/topic"))
        assert first == again and first


def test_the_rule_never_flags_a_linearizable_history() -> None:
    """Soundness on seeded random histories with repeated values and pending writes: a
    read the writes contradict always makes the history fail the search."""
    rng = random.Random(46)
    flagged = 0
    for _ in range(1_500):
        ops = []
        for i in range(rng.randint(2, 8)):
            start = rng.randint(0, 30)
            is_write = rng.random() < 0.5
            end = None if is_write and rng.random() < 0.2 else start + rng.randint(0, 10)
            ops.append(RegisterOp(i, is_write, rng.choice("abc"), start, end))
        initial = rng.choice(["", "a"])
        rule = WriteRule(ops, initial)
        if any(rule.contradicted(op) for op in ops if not op.is_write):
            flagged += 1
            assert search_register(ops, initial).verdict == NOT_LINEARIZABLE, ops
    assert flagged > 300
