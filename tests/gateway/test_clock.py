"""The proposer's clock: wall time, optionally skewed for experiments."""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.test import override_settings

from gateway.clock import ManualClock, SystemClock
from namesrv_app.conf import system_clock


def test_the_system_clock_reads_wall_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    now = SystemClock(offset_ms=0).now_ms()
    assert before <= now <= time.time_ns() // 1_000_000


def test_an_offset_skews_every_reading() -> None:
    skewed = SystemClock(offset_ms=60_000).now_ms()
    assert skewed - time.time_ns() // 1_000_000 >= 59_000


def test_the_node_clock_takes_its_offset_from_the_setting() -> None:
    with override_settings(NAMESRV={**settings.NAMESRV, "CLOCK_OFFSET_MS": -30_000}):
        assert system_clock().offset_ms == -30_000
    assert system_clock().offset_ms == settings.NAMESRV.get("CLOCK_OFFSET_MS", 0)
    assert SystemClock().offset_ms == 0


def test_a_manual_clock_never_goes_backwards() -> None:
    clock = ManualClock(1_000)
    assert clock.advance(500) == 1_500
    with pytest.raises(ValueError, match="never goes backwards"):
        clock.advance(-1)
    assert clock.now_ms() == 1_500
