"""Long polling of PULL_MESSAGE (RocketMQ's ``PullRequestHoldService``).

A pull that finds nothing new is not answered at once: it waits here until a
message arrives in its queue (the store's arrival hook calls :meth:`PullHold.notify`,
on a master for every put, on a slave for every replicated message) or its
suspend timeout passes, and only then is the pull run again and answered. So a
consumer sees a new message within one event-loop turn of it being stored,
without polling.

Everything runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib


class PullHold:
    """Pulls waiting for a message, by (topic, queue id)."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, int], list[tuple[int, asyncio.Future[None]]]] = {}

    def waiting(self) -> int:
        """How many pulls are held now."""
        return sum(len(items) for items in self._waiting.values())

    async def wait(self, topic: str, queue_id: int, offset: int, timeout_s: float) -> bool:
        """Hold until a message lands at or past ``offset``; True if one did, False on timeout."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        key = (topic, queue_id)
        entry = (offset, future)
        self._waiting.setdefault(key, []).append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            items = self._waiting.get(key)
            if items is not None:
                with contextlib.suppress(ValueError):
                    items.remove(entry)
                if not items:
                    del self._waiting[key]

    def notify(self, topic: str, queue_id: int, max_offset: int) -> None:
        """A message was indexed: wake the pulls of that queue it satisfies."""
        items = self._waiting.get((topic, queue_id))
        if not items:
            return
        for offset, future in items:
            if max_offset > offset and not future.done():
                future.set_result(None)

    def wake_all(self) -> None:
        """Answer every held pull now (shutdown, or a role change)."""
        for items in self._waiting.values():
            for _offset, future in items:
                if not future.done():
                    future.set_result(None)
