"""Raft mode: a whole-cluster crash (SIGKILL every node) loses no acknowledged write,
and every node rebuilds its Django projection from snapshot + log."""

from __future__ import annotations

from pathlib import Path

import pytest

from remoting.codes import ResponseCode
from tests.integration.raft_cluster_harness import (
    RAFT_COMPACT_LOG,
    RaftGatewayCluster,
    register_frame,
    route_frame,
    topic_of,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BEFORE_SNAPSHOT = range(30, 34)
AFTER_SNAPSHOT = range(34, 37)
PROJECTED_TABLES = ("queuedata", "livebroker", "brokergroup", "brokeraddress")


def _projection(cluster: RaftGatewayCluster) -> list[dict[str, int]]:
    return [
        {table: node.projection_count(table) for table in PROJECTED_TABLES}
        for node in cluster.nodes
    ]


def test_a_killed_cluster_restarts_with_every_acknowledged_write(
    cluster: RaftGatewayCluster,
) -> None:
    """Writes, a snapshot on every node, more writes, SIGKILL all, start all: the
    same state (digest, table version) everywhere and projections rebuilt to match."""
    for index, b in enumerate(BEFORE_SNAPSHOT):
        node = cluster.nodes[index % len(cluster)]
        assert node.invoke(register_frame(b)).code == ResponseCode.SUCCESS
    cluster.converged()
    for node in cluster.nodes:
        assert node.internal(RAFT_COMPACT_LOG).code == ResponseCode.SUCCESS
    for index, b in enumerate(AFTER_SNAPSHOT):
        node = cluster.nodes[index % len(cluster)]
        assert node.invoke(register_frame(b)).code == ResponseCode.SUCCESS
    before = cluster.converged()
    for node in cluster.nodes:
        node.wait_for_projection()
    projected_before = _projection(cluster)
    assert (cluster.nodes[0].raft_dir / "raft.snapshot").exists()

    for node in cluster.nodes:
        node.kill()
    for node in cluster.nodes:
        # Drop the projection too: it must come back from the Raft state alone.
        for suffix in ("", "-wal", "-shm"):
            Path(f"{node.db_path}{suffix}").unlink(missing_ok=True)
    cluster.start()

    after = cluster.converged()
    assert {(s["digest"], s["applied_version"]) for s in after} == {
        (before[0]["digest"], before[0]["applied_version"])
    }
    for node in cluster.nodes:
        node.wait_for_projection()
    assert _projection(cluster) == projected_before
    for b in (*BEFORE_SNAPSHOT, *AFTER_SNAPSHOT):
        for node in cluster.nodes:
            assert node.invoke(route_frame(topic_of(b))).code == ResponseCode.SUCCESS, (b, node)
