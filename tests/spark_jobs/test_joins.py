"""The two join shapes of the metric jobs against a plain-Python join of random frames.

Times are multiples of 250 ms so events, window edges, bucket edges and facts tie often.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from spark_jobs.joins import WINDOW_BUCKET_MS, asof_join, window_buckets, window_join
from spark_jobs.metrics import OPEN_END_MS

pytestmark = pytest.mark.slow

RUNS = ("r1", "r2", "r3")
BROKERS = ("a", "b", "c")
SPAN_MS = 120_000
EVENT_DDL = "run_id string, target string, t_ms long, event_id long"
WINDOW_DDL = "run_id string, target string, start_ms long, end_ms long, window_id long"


def _time(rng: random.Random) -> int:
    return rng.randrange(0, SPAN_MS // 250) * 250


def _events(rng: random.Random, count: int) -> list[tuple[Any, ...]]:
    return [(rng.choice(RUNS), rng.choice(BROKERS), _time(rng), i) for i in range(count)]


def _windows(rng: random.Random, count: int) -> list[tuple[Any, ...]]:
    rows = []
    for i in range(count):
        start = _time(rng)
        end = OPEN_END_MS if rng.random() < 0.3 else start + rng.randrange(0, 80) * 250
        rows.append((rng.choice(RUNS), rng.choice(BROKERS), start, end, i))
    # A window after every event of its run, and one in a run with no events at all.
    rows.append(("r1", "a", SPAN_MS + 10_000, OPEN_END_MS, count))
    rows.append(("r9", "a", 0, OPEN_END_MS, count + 1))
    return rows


def _brute_window_join(
    events: list[tuple[Any, ...]], windows: list[tuple[Any, ...]], on_target: bool
) -> list[tuple[int, int]]:
    return sorted(
        (event_id, window_id)
        for run, target, t, event_id in events
        for w_run, w_target, start, end, window_id in windows
        if run == w_run and (not on_target or target == w_target) and start <= t < end
    )


@pytest.mark.parametrize("on_target", [False, True], ids=["on the run", "on run and broker"])
def test_the_window_join_finds_exactly_the_events_inside_each_window(spark, on_target):
    rng = random.Random(33)
    events, windows = _events(rng, 400), _windows(rng, 30)
    keys = ["run_id", "target"] if on_target else ["run_id"]
    event_frame = spark.createDataFrame(events, EVENT_DDL)
    window_frame = spark.createDataFrame(windows, WINDOW_DDL)
    if not on_target:
        window_frame = window_frame.withColumnRenamed("target", "w_target")
    joined = window_join(event_frame, window_frame, keys=keys, event_ms="t_ms")
    got = sorted((r.event_id, r.window_id) for r in joined.collect())
    expected = _brute_window_join(events, windows, on_target)
    assert got == expected
    assert len(expected) > 100  # the random frames do overlap
    outside = {e[3] for e in events} - {event_id for event_id, _ in expected}
    assert outside  # and some events fall in no window


def _clamped_buckets(events: list[tuple[Any, ...]], windows: list[tuple[Any, ...]]) -> int:
    """Buckets of each window's part between the first and last event of its run."""
    total = 0
    for run, _, start, end, _ in windows:
        times = [t for e_run, _, t, _ in events if e_run == run]
        if not times:
            continue
        low, high = max(start, min(times)), min(end - 1, max(times))
        if high >= low:
            total += high // WINDOW_BUCKET_MS - low // WINDOW_BUCKET_MS + 1
    return total


def test_the_window_join_explodes_windows_by_their_length_not_by_the_events(spark):
    rng = random.Random(34)
    windows = _windows(rng, 30)
    window_frame = spark.createDataFrame(windows, WINDOW_DDL).drop("target")
    counts = []
    for event_count in (50, 800):
        events = _events(rng, event_count)
        event_frame = spark.createDataFrame(events, EVENT_DDL)
        exploded = window_buckets(event_frame, window_frame, keys=["run_id"], event_ms="t_ms")
        counts.append(exploded.count())
        assert counts[-1] == _clamped_buckets(events, windows)
    # Open windows end at their run's last event: each window is at most the run's span
    # in buckets, whatever the number of events (16x more events here).
    bound = len(windows) * (SPAN_MS // WINDOW_BUCKET_MS + 1)
    assert 0 < counts[0] <= counts[1] <= bound
    # The old join on run_id alone compared every event of a run with every window of it.
    assert counts[1] * 10 < 800 * len(windows)


def _brute_asof(
    probes: list[tuple[Any, ...]], facts: list[tuple[Any, ...]]
) -> list[tuple[int, Any, Any]]:
    out = []
    for run, topic, t, probe_id in probes:
        seen = [
            (f_t, seq, value)
            for f_run, f_topic, f_t, seq, value in facts
            if (f_run, f_topic) == (run, topic) and f_t <= t
        ]
        latest = max(seen, key=lambda f: (f[0], f[1])) if seen else (None, None, None)
        out.append((probe_id, latest[1], latest[2]))
    return sorted(out)


def test_the_as_of_join_takes_the_latest_fact_at_or_before_each_probe(spark):
    rng = random.Random(35)
    topics = ("T0", "T1", "T2", "T3")
    probes = [(rng.choice(RUNS), rng.choice(topics), _time(rng), i) for i in range(400)]
    facts = [
        (
            rng.choice(RUNS),
            rng.choice(topics[:3]),  # T3 has probes and no fact
            _time(rng),
            seq,
            None if rng.random() < 0.2 else f"v{rng.randrange(5)}",
        )
        for seq in range(300)
    ]
    probe_frame = spark.createDataFrame(probes, "run_id string, topic string, t_ms long, id long")
    fact_frame = spark.createDataFrame(
        facts, "run_id string, topic string, f_ms long, seq long, value string"
    )
    joined = asof_join(
        probe_frame,
        fact_frame,
        keys=["run_id", "topic"],
        probe_ms="t_ms",
        fact_ms="f_ms",
        carry=["seq", "value"],
        tie_order=["seq"],
    )
    got = sorted((r.id, r.seq, r.value) for r in joined.collect())
    expected = _brute_asof(probes, facts)
    assert got == expected
    fact_times = {(f[0], f[1], f[2]) for f in facts}
    assert any(p[:3] in fact_times for p in probes)  # ties between probes and facts occur
    assert any(seq is not None and value is None for _, seq, value in expected)
    assert any(seq is None for _, seq, _ in expected)


def test_the_joins_refuse_a_column_on_both_sides(spark):
    frame = spark.createDataFrame([("r1", 0, 1)], "run_id string, start_ms long, end_ms long")
    with pytest.raises(ValueError, match="end_ms"):
        asof_join(frame, frame, ["run_id"], "start_ms", "start_ms", carry=["end_ms"])
    events = spark.createDataFrame([("r1", 0, 5)], "run_id string, t_ms long, end_ms long")
    with pytest.raises(ValueError, match="end_ms"):
        window_join(events, frame, keys=["run_id"], event_ms="t_ms")
