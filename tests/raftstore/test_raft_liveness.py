"""Raft-mode liveness: one replicated expiry, proposed by the leader only, with skew."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from raftstore.commands import Command, ExpireBrokers, RegisterBroker
from raftstore.raft import DEFAULT_SKEW_ALLOWANCE_MS, scan_liveness
from raftstore.replicator import LocalReplicator
from raftstore.results import ApplyResult, ExpireOutcome
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from tests.raftstore.raft_node import InProcessCluster

START_MS = 1_700_000_000_000
TIMEOUT_MS = 120_000
BROKER = "10.0.0.9:10911"


def _register(now_ms: int) -> RegisterBroker:
    wrapper = TopicConfigSerializeWrapper(
        data_version=DataVersion(0, 1, 1),
        topic_config_table={t: TopicConfig(t) for t in ("TopicA", "TopicB")},
    )
    return RegisterBroker("DefaultCluster", BROKER, "broker-a", 0, BROKER, now_ms, wrapper)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    nodes = InProcessCluster(tmp_path)
    await nodes.start()
    await nodes.leader()
    await nodes.nodes[0].propose(_register(START_MS))
    yield nodes
    await nodes.close()


async def test_only_the_leader_proposes_the_expiry_scan(cluster: InProcessCluster) -> None:
    leader = await cluster.leader()
    scans: list[Command] = []
    leader.subscribe(
        lambda command, _r: scans.append(command) if isinstance(command, ExpireBrokers) else None
    )
    now = START_MS + 1_000
    results = [await scan_liveness(node, now) for node in cluster.nodes]
    await leader.barrier()
    assert sum(r is not None for r in results) == 1
    assert scans == [ExpireBrokers(now_ms=now, skew_allowance_ms=DEFAULT_SKEW_ALLOWANCE_MS)]


async def test_the_skew_allowance_keeps_a_broker_alive_against_a_fast_clock(
    cluster: InProcessCluster,
) -> None:
    leader = await cluster.leader()
    just_past_timeout = START_MS + TIMEOUT_MS + DEFAULT_SKEW_ALLOWANCE_MS // 2
    kept = await scan_liveness(leader, just_past_timeout)
    assert kept is not None and kept.outcome == ExpireOutcome(expired=())
    gone = await scan_liveness(leader, START_MS + TIMEOUT_MS + DEFAULT_SKEW_ALLOWANCE_MS + 1)
    assert gone is not None and isinstance(gone.outcome, ExpireOutcome)
    assert [key.broker_addr for key in gone.outcome.expired] == [BROKER]
    statuses = await cluster.converged()
    assert all(
        n.read(lambda t: t.live_broker("DefaultCluster", BROKER)) is None for n in cluster.nodes
    )
    assert len({s.digest for s in statuses}) == 1


async def test_eventual_mode_scans_on_every_node_without_skew() -> None:
    local = LocalReplicator("n1")
    local.apply_now(_register(START_MS))
    result: ApplyResult | None = await scan_liveness(local, START_MS + TIMEOUT_MS + 1)
    assert result is not None and isinstance(result.outcome, ExpireOutcome)
    assert len(result.outcome.expired) == 1
