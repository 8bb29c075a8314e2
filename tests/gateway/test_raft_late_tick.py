"""Raft mode, a node whose Raft tick thread runs late (a large entry applying, a starved
core): its contact with the quorum is stale by the clock, which says nothing about the
quorum. A registration the applied state could answer is proposed instead, so the broker
gets an answer the commit stands behind, not a false "no raft quorum"."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.clock import SystemClock
from gateway.services import NameServerService
from raftstore.raft.settings import RaftSettings
from tests.gateway.conftest import default_registration
from tests.raftstore.raft_node import InProcessCluster, stall_tick_thread

STALL_S = 1.6


async def _register(service: NameServerService) -> bool:
    """Register ``default-broker`` with the same table; True when answered from state."""
    _, from_state = await service.register(service.registration_command(**default_registration()))
    return from_state


async def test_an_unchanged_registration_on_a_late_ticking_follower_is_proposed(
    tmp_path: Path,
) -> None:
    async with InProcessCluster(tmp_path, propose_timeout_s=3.0) as cluster:
        await cluster.leader()
        follower = await cluster.follower()
        service = NameServerService(follower, SystemClock())
        assert await _register(service) is False, "the first registration is proposed"
        assert await _register(service) is True, "the same table again: from the state"

        pending = await stall_tick_thread(follower, STALL_S)
        await asyncio.sleep(RaftSettings().quorum_window_s + 0.2)
        assert follower.quorum_refusal() is not None, "stale by the clock"
        assert await _register(service) is False, "proposed, and committed once it ticks"
        await pending
        assert await _register(service) is True
