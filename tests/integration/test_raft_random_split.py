"""A seeded random run of split registrations with leader kills, checked for
linearizability: three raft gateways, one broker registering its table in parts
(``splitRegistrationPart`` of ``splitRegistrationParts``) to one node per round, a
watched topic in the table every other round (``deleteTopicWithBrokerRegistration``
drops it in between), linearizable route reads on every node, and a nemesis that
SIGKILLs the leader while a registration is under way (between its parts, or while
its last part is being committed), then restarts it.

The history is one register per the watched topic: a round is a write of "present"
or absent, acknowledged when its last part was answered 0, pending (it may or may
not take effect, at any time after its call) when the last part was sent and not
acknowledged, and left out when the last part never left (held parts never apply).
A read is the route answer: present, absent (TOPIC_NOT_EXIST), or left out when
refused. ``spark_jobs.checker.check_register`` must find the history linearizable.
Reproduce a failure with ``RAFT_SEED=<seed printed in the failure>``.
"""

from __future__ import annotations

import os
import random
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_app.registration import BrokerIdentity, build_register_request, split_table
from remoting.blocking import BlockingClient
from remoting.client import RemotingClientError
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from spark_jobs.checker import ABSENT_VALUE, LINEARIZABLE, CheckBudget, RegisterOp, check_register
from tests.integration.gateway_harness import config_args
from tests.integration.raft_cluster_harness import (
    WIRE_TIMEOUT_S,
    RaftGateway,
    RaftGatewayCluster,
    route_frame,
    running_cluster,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RUN_S = float(os.environ.get("RAFT_RANDOM_SPLIT_S", "30"))
WATCHED = "WatchedSplitTopic"
PRESENT = "present"
TOPICS = 30
SPLIT_SIZE = 8
PART_PAUSE_S = 0.03
"""Between parts: the window in which the nemesis kills the leader."""
IDENTITY = BrokerIdentity(
    "RaftSplitCluster", "broker-split", 0, "127.0.0.1:31911", "127.0.0.1:31912"
)


def now_us() -> int:
    return time.monotonic_ns() // 1000


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RaftGatewayCluster]:
    args = config_args(tmp_path, deleteTopicWithBrokerRegistration="true")
    with running_cluster(tmp_path, args) as nodes:
        yield nodes


class _Run:
    """The writer, readers and nemesis of one run, and the history they record."""

    def __init__(self, cluster: RaftGatewayCluster, seed: int) -> None:
        self.cluster = cluster
        self.seed = seed
        self.stop = threading.Event()
        self.mid_split = threading.Event()
        self.lock = threading.Lock()
        self.ops: list[RegisterOp] = []
        self.kills_mid_split = 0
        self.acknowledged = 0

    def record(self, is_write: bool, value: str, invoke: int, complete: int | None) -> None:
        with self.lock:
            self.ops.append(RegisterOp(len(self.ops), is_write, value, invoke, complete))

    def running(self) -> list[RaftGateway]:
        return [node for node in self.cluster.nodes if node.running and node.info]

    # ------------------------------------------------------------------ writer

    def writer(self) -> None:
        rng = random.Random(self.seed)
        round_ = 0
        while not self.stop.is_set():
            round_ += 1
            present = round_ % 2 == 1
            names = [f"SplitFiller{i:03d}" for i in range(TOPICS - 1)]
            if present:
                names.insert(rng.randrange(len(names) + 1), WATCHED)
            wrapper = TopicConfigSerializeWrapper(
                data_version=DataVersion(1_700_000_000_000 + round_, 1, round_),
                topic_config_table={n: TopicConfig(n, 4, 4) for n in names},
            )
            requests = [
                build_register_request(IDENTITY, part, compress_over_bytes=1 << 40, extra_fields=f)
                for part, f in split_table(wrapper, SPLIT_SIZE)
            ]
            candidates = self.running()
            if not candidates:
                time.sleep(0.1)
                continue
            node = rng.choice(candidates)
            self._round(node, requests, PRESENT if present else ABSENT_VALUE)
            time.sleep(rng.uniform(0.0, 0.1))

    def _round(self, node: RaftGateway, requests: list[RemotingCommand], value: str) -> None:
        invoke = now_us()
        last_sent = False
        try:
            with BlockingClient(node.addr, timeout_s=WIRE_TIMEOUT_S) as client:
                self.mid_split.set()
                for request in requests[:-1]:
                    if client.invoke(request).code != ResponseCode.SUCCESS:
                        return
                    time.sleep(PART_PAUSE_S)
                last_sent = True
                answer = client.invoke(requests[-1])
        except (OSError, RemotingClientError):
            answer = None  # the node died during the round
        finally:
            self.mid_split.clear()
        if answer is not None and answer.code == ResponseCode.SUCCESS:
            self.acknowledged += 1
            self.record(True, value, invoke, now_us())
        elif last_sent:
            self.record(True, value, invoke, None)

    # ------------------------------------------------------------------ readers

    def reader(self, index: int) -> None:
        rng = random.Random(self.seed * 31 + index)
        while not self.stop.is_set():
            candidates = self.running()
            if candidates:
                self.read(rng.choice(candidates))
            time.sleep(rng.uniform(0.0, 0.02))

    def read(self, node: RaftGateway) -> None:
        invoke = now_us()
        try:
            with BlockingClient(node.addr, timeout_s=WIRE_TIMEOUT_S) as client:
                answer = client.invoke(route_frame(WATCHED, linearizable=True))
        except (OSError, RemotingClientError):
            return
        complete = now_us()
        if answer.code == ResponseCode.SUCCESS:
            self.record(False, PRESENT, invoke, complete)
        elif answer.code == ResponseCode.TOPIC_NOT_EXIST:
            self.record(False, ABSENT_VALUE, invoke, complete)

    # ------------------------------------------------------------------ nemesis

    def nemesis(self) -> None:
        rng = random.Random(self.seed * 7)
        while not self.stop.is_set():
            if not self.mid_split.wait(timeout=1.0):
                continue
            leader = self._leader()
            if leader is None or not self.mid_split.is_set():
                continue
            leader.kill()
            self.kills_mid_split += 1
            self.stop.wait(rng.uniform(0.3, 1.5))
            leader.launch(migrate=False)
            leader.wait_ready()
            self.stop.wait(rng.uniform(1.0, 3.0))

    def _leader(self) -> RaftGateway | None:
        for node in self.running():
            try:
                if node.node_status()["state"] == "leader":
                    return node
            except (OSError, AssertionError, RemotingClientError):
                continue
        return None


def test_split_registrations_stay_linearizable_through_leader_kills(
    cluster: RaftGatewayCluster,
) -> None:
    seed = int(os.environ.get("RAFT_SEED", secrets.randbelow(2**31)))
    run = _Run(cluster, seed)
    threads = [
        threading.Thread(target=run.writer, name="writer"),
        threading.Thread(target=run.nemesis, name="nemesis"),
        *(threading.Thread(target=run.reader, args=(i,), name=f"reader{i}") for i in range(2)),
    ]
    for thread in threads:
        thread.start()
    try:
        time.sleep(RUN_S)
    finally:
        run.stop.set()
        for thread in threads:
            thread.join(timeout=60)
    for node in cluster.nodes:
        if not node.running:
            node.launch(migrate=False)
            node.wait_ready()
    cluster.leader(timeout_s=30)
    cluster.converged(timeout_s=40)
    for node in cluster.nodes:  # the settled state, read on every node
        run.read(node)

    writes = [op for op in run.ops if op.is_write]
    reads = [op for op in run.ops if not op.is_write]
    context = (
        f"RAFT_SEED={seed}: {len(writes)} writes ({run.acknowledged} acknowledged), "
        f"{len(reads)} reads, {run.kills_mid_split} leader kills during a registration"
    )
    assert run.kills_mid_split >= 2, context
    assert run.acknowledged >= 10 and len(reads) >= 50, context
    result = check_register(run.ops, ABSENT_VALUE, CheckBudget(max_seconds=60.0))
    assert result.verdict == LINEARIZABLE, f"{context}; {result}"
