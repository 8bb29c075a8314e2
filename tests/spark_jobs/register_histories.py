"""Random register histories whose writes have unique values, for the checker tests.

Two shapes: a real register run (each operation takes effect at a random instant inside
its interval, a read returns what the register held then: linearizable by construction)
that may then be spoiled by one read, and a free draw (any read of any value).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from spark_jobs.register_ops import ABSENT_VALUE, RegisterOp

NEVER_WRITTEN_VALUE = "never-written"
WRITE_VALUES = (ABSENT_VALUE, *"abcdefghijklmnop")
"""Enough for histories of up to 16 operations (one value may be the initial one)."""


@dataclass(frozen=True, slots=True)
class Shape:
    """How dense and how broken the histories are."""

    ops_max: int = 8
    time_max_us: int = 30
    duration_max_us: int = 12
    pending_share: float = 0.2
    spoiled_share: float = 0.5


def _interval(rng: random.Random, shape: Shape) -> tuple[int, int]:
    invoke = rng.randint(0, shape.time_max_us)
    return invoke, invoke + rng.randint(0, shape.duration_max_us)


Event = tuple[int, int, bool, RegisterOp]
"""(instant it takes effect, op id, a pending write that never takes effect, operation)"""


def _played(events: list[Event], initial: str) -> list[RegisterOp]:
    """The operations with each read returning what the register held at its instant."""
    events.sort(key=lambda e: (e[0], e[1]))
    state, result = initial, []
    for _, _, never, op in events:
        if op.is_write:
            state = state if never else op.value
            result.append(op)
        else:
            result.append(RegisterOp(op.op_id, False, state, op.invoke_us, op.complete_us))
    return sorted(result, key=lambda o: o.op_id)


def register_run(rng: random.Random, count: int, initial: str, shape: Shape) -> list[RegisterOp]:
    """``count`` operations of a real register: linearizable by construction. A pending
    write takes effect inside [call, call + duration] or, half the time, never."""
    writes = rng.randint(0, count)
    values = [v for v in WRITE_VALUES if v != initial]
    rng.shuffle(values)
    events: list[Event] = []
    for op_id in range(1, count + 1):
        invoke, complete = _interval(rng, shape)
        instant = rng.randint(invoke, complete)
        if op_id <= writes:
            pending = rng.random() < shape.pending_share
            never = pending and rng.random() < 0.5
            op = RegisterOp(op_id, True, values.pop(), invoke, None if pending else complete)
            events.append((instant, op_id, never, op))
        else:
            events.append((instant, op_id, False, RegisterOp(op_id, False, "", invoke, complete)))
    return _played(events, initial)


def spoil(rng: random.Random, ops: list[RegisterOp], initial: str) -> list[RegisterOp]:
    """One read made to return another value: an older one, the initial value, a value
    written later, or one never written."""
    reads = [op for op in ops if not op.is_write]
    if not reads:
        return ops
    victim = rng.choice(reads)
    choices = [op.value for op in ops if op.is_write] + [initial]
    if rng.random() < 0.1:
        choices.append(NEVER_WRITTEN_VALUE)
    value = rng.choice([v for v in choices if v != victim.value] or [NEVER_WRITTEN_VALUE])
    spoiled = RegisterOp(victim.op_id, False, value, victim.invoke_us, victim.complete_us)
    return [spoiled if op is victim else op for op in ops]


def free_draw(rng: random.Random, count: int, initial: str, shape: Shape) -> list[RegisterOp]:
    """Writes of unique values and reads of any of them, the initial value or a value
    never written, at random times."""
    values = [v for v in WRITE_VALUES if v != initial]
    rng.shuffle(values)
    ops: list[RegisterOp] = []
    written: list[str] = []
    for op_id in range(1, count + 1):
        invoke, complete = _interval(rng, shape)
        if rng.random() < 0.45:
            value = values.pop()
            written.append(value)
            pending = rng.random() < shape.pending_share
            ops.append(RegisterOp(op_id, True, value, invoke, None if pending else complete))
        else:
            # Mostly values written so far; sometimes one written later, or never.
            pool = [values[-1], initial, *written, *written, *written]
            value = NEVER_WRITTEN_VALUE if rng.random() < 0.05 else rng.choice(pool)
            ops.append(RegisterOp(op_id, False, value, invoke, complete))
    return ops


def random_history(rng: random.Random, shape: Shape) -> tuple[list[RegisterOp], str]:
    """One history and its initial value (the absent route most of the time)."""
    initial = ABSENT_VALUE if rng.random() < 0.7 else "initial"
    count = rng.randint(1, shape.ops_max)
    if rng.random() < 0.6:
        ops = register_run(rng, count, initial, shape)
        if rng.random() < shape.spoiled_share:
            ops = spoil(rng, ops, initial)
    else:
        ops = free_draw(rng, count, initial, shape)
    rng.shuffle(ops)
    return ops, initial


def long_register_run(
    rng: random.Random, count: int, write_share: float = 0.25, pending_share: float = 0.03
) -> list[RegisterOp]:
    """A long real register run of one topic: an operation called every 10 µs, each
    lasting up to 60 µs (so about six overlap), a quarter of them writes of values of
    their own, a few of those pending (half of which never take effect). Linearizable by
    construction, like :func:`register_run`."""
    events: list[Event] = []
    for op_id in range(1, count + 1):
        invoke = op_id * 10 + rng.randint(0, 5)
        complete = invoke + rng.randint(0, 60)
        instant = rng.randint(invoke, complete)
        if rng.random() < write_share:
            pending = rng.random() < pending_share
            never = pending and rng.random() < 0.5
            op = RegisterOp(op_id, True, f"v{op_id}", invoke, None if pending else complete)
            events.append((instant, op_id, never, op))
        else:
            events.append((instant, op_id, False, RegisterOp(op_id, False, "", invoke, complete)))
    return _played(events, ABSENT_VALUE)
