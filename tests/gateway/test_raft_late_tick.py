"""Raft mode, a node whose Raft tick thread runs late (a large entry applying, a starved
core): its contact with the quorum is stale by the clock, which says nothing about the
quorum. A registration the applied state could answer is proposed instead, so the broker
gets an answer the commit stands behind, not a false "no raft quorum"."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from gateway.clock import SystemClock
from gateway.services import NameServerService
from raftstore.commands import Command, PutKV
from raftstore.raft.settings import RaftSettings
from raftstore.results import ApplyResult
from tests.gateway.conftest import (
    DEFAULT_ADDR,
    DEFAULT_BROKER,
    DEFAULT_BROKER_ID,
    DEFAULT_CLUSTER,
    DEFAULT_HA,
    unit_topics_wrapper,
)
from tests.raftstore.raft_node import InProcessCluster

STALL_S = 1.6


async def _register(service: NameServerService) -> bool:
    """Register ``default-broker`` with the same table; True when answered from state."""
    command = service.registration_command(
        cluster_name=DEFAULT_CLUSTER,
        broker_addr=DEFAULT_ADDR,
        broker_name=DEFAULT_BROKER,
        broker_id=DEFAULT_BROKER_ID,
        ha_server_addr=DEFAULT_HA,
        topic_config_wrapper=unit_topics_wrapper(),
        filter_server_list=(),
    )
    _, from_state = await service.register(command)
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

        stalled = threading.Event()

        def stall(command: Command, _result: ApplyResult) -> None:
            if getattr(command, "key", "") == "stall" and not stalled.is_set():
                stalled.set()
                time.sleep(STALL_S)

        follower.subscribe(stall)
        pending = asyncio.ensure_future(follower.propose(PutKV("ns", "stall", "1")))
        while not stalled.is_set():
            await asyncio.sleep(0.01)
        await asyncio.sleep(RaftSettings().quorum_window_s + 0.2)
        assert follower.quorum_refusal() is not None, "stale by the clock"
        assert await _register(service) is False, "proposed, and committed once it ticks"
        await pending
        assert await _register(service) is True
