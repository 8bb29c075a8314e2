"""One way for tests to wait: poll a check until it is true or a deadline passes.

Every test that waits for another thread, task or process goes through these two
functions, so a deadline is written one way (``time.monotonic``), a timeout always
fails as an AssertionError that names what was awaited, and poll intervals are
chosen in one place. The launcher has its own loop (``localcluster.readiness``),
which watches a process and raises LauncherError; that one is for the launcher.

A check may itself raise AssertionError to fail at once (a watched process died).
``what`` is a short description, or a callable that describes the state at the
timeout (a log tail, the last answer seen); it is only called on failure, and
lines after its first follow the message.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

# Polling a thread or process from a test: often enough not to add latency, rarely
# enough not to steal the CPU from what is awaited on a two-core machine.
INTERVAL_S = 0.05
# Polling in-process state from an asyncio test: cheap, and the loop runs the
# awaited tasks between polls.
ASYNC_INTERVAL_S = 0.01


def _failure(what: str | Callable[[], str], timeout_s: float) -> AssertionError:
    """The timeout's error: '<what> not true after N s', then the lines of ``what``
    after its first (a log tail), if any."""
    head, _, detail = (what() if callable(what) else what).partition("\n")
    return AssertionError(
        f"{head} not true after {timeout_s:g} s" + (f"\n{detail}" if detail else "")
    )


def wait_until(
    check: Callable[[], T | None],
    *,
    what: str | Callable[[], str],
    timeout_s: float,
    interval_s: float = INTERVAL_S,
) -> T:
    """Call ``check`` every ``interval_s`` until it returns a truthy value, and return
    that value; AssertionError("<what> not true after N s") once ``timeout_s`` passed.
    ``check`` runs at least once, and once more after the deadline's last sleep."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise _failure(what, timeout_s)
        time.sleep(min(interval_s, left))


@overload
async def eventually(
    check: Callable[[], Awaitable[T | None]],
    *,
    what: str | Callable[[], str],
    timeout_s: float,
    interval_s: float = ...,
) -> T: ...


@overload
async def eventually(
    check: Callable[[], T | None],
    *,
    what: str | Callable[[], str],
    timeout_s: float,
    interval_s: float = ...,
) -> T: ...


async def eventually(
    check: Callable[[], Any],
    *,
    what: str | Callable[[], str],
    timeout_s: float,
    interval_s: float = ASYNC_INTERVAL_S,
) -> Any:
    """``wait_until`` for asyncio tests: sleeps with ``asyncio.sleep``, so the tasks
    the check waits for run in between. ``check`` may be a coroutine function (one
    that asks a node over the wire): each call's result is awaited."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        value = await result if inspect.isawaitable(result) else result
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise _failure(what, timeout_s)
        await asyncio.sleep(min(interval_s, left))
