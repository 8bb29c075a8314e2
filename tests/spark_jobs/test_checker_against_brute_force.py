"""The register checker agrees with a brute-force search on small random histories.

The reference below shares nothing with ``spark_jobs.checker`` but the operation type: it
tries every subset of the pending writes (a write that timed out may or may not have taken
effect) and every order of the chosen operations, keeps the orders that respect real time
(``a`` precedes ``b`` when ``a`` returned strictly before ``b`` was called) and replays each
order on a register. It is exponential, so histories stay at a few operations.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings, strategies as st

from spark_jobs.checker import (
    ABSENT_VALUE,
    LINEARIZABLE,
    NOT_LINEARIZABLE,
    RegisterOp,
    check_register,
)

OPS_MAX = 6
VALUES = (ABSENT_VALUE, "a", "b", "c")
# Microseconds, kept small so that drawn intervals often touch or share an endpoint.
TIME_MAX_US = 30
DURATION_MAX_US = 12


def _precedes(first: RegisterOp, second: RegisterOp) -> bool:
    """Real-time order: ``first`` answered before ``second`` was called."""
    return first.complete_us is not None and first.complete_us < second.invoke_us


def _replays(order: Sequence[RegisterOp], initial: str) -> bool:
    """True when every read of ``order`` returns the value of the write before it."""
    state = initial
    for op in order:
        if op.is_write:
            state = op.value
        elif op.value != state:
            return False
    return True


def _respects_real_time(order: Sequence[RegisterOp]) -> bool:
    return not any(
        _precedes(later, earlier) for i, earlier in enumerate(order) for later in order[i + 1 :]
    )


def brute_force_linearizable(ops: Sequence[RegisterOp], initial: str = ABSENT_VALUE) -> bool:
    """The reference: some subset of pending writes plus every complete operation has an
    order that respects real time and replays on a register."""
    done = [op for op in ops if op.complete_us is not None]
    pending = [op for op in ops if op.complete_us is None]
    assert all(op.is_write for op in pending), "only writes can be pending"
    for size in range(len(pending) + 1):
        for chosen in itertools.combinations(pending, size):
            for order in itertools.permutations([*done, *chosen]):
                if _respects_real_time(order) and _replays(order, initial):
                    return True
    return False


@st.composite
def histories(draw: st.DrawFn) -> list[RegisterOp]:
    """A few reads and writes with overlapping intervals; some writes never answered."""
    count = draw(st.integers(min_value=1, max_value=OPS_MAX))
    ops = []
    for op_id in range(1, count + 1):
        is_write = draw(st.booleans())
        value = draw(st.sampled_from(VALUES))
        invoke = draw(st.integers(min_value=0, max_value=TIME_MAX_US))
        pending = is_write and draw(st.integers(min_value=0, max_value=5)) == 0
        duration = draw(st.integers(min_value=0, max_value=DURATION_MAX_US))
        ops.append(
            RegisterOp(op_id, is_write, value, invoke, None if pending else invoke + duration)
        )
    return ops


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.sampled_from(VALUES))
def test_it_agrees_with_the_brute_force_search(ops: list[RegisterOp], initial: str) -> None:
    expected = LINEARIZABLE if brute_force_linearizable(ops, initial) else NOT_LINEARIZABLE
    result = check_register(ops, initial)
    assert result.verdict == expected, ops
    if expected == NOT_LINEARIZABLE:
        witness = [op for op in ops if op.op_id in result.counterexample]
        assert not brute_force_linearizable(witness, initial), "the counterexample fails too"


def w(op_id: int, value: str, invoke: int, complete: int | None) -> RegisterOp:
    return RegisterOp(op_id, True, value, invoke, complete)


def r(op_id: int, value: str, invoke: int, complete: int) -> RegisterOp:
    return RegisterOp(op_id, False, value, invoke, complete)


KNOWN_LINEARIZABLE = {
    "a read overlapping a write may see the old value": [
        w(1, "a", 0, 10),
        w(2, "b", 20, 40),
        r(3, "a", 25, 30),
        r(4, "b", 45, 50),
    ],
    "a read touching a write's ack may see the old value": [
        w(1, "a", 0, 10),
        w(2, "b", 20, 30),
        r(3, "a", 30, 35),
    ],
    "two clients see concurrent writes in one order": [
        w(1, "a", 0, 50),
        w(2, "b", 0, 50),
        r(3, "b", 10, 20),
        r(4, "a", 30, 40),
        r(5, "a", 60, 70),
    ],
    "a write that timed out took effect late": [
        w(1, "a", 0, 10),
        w(2, "b", 20, None),
        r(3, "a", 30, 40),
        r(4, "b", 50, 60),
    ],
    "a write that timed out never took effect": [
        w(1, "a", 0, 10),
        w(2, "b", 20, None),
        r(3, "a", 30, 40),
    ],
    "a delete then a read of no route": [w(1, "a", 0, 10), w(2, "", 20, 30), r(3, "", 40, 50)],
}

KNOWN_VIOLATING = {
    "a stale read after an acknowledged write": [
        w(1, "a", 0, 10),
        w(2, "b", 20, 30),
        r(3, "a", 31, 35),
    ],
    "non-monotonic reads of one client": [
        w(1, "a", 0, 10),
        w(2, "b", 20, 60),
        r(3, "b", 25, 30),
        r(4, "a", 35, 40),
    ],
    "a read of a value never written": [w(1, "a", 0, 10), r(2, "z", 20, 30)],
    "a read of the old value after a timed-out write was seen": [
        w(1, "a", 0, 10),
        w(2, "b", 20, None),
        r(3, "b", 30, 40),
        r(4, "a", 50, 60),
    ],
    "a route read after its delete was acknowledged": [
        w(1, "a", 0, 10),
        w(2, "", 20, 30),
        r(3, "a", 40, 50),
    ],
}


def test_the_known_linearizable_histories_pass_both_checkers() -> None:
    for name, ops in KNOWN_LINEARIZABLE.items():
        assert brute_force_linearizable(ops), name
        assert check_register(ops).verdict == LINEARIZABLE, name


def test_the_known_violating_histories_fail_both_with_a_failing_counterexample() -> None:
    for name, ops in KNOWN_VIOLATING.items():
        assert not brute_force_linearizable(ops), name
        result = check_register(ops)
        assert result.verdict == NOT_LINEARIZABLE, name
        witness = [op for op in ops if op.op_id in result.counterexample]
        assert not brute_force_linearizable(witness), name
