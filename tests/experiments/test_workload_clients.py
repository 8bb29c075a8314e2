"""Producers and consumers of the experiment workload pick queues as RocketMQ clients do."""

from __future__ import annotations

import random
from pathlib import Path

from experiment_history.runs import HistoryWriter, RunMeta, iter_rows
from experiments.traffic import ClientTiming, ConsumerGroup, Producer
from experiments.workload import BrokerFleet, Recorder, make_brokers

TOPIC = "topic-000"
TIMING = ClientTiming(poll_ms=1000, rebalance_ms=1000, send_timeout_ms=500, request_timeout_s=1.0)
NODES = {"n1": "127.0.0.1:1"}


def _setup(tmp_path: Path) -> tuple[Recorder, BrokerFleet, HistoryWriter]:
    writer = HistoryWriter(tmp_path / "run", RunMeta("r", "unit", "eventual", 1, ["n1"]))
    recorder = Recorder(writer)
    recorder.start()
    brokers = make_brokers(2, [TOPIC], 2, 4, random.Random(1), ["n1"])
    fleet = BrokerFleet(
        brokers,
        lambda b, n: NODES[n],
        recorder,
        heartbeat_ms=1000,
        expiry_ms=4000,
        timeout_s=1.0,
        rng=random.Random(2),
    )
    return recorder, fleet, writer


def test_a_send_that_fails_on_a_dead_broker_is_retried_on_another_broker(tmp_path: Path) -> None:
    recorder, fleet, writer = _setup(tmp_path)
    producer = Producer("p", [TOPIC], NODES, recorder, TIMING, random.Random(3), fleet, seed=7)
    producer.views[TOPIC] = fleet.truth(TOPIC)
    dead = sorted(fleet.brokers)[0]
    fleet.kill_hard(dead)
    failed_first = 0
    for _ in range(20):
        attempts = producer.send(TOPIC)
        assert attempts[-1][2], "the last attempt must land on the live broker"
        if len(attempts) == 2:
            failed_first += 1
            assert attempts[0][0] == dead and attempts[1][0] != dead
    assert failed_first > 0, "round robin must reach the dead broker's queues sometimes"
    writer.close()
    sends = [r for r in iter_rows(tmp_path / "run", "operations") if r["kind"] == "send"]
    assert sum(r["outcome"] == "error" for r in sends) == failed_first


def test_consumers_with_the_same_view_own_every_queue_exactly_once(tmp_path: Path) -> None:
    recorder, fleet, writer = _setup(tmp_path)
    group = ConsumerGroup("cg", TOPIC, 3, NODES, recorder, TIMING, random.Random(4))
    for consumer in group.consumers:
        consumer.views[TOPIC] = fleet.truth(TOPIC)
    owned = [q for consumer in group.consumers for q in consumer.rebalance()]
    assert len(owned) == 8 and len(set(owned)) == 8
    writer.close()


def test_consumers_with_different_views_leave_queues_orphaned(tmp_path: Path) -> None:
    recorder, fleet, writer = _setup(tmp_path)
    group = ConsumerGroup("cg", TOPIC, 2, NODES, recorder, TIMING, random.Random(5))
    first, second = sorted(fleet.brokers)
    full = fleet.truth(TOPIC)
    without_first = ",".join(i for i in full.split(",") if not i.startswith(first))
    without_second = ",".join(i for i in full.split(",") if not i.startswith(second))
    group.consumers[0].views[TOPIC] = without_second  # this consumer's node lost `second`
    group.consumers[1].views[TOPIC] = without_first
    owned = {q for consumer in group.consumers for q in consumer.rebalance()}
    all_queues = {(b, q) for b in (first, second) for q in range(4)}
    # Each consumer takes half of a 4-queue view, so half the real queues have no owner.
    assert len(all_queues - owned) == 4
    writer.close()
