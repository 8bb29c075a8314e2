"""SYSTEM_BUSY back-pressure: upstream's two executor queues, counted.

Upstream runs route reads (GET_ROUTEINFO_BY_TOPIC) on the client-request executor and
every other request on the default one; a request that finds its executor's queue
full (``clientRequestThreadPoolQueueCapacity``, ``defaultThreadPoolQueueCapacity``) is
answered SYSTEM_BUSY at once. Here a request that cannot be answered on the spot
waits as an asyncio task; the tasks of each kind are counted, and a request that
would take its kind past the capacity is answered the same way. Route reads answered
from the cache never wait, so they never count.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from raftstore.config import NamesrvConfig
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, make_response

REMARK_BUSY = "[OVERLOAD]system busy, start flow control for a while"
"""Upstream's remark when an executor rejects a request."""

_ROUTE_READ = int(RequestCode.GET_ROUTEINFO_BY_TOPIC)

Answer = RemotingCommand | None


class RequestQueues:
    """How many requests of each kind wait for their answer, against the capacities
    of the applied NamesrvConfig (an UPDATE_NAMESRV_CONFIG takes effect at once)."""

    def __init__(self, config: Callable[[], NamesrvConfig]) -> None:
        """``config`` returns the applied config (read on each waiting request)."""
        self._config = config
        self.waiting_route_reads = 0
        self.waiting_others = 0

    def refusal(self, request: RemotingCommand) -> RemotingCommand | None:
        """SYSTEM_BUSY when ``request`` would take its queue past its capacity, else None."""
        config = self._config()
        if request.code == _ROUTE_READ:
            waiting, capacity = (
                self.waiting_route_reads,
                config.client_request_thread_pool_queue_capacity,
            )
            key = "clientRequestThreadPoolQueueCapacity"
        else:
            waiting, capacity = self.waiting_others, config.default_thread_pool_queue_capacity
            key = "defaultThreadPoolQueueCapacity"
        if waiting < capacity:
            return None
        return make_response(
            request,
            ResponseCode.SYSTEM_BUSY,
            remark=f"{REMARK_BUSY} ({waiting} requests waiting, {key}={capacity})",
        )

    def track(
        self, request: RemotingCommand, handling: Coroutine[Any, Any, Answer]
    ) -> asyncio.Task[Answer]:
        """Count ``handling`` as waiting until it is done (or cancelled, even unstarted)."""
        route_read = request.code == _ROUTE_READ
        if route_read:
            self.waiting_route_reads += 1
        else:
            self.waiting_others += 1
        task = asyncio.ensure_future(handling)
        task.add_done_callback(lambda _task: self._release(route_read))
        return task

    def _release(self, route_read: bool) -> None:
        if route_read:
            self.waiting_route_reads -= 1
        else:
            self.waiting_others -= 1
