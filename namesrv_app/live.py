"""Live updates: the console's websocket consumer and the helpers that feed it.

Producers (the gateway's projection writer, a divergence check, later the Raft
leader watcher) call :func:`publish_event` with a small JSON-able dict; it goes
to the Channels group :data:`EVENTS_GROUP` of the channel layer (Redis in the
full stack, so it crosses from the gateway process to the web processes).
Every console page opens one websocket to ``/ws/events/``; the consumer sends
each event on as JSON and the page's script refreshes the parts that changed.

Without the channel layer (Redis down) the socket is refused with
:data:`CLOSE_LAYER_DOWN` instead of failing inside the consumer, and a browser's
``ping`` is answered through the layer, so a socket whose layer went away is
noticed too: the page shows "Live updates paused: reconnecting…" and keeps
retrying, while the pages themselves still render (they read the database).

:func:`publish_change` adapts :class:`namesrv_app.events.ChangeEvent` so it can
be the gateway's ``NAMESRV['EVENT_PUBLISHER']``
(``namesrv_app.live.publish_change``). The consumer also listens to
:data:`namesrv_app.events.CHANGES_GROUP`, so the stock
``channel_layer_publisher`` works too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from asgiref.sync import async_to_sync
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer

from namesrv_app.agreement import mark_agreement
from namesrv_app.events import (
    CHANGES_GROUP,
    ChangeEvent,
    master_moves_from_json,
    master_moves_json,
)

log = logging.getLogger(__name__)

EVENTS_GROUP = "namesrv.events"
EVENT_MESSAGE_TYPE = "namesrv.event"
CLOSE_FORBIDDEN = 4403
"""Websocket close code for a user without a console role."""
CLOSE_LAYER_DOWN = 4503
"""Websocket close code when the channel layer (Redis) cannot be reached."""
PONG_MESSAGE_TYPE = "namesrv.pong"
TOPICS_SHOWN_MAX = 20
"""Topic names carried by one event; a full rebuild would otherwise ship 10k names."""


# ------------------------------------------------------------------- publishing


def publish_event(event: dict[str, Any]) -> None:
    """Send ``event`` to every open console; never raises (a lost event is only cosmetic).

    Safe from any thread: from a plain thread (the projection writer) it blocks
    until the layer accepted the message; from inside a running event loop (the
    gateway's own) it schedules the send instead of blocking that loop.
    """
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": EVENT_MESSAGE_TYPE, "event": {"at_ms": int(time.time() * 1000), **event}}
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    try:
        if loop is None:
            async_to_sync(layer.group_send)(EVENTS_GROUP, message)
        else:
            loop.create_task(layer.group_send(EVENTS_GROUP, message))
    except Exception as exc:
        # One line per lost event while Redis is down; the traceback only at DEBUG.
        log.warning(
            "publishing a console event failed: %s", exc, exc_info=log.isEnabledFor(logging.DEBUG)
        )


def is_liveness_only(event: ChangeEvent) -> bool:
    """Whether ``event`` only moved live-broker rows: heartbeats that changed nothing else.

    A registration or an expiry changes a broker group (``broker_names``) or a cluster,
    a route change its topics; heartbeats of known brokers only touch ``brokerLiveTable``.
    The console folds these into one line instead of one line per batch.
    """
    return (
        event.live_changed
        and not event.rebuilt
        and not event.config_changed
        and not (event.topics or event.broker_names or event.clusters or event.kv_namespaces)
    )


def change_event(event: ChangeEvent) -> dict[str, Any]:
    """A projection ChangeEvent as a console event: its kind and what it touched.

    ``liveness_only`` marks heartbeat-only batches (:func:`is_liveness_only`), which the
    console coalesces; every other event is shown on a line of its own. ``master_moves``
    lists each broker whose master moved to another address ("broker-a's master moved
    from A to B").
    """
    if event.rebuilt:
        kind = "rebuild"
    elif event.broker_names or event.clusters or event.live_changed:
        kind = "brokers"
    elif event.topics:
        kind = "topics"
    elif event.kv_namespaces:
        kind = "kv"
    else:
        kind = "config"
    topics = sorted(event.topics)
    return {
        "kind": kind,
        "node_id": event.node_id,
        "applied_version": event.applied_version,
        "routes_version": event.routes_version,
        "topics": topics[:TOPICS_SHOWN_MAX],
        "topic_count": len(topics),
        "broker_names": sorted(event.broker_names),
        "clusters": sorted(event.clusters),
        "kv_namespaces": sorted(event.kv_namespaces),
        "live_changed": event.live_changed,
        "liveness_only": is_liveness_only(event),
        "master_moves": master_moves_json(event.master_moves),
    }


def publish_change(event: ChangeEvent) -> None:
    """An ``EventPublisher`` for the gateway: publish a committed projection batch."""
    publish_event(change_event(event))


def publish_leader_change(node_id: str, leader: str | None, term: int) -> None:
    """For the Raft gateway: a node saw a new leader (or lost it) in ``term``."""
    publish_event({"kind": "leader", "node_id": node_id, "leader": leader, "term": term})


def divergence_event(panels: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A divergence event when reachable nodes disagree on what clients can see
    (:mod:`namesrv_app.agreement`; heartbeat times do not count), else None."""
    reachable = [p for p in panels if p.get("reachable")]
    if mark_agreement(panels):
        return None
    views: dict[Any, list[str]] = {}
    for p in reachable:
        views.setdefault(p.get("view_digest") or p.get("digest"), []).append(p["node_id"])
    return {
        "kind": "divergence",
        # Nodes that see the same thing, the largest group first: "n1, n3 | n2".
        "groups": sorted((sorted(ids) for ids in views.values()), key=lambda g: (-len(g), g)),
        "nodes": [
            {
                "node_id": p["node_id"],
                "digest": p.get("view_digest") or p.get("digest"),
                "applied_version": p.get("applied_version"),
            }
            for p in reachable
        ],
    }


def check_divergence() -> dict[str, Any] | None:
    """Ask every node for its status and publish a divergence event if digests differ.

    Meant for a periodic task (e.g. next to the Celery scan); returns the event.
    """
    from namesrv_app.web.reads import node_panels

    event = divergence_event(node_panels())
    if event is not None:
        publish_event(event)
    return event


# ------------------------------------------------------------------- the consumer


def is_layer_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is the channel layer failing to reach its store (Redis)."""
    if isinstance(exc, OSError | TimeoutError):
        return True
    try:
        from redis.exceptions import RedisError
    except ImportError:  # pragma: no cover - channels_redis depends on redis
        return False
    return isinstance(exc, RedisError)


class EventsConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """One console tab: forwards every event to the browser as JSON.

    Only users with a console role may connect (the session cookie is read by
    ``AuthMiddlewareStack``); others are closed with 4403.
    """

    groups_joined = (EVENTS_GROUP, CHANGES_GROUP)
    layer_down = False
    """Set once this consumer found the channel layer unreachable and closed its socket."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """The consumer; a channel layer that fails under it (Redis went away) closes
        the socket with :data:`CLOSE_LAYER_DOWN` instead of crashing the connection."""
        try:
            await super().__call__(scope, receive, send)
        except Exception as exc:
            if not is_layer_failure(exc):
                raise
            if self.layer_down:
                return  # already refused; the layer's own receive failed as well
            self.layer_down = True
            log.warning("live updates interrupted, channel layer unreachable: %s", exc)
            with contextlib.suppress(Exception):
                await send({"type": "websocket.close", "code": CLOSE_LAYER_DOWN})

    async def connect(self) -> None:
        """Accept viewers and operators; join the event groups."""
        from channels.db import database_sync_to_async

        from namesrv_app.roles import is_viewer

        user = self.scope.get("user")
        if user is None or not await database_sync_to_async(is_viewer)(user):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        try:
            for group in self.groups_joined:
                await self.channel_layer.group_add(group, self.channel_name)
        except Exception as exc:
            # Redis is down: refuse the socket cleanly; the page says live updates are
            # paused and retries, the rest of the console works without Redis.
            log.warning("live updates unavailable, channel layer unreachable: %s", exc)
            self.layer_down = True
            await self.close(code=CLOSE_LAYER_DOWN)
            return
        await self.accept()
        await self.send_json({"kind": "hello", "groups": list(self.groups_joined)})

    async def disconnect(self, code: int) -> None:
        """Leave the groups (nothing to leave when the layer is gone)."""
        for group in self.groups_joined:
            try:
                await self.channel_layer.group_discard(group, self.channel_name)
            except Exception as exc:
                log.info("leaving %s failed: %s", group, exc)
                return

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Browsers only listen; a ping is answered through the channel layer, so the
        pong proves events can still arrive (no pong: the page reconnects)."""
        if isinstance(content, dict) and content.get("kind") == "ping":
            try:
                await self.channel_layer.send(self.channel_name, {"type": PONG_MESSAGE_TYPE})
            except Exception as exc:
                log.warning("live updates interrupted, channel layer unreachable: %s", exc)
                self.layer_down = True
                await self.close(code=CLOSE_LAYER_DOWN)

    async def namesrv_pong(self, message: dict[str, Any]) -> None:
        """The ping's round trip through the layer came back."""
        await self.send_json({"kind": "pong"})

    async def namesrv_event(self, message: dict[str, Any]) -> None:
        """A :func:`publish_event` message."""
        await self.send_json(message["event"])

    async def namesrv_change(self, message: dict[str, Any]) -> None:
        """A stock ``events.channel_layer_publisher`` message (ChangeEvent.as_message)."""
        event = ChangeEvent(
            node_id=message["node_id"],
            applied_version=message["applied_version"],
            routes_version=message["routes_version"],
            topics=frozenset(message.get("topics", ())),
            broker_names=frozenset(message.get("broker_names", ())),
            clusters=frozenset(message.get("clusters", ())),
            kv_namespaces=frozenset(message.get("kv_namespaces", ())),
            live_changed=bool(message.get("live_changed")),
            config_changed=bool(message.get("config_changed")),
            rebuilt=bool(message.get("rebuilt")),
            master_moves=master_moves_from_json(message.get("master_moves")),
        )
        await self.send_json({"at_ms": int(time.time() * 1000), **change_event(event)})
