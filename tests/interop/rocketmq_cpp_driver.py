"""Fetch a topic's queues with rocketmq 0.4.4 (rocketmq-client-cpp 1.0.1) and print them.

Runs in the separate interop venv (``.cache/interop/py``), not the project's:
``python rocketmq_cpp_driver.py <namesrvAddr> <topic>`` prints one JSON line,
``{"status": <C API status>, "queues": [{"topic", "brokerName", "queueId"}, ...]}``.

``FetchSubscriptionMessageQueues`` is the consumer-side route lookup: the C++
client sends GET_ROUTEINFO_BY_TOPIC (105, language CPP, version 63) and turns the
route's read queues into message queues. Its status cannot tell a missing route
from a transport error, so the test checks the queues of a registered topic.
"""

from __future__ import annotations

import ctypes
import json
import sys

from rocketmq.client import PullConsumer
from rocketmq.ffi import _CMessageQueue, dll

CONSUMER_GROUP = "interop-cpp-consumer"


def fetch_queues(namesrv_addr: str, topic: str) -> dict[str, object]:
    """The C API's answer for ``topic``: its status and the message queues it built."""
    consumer = PullConsumer(CONSUMER_GROUP)
    consumer.set_namesrv_addr(namesrv_addr)
    consumer.start()
    try:
        queues_ptr = ctypes.POINTER(_CMessageQueue)()
        size = ctypes.c_int()
        status = dll.FetchSubscriptionMessageQueues(
            consumer._handle, topic.encode(), ctypes.pointer(queues_ptr), ctypes.pointer(size)
        )
        queues = [
            {
                "topic": queues_ptr[i].topic.decode(),
                "brokerName": queues_ptr[i].brokerName.decode(),
                "queueId": queues_ptr[i].queueId,
            }
            for i in range(size.value)
        ]
        if size.value:
            dll.ReleaseSubscriptionMessageQueue(queues_ptr)
    finally:
        consumer.shutdown()
    return {"status": int(status), "queues": queues}


if __name__ == "__main__":
    print(json.dumps(fetch_queues(sys.argv[1], sys.argv[2])), flush=True)
