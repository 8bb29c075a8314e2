"""bench/checker.py still runs: at a tiny size, every decider gives its verdict on both
histories, and they agree (the bench's timings are not asserted)."""

from __future__ import annotations

from bench import checker as bench
from spark_jobs.register_ops import LINEARIZABLE, NOT_LINEARIZABLE

TINY = bench.Scale("test", (150,), 1)


def test_the_checker_bench_runs_every_decider_and_they_agree() -> None:
    rows = bench.large_rows(TINY)
    assert [(row.history, row.ops) for row in rows] == [
        ("linearizable", 150),
        ("one stale read", 150),
    ]
    assert bench.disagreements(rows) == []
    for row, expected in zip(rows, (LINEARIZABLE, NOT_LINEARIZABLE), strict=True):
        assert {run.checker for run in row.runs} == {"zones", "search", "precedence"}
        assert {run.verdict for run in row.runs} == {expected}
        assert all(run.ms >= 0 for run in row.runs)
    bench.print_report(bench.Report(TINY.name, [], rows))
