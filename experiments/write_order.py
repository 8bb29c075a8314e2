"""The order in which the harness lets its writes go: :class:`TopicGate` and
:class:`FreshRound`.

While every heartbeat round is a write (the nemesis), a write's value is the register's
latest value with the broker's share changed, so two writes of one topic must not be in
flight together: the harness could not tell which one a node applied last. A broker
holds several topics, the route-churn brokers hold all of them, and a restarted broker
registers all of its own in one round.

Taking one lock per topic in a fixed order is correct but convoys at scale: a write that
waits for its tenth lock holds the nine before it, so every write behind those waits
too, and a restart queued behind 50 brokers' rounds took minutes. :class:`TopicGate`
admits a write only when it can have all its topics at once, in the order writes asked,
so disjoint writes run together and none holds a topic while it waits for another.

Each write also first reads the nodes' journals, so an expiry committed before it is
recorded before it is valued. :class:`FreshRound` lets every write that asks at once
share one read of the journals instead of each making its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class _Ticket:
    topics: frozenset[str]
    admitted: asyncio.Future[None]
    running: bool = False


@dataclass
class TopicGate:
    """Writes whose topic sets overlap run one at a time, in the order they asked;
    writes with disjoint topic sets run together.

    A write that asks with ``first=True`` (a broker's restart, which a fault schedule
    waits on) goes ahead of every write still waiting, though not of those running."""

    _queue: list[_Ticket] = field(default_factory=list)

    @contextlib.asynccontextmanager
    async def hold(self, topics: Iterable[str], *, first: bool = False) -> AsyncIterator[None]:
        ticket = _Ticket(frozenset(topics), asyncio.get_running_loop().create_future())
        if first:
            waiting = next((i for i, t in enumerate(self._queue) if not t.running), None)
            self._queue.insert(len(self._queue) if waiting is None else waiting, ticket)
        else:
            self._queue.append(ticket)
        try:
            self._admit()
            await ticket.admitted
            yield
        finally:
            self._queue.remove(ticket)
            self._admit()

    def _admit(self) -> None:
        """Start every waiting write whose topics no write before it in the queue claims."""
        claimed: set[str] = set()
        for ticket in self._queue:
            if not ticket.running and ticket.topics.isdisjoint(claimed):
                ticket.running = True
                ticket.admitted.set_result(None)
            claimed |= ticket.topics

    def waiting(self) -> int:
        """Writes queued and not yet admitted."""
        return sum(1 for t in self._queue if not t.running)


class FreshRound:
    """Run ``read`` on behalf of everyone who asks, so that each caller returns after a
    whole run of ``read`` that began after it asked; callers that ask while one is under
    way share the next one. However many writes ask at once, at most two runs serve
    them: the one under way, and one more."""

    def __init__(self, read: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._read = read
        self._started = 0
        self._task: asyncio.Task[None] | None = None

    async def __call__(self) -> None:
        need = self._started + 1
        while True:
            task = self._task
            if task is not None and not task.done():
                # shield: a caller that is cancelled leaves the run to the others.
                await asyncio.shield(task)
                if self._started >= need:
                    return
                continue
            if self._started >= need:
                return
            self._started += 1
            self._task = asyncio.get_running_loop().create_task(self._read())
