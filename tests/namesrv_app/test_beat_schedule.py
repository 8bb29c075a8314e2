"""Celery beat's schedule: one broker scan per node, one divergence check per cluster."""

from __future__ import annotations

import pytest

from namesrv_site.celery import DIVERGENCE_TASK_NAME, SCAN_TASK_NAME, build_beat_schedule


def test_every_node_gets_its_own_scan_and_the_cluster_one_divergence_check() -> None:
    schedule = build_beat_schedule(["n1", "n2", "n3"], 10)

    scans = {name: entry for name, entry in schedule.items() if entry["task"] == SCAN_TASK_NAME}
    assert sorted(entry["args"] for entry in scans.values()) == [("n1",), ("n2",), ("n3",)]
    assert schedule["check-divergence"]["task"] == DIVERGENCE_TASK_NAME
    assert all(entry["options"]["expires"] == 10.0 for entry in schedule.values())


def test_a_single_node_has_nothing_to_diverge_from() -> None:
    assert "check-divergence" not in build_beat_schedule(["n1"], 10)


def test_a_non_positive_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        build_beat_schedule(["n1"], 0)
