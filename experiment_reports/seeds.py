"""Measures across seeds as the report gives them: what each measure is, and how its mean
and 95 % interval read.

``run_experiment --seeds N`` records N runs per mode; the report then gives every measure of
a client's view (stale reads, freshness right after a write, divergence, sends to a dead
broker, doubly owned queues, route-read latency) as the mean over the seeds with a Student t
interval (n - 1 degrees of freedom). With one seed there is no interval, and the report says
so instead of inventing one. The rows come in as plain dicts (the analysis computes them,
:mod:`spark_jobs.across_seeds`), so the console renders them as ``summary.md`` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from experiment_reports.t_buckets import t_bucket_label

Row = Mapping[str, Any]
SEED_INTERVALS = "seed_intervals"
"""The report table of this module: one row per mode, scenario and measure."""
ONE_SEED = "one seed, no interval"
SEEDS_TITLE = "Across seeds: mean and 95 % interval"
SEEDS_ABOUT = (
    "Each measure per run, then per mode the mean over the seeds and its 95 % Student t "
    "interval (n - 1 degrees of freedom), clipped to the measure's possible range; n is the "
    "number of seeds that had a value. With one seed there is no interval."
)
SEEDS_EMPTY = "No run had a measure to compare across seeds."
PERCENT = "%"
SECONDS = "s"
MS = "ms"


@dataclass(frozen=True, slots=True)
class Measure:
    """One measure of a run: its label in the report, its unit and its possible range."""

    key: str
    label: str
    unit: str
    floor: float | None = 0.0
    ceiling: float | None = None


def _share(key: str, label: str) -> Measure:
    return Measure(key, label, PERCENT, 0.0, 100.0)


STALE_READS = _share("stale_read_pct", "route reads older than the latest write")
DIVERGED_TOPICS = _share("topics_diverged_pct", "topics whose nodes ever answered differently")
DIVERGED_LONGEST = Measure("diverged_longest_s", "longest window of differing answers", SECONDS)
DEAD_SENDS = Measure("dead_sends", "sends to a dead broker", "sends")
CLIENTS_ON_DEAD = Measure("clients_dead_route_s", "clients routed to a dead broker for", SECONDS)
NODES_ON_DEAD = Measure("nodes_dead_route_s", "nodes answered with a dead broker for", SECONDS)
DOUBLE_OWNED = Measure("double_owned_s", "a queue owned by two consumers for", SECONDS)
DOUBLE_CHECKPOINTS = _share("double_owned_pct", "rebalance checkpoints with a doubly owned queue")
NOT_EXIST_LIVE = Measure("not_exist_live", "TOPIC_NOT_EXIST for a live topic", "reads")
NOT_LINEARIZABLE = Measure("not_linearizable_topics", "topics not linearizable", "topics")
STALE_CLASSED = Measure("stale_read", "reads of a route already replaced", "reads")
NON_MONOTONIC = Measure("non_monotonic_read", "reads older than one the client had seen", "reads")
NEVER_WRITTEN = Measure("never_written", "reads of a route never written", "reads")


def fresh_measure(bucket_ms: float) -> Measure:
    """The share of fresh reads in the t-visibility bucket whose lower edge is ``bucket_ms``."""
    label = t_bucket_label(bucket_ms)
    return _share(f"fresh_{int(bucket_ms)}ms", f"fresh reads {label} after a write")


def latency_measure(quantile: int) -> Measure:
    """A percentile of route-read latency."""
    return Measure(f"read_p{quantile}_ms", f"route-read latency p{quantile}", MS)


# ------------------------------------------------------------------------ as text


def number(value: float) -> str:
    """A value of the report: 3 significant digits, no exponent below a million."""
    if value == 0:
        return "0"
    text = f"{value:.3g}"
    return f"{value:.0f}" if "e" in text and abs(value) >= 1 else text


def _with_unit(text: str, unit: str) -> str:
    return f"{text} {unit}" if unit else text


def interval_text(row: Row) -> str:
    """``12.5 % [3.1, 21.9]`` (mean and 95 % interval, with the unit), or the mean and
    ``(one seed, no interval)``."""
    mean = _with_unit(number(float(row["mean"])), str(row["unit"]))
    if row.get("lo") is None or row.get("hi") is None:
        return f"{mean} ({ONE_SEED})"
    return f"{mean} [{number(float(row['lo']))}, {number(float(row['hi']))}]"


def interval_table(rows: Sequence[Row], modes: Sequence[str]) -> list[dict[str, Any]]:
    """The side-by-side table: a row per measure (label and unit), a column per mode."""
    several = len({r.get("scenario") for r in rows}) > 1
    table: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        group = (row.get("scenario"), row["measure"]) if several else (row["measure"],)
        shown = table.setdefault(
            group,
            {
                **({"scenario": row.get("scenario")} if several else {}),
                "measure": f"{row['measure']} ({row['unit']})",
                **dict.fromkeys(modes),
            },
        )
        shown[str(row["mode"])] = f"{interval_text(row)}, n={row['seeds']}"
    return list(table.values())


def several_seeds(rows: Sequence[Row]) -> bool:
    """Whether some measure had more than one seed. With one seed per mode the table
    would repeat the run's own numbers with no interval on every row, so the report
    leaves it out (the client paragraph says that one seed gives no interval)."""
    return any(int(r.get("seeds") or 0) > 1 for r in rows)


def seeds_of(rows: Sequence[Row], mode: str) -> list[int]:
    """The seeds that gave a mode any measure."""
    return sorted({int(s) for r in rows if r.get("mode") == mode for s in r["seed_values"]})


def find(rows: Sequence[Row], mode: str, key: str) -> Row | None:
    """One mode's row of a measure (by its key), or None."""
    for row in rows:
        if row.get("mode") == mode and row.get("key") == key:
            return row
    return None


def _about(row: Row) -> str:
    """``2.3 s on average (95 % interval 1.1-3.5 s over 3 seeds)``."""
    unit = str(row["unit"])
    mean = _with_unit(number(float(row["mean"])), unit)
    if row.get("lo") is None or row.get("hi") is None:
        return f"{mean} ({ONE_SEED})"
    bounds = f"[{number(float(row['lo']))}, {number(float(row['hi']))}] {unit}".rstrip()
    return f"{mean} on average (95 % interval {bounds} over {row['seeds']} seeds)"


def seeds_paragraph(rows: Sequence[Row], mode: str) -> str:
    """What the intervals mean for a client of one mode, in sentences; a mode measured
    with one seed says that it has no interval."""
    seeds = seeds_of(rows, mode)
    if not seeds:
        return ""
    if len(seeds) == 1:
        return (
            f"One seed ({seeds[0]}) in {mode} mode, so no interval: the numbers are that one "
            "run's (`run_experiment --seeds N` runs N seeds per mode)."
        )
    sentences = [f"Across {len(seeds)} seeds ({', '.join(map(str, seeds))}) in {mode} mode:"]
    sentences += [text for text in _client_sentences(rows, mode) if text]
    return " ".join(sentences)


def _client_sentences(rows: Sequence[Row], mode: str) -> list[str]:
    def about(key: str) -> str | None:
        row = find(rows, mode, key)
        return None if row is None else _about(row)

    out = []
    clients, sends = about(CLIENTS_ON_DEAD.key), about(DEAD_SENDS.key)
    if clients is not None:
        out.append(
            f"after a broker died, clients kept routing to it for {clients}"
            + (f", and per run {sends} went to it and could not be delivered." if sends else ".")
        )
    elif sends is not None:
        out.append(f"per run {sends} went to a dead broker.")
    double = about(DOUBLE_OWNED.key)
    if double is not None:
        out.append(
            f"Per run, two consumers of a group owned the same queue for {double}: "
            "its messages could be consumed twice."
        )
    stale = about(STALE_READS.key)
    if stale is not None:
        out.append(f"Route reads that returned an older route than the latest write: {stale}.")
    first = find(rows, mode, fresh_measure(0).key)
    if first is not None:
        out.append(f"Reads {t_bucket_label(0)} after a write were fresh in {_about(first)}.")
    diverged = about(DIVERGED_LONGEST.key)
    if diverged is not None:
        out.append(
            f"The longest window in which the nodes answered a topic differently lasted {diverged}."
        )
    return out
