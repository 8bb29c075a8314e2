"""A healthy eventual cluster agrees: nodes compare what clients see, not heartbeat times."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from remoting.blocking import BlockingClient
from tests.integration.cluster_fixtures import (
    api,
    create_operator,
    make_broker,
    register_broker,
    remoting_addr,
    start_cluster,
    stop_cluster,
)

pytestmark = pytest.mark.slow


def _nodes(base: str, token: str) -> dict[str, Any]:
    status, answer = api(base, "/api/v1/nodes/", token)
    assert status == 200, answer
    return dict(answer)


def test_heartbeats_stamped_by_each_node_do_not_make_the_nodes_disagree(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary = start_cluster(run_dir, nodes=3)
    try:
        token = create_operator(run_dir, "watcher", role="viewer", token=True)
        broker = make_broker("broker-t", 30811)
        # The same registration reaches each node at a different moment, as it does
        # from a real broker: each node stamps its own heartbeat time. The connections
        # stay open (a closed channel unregisters the broker, as upstream).
        clients = [BlockingClient(remoting_addr(summary, i), timeout_s=5.0) for i in range(3)]
        try:
            for client in clients:
                register_broker(client, broker, ["AgreeTopic"])
                time.sleep(0.05)
            base = f"http://127.0.0.1:{summary['nodes'][0]['web_port']}"

            answer = _nodes(base, token)

            panels = answer["nodes"]
            assert answer["agree"] is True, panels
            assert len({p["digest"] for p in panels}) == 3  # the full states differ: times
            assert len({p["view_digest"] for p in panels}) == 1  # what clients see does not
            live = ["DefaultCluster/127.0.0.1:30811"]
            assert all(p["live_brokers"] == live for p in panels)
            assert not any(p["disagrees"] or p["live_missing"] for p in panels)

            # A real difference: n3 alone learns a topic (an eventual write to one node).
            register_broker(clients[2], broker, ["AgreeTopic", "OnlyOnN3"])
            assert _nodes(base, token)["agree"] is False
        finally:
            for client in clients:
                client.close()
    finally:
        stop_cluster(run_dir)
