"""The broker's background asyncio tasks: the periodic loops and the one-off registrations.

Kept in one place so that :meth:`BrokerTasks.stop` ends every task the broker started,
whichever part started it, before the ports close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine

log = logging.getLogger(__name__)


class BrokerTasks:
    """Starts the broker's periodic loops and one-off tasks, and cancels them all at stop."""

    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []

    def every(self, delay_ms: int, period_ms: int, step: Callable[[], Awaitable[object]]) -> None:
        """Run ``step`` after ``delay_ms``, then every ``period_ms``, until :meth:`stop`."""

        async def loop() -> None:
            await asyncio.sleep(delay_ms / 1000)
            while True:
                try:
                    await step()
                except Exception:
                    # A failed round must not end the schedule (ScheduledExecutor
                    # tasks in BrokerController catch everything too).
                    log.exception("periodic broker task failed")
                await asyncio.sleep(period_ms / 1000)

        self._tasks.append(asyncio.create_task(loop()))

    def spawn(self, work: Coroutine[object, object, None]) -> asyncio.Task[None]:
        """Run ``work`` once in the background (finished tasks are forgotten here)."""
        task = asyncio.create_task(work)
        self._tasks[:] = [t for t in self._tasks if not t.done()]
        self._tasks.append(task)
        return task

    async def stop(self) -> None:
        """Cancel every task and wait until each has ended."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
