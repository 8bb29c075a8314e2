"""Stale routes after a broker kill (r2) and consumer queue ownership (r3)."""

from __future__ import annotations

import pytest

from spark_jobs.metrics import (
    dead_sends_summary,
    ownership_summary,
    queue_ownership,
    stale_route_windows,
)
from tests.spark_jobs.conftest import rows_of

pytestmark = pytest.mark.slow


def test_it_times_how_long_nodes_and_clients_keep_a_killed_broker(history):
    [row] = rows_of(stale_route_windows(history), "kill")
    assert row["target"] == "b"
    assert row["nodes_window_ms"] == 10000
    assert (row["client_topics"], row["client_topics_never_dropped"]) == (2, 0)
    assert row["clients_window_ms"] == 30002
    assert (row["sends_in_window"], row["sends_to_dead"]) == (2, 1)
    assert row["end_ms"] is None


def test_it_counts_sends_routed_to_a_dead_broker(history):
    [row] = rows_of(dead_sends_summary(history), "kill")
    assert (row["sends"], row["sends_to_dead"]) == (3, 1)


def test_it_finds_queues_owned_twice_and_queues_owned_by_nobody(history):
    rows = rows_of(queue_ownership(history), "own")
    by_time = {r["at_ms"]: (r["orphan_queues"], r["double_queues"]) for r in rows}
    assert by_time == {200: (0, 0), 300: (0, 1), 400: (1, 0)}
    [summary] = rows_of(ownership_summary(queue_ownership(history)), "own")
    assert summary["checkpoints"] == 3
    assert summary["orphan_share"] == pytest.approx(1 / 3)
    assert summary["double_share"] == pytest.approx(1 / 3)
    assert summary["double_ms"] == 100  # owned twice from the checkpoint at 300 until 400
