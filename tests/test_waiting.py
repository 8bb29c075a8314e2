"""The tests' one wait helper: what it returns, and how it fails."""

from __future__ import annotations

import itertools

import pytest

from tests.waiting import eventually, wait_until


def test_wait_until_returns_the_first_truthy_value() -> None:
    calls = itertools.count()
    assert wait_until(lambda: next(calls) >= 2 and "done", what="x", timeout_s=5, interval_s=0) == (
        "done"
    )


def test_wait_until_names_what_it_waited_for_and_puts_a_described_log_after() -> None:
    with pytest.raises(AssertionError, match=r"^the answer not true after 0.05 s$"):
        wait_until(lambda: False, what="the answer", timeout_s=0.05, interval_s=0.01)
    with pytest.raises(AssertionError) as caught:
        wait_until(lambda: 0, what=lambda: "the answer\nlog line", timeout_s=0, interval_s=0)
    assert str(caught.value) == "the answer not true after 0 s\nlog line"


def test_a_failing_check_fails_at_once() -> None:
    def check() -> bool:
        raise AssertionError("the process exited")

    with pytest.raises(AssertionError, match="the process exited"):
        wait_until(check, what="x", timeout_s=60)


async def test_eventually_awaits_a_coroutine_check_and_times_out_like_wait_until() -> None:
    calls = itertools.count()

    async def check() -> int:
        return next(calls) if next(calls) > 3 else 0

    assert await eventually(check, what="x", timeout_s=5, interval_s=0) > 3
    with pytest.raises(AssertionError, match=r"^nothing not true after 0.02 s$"):
        await eventually(lambda: None, what="nothing", timeout_s=0.02)
