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

:func:`broker_matrix` is the Topology page's node x broker matrix: what each node's own
table says of every broker replica any node knows, so that a replica one eventual node
still holds and another already dropped (or never heard) shows at a glance.
"""

from __future__ import annotations

from collections.abc import Callable
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


MATRIX_ROWS_MAX = 300
"""Replicas the node x broker matrix shows at most: past it, the ones the nodes disagree
on first (a search narrows the rest)."""

# A matrix cell: heard within the expiring threshold; heard, but silent past it; past
# its timeout and waiting for that node's next scan to drop it; not in that node's table;
# that node did not answer (or is a member on another host, whose status is on its own
# console).
ALIVE = "alive"
EXPIRING = "expiring"
LATE = "past timeout"
ABSENT = "absent"
NO_ANSWER = "no answer"


def _cell(view: dict[str, Any] | None, expiring_after: Callable[[int], int]) -> dict[str, Any]:
    if view is None:
        return {"state": ABSENT, "age_ms": None, "timeout_ms": None}
    age, timeout = view.get("age_ms"), view.get("timeout_ms")
    if age is None or timeout is None:
        state = LATE  # in the group's address table, with no live entry
    elif age > timeout:
        state = LATE
    elif age > expiring_after(timeout):
        state = EXPIRING
    else:
        state = ALIVE
    return {"state": state, "age_ms": age, "timeout_ms": timeout}


def broker_matrix(
    panels: list[dict[str, Any]],
    expiring_after: Callable[[int], int],
    *,
    search: str = "",
    cluster: str = "",
) -> dict[str, Any]:
    """Every broker replica any node knows, one column per node: what each node's own
    table says of it (``brokers`` of NODE_STATUS, :func:`gateway.selectors.broker_views`;
    ages by that node's clock). A row ``disagrees`` when the answering nodes differ on
    whether they know it at all. ``search`` filters on the broker name, ``cluster`` on
    the cluster, as the page's groups are."""
    columns = [
        {"node_id": p["node_id"], "answered": bool(p.get("reachable")) and "brokers" in p}
        for p in panels
    ]
    heard: list[dict[tuple[Any, ...], dict[str, Any]]] = []
    for panel in panels:
        views = panel.get("brokers") if panel.get("reachable") else None
        heard.append({_replica_key(v): v for v in views or ()})
    keys = sorted(
        {k for node in heard for k in node},
        key=lambda k: (k[0], k[1] or "", -1 if k[2] is None else k[2], k[3]),
    )
    needle = search.lower()
    rows = []
    for key in keys:
        name = key[1] or ""
        if (needle and needle not in name.lower()) or (cluster and key[0] != cluster):
            continue
        cells = [
            _cell(node.get(key), expiring_after)
            if column["answered"]
            else {"state": NO_ANSWER, "age_ms": None, "timeout_ms": None}
            for node, column in zip(heard, columns, strict=True)
        ]
        known = {c["state"] != ABSENT for c in cells if c["state"] != NO_ANSWER}
        rows.append(
            {
                "cluster": key[0],
                "broker_name": key[1],
                "broker_id": key[2],
                "addr": key[3],
                "cells": cells,
                "disagrees": len(known) > 1,
            }
        )
    disagreeing = sum(1 for r in rows if r["disagrees"])
    shown = rows
    if len(rows) > MATRIX_ROWS_MAX:
        shown = sorted(rows, key=lambda r: not r["disagrees"])[:MATRIX_ROWS_MAX]
    return {
        "columns": columns,
        "rows": shown,
        "total": len(rows),
        "disagreeing": disagreeing,
        "answered": sum(1 for c in columns if c["answered"]),
    }


def _replica_key(view: dict[str, Any]) -> tuple[Any, ...]:
    return (view.get("cluster"), view.get("broker_name"), view.get("broker_id"), view["addr"])
