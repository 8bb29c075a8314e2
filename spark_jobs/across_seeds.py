"""Measures across seeds: each run's measures, and per mode their mean with a 95 % interval.

Per run, every measure of :mod:`experiment_reports.seeds` is taken from the report's tables
(:data:`EXTRACTORS`); per mode and scenario, their mean over the seeds gets a Student t
interval (n - 1 degrees of freedom), and one seed gets none. Plain rows, no Spark:
:mod:`spark_jobs.per_run` computes the per-run tables, and the rows this module makes are
the report's ``seed_intervals`` table.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from experiment_reports.seeds import (
    CLIENTS_ON_DEAD,
    DEAD_SENDS,
    DIVERGED_LONGEST,
    DIVERGED_TOPICS,
    DOUBLE_CHECKPOINTS,
    DOUBLE_OWNED,
    NEVER_WRITTEN,
    NODES_ON_DEAD,
    NON_MONOTONIC,
    NOT_EXIST_LIVE,
    NOT_LINEARIZABLE,
    STALE_CLASSED,
    STALE_READS,
    Measure,
    Row,
    fresh_measure,
    latency_measure,
)
from experiment_reports.t_buckets import MS_PER_S

CONFIDENCE = 0.95
T_975_BY_DF = (
    12.7062,
    4.3027,
    3.1824,
    2.7764,
    2.5706,
    2.4469,
    2.3646,
    2.3060,
    2.2622,
    2.2281,
    2.2010,
    2.1788,
    2.1604,
    2.1448,
    2.1314,
    2.1199,
    2.1098,
    2.1009,
    2.0930,
    2.0860,
    2.0796,
    2.0739,
    2.0687,
    2.0639,
    2.0595,
    2.0555,
    2.0518,
    2.0484,
    2.0452,
    2.0423,
)
"""The 0.975 quantile of Student's t for 1..30 degrees of freedom (a two-sided 95 %
interval); past 30 the Cornish-Fisher expansion around the normal quantile is within 1e-4."""
Z_975 = 1.959964
READ_KIND = "route_read"
LATENCY_QUANTILES = (50, 95, 99)


def t_quantile_975(df: int) -> float:
    """Student's t 0.975 quantile with ``df`` degrees of freedom (>= 1)."""
    if df < 1:
        raise ValueError(f"a t quantile needs at least one degree of freedom, got {df}")
    if df <= len(T_975_BY_DF):
        return T_975_BY_DF[df - 1]
    z = Z_975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass(frozen=True, slots=True)
class Interval:
    """The mean of ``n`` values and its 95 % t interval (``lo``/``hi`` None when n is 1)."""

    mean: float
    n: int
    lo: float | None = None
    hi: float | None = None


def mean_interval(
    values: Sequence[float], floor: float | None = None, ceiling: float | None = None
) -> Interval:
    """Mean and 95 % Student t interval (mean +- t(0.975, n-1) * s / sqrt(n)), the bounds
    kept inside ``[floor, ceiling]`` (a share cannot pass 100 %, a duration cannot go
    below 0). One value: its mean and no interval."""
    if not values:
        raise ValueError("an interval needs at least one value")
    mean = statistics.fmean(values)
    n = len(values)
    if n == 1:
        return Interval(mean, 1)
    half = t_quantile_975(n - 1) * statistics.stdev(values) / math.sqrt(n)
    lo, hi = mean - half, mean + half
    if floor is not None:
        lo = max(lo, floor)
    if ceiling is not None:
        hi = min(hi, ceiling)
    return Interval(mean, n, lo, hi)


RunMeasures = dict[str, dict[Measure, float]]
"""Run id -> measure -> value (in the measure's unit)."""


def _by_run(rows: Iterable[Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(str(row["run_id"]), []).append(row)
    return grouped


def _freshness(rows: Sequence[Row]) -> dict[Measure, float]:
    """Stale reads over every bucket, and the share of fresh reads per bucket."""
    counted = [r for r in rows if r.get("p_fresh") is not None and int(r.get("reads") or 0)]
    reads = sum(int(r["reads"]) for r in counted)
    if not reads:
        return {}
    stale = sum(int(r["reads"]) * (1 - float(r["p_fresh"])) for r in counted)
    out = {STALE_READS: 100 * stale / reads}
    for row in counted:
        out[fresh_measure(float(row["t_bucket_ms"]))] = 100 * float(row["p_fresh"])
    return out


def _latency_ms(row: Row, quantile: int) -> float | None:
    """A percentile in ms, whether the table gives it in ms or in microseconds."""
    if row.get(f"p{quantile}_ms") is not None:
        return float(row[f"p{quantile}_ms"])
    if row.get(f"p{quantile}_us") is not None:
        return float(row[f"p{quantile}_us"]) / 1000
    return None


def _latency(rows: Sequence[Row]) -> dict[Measure, float]:
    out = {}
    for row in (r for r in rows if r.get("kind") == READ_KIND):
        for quantile in LATENCY_QUANTILES:
            value = _latency_ms(row, quantile)
            if value is not None:
                out[latency_measure(quantile)] = value
    return out


def _first_number(rows: Sequence[Row], column: str) -> float | None:
    found = [float(r[column]) for r in rows if r.get(column) is not None]
    return found[0] if found else None


def _most(rows: Sequence[Row], column: str) -> float | None:
    found = [float(r[column]) for r in rows if r.get(column) is not None]
    return max(found) if found else None


def _sum(rows: Sequence[Row], column: str) -> float | None:
    found = [float(r[column]) for r in rows if r.get(column) is not None]
    return sum(found) if found else None


Extractor = Callable[[Sequence[Row]], dict[Measure, float]]


def _columns(
    *picks: tuple[Measure, str, Callable[[Sequence[Row], str], float | None], float],
) -> Extractor:
    """An extractor of plain columns: (measure, column, how rows combine, scale)."""

    def extract(rows: Sequence[Row]) -> dict[Measure, float]:
        out = {}
        for measure, column, combine, scale in picks:
            value = combine(rows, column)
            if value is not None:
                out[measure] = value * scale
        return out

    return extract


EXTRACTORS: dict[str, Extractor] = {
    "t_visibility": _freshness,
    "divergence": _columns(
        (DIVERGED_TOPICS, "topics_diverged_share", _first_number, 100.0),
        (DIVERGED_LONGEST, "longest_ms", _first_number, 1 / MS_PER_S),
    ),
    "dead_sends": _columns((DEAD_SENDS, "sends_to_dead", _sum, 1.0)),
    "stale_route": _columns(
        (CLIENTS_ON_DEAD, "clients_window_ms", _most, 1 / MS_PER_S),
        (NODES_ON_DEAD, "nodes_window_ms", _most, 1 / MS_PER_S),
    ),
    "ownership": _columns(
        (DOUBLE_OWNED, "double_ms", _first_number, 1 / MS_PER_S),
        (DOUBLE_CHECKPOINTS, "double_share", _first_number, 100.0),
    ),
    "not_exist_live": _columns((NOT_EXIST_LIVE, "not_exist_live", _sum, 1.0)),
    "anomalies": _columns(
        (STALE_CLASSED, "stale_read", _sum, 1.0),
        (NON_MONOTONIC, "non_monotonic_read", _sum, 1.0),
        (NEVER_WRITTEN, "never_written", _sum, 1.0),
    ),
    "linearizability": _columns((NOT_LINEARIZABLE, "not_linearizable", _sum, 1.0)),
    "latency": _latency,
}
"""Per report table: how one run's rows become measures. A table without rows for a run
gives that run no value (the measure's n counts the runs that have one)."""


def run_measures(per_run: Mapping[str, Sequence[Row]]) -> RunMeasures:
    """Every run's measures from tables whose rows carry their ``run_id``."""
    out: RunMeasures = {}
    for table, extract in EXTRACTORS.items():
        for run_id, rows in _by_run(per_run.get(table, ())).items():
            out.setdefault(run_id, {}).update(extract(rows))
    return out


@dataclass(frozen=True, slots=True)
class SeededRun:
    """Which mode, scenario and seed a run id stands for."""

    run_id: str
    mode: str
    scenario: str
    seed: int


def interval_rows(measures: RunMeasures, runs: Sequence[SeededRun]) -> list[dict[str, Any]]:
    """The ``seed_intervals`` table: per mode, scenario and measure, the seeds that have a
    value, the per-seed values (in seed order), their mean and 95 % interval."""
    groups: dict[tuple[str, str], list[SeededRun]] = {}
    for run in sorted(runs, key=lambda r: (r.mode, r.scenario, r.seed, r.run_id)):
        groups.setdefault((run.mode, run.scenario), []).append(run)
    order = {m: i for i, m in enumerate(dict.fromkeys(m for r in measures.values() for m in r))}
    rows = []
    for (mode, scenario), members in groups.items():
        seen = {m for run in members for m in measures.get(run.run_id, {})}
        for measure in sorted(seen, key=lambda m: _measure_rank(m, order)):
            valued = [r for r in members if measure in measures.get(r.run_id, {})]
            values = [measures[r.run_id][measure] for r in valued]
            found = mean_interval(values, measure.floor, measure.ceiling)
            rows.append(
                {
                    "mode": mode,
                    "scenario": scenario,
                    "measure": measure.label,
                    "unit": measure.unit,
                    "key": measure.key,
                    "seeds": found.n,
                    "seed_values": [r.seed for r in valued],
                    "values": values,
                    "mean": found.mean,
                    "lo": found.lo,
                    "hi": found.hi,
                }
            )
    return rows


def _measure_rank(measure: Measure, order: Mapping[Measure, int]) -> tuple[int, int, str]:
    """Report order: the extractors' order, the fresh-read buckets by their lower edge."""
    if measure.key.startswith("fresh_"):
        return (order.get(STALE_READS, 0), int(measure.key[6:-2]) + 1, measure.key)
    return (order.get(measure, len(order)), 0, measure.key)
