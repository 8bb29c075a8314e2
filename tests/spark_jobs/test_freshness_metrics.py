"""t-visibility and k-staleness on run r1 ("fresh"); TOPIC_NOT_EXIST for live topics is a
class of ``spark_jobs.anomalies`` (tests/spark_jobs/test_anomalies.py)."""

from __future__ import annotations

import pytest

from spark_jobs.metrics import k_staleness, read_freshness, t_visibility
from tests.spark_jobs.conftest import rows_of

pytestmark = pytest.mark.slow


def test_it_measures_staleness_of_each_read_in_versions(history):
    rows = {r["op_id"]: r for r in rows_of(read_freshness(history), "fresh")}
    assert {i: rows[i]["staleness"] for i in rows} == {1: 0, 2: 1, 3: 0, 4: 0, 5: None, 6: 2}
    assert {i: rows[i]["t_ms"] for i in rows} == {1: 500, 2: 50, 3: 200, 4: 2000, 5: 2500, 6: 3000}


def test_it_buckets_fresh_reads_by_time_since_the_write(history):
    rows = rows_of(t_visibility(read_freshness(history)), "fresh")
    curve = {r["t_bucket_ms"]: (r["reads"], r["p_fresh"]) for r in rows}
    assert curve == {0: (1, 0.0), 100: (1, 1.0), 500: (1, 1.0), 2000: (3, pytest.approx(1 / 3))}


def test_it_gives_the_share_of_reads_within_k_versions(history):
    rows = rows_of(k_staleness(read_freshness(history), ks=(0, 1, 2, 3)), "fresh")
    assert {r["k"]: r["p_within_k"] for r in rows} == pytest.approx(
        {0: 3 / 6, 1: 4 / 6, 2: 5 / 6, 3: 5 / 6}
    )
