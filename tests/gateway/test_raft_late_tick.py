"""Raft mode, a node whose Raft tick thread runs late (a large entry applying, a starved
core): its contact with the quorum is stale by the clock, which says nothing about the
quorum. A registration the applied state could answer is proposed instead, so the broker
gets an answer the commit stands behind, not a false "no raft quorum"."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.clock import SystemClock
from gateway.services import NameServerService
from tests.gateway.conftest import default_registration
from tests.raftstore.raft_node import InProcessCluster, stall_tick_thread
from tests.waiting import eventually


async def _register(service: NameServerService) -> bool:
    """Register ``default-broker`` with the same table; True when answered from state."""
    _, from_state = await service.register(default_registration(service))
    return from_state


# Serial: three Raft nodes share this process and the test holds one's tick thread on
# purpose; beside another worker's clusters the others starved too (a CI run: the
# follower's contact was 15 s stale before the stall, so it refused as cut off).
@pytest.mark.serial
async def test_an_unchanged_registration_on_a_late_ticking_follower_is_proposed(
    tmp_path: Path,
) -> None:
    async with InProcessCluster(tmp_path, propose_timeout_s=3.0) as cluster:
        await cluster.leader()
        follower = await cluster.follower()
        service = NameServerService(follower, SystemClock())
        assert await _register(service) is False, "the first registration is proposed"
        assert await _register(service) is True, "the same table again: from the state"

        pending, release = await stall_tick_thread(follower)
        try:
            await eventually(
                lambda: follower.quorum_refusal() is not None,
                what="contact with the quorum stale by the clock",
                timeout_s=5,
            )
            registering = asyncio.ensure_future(_register(service))
            await asyncio.sleep(0.2)
            assert not registering.done(), "proposed: the answer waits for the commit"
        finally:
            release()
        assert await registering is False, "proposed, and committed once it ticks"
        await pending
        assert await _register(service) is True
