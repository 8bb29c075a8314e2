"""Each mode's node tables show only what means something in it: Raft's state, leader,
term and quorum in raft mode; an eventual node's own last scan instead (it has no leader,
term or quorum: it is its own table)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from django.template.loader import render_to_string

from raftstore.replicator import LocalReplicator

NOW_MS = 1_000_000


def _panel(node_id: str, **extra: Any) -> dict[str, Any]:
    return {
        **dataclasses.asdict(LocalReplicator(node_id).status()),
        "node_id": node_id,
        "remoting_addr": "127.0.0.1:9876",
        "local": node_id == "n1",
        "reachable": True,
        "remote": False,
        "disagrees": False,
        "live_missing": [],
        **extra,
    }


@pytest.fixture
def eventual_nodes() -> list[dict[str, Any]]:
    scanned = {"at_ms": NOW_MS - 4_000, "role": "standalone", "expired": 1}
    return [_panel("n1", last_scan=scanned), _panel("n2", last_scan=None)]


@pytest.mark.parametrize("template", ["console/_nodes_table.html", "console/nodes.html"])
def test_eventual_nodes_show_their_last_scan_and_no_raft_words(
    template: str, eventual_nodes: list[dict[str, Any]], db: Any
) -> None:
    html = render_to_string(
        template, {"nodes": eventual_nodes, "raft_mode": False, "wall_now_ms": NOW_MS}
    )
    assert "since its last scan" in html
    assert "4.0 s (1 expired)" in html
    assert "no scan yet" in html
    for word in (">term<", ">leader<", ">quorum<", "standalone", "commit index", ">peer<"):
        assert word not in html, word


def test_raft_nodes_keep_their_raft_fields(eventual_nodes: list[dict[str, Any]], db: Any) -> None:
    raft = [{**n, "mode": "raft", "state": "leader", "term": 3} for n in eventual_nodes]
    html = render_to_string(
        "console/_nodes_table.html", {"nodes": raft, "raft_mode": True, "wall_now_ms": NOW_MS}
    )
    assert "<th>term</th>" in html and "<th>leader</th>" in html
    assert "since its last scan" not in html


def test_an_eventual_cluster_offers_no_membership_change(
    eventual_nodes: list[dict[str, Any]], db: Any
) -> None:
    html = render_to_string(
        "console/nodes.html",
        {"nodes": eventual_nodes, "raft_mode": False, "wall_now_ms": NOW_MS, "can_write": True},
    )
    assert "Membership" not in html and "Download a backup" in html
