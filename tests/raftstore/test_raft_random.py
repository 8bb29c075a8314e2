"""A seeded random run: kills, restarts, partitions and writes against 3 processes.

Checks: at most one leader per term as observed, every acknowledged write is
visible afterwards on every node, digests converge. Reproduce a failure with
``RAFT_SEED=<seed printed in the failure> pytest tests/raftstore/test_raft_random.py``.
"""

from __future__ import annotations

import asyncio
import os
import random
import secrets
from collections import defaultdict
from pathlib import Path

import pytest

from tests.raftstore.raft_node import ProcessCluster

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.serial]

RUN_S = float(os.environ.get("RAFT_RANDOM_S", "45"))
STEP_PAUSE_S = 0.3


class _Run:
    """One randomized run and what it observed."""

    def __init__(self, cluster: ProcessCluster, rng: random.Random) -> None:
        self.cluster = cluster
        self.rng = rng
        self.acknowledged: dict[str, str] = {}
        self.leaders_by_term: dict[int, set[str]] = defaultdict(set)
        self.partitioned: int | None = None
        self.writes = 0

    async def observe(self) -> None:
        for node in self.cluster.nodes:
            if node.running:
                status = await node.status()
                if status["state"] == "leader":
                    self.leaders_by_term[status["term"]].add(status["self_addr"])

    async def step(self) -> None:
        roll = self.rng.random()
        down = [i for i, n in enumerate(self.cluster.nodes) if not n.running]
        if roll < 0.08 and not down and self.partitioned is None:
            await self.cluster.nodes[self.rng.randrange(3)].kill()
        elif roll < 0.16 and down:
            await self.cluster.nodes[down[0]].start()
        elif roll < 0.22 and self.partitioned is None:
            self.partitioned = self.rng.randrange(3)
            self.cluster.partition(self.partitioned, self.rng.choice(["blackhole", "drop"]))
        elif roll < 0.30 and self.partitioned is not None:
            self.cluster.heal()
            self.partitioned = None
        else:
            await self.write()

    async def write(self) -> None:
        running = [n for n in self.cluster.nodes if n.running]
        node = self.rng.choice(running)
        self.writes += 1
        key, value = f"k{self.writes}", str(self.rng.randrange(1_000_000))
        reply = await node.put(key, value)
        if reply["ok"]:
            self.acknowledged[key] = value

    async def settle(self) -> list[dict[str, object]]:
        self.cluster.heal()
        for node in self.cluster.nodes:
            if not node.running:
                await node.start()
        await self.cluster.leader(timeout_s=30)
        return await self.cluster.converged(timeout_s=40)


async def test_a_random_run_keeps_leaders_unique_writes_durable_and_digests_equal(
    tmp_path: Path,
) -> None:
    seed = int(os.environ.get("RAFT_SEED") or secrets.randbelow(2**32))
    print(f"RAFT_SEED={seed}")
    cluster = ProcessCluster(tmp_path)
    await cluster.start()
    run = _Run(cluster, random.Random(seed))
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RUN_S
        while loop.time() < deadline:
            await run.step()
            await run.observe()
            await asyncio.sleep(STEP_PAUSE_S * run.rng.random())
        statuses = await run.settle()
        doubled = {t: s for t, s in run.leaders_by_term.items() if len(s) > 1}
        assert not doubled, f"RAFT_SEED={seed}: two leaders in one term: {doubled}"
        assert run.acknowledged, f"RAFT_SEED={seed}: no write was acknowledged"
        for node in cluster.nodes:
            for key, value in run.acknowledged.items():
                got = (await node.call("get", namespace="ns", key=key))["value"]
                assert got == value, f"RAFT_SEED={seed}: {node.node_id} lost {key}"
        assert all(not s["alarms"] for s in statuses), f"RAFT_SEED={seed}: {statuses}"
    except AssertionError as exc:
        raise AssertionError(f"RAFT_SEED={seed}: {exc}") from exc
    finally:
        await cluster.close()
