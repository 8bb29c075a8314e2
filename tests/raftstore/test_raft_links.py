"""Links between followers stay open while a leader lives (raftstore.raft.transport,
KEEPALIVE_S), so a candidate's RequestVote reaches the other follower instead of
closing a link that PySyncObj's connection timeout (3 s without a read) had left for
dead; then a leader's death costs one election, not two."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pysyncobj.monotonic import monotonic
from pysyncobj.tcp_connection import CONNECTION_STATE

from raftstore.raft import RaftSettings
from raftstore.raft.transport import KEEPALIVE_S
from tests.raftstore.raft_node import InProcessCluster

IDLE_S = 4.5
"""Longer than the connection timeout: what followers would have let go stale."""


def _link(node: Any, other: Any) -> Any:
    """``node``'s connection to ``other`` (by Raft address)."""
    transport = node._require_started()._SyncObj__transport
    for peer, conn in transport._connections.items():
        if peer.address == other.self_addr:
            return transport, conn
    raise AssertionError("no connection")


async def test_followers_keep_their_link_read_and_a_request_vote_reaches_it(
    tmp_path: Path,
) -> None:
    settings = RaftSettings()
    assert settings.connection_timeout_s > 2 * KEEPALIVE_S
    async with InProcessCluster(tmp_path, settings=settings) as cluster:
        leader = await cluster.leader()
        await cluster.converged()
        first, second = [n for n in cluster.nodes if n is not leader]
        await asyncio.sleep(IDLE_S)
        for node, other in ((first, second), (second, first)):
            transport, conn = _link(node, other)
            assert conn.state == CONNECTION_STATE.CONNECTED
            read_ago = monotonic() - conn._TcpConnection__lastReadTime
            assert read_ago < 2 * KEEPALIVE_S, f"nothing read for {read_ago:.1f} s"
            assert transport.keepalives_sent >= 2
        # What a candidate sends first: a message on the follower-to-follower link.
        transport, conn = _link(first, second)
        assert transport.send(_peer(transport, second), {"type": "keepalive"}) is True
        assert conn.state == CONNECTION_STATE.CONNECTED
        # The cluster goes on: nothing the keepalives carry reaches Raft.
        statuses = await cluster.converged()
        assert len({s.term for s in statuses}) == 1


def _peer(transport: Any, other: Any) -> Any:
    return next(p for p in transport._connections if p.address == other.self_addr)


async def test_each_member_draws_its_election_timeout_from_its_own_slot(tmp_path: Path) -> None:
    """Ordered by address, member r of n draws within the first half of slot r of
    [raftMinTimeout, raftMaxTimeout]: two members' candidacies after one heartbeat
    are at least half a slot apart, so the first RequestVote arrives before the
    second member stands."""
    settings = RaftSettings()
    async with InProcessCluster(tmp_path, settings=settings) as cluster:
        await cluster.leader()
        order = sorted(node.self_addr for node in cluster.nodes)
        slot = (settings.raft_max_timeout_s - settings.raft_min_timeout_s) / len(order)
        for node in cluster.nodes:
            rank = order.index(node.self_addr)
            low = settings.raft_min_timeout_s + rank * slot
            draws = [node._require_started()._SyncObj__generateRaftTimeout() for _ in range(200)]
            assert low <= min(draws) and max(draws) <= low + slot / 2, (rank, min(draws))
            assert max(draws) - min(draws) > slot / 4, "still drawn at random within the slot"
