"""Benchmark of the linearizability checkers on one topic whose writes have unique values.

The histories are real register runs (an operation called every 10 µs, each lasting up
to 60 µs, a quarter of them writes of a value of their own, 3 % of those timed out), so
they are linearizable; the "stale" variant makes the last read return the value of a
write acknowledged 5 ms before it was called. Three deciders, each on the same history
in the same run:

- the Wing-Gong-Lowe search (``spark_jobs.checker.search_register``, default budget:
  5,000 operations, 2,000,000 steps, 20 s; verdict ``unknown`` past them): the baseline;
- the value zones (``spark_jobs.register_zones.check_unique_register``), what
  ``check_register`` now runs on such a topic;
- the precedence graph of value blocks (``spark_jobs.register_precedence``), the
  cross-check, O(n^2): up to 2,000 operations.

1. Small: 60 operations, microseconds per check (best of batches), and the search's time
   over each one's.
2. Scale: 1,000 to 100,000 operations, milliseconds per check (best of a few), the
   zones' microseconds per operation, and the search's time over the zones'.

Run: ``.venv/bin/python -m bench.checker`` (``--scale small``: up to 10,000 operations).
"""

from __future__ import annotations

import functools
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench import _util
from spark_jobs.checker import search_register
from spark_jobs.register_ops import ABSENT_VALUE, CheckResult, RegisterOp
from spark_jobs.register_precedence import check_precedence
from spark_jobs.register_zones import check_unique_register
from tools.cli import ExactArgumentParser

_MS_PER_S = 1_000.0
_US_PER_MS = 1_000.0
SMALL_OPS = 60
PRECEDENCE_OPS_MAX = 2_000
SEARCH_OPS_MAX = 5_000
STALE_GAP_US = 5_000
SEED = 2026


@dataclass(frozen=True, slots=True)
class Scale:
    """The sizes of one run."""

    name: str
    sizes: tuple[int, ...]
    repeats: int


SCALES = {
    "full": Scale("full", (1_000, 5_000, 10_000, 100_000), 3),
    "small": Scale("small", (1_000, 10_000), 2),
    "tiny": Scale("tiny", (300,), 1),
}


@dataclass(frozen=True, slots=True)
class Run:
    """One decider on one history: its verdict and time."""

    checker: str
    verdict: str
    ms: float


@dataclass(frozen=True, slots=True)
class Row:
    """One history and every decider's run on it."""

    history: str
    ops: int
    runs: tuple[Run, ...]

    def run(self, checker: str) -> Run | None:
        """The run of ``checker``, None when it was not run on this history."""
        return next((run for run in self.runs if run.checker == checker), None)


@dataclass(frozen=True, slots=True)
class Report:
    """Everything one run measured."""

    scale: str
    small: list[Row]
    large: list[Row]


# ---------------------------------------------------------------------- histories


def register_run(count: int, seed: int) -> list[RegisterOp]:
    """``count`` operations of a real register, linearizable: each takes effect at a
    random instant of its interval; half the timed-out writes never take effect."""
    rng = random.Random(seed)
    events: list[tuple[int, int, bool, RegisterOp]] = []
    for op_id in range(1, count + 1):
        invoke = op_id * 10 + rng.randint(0, 5)
        complete = invoke + rng.randint(0, 60)
        instant = rng.randint(invoke, complete)
        if rng.random() < 0.25:
            pending = rng.random() < 0.03
            write = RegisterOp(op_id, True, f"v{op_id}", invoke, None if pending else complete)
            events.append((instant, op_id, pending and rng.random() < 0.5, write))
        else:
            events.append((instant, op_id, False, RegisterOp(op_id, False, "", invoke, complete)))
    events.sort(key=lambda e: (e[0], e[1]))
    state, ops = ABSENT_VALUE, []
    for _, _, never, op in events:
        if op.is_write:
            state = state if never else op.value
            ops.append(op)
        else:
            ops.append(RegisterOp(op.op_id, False, state, op.invoke_us, op.complete_us))
    return sorted(ops, key=lambda o: o.op_id)


def with_stale_read(ops: Sequence[RegisterOp]) -> list[RegisterOp]:
    """The last read made to return a value acknowledged long before it was called (or
    the first write's, in a history too short for that)."""
    read = next(op for op in reversed(ops) if not op.is_write)
    acked = [(op.complete_us, op) for op in ops if op.is_write and op.complete_us is not None]
    old = next((op for end, op in acked if end < read.invoke_us - STALE_GAP_US), acked[0][1])
    stale = RegisterOp(read.op_id, False, old.value, read.invoke_us, read.complete_us)
    return [stale if op is read else op for op in ops]


# ---------------------------------------------------------------------- measuring


Decider = Callable[[Sequence[RegisterOp]], CheckResult]
DECIDERS: dict[str, Decider] = {
    "search": search_register,
    "zones": check_unique_register,
    "precedence": check_precedence,
}


def _timed(checker: str, fn: Callable[[], CheckResult], repeats: int) -> Run:
    """``checker``'s verdict and best milliseconds of ``fn`` over ``repeats`` calls."""
    times, verdict = [], ""
    for _ in range(repeats):
        start = time.perf_counter()
        verdict = fn().verdict
        times.append((time.perf_counter() - start) * _MS_PER_S)
    return Run(checker, verdict, min(times))


def _histories(count: int) -> list[tuple[str, list[RegisterOp]]]:
    ops = register_run(count, SEED + count)
    return [("linearizable", ops), ("one stale read", with_stale_read(ops))]


def small_rows() -> list[Row]:
    """The small history: every decider, microseconds per check of many batches."""
    rows = []
    for name, ops in _histories(SMALL_OPS):
        runs = []
        for checker, decide in DECIDERS.items():
            us = _util.us_per_op(functools.partial(decide, ops))
            runs.append(Run(checker, decide(ops).verdict, us / _US_PER_MS))
        rows.append(Row(name, len(ops), tuple(runs)))
    return rows


def large_rows(scale: Scale) -> list[Row]:
    """Each size: the zones always, the search up to its cap (once: it may run for its
    whole budget), the precedence graph up to :data:`PRECEDENCE_OPS_MAX`."""
    rows = []
    for count in scale.sizes:
        for name, ops in _histories(count):
            zones = functools.partial(check_unique_register, ops)
            runs = [_timed("zones", zones, scale.repeats)]
            if count <= SEARCH_OPS_MAX:
                search = functools.partial(search_register, ops)
                runs.append(_timed("search", search, 1))
            if count <= PRECEDENCE_OPS_MAX:
                precedence = functools.partial(check_precedence, ops)
                runs.append(_timed("precedence", precedence, 1))
            rows.append(Row(name, len(ops), tuple(runs)))
    return rows


def disagreements(rows: Sequence[Row]) -> list[str]:
    """Histories on which two deciders that decided gave different verdicts."""
    found = []
    for row in rows:
        verdicts = {run.verdict for run in row.runs if run.verdict != "unknown"}
        if len(verdicts) > 1:
            found.append(f"{row.history}, {row.ops} ops: {row.runs}")
    return found


def run(scale: Scale) -> Report:
    """Measure everything at ``scale``."""
    return Report(scale.name, small_rows(), large_rows(scale))


# ---------------------------------------------------------------------- output


def _ratio(row: Row, checker: str) -> str:
    """The search's time over ``checker``'s on the same history."""
    search, other = row.run("search"), row.run(checker)
    if search is None or other is None or other.ms <= 0:
        return "—"
    return f"{search.ms / other.ms:,.1f}x"


def _cell(run: Run | None) -> str:
    if run is None:
        return "—"
    ms = f"{run.ms:,.3g}" if run.ms < 100 else f"{run.ms:,.0f}"
    return f"{ms} ({run.verdict})"


def print_report(report: Report) -> None:
    """Markdown tables of a report."""
    _util.print_table(
        f"{SMALL_OPS} operations, ms per check (verdict)",
        ["history", "search (baseline)", "zones", "precedence", "search / zones"],
        [
            (
                r.history,
                _cell(r.run("search")),
                _cell(r.run("zones")),
                _cell(r.run("precedence")),
                _ratio(r, "zones"),
            )
            for r in report.small
        ],
    )
    _util.print_table(
        f"one topic at scale ({report.scale}), ms per check (verdict)",
        ["history", "ops", "zones", "zones µs/op", "search", "search / zones", "precedence"],
        [
            (
                r.history,
                f"{r.ops:,}",
                _cell(r.run("zones")),
                (r.run("zones") or Run("", "", 0.0)).ms * _US_PER_MS / r.ops,
                _cell(r.run("search")),
                _ratio(r, "zones"),
                _cell(r.run("precedence")),
            )
            for r in report.large
        ],
    )
    for line in disagreements([*report.small, *report.large]):
        print(f"\nDISAGREEMENT: {line}")


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scale", choices=sorted(SCALES), default="full", help="small or tiny: a quick run"
    )
    args = parser.parse_args(argv)
    print(f"# bench/checker.py --scale {args.scale}\n{_util.machine_notes()}")
    report = run(SCALES[args.scale])
    print_report(report)
    return 1 if disagreements([*report.small, *report.large]) else 0


if __name__ == "__main__":
    sys.exit(main())
