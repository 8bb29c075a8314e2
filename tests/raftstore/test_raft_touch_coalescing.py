"""Heartbeat touches are coalesced cluster-wide: at most one proposal per interval."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from raftstore.commands import BrokerHeartbeat, Command, QueryDataVersion, RegisterBroker
from raftstore.liveness import TouchCoalescer, designated_member
from raftstore.results import ApplyResult, QueryDataVersionOutcome
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from tests.raftstore.raft_node import InProcessCluster

HEARTBEAT_PERIOD_MS = 30_000
START_MS = 1_700_000_000_000
VERSION = DataVersion(state_version=0, timestamp=1000, counter=7)
BROKERS = [f"10.0.0.{i}:10911" for i in range(1, 5)]
CLUSTER = "DefaultCluster"
FAST_TIMEOUT_MS = 3_000
FAST_HEARTBEAT_MS = 1_000


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    nodes = InProcessCluster(tmp_path)
    await nodes.start()
    await nodes.leader()
    for i, addr in enumerate(BROKERS):
        wrapper = TopicConfigSerializeWrapper(
            data_version=VERSION,
            topic_config_table={t: TopicConfig(t) for t in ("TopicA", "TopicB")},
        )
        await nodes.nodes[0].propose(
            RegisterBroker(CLUSTER, addr, f"broker-{i}", 0, addr, START_MS, wrapper)
        )
    await nodes.converged()
    yield nodes
    await nodes.close()


def _qdv(addr: str, now_ms: int) -> QueryDataVersion:
    return QueryDataVersion(CLUSTER, addr, "b", 0, VERSION, now_ms)


async def _heartbeat_round(coalescers: list[TouchCoalescer], now_ms: int) -> None:
    # Brokers register with every NameServer in parallel: the three nodes hear
    # each broker within a few milliseconds of each other.
    await asyncio.gather(
        *(
            coalescer.touch(_qdv(addr, now_ms + offset))
            for addr in BROKERS
            for offset, coalescer in enumerate(coalescers)
        )
    )


async def test_touches_cost_at_most_two_log_entries_per_broker_per_minute(
    cluster: InProcessCluster,
) -> None:
    touched: Counter[str] = Counter()

    def count(command: Command, _result: ApplyResult) -> None:
        if isinstance(command, QueryDataVersion | BrokerHeartbeat):
            touched[command.broker_addr] += 1

    cluster.nodes[0].subscribe(count)
    coalescers = [TouchCoalescer(node) for node in cluster.nodes]
    minutes = 10
    for tick in range(1, minutes * 60_000 // HEARTBEAT_PERIOD_MS + 1):
        await _heartbeat_round(coalescers, START_MS + tick * HEARTBEAT_PERIOD_MS)
        await asyncio.gather(*(n.barrier() for n in cluster.nodes))
    await cluster.converged()
    assert set(touched) == set(BROKERS)
    assert max(touched.values()) <= 2 * minutes
    last_ms = START_MS + minutes * 60_000
    for addr in BROKERS:
        entry = cluster.nodes[1].read(lambda t, a=addr: t.live_broker(CLUSTER, a))
        assert entry is not None and entry.last_update_ms >= last_ms - HEARTBEAT_PERIOD_MS


async def test_a_broker_heard_only_by_backup_members_stays_fresh_enough_to_live(
    cluster: InProcessCluster,
) -> None:
    addr = BROKERS[0]
    designated = designated_member(cluster.nodes[0].members(), (CLUSTER, addr))
    backups = [TouchCoalescer(n) for n in cluster.nodes if n.self_addr != designated]
    gaps: list[int] = []
    previous = START_MS
    for tick in range(1, 11):
        now = START_MS + tick * HEARTBEAT_PERIOD_MS
        await asyncio.gather(*(c.touch(_qdv(addr, now)) for c in backups))
        await asyncio.gather(*(n.barrier() for n in cluster.nodes))
        entry = cluster.nodes[0].read(lambda t: t.live_broker(CLUSTER, addr))
        assert entry is not None
        gaps.append(now - entry.last_update_ms)
        previous = entry.last_update_ms
    assert previous > START_MS
    assert max(gaps) <= 2 * HEARTBEAT_PERIOD_MS < 120_000


async def test_a_skipped_query_data_version_is_still_answered_from_local_state(
    cluster: InProcessCluster,
) -> None:
    coalescer = TouchCoalescer(cluster.nodes[2])
    result = await coalescer.touch(_qdv(BROKERS[1], START_MS + 1))
    assert coalescer.skipped == 1 and coalescer.proposed == 0
    assert result.outcome == QueryDataVersionOutcome(changed=False, data_version=VERSION)
    stale = QueryDataVersion(CLUSTER, BROKERS[1], "b", 0, DataVersion(0, 1, 1), START_MS + 2)
    answer = await coalescer.touch(stale)
    assert isinstance(answer.outcome, QueryDataVersionOutcome) and answer.outcome.changed


async def test_a_fast_heartbeat_broker_is_touched_within_its_own_short_timeout(
    cluster: InProcessCluster,
) -> None:
    """Fast detection (3 s timeout, 1 s heartbeats): the shipped 15 s / 45 s intervals are
    capped at timeout/4 (designated member) and timeout/2 (others), so it never expires."""
    addr = "10.0.0.99:10911"
    wrapper = TopicConfigSerializeWrapper(
        data_version=VERSION, topic_config_table={t: TopicConfig(t) for t in ("TopicA", "TopicB")}
    )
    await cluster.nodes[0].propose(
        RegisterBroker(
            CLUSTER,
            addr,
            "broker-fast",
            0,
            addr,
            START_MS,
            wrapper,
            heartbeat_timeout_ms=FAST_TIMEOUT_MS,
        )
    )
    coalescers = [TouchCoalescer(node) for node in cluster.nodes]
    for tick in range(1, 11):
        now = START_MS + tick * FAST_HEARTBEAT_MS
        await asyncio.gather(*(c.touch(_qdv(addr, now)) for c in coalescers))
        await asyncio.gather(*(n.barrier() for n in cluster.nodes))
        entry = cluster.nodes[2].read(lambda t: t.live_broker(CLUSTER, addr))
        assert entry is not None
        assert now - entry.last_update_ms < FAST_TIMEOUT_MS // 2
