"""Produce and consume with rocketmq 0.4.4 (rocketmq-client-cpp 1.0.1): Producer + PushConsumer.

Runs in the separate interop venv (``.cache/interop/py``), not the project's:
``python rocketmq_cpp_consume_driver.py '<scenario JSON>'`` prints one JSON line per
event: ``sent`` (body, msgId, status), ``send_retry`` (body, error: a send the
client gave up on, sent again), ``received`` (body, msgId, topic, queueId,
queueOffset, reconsumeTimes), ``done`` (sent, distinct).

Scenario fields: ``namesrv`` (``;``-separated), ``topic``, ``group``, ``send``
(messages the Producer sends, bodies ``<prefix>-<i>``), ``prefix``, ``expect`` (distinct
bodies to wait for), ``timeout_s``, ``hold_s`` (keep consuming after that, so that
duplicates show), ``orderly`` (an orderly PushConsumer: it locks its queues on the
brokers with LOCK_BATCH_MQ and consumes each queue in order).

The C++ client does everything in its own threads: route lookups (105), heartbeats
(34), rebalancing (38 and AllocateMessageQueueAveragely), long-polling pulls (11) and
offset commits (15); the callback runs on one of its consumer threads.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer

lock = threading.Lock()


def emit(event: dict[str, object]) -> None:
    """One JSON line (callbacks run on the client's threads)."""
    with lock:
        print(json.dumps(event), flush=True)


SEND_ATTEMPTS = 3


def send_with_retries(producer: Producer, message: Message, body: str) -> object:
    """``send_sync``, sent again (after 1 s, at most twice) when the C++ client gives
    up: it reports "No route info of this topic" once its own retries over the queues
    failed, which was seen once under a loaded CI machine. Each retry is a
    ``send_retry`` event, so a test sees it (and a retried message may arrive twice)."""
    for attempt in range(1, SEND_ATTEMPTS + 1):
        try:
            return producer.send_sync(message)
        except Exception as exc:  # the client raises one class per C error code
            if attempt == SEND_ATTEMPTS:
                raise
            emit({"event": "send_retry", "body": body, "error": str(exc)[:200]})
            time.sleep(1.0)
    raise AssertionError("unreachable")


def main(scenario: dict[str, object]) -> None:
    """Send, then consume until ``expect`` distinct bodies arrived (or the timeout)."""
    namesrv = str(scenario["namesrv"])
    topic, group, prefix = str(scenario["topic"]), str(scenario["group"]), str(scenario["prefix"])
    producer = Producer(f"{group}-producer")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    sent = 0
    for index in range(int(scenario["send"])):  # type: ignore[call-overload]
        message = Message(topic)
        message.set_tags("TagA")
        message.set_keys(f"key-{index}")
        message.set_body(f"{prefix}-{index}")
        result = send_with_retries(producer, message, f"{prefix}-{index}")
        emit(
            {
                "event": "sent",
                "body": f"{prefix}-{index}",
                "msgId": result.msg_id,
                "status": int(result.status),
                "offset": result.offset,
            }
        )
        sent += 1
    producer.shutdown()

    received: set[str] = set()

    def on_message(message: object) -> None:
        body = message.body.decode()  # type: ignore[attr-defined]
        emit(
            {
                "event": "received",
                "body": body,
                "msgId": message.id,  # type: ignore[attr-defined]
                "topic": message.topic,
                "queueId": message.queue_id,  # type: ignore[attr-defined]
                "queueOffset": message.queue_offset,  # type: ignore[attr-defined]
                "reconsumeTimes": message.reconsume_times,
            }
        )  # type: ignore[attr-defined]
        with lock:
            received.add(body)

    consumer = PushConsumer(group, orderly=bool(scenario.get("orderly", False)))
    consumer.set_namesrv_addr(namesrv)
    consumer.set_thread_count(1)
    consumer.subscribe(topic, on_message)
    consumer.start()
    started = time.monotonic()
    met_at = None
    while time.monotonic() - started < float(scenario["timeout_s"]):  # type: ignore[arg-type]
        with lock:
            count = len(received)
        if met_at is None and count >= int(scenario["expect"]):  # type: ignore[call-overload]
            met_at = time.monotonic()
        if met_at is not None and time.monotonic() - met_at >= float(scenario["hold_s"]):  # type: ignore[arg-type]
            break
        time.sleep(0.2)
    consumer.shutdown()
    emit({"event": "done", "sent": sent, "distinct": len(received)})


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
