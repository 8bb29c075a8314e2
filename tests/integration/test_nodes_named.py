"""Raft mode: the console names the leader and the peers by node id, not by Raft address."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cluster_fixtures import (
    FREE_PORTS,
    api,
    cluster_cli,
    create_operator,
    stop_cluster,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.slow


def _nodes(base: str, token: str) -> list[dict[str, Any]]:
    status, answer = api(base, "/api/v1/nodes/", token)
    assert status == 200, answer
    return list(answer["nodes"])


def test_the_leader_and_peers_are_named_by_node_id(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = cluster_cli(
        "up",
        "--nodes",
        "3",
        "--mode",
        "raft",
        "--run-dir",
        str(run_dir),
        "--json",
        *FREE_PORTS,
        "--raft-base-port",
        "0",
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    try:
        token = create_operator(run_dir, "eye", role="viewer", token=True)
        base = f"http://127.0.0.1:{summary['nodes'][0]['web_port']}"
        panels: list[dict[str, Any]] = []

        def leaders_named() -> bool:
            panels[:] = _nodes(base, token)
            return all(p.get("leader") for p in panels)

        wait_until(
            leaders_named,
            what=lambda: f"a leader on every node's panel ({panels})",
            timeout_s=30,
            interval_s=0.5,
        )

        ids = {"n1", "n2", "n3"}
        leaders = {p["leader_id"] for p in panels}
        assert len(leaders) == 1 and leaders <= ids
        leader = next(p for p in panels if p["node_id"] == p["leader_id"])
        assert {peer["node_id"] for peer in leader["peers"]} == ids - {leader["node_id"]}
    finally:
        stop_cluster(run_dir)
