"""Change events: what the projection just committed, for whoever listens.

The projection writer calls one pluggable publisher after each committed
batch. Publishing must never fail the writer, so errors are logged and
dropped. :func:`channel_layer_publisher` sends to a Channels group (Redis in
the full stack); tests and the plain gateway use :func:`null_publisher` or
their own callable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.utils.module_loading import import_string

from raftstore.results import MasterMove

if TYPE_CHECKING:
    # An annotation only: gateway.loops brings PySyncObj, which the web process never needs.
    from gateway.loops import LeaderPublisher

log = logging.getLogger(__name__)

CHANGES_GROUP = "namesrv.changes"
"""The Channels group every console websocket joins."""
MASTER_MOVES_MAX = 32
"""Master moves one event carries at most (the latest); a flapping master is still seen."""


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """One committed projection batch of a node: versions and the keys it touched."""

    node_id: str
    applied_version: int
    routes_version: int
    topics: frozenset[str] = field(default_factory=frozenset)
    broker_names: frozenset[str] = field(default_factory=frozenset)
    clusters: frozenset[str] = field(default_factory=frozenset)
    kv_namespaces: frozenset[str] = field(default_factory=frozenset)
    live_changed: bool = False
    config_changed: bool = False
    rebuilt: bool = False
    master_moves: tuple[MasterMove, ...] = ()
    """Brokers whose master (id 0) moved to another address, in apply order."""

    def as_message(self) -> dict[str, Any]:
        """A JSON-friendly form (sorted lists) for channel layers and websockets."""
        return {
            "type": "namesrv.change",
            "node_id": self.node_id,
            "applied_version": self.applied_version,
            "routes_version": self.routes_version,
            "topics": sorted(self.topics),
            "broker_names": sorted(self.broker_names),
            "clusters": sorted(self.clusters),
            "kv_namespaces": sorted(self.kv_namespaces),
            "live_changed": self.live_changed,
            "config_changed": self.config_changed,
            "rebuilt": self.rebuilt,
            "master_moves": master_moves_json(self.master_moves),
        }


def master_moves_json(moves: tuple[MasterMove, ...]) -> list[dict[str, str]]:
    """Master moves as JSON objects: ``cluster``, ``broker_name``, ``from``, ``to``."""
    return [
        {
            "cluster": m.cluster_name,
            "broker_name": m.broker_name,
            "from": m.old_addr,
            "to": m.new_addr,
        }
        for m in moves
    ]


def master_moves_from_json(items: Any) -> tuple[MasterMove, ...]:
    """:func:`master_moves_json` read back; entries that do not fit are left out."""
    if not isinstance(items, list):
        return ()
    keys = ("cluster", "broker_name", "from", "to")
    return tuple(
        MasterMove(*(str(item[key]) for key in keys))
        for item in items
        if isinstance(item, dict) and all(key in item for key in keys)
    )


EventPublisher = Callable[[ChangeEvent], None]


def null_publisher(event: ChangeEvent) -> None:
    """Publish nowhere (the default)."""


def channel_layer_publisher(event: ChangeEvent) -> None:
    """Send ``event`` to the :data:`CHANGES_GROUP` group of the default channel layer."""
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return
    async_to_sync(layer.group_send)(CHANGES_GROUP, event.as_message())


def load_publisher(dotted_path: str) -> EventPublisher:
    """The publisher named by a dotted path, or :func:`null_publisher` for an empty path."""
    if not dotted_path:
        return null_publisher
    publisher: EventPublisher = import_string(dotted_path)
    return publisher


def load_leader_publisher(dotted_path: str) -> LeaderPublisher | None:
    """The leader-change publisher named by a dotted path, or None for an empty path."""
    if not dotted_path:
        return None
    publisher: LeaderPublisher = import_string(dotted_path)
    return publisher


def publish_safely(publisher: EventPublisher, event: ChangeEvent) -> None:
    """Call ``publisher``; a failing publisher is logged, never raised to the writer."""
    try:
        publisher(event)
    except Exception:
        log.warning("change event publisher failed", exc_info=True)
