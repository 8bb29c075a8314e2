"""Barriers: a no-op committed through the leader, so that a read after it sees every
write committed before it; callers that arrive while one is in flight share the next."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from raftstore.commands import Barrier, Command
from raftstore.replicator import ReplicationError
from raftstore.results import ApplyResult


class Barriers:
    """Runs one barrier at a time; the callers that wait meanwhile share the next."""

    def __init__(self, node_id: str, propose: Callable[[Command], Awaitable[ApplyResult]]) -> None:
        self._node_id = node_id
        self._propose = propose
        self._next: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None

    async def wait(self) -> None:
        """Return once a barrier proposed after this call is applied on this node."""
        loop = asyncio.get_running_loop()
        if self._next is None:
            self._next = loop.create_future()
        group = self._next
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())
        await asyncio.shield(group)

    async def _run(self) -> None:
        while self._next is not None:
            group, self._next = self._next, None
            try:
                await self._propose(Barrier())
            except asyncio.CancelledError:
                group.set_exception(ReplicationError(f"{self._node_id} stopped"))
                raise
            except Exception as exc:
                group.set_exception(exc)
            else:
                group.set_result(None)

    def stop(self) -> None:
        """Cancel the barrier in flight and fail the callers waiting for the next."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._next is not None:
            self._next.set_exception(ReplicationError(f"{self._node_id} stopped"))
            self._next = None
