"""Every Redis client of a node's processes, tried once over ``REDIS_URL``.

``python -m tests.integration.redis_tls_probe`` runs in a process of its own, as the
web process and Celery do, so the settings read ``REDIS_URL`` (and check it) the way
theirs do. It prints one JSON line, each client's result or its error:

* ``celery``: a task sent through the broker (Celery's built-in ``celery.accumulate``,
  which the worker logs with its arguments), then a ping the worker answers through
  the broker too: the project has no result backend, as no task's result is read;
* ``channels``: a message sent to a group on the Channels layer and received;
* ``beat_lock``: a PING by the client beat's lock uses (``redis.Redis.from_url``
  of the broker URL).

With ``--no-worker`` (where every link must fail) the Celery side is tried as its
broker connection instead (kombu), once and without retries, so the error is the
link's own and not Celery's "retry limit exceeded".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Callable
from typing import Any

ROUND_TRIP_TIMEOUT_S = 60.0
PING_TIMEOUT_S = 1.0
GROUP = "redis-tls-probe"
ECHOED = ("over", "tls")


def _attempt(check: Callable[[], Any]) -> dict[str, Any]:
    try:
        return {"ok": check()}
    except Exception as exc:  # the probe reports whatever a client raised
        return {"error": f"{type(exc).__name__}: {exc}"}


def _celery_round_trip() -> Any:
    from namesrv_site.celery import app

    app.send_task("celery.accumulate", args=ECHOED)
    # A ping sent before the worker listens is lost (a broadcast): ask until one answers.
    deadline = time.monotonic() + ROUND_TRIP_TIMEOUT_S
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=PING_TIMEOUT_S, limit=1)
        if replies:
            return [answer for reply in replies for answer in reply.values()]
    raise TimeoutError(f"no worker answered a ping in {ROUND_TRIP_TIMEOUT_S:g} s")


def _celery_broker() -> Any:
    from namesrv_site.celery import app

    with app.connection_for_write() as connection:
        connection.ensure_connection(max_retries=0)
        return True


async def _channels_round_trip() -> Any:
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(GROUP, channel)
    await layer.group_send(GROUP, {"type": "probe.message", "text": " ".join(ECHOED)})
    message = await asyncio.wait_for(layer.receive(channel), ROUND_TRIP_TIMEOUT_S)
    return message["text"]


def _beat_lock() -> Any:
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=5.0)
    try:
        return client.ping()
    finally:
        client.close()


def main() -> None:
    """Try each client once and print what happened as one JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-worker", action="store_true")
    options = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "namesrv_site.settings")
    import django

    django.setup()
    if options.no_worker:
        results = {"celery_broker": _attempt(_celery_broker)}
    else:
        results = {"celery": _attempt(_celery_round_trip)}
    results |= {
        "channels": _attempt(lambda: asyncio.run(_channels_round_trip())),
        "beat_lock": _attempt(_beat_lock),
    }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
