"""The two join shapes of the metric jobs, so that each costs its input plus its output.

- :func:`window_join`: events to the time windows (faults) that contain them, as an
  equi-join on a time bucket instead of a join on ``run_id`` filtered on time (which builds
  windows x events rows before it filters).
- :func:`asof_join`: each probe row with the latest fact at or before its time, as one
  sort of probes and facts together instead of probes x facts.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window, functions as F

WINDOW_BUCKET_MS = 5_000
"""Bucket of :func:`window_join`: a 100 s kill window spans ~20 buckets and a 10 min
partition ~120, so windows explode to few rows while an event meets at most a bucket's
worth of extra candidates at each edge of a window."""

_BUCKET = "_wj_bucket"
_LO = "_wj_lo_ms"
_HI = "_wj_hi_ms"
_TIME = "_asof_ms"
_SIDE = "_asof_side"
_FACT = "_asof_fact"
_HIT = "_asof_hit"
_FACT_SIDE = 0  # facts sort before probes of the same time: a tie counts the fact
_PROBE_SIDE = 1


def _bucket_of(ms: str, bucket_ms: int) -> Column:
    return F.floor(F.col(ms) / F.lit(bucket_ms)).cast("long")


def _refuse_clashes(left: Sequence[str], right: Sequence[str], what: str) -> None:
    clash = sorted(set(left) & set(right))
    if clash:
        raise ValueError(f"{what}: columns on both sides {clash}; rename one side first")


def window_buckets(
    events: DataFrame,
    windows: DataFrame,
    keys: Sequence[str],
    event_ms: str,
    bucket_ms: int = WINDOW_BUCKET_MS,
) -> DataFrame:
    """``windows`` with one row per time bucket each covers, in column ``_wj_bucket``.

    A window ``[start_ms, end_ms)`` is first clamped to the first and last event time with
    its keys (an open window, ``end_ms`` = ``metrics.OPEN_END_MS``, ends at its run's last
    event), so it explodes into at most (clamped length / ``bucket_ms``) + 2 rows, however
    many events there are; a window that no event with its keys can fall in, into none.
    """
    span = events.groupBy(*keys).agg(F.min(event_ms).alias(_LO), F.max(event_ms).alias(_HI))
    clamped = windows.join(span, list(keys)).select(
        *windows.columns,
        F.greatest(F.col("start_ms"), F.col(_LO)).alias(_LO),
        # end_ms is exclusive: an event at end_ms - 1 is the last one inside.
        F.least(F.col("end_ms") - 1, F.col(_HI)).alias(_HI),
    )
    covered = F.when(
        F.col(_HI) >= F.col(_LO), F.sequence(_bucket_of(_LO, bucket_ms), _bucket_of(_HI, bucket_ms))
    )
    return clamped.select(*windows.columns, F.explode(covered).alias(_BUCKET))


def window_join(
    events: DataFrame,
    windows: DataFrame,
    keys: Sequence[str],
    event_ms: str,
    bucket_ms: int = WINDOW_BUCKET_MS,
) -> DataFrame:
    """Each event with every window of the same ``keys`` with ``start_ms <= t < end_ms``.

    ``windows`` has the ``keys``, ``start_ms``, ``end_ms`` and any other columns (which
    must not also be columns of ``events``); the result has the columns of ``events`` then
    the other columns of ``windows``. Rows: the matches, plus at most a bucket of events at
    each edge of each window compared and dropped, never events x windows.
    """
    _refuse_clashes(
        [c for c in events.columns if c not in keys],
        [c for c in windows.columns if c not in keys],
        "window_join",
    )
    exploded = window_buckets(events, windows, keys, event_ms, bucket_ms)
    bucketed = events.withColumn(_BUCKET, _bucket_of(event_ms, bucket_ms))
    inside = (F.col(event_ms) >= F.col("start_ms")) & (F.col(event_ms) < F.col("end_ms"))
    extra = [c for c in windows.columns if c not in keys]
    return (
        bucketed.join(exploded, [*keys, _BUCKET])
        .filter(inside)
        .select(*keys, *[c for c in events.columns if c not in keys], *extra)
    )


def asof_join(
    probes: DataFrame,
    facts: DataFrame,
    keys: Sequence[str],
    probe_ms: str,
    fact_ms: str,
    carry: Sequence[str],
    tie_order: Sequence[str] = (),
) -> DataFrame:
    """Each probe row with the ``carry`` columns of the latest fact with the same ``keys``
    and ``fact_ms <= probe_ms`` (null when there is none).

    Facts and probes are unioned and sorted by time within each key (facts before probes
    of the same time, facts of the same time by ``tie_order``, the last one winning), and
    each probe takes the last fact seen: one sort, no probes x facts rows. ``carry`` and
    ``tie_order`` are columns of ``facts``; ``carry`` must not be columns of ``probes``.
    Null keys match each other (as in a window partition, unlike an equi-join).
    """
    _refuse_clashes(probes.columns, carry, "asof_join")
    order_cols = [f"_asof_order{i}" for i in range(len(tie_order))]
    fact_rows = facts.select(
        *keys,
        F.col(fact_ms).alias(_TIME),
        F.lit(_FACT_SIDE).alias(_SIDE),
        *[F.col(c).alias(o) for c, o in zip(tie_order, order_cols, strict=True)],
        # A struct is non-null even when its fields are null, so ignorenulls below skips
        # only probe rows, never a fact whose value is null.
        F.struct(*carry).alias(_FACT),
    )
    probe_rows = probes.select(
        *probes.columns, F.col(probe_ms).alias(_TIME), F.lit(_PROBE_SIDE).alias(_SIDE)
    )
    timeline = Window.partitionBy(*keys).orderBy(_TIME, _SIDE, *order_cols)
    seen = timeline.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    union = probe_rows.unionByName(fact_rows, allowMissingColumns=True)
    return (
        union.withColumn(_HIT, F.last(_FACT, ignorenulls=True).over(seen))
        .filter(F.col(_SIDE) == _PROBE_SIDE)
        .select(*probes.columns, *[F.col(_HIT).getField(c).alias(c) for c in carry])
    )
