"""The time buckets of t-visibility, one definition for the Spark job, the tables and the
plots: bucket ``[lower, upper)`` holds the reads that started ``lower`` ms or more, and less
than ``upper`` ms, after the latest write; the last one is open (``t >= lower``).

No Spark and no matplotlib here, so the report, the console and the plots share it.
"""

from __future__ import annotations

from collections.abc import Sequence

T_BUCKET_EDGES_MS = (
    0,
    100,
    500,
    1_000,
    2_000,
    5_000,
    10_000,
    30_000,
    60_000,
    120_000,
    180_000,
    300_000,
)
MS_PER_S = 1000


def t_bucket_upper_ms(lower_ms: float, edges_ms: Sequence[int] = T_BUCKET_EDGES_MS) -> float | None:
    """The upper edge (exclusive) of the bucket whose lower edge is ``lower_ms``; ``None``
    for the open last bucket."""
    later = [edge for edge in edges_ms if edge > lower_ms]
    return float(later[0]) if later else None


def _number(ms: float, unit_ms: int) -> str:
    return f"{ms / unit_ms:g}"


def t_bucket_label(lower_ms: float, edges_ms: Sequence[int] = T_BUCKET_EDGES_MS) -> str:
    """A bucket as the report and the plot name it: ``0-100 ms``, ``0.5-1 s``, ``≥ 300 s``
    (lower edge included, upper edge excluded; in seconds once the upper edge is)."""
    upper = t_bucket_upper_ms(lower_ms, edges_ms)
    if upper is None:
        unit_ms, unit = (MS_PER_S, "s") if lower_ms >= MS_PER_S else (1, "ms")
        return f"≥ {_number(lower_ms, unit_ms)} {unit}"
    unit_ms, unit = (MS_PER_S, "s") if upper >= MS_PER_S else (1, "ms")
    return f"{_number(lower_ms, unit_ms)}-{_number(upper, unit_ms)} {unit}"
