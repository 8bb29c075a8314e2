"""SYSTEM_BUSY back-pressure of the route-read queue (``clientRequestThreadPoolQueueCapacity``).

The default queue's capacity is burst-tested on a real gateway
(tests/integration/test_namesrv_config_keys.py); the route-read queue follows the same
rule in ``gateway.backpressure.RequestQueues``, checked here against its counts.
"""

from __future__ import annotations

import asyncio

from gateway.backpressure import REMARK_BUSY, RequestQueues
from raftstore.config import NamesrvConfig
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand


def route_read(opaque: int) -> RemotingCommand:
    """A GET_ROUTEINFO_BY_TOPIC that waits (a linearizable read, say)."""
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, opaque=opaque
    )


async def test_a_route_read_past_the_route_read_capacity_answers_system_busy() -> None:
    queues = RequestQueues(lambda: NamesrvConfig(client_request_thread_pool_queue_capacity=1))
    answered = asyncio.Event()

    async def waiting() -> RemotingCommand | None:
        await answered.wait()
        return None

    first = route_read(1)
    assert queues.refusal(first) is None
    task = queues.track(first, waiting())

    busy = queues.refusal(route_read(2))
    assert busy is not None and busy.code == ResponseCode.SYSTEM_BUSY and busy.opaque == 2
    assert busy.remark == (
        f"{REMARK_BUSY} (1 requests waiting, clientRequestThreadPoolQueueCapacity=1)"
    )
    # The other queue is not full: a write still waits its turn.
    write = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, opaque=3)
    assert queues.refusal(write) is None

    answered.set()
    await task
    assert queues.waiting_route_reads == 0
    assert queues.refusal(route_read(4)) is None
