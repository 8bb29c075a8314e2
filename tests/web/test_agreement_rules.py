"""What counts as agreement between nodes, and the divergence event the feed shows."""

from __future__ import annotations

from typing import Any

from namesrv_app.agreement import mark_agreement
from namesrv_app.live import divergence_event


def panel(node_id: str, view: str, live: list[str], *, reachable: bool = True) -> dict[str, Any]:
    # The full digests always differ (each node stamps heartbeats with its own clock).
    return {
        "node_id": node_id,
        "reachable": reachable,
        "digest": f"full-{node_id}",
        "view_digest": view,
        "live_brokers": live,
        "applied_version": 7,
    }


def test_equal_client_views_agree_whatever_the_heartbeat_times() -> None:
    panels = [panel("n1", "v", ["b1"]), panel("n2", "v", ["b1"]), panel("n3", "v", ["b1"])]
    assert mark_agreement(panels) is True
    assert not any(p["disagrees"] for p in panels)
    assert divergence_event(panels) is None


def test_liveness_is_compared_apart_and_never_counts_as_disagreement() -> None:
    panels = [panel("n1", "v", ["b1", "b2"]), panel("n2", "v", ["b1"])]
    assert mark_agreement(panels) is True
    assert panels[1]["live_missing"] == ["b2"] and panels[0]["live_missing"] == []


def test_a_different_view_marks_every_reachable_node_and_names_the_groups() -> None:
    panels = [
        panel("n3", "v", []),
        panel("n2", "w", []),
        panel("n1", "v", []),
        panel("n4", "x", [], reachable=False),
    ]
    event = divergence_event(panels)
    assert event is not None and event["kind"] == "divergence"
    assert event["groups"] == [["n1", "n3"], ["n2"]]  # the largest group first
    assert [p["disagrees"] for p in panels] == [True, True, True, False]
    assert {n["node_id"] for n in event["nodes"]} == {"n1", "n2", "n3"}


def test_an_unreachable_node_is_not_a_disagreement() -> None:
    panels = [panel("n1", "v", []), panel("n2", "other", [], reachable=False)]
    assert mark_agreement(panels) is True
    assert divergence_event(panels) is None
