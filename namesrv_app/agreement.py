"""Do the nodes agree? Compared on what a client can observe, liveness apart.

Every node reports two things in NODE_STATUS (``raftstore.snapshot.StateDigests``):

* ``view_digest``: a hash of routes, cluster info, topic lists, KV and config, the
  answers a RocketMQ client can get. Nodes **agree** when these are equal. The live-
  broker table is left out on purpose: in eventual mode each node stamps heartbeats
  with its own clock, so a hash including them never matches across nodes, and a
  badge built on it would be a permanent false alarm.
* ``live_brokers``: who is alive, without times. Compared on its own, as "the same
  brokers are alive"; a difference is shown as a liveness note, not as disagreement,
  since a registration reaches the nodes a few milliseconds apart.

Nodes that predate ``view_digest`` are compared on their full ``digest``.
"""

from __future__ import annotations

from typing import Any


def _view(panel: dict[str, Any]) -> Any:
    return panel.get("view_digest") or panel.get("digest")


def mark_agreement(panels: list[dict[str, Any]]) -> bool:
    """Set ``disagrees`` and ``live_missing`` (brokers alive on another node but not on
    this one) on each panel; True when every reachable node agrees."""
    reachable = [p for p in panels if p.get("reachable")]
    views = {_view(p) for p in reachable}
    live_sets = {p["node_id"]: set(p.get("live_brokers") or ()) for p in reachable}
    everywhere = set.union(*live_sets.values()) if live_sets else set()
    for panel in panels:
        here = live_sets.get(panel["node_id"])
        panel["disagrees"] = bool(panel.get("reachable")) and len(views) > 1
        panel["live_missing"] = sorted(everywhere - here) if here is not None else []
    return len(views) <= 1
