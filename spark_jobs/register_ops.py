"""What every register checker of one topic takes and answers: the operation, the verdict,
and the one rule of which operations a counterexample may drop.

Three checkers share these types: the Wing-Gong-Lowe search (``spark_jobs.checker``),
the value-zone checker for histories whose writes have unique values
(``spark_jobs.register_zones``), and its cross-check, the precedence graph of value
clusters (``spark_jobs.register_precedence``). They live here, below all three, so that
none of them imports another to name a result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from experiment_history.superseding import ABSENT

LINEARIZABLE = "linearizable"
NOT_LINEARIZABLE = "not_linearizable"
UNKNOWN = "unknown"
NOT_EXERCISED = "not_exercised"
"""Shown for a topic with fewer than two writes: any reads of one value fit a register."""
ABSENT_VALUE = ABSENT
"""The route of a topic no write has touched (TOPIC_NOT_EXIST)."""
# Minimizing a counterexample re-runs a check; cap the re-runs so a failure report
# costs at most this many extra checks.
MINIMIZE_CHECKS_MAX = 400


@dataclass(frozen=True, slots=True)
class RegisterOp:
    """One register operation, its times in microseconds. ``complete_us`` None means
    pending: it may take effect at any time after its call, or never (a write that timed
    out or failed ambiguously)."""

    op_id: int
    is_write: bool
    value: str
    invoke_us: int
    complete_us: int | None


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The verdict for one topic, with a minimal counterexample when not linearizable.

    ``steps`` counts Wing-Gong-Lowe search steps (0 when no search ran)."""

    verdict: str
    ops: int
    steps: int
    counterexample: tuple[int, ...] = ()
    reason: str = ""


def removable(op: RegisterOp, kept: Sequence[RegisterOp]) -> bool:
    """Whether a counterexample may drop ``op`` and stay sound: any read, and a write only
    when no other kept read returns its value (then no read could have depended on it;
    dropping a write a read depends on would invent a violation)."""
    if not op.is_write:
        return True
    return not any(not o.is_write and o.value == op.value for o in kept if o is not op)


def removal_order(ops: Sequence[RegisterOp]) -> list[RegisterOp]:
    """The order greedy minimization tries removals in: reads before writes, the latest
    call first (a late operation is the likeliest to be beside the point)."""
    return sorted(ops, key=lambda o: (not o.is_write, o.invoke_us), reverse=True)
