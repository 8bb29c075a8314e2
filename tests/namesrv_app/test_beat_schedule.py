"""Celery beat's schedule: one broker scan per node on its own phase, one divergence check."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime

import pytest

from namesrv_site.celery import (
    DIVERGENCE_TASK_NAME,
    SCAN_TASK_NAME,
    PhasedSchedule,
    build_beat_schedule,
)


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


def _at(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, tz=UTC)


class _Clock:
    """The schedule's ``nowfun``: beat's notion of now, set by the test."""

    def __init__(self, epoch_s: float) -> None:
        self.epoch_s = epoch_s

    def __call__(self) -> datetime:
        return _at(self.epoch_s)


def test_the_nodes_scan_on_evenly_spread_phases_of_the_period() -> None:
    schedule = build_beat_schedule(["n1", "n2", "n3"], 9)

    phases = [
        schedule[f"scan-not-active-broker-{n}"]["schedule"].phase_s for n in ("n1", "n2", "n3")
    ]
    assert phases == [0.0, 3.0, 6.0]
    assert all(
        isinstance(schedule[f"scan-not-active-broker-{n}"]["schedule"], PhasedSchedule)
        for n in ("n1", "n2", "n3")
    )


def test_a_phased_schedule_is_due_at_its_own_instants_and_a_late_run_does_not_shift_them() -> None:
    clock = _Clock(1_000_003.5)  # 1_000_000 is a multiple of the 10 s period
    phased = PhasedSchedule(10, phase_s=4.0, nowfun=clock)
    started = _at(1_000_003.5)

    due, next_s = phased.is_due(started)
    assert not due and next_s == pytest.approx(0.5)  # first instant: ...004

    clock.epoch_s = 1_000_004.0
    due, next_s = phased.is_due(started)
    assert due and next_s == pytest.approx(10.0)

    # Ran 2.5 s late; the next instant is still ...014, not 10 s after the late run.
    clock.epoch_s = 1_000_006.5
    due, next_s = phased.is_due(_at(1_000_006.5))
    assert not due and next_s == pytest.approx(7.5)


def test_a_phased_schedule_survives_beats_schedule_file() -> None:
    phased = PhasedSchedule(5, phase_s=12.0)  # phases wrap into the period

    restored = pickle.loads(pickle.dumps(phased))

    assert restored == phased
    assert restored.phase_s == 2.0
    assert restored != PhasedSchedule(5, phase_s=3.0)


def test_a_phased_schedule_refuses_a_non_positive_period() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        PhasedSchedule(0)
