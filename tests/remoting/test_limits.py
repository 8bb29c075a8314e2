"""The server-wide limits of remoting/limits.py on their own (the server's use of them,
over real sockets, is tests/remoting/test_server_limits.py)."""

from __future__ import annotations

import logging

import pytest

from remoting.limits import AddressCounts, RefusalLog, UnfinishedFrameBudget


def test_the_refusal_log_says_how_many_lines_it_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    refusal_log = RefusalLog(lines_max=2, interval_s=10.0)
    caplog.set_level(logging.WARNING, logger="remoting.limits")

    written = [refusal_log.warning(t, "refusing peer %d", t) for t in (0.0, 1.0, 2.0, 3.0, 11.0)]

    assert written == [True, True, False, False, True]
    assert [r.getMessage() for r in caplog.records] == [
        "refusing peer 0",
        "refusing peer 1",
        "refusing peer 11 (2 similar lines left out)",
    ]


def test_the_unfinished_frame_budget_refuses_a_growth_past_it_and_takes_releases() -> None:
    budget = UnfinishedFrameBudget(100)

    assert budget.reserve(60)
    assert not budget.reserve(41)
    assert budget.held_bytes == 60
    assert budget.reserve(-60)
    assert budget.reserve(100)
    assert budget.held_bytes == 100


def test_address_counts_refuse_one_past_the_cap_and_forget_an_address_at_zero() -> None:
    counts = AddressCounts(2)

    assert counts.add("10.0.0.1")
    assert counts.add("10.0.0.1")
    assert not counts.add("10.0.0.1")
    assert counts.add("10.0.0.2")
    assert counts.count("10.0.0.1") == 2
    counts.remove("10.0.0.1")
    counts.remove("10.0.0.1")
    assert counts.count("10.0.0.1") == 0
    assert counts.add("10.0.0.1")


@pytest.mark.parametrize("value", [0, -1])
def test_every_limit_must_be_positive(value: int) -> None:
    with pytest.raises(ValueError, match="unfinished_frames_bytes_max"):
        UnfinishedFrameBudget(value)
    with pytest.raises(ValueError, match="connections_per_address_max"):
        AddressCounts(value)
