"""Divergence between NameServer answers, from the node_states samples of run r1."""

from __future__ import annotations

import pytest

from spark_jobs.metrics import divergence_by_topic, divergence_summary
from tests.spark_jobs.conftest import rows_of

pytestmark = pytest.mark.slow


def test_it_measures_the_diverged_share_and_longest_window_per_topic(history):
    rows = {r["topic"]: r for r in rows_of(divergence_by_topic(history), "fresh")}
    assert (rows["T"]["rounds"], rows["T"]["diverged_fraction"], rows["T"]["longest_ms"]) == (
        5,
        pytest.approx(0.6),
        10000,
    )
    assert (rows["U"]["diverged_fraction"], rows["U"]["longest_ms"]) == (0.0, 0)


def test_it_summarises_divergence_over_topics(history):
    [row] = rows_of(divergence_summary(divergence_by_topic(history)), "fresh")
    assert row["topics"] == 2
    assert row["mean_diverged_fraction"] == pytest.approx(0.3)
    assert row["topics_diverged_share"] == pytest.approx(0.5)
    assert row["longest_ms"] == 10000
