"""Availability inside partition windows (r1) and latency percentiles (r4)."""

from __future__ import annotations

import pytest

from spark_jobs.metrics import availability, latency_percentiles
from tests.spark_jobs.conftest import rows_of

pytestmark = pytest.mark.slow


def test_it_splits_availability_during_a_partition_into_reads_and_writes(history):
    rows = {r["op_class"]: r for r in rows_of(availability(history), "fresh")}
    assert (rows["read"]["ops"], rows["read"]["ok_share"]) == (3, 1.0)
    assert (rows["write"]["ops"], rows["write"]["ok_share"]) == (2, 0.5)


def test_it_reports_latency_percentiles_without_timeouts(history):
    [row] = rows_of(latency_percentiles(history), "lat")
    assert (row["ops"], row["p50_us"], row["p95_us"], row["p99_us"]) == (
        100,
        50_000,
        95_000,
        99_000,
    )
