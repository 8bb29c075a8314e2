"""The route churn without a cluster (experiments/runner.py ``_churn``): two spare brokers
take turns, so no write of a churned topic repeats a value and the churn never goes back
to the warm-up's route."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from experiment_history.runs import iter_rows
from experiment_history.schema import KIND_REGISTER, KIND_UNREGISTER, route_brokers
from experiments.context import ExperimentContext
from experiments.runner import CHURN_BROKERS, _churn, _churn_broker
from experiments.scenarios import NEMESIS_SPARE_BROKERS
from experiments.workload import Ack, now_us
from tests.experiments.unit_context import unit_context

TOPICS = ["topic-000", "topic-001"]
NODES = ["n1", "n2", "n3"]
CHANGES = 9


def _churned(tmp_path: Path, changes: int) -> tuple[ExperimentContext, list[dict[str, Any]]]:
    """``changes`` steps of the churn, every node acknowledging each at once; the
    context and the history's writes (the warm-up's first)."""
    context, writer, brokers = unit_context(
        tmp_path, "s1-asymmetric-partition", topics=TOPICS, nodes=NODES, brokers=3, seed=2
    )
    for i, name in enumerate(CHURN_BROKERS):
        context.fleet.brokers[name] = _churn_broker(name, i, brokers[0], TOPICS, 4)
    context.config = dataclasses.replace(context.config, churn_ms=1)
    fleet: Any = context.fleet

    async def acked(broker: Any, node_ids: Any = None) -> list[Ack]:
        return [Ack(n, now_us()) for n in broker.namesrv]

    async def unregistered(broker: Any, node: str, ext: Any) -> Ack:
        return Ack(node, now_us())

    fleet.register_acks = acked
    fleet._unregister_one = unregistered
    for topic in TOPICS:
        context.registers.record(topic, 0, 10, context.fleet.truth(topic))
        context.recorder.operation(
            process="warmup",
            kind=KIND_REGISTER,
            node="n1",
            topic=topic,
            outcome="ok",
            value=context.fleet.truth(topic),
            invoke_us=0,
            complete_us=10,
        )
    stop = asyncio.Event()
    sent = []

    def counted(step: Any) -> Any:
        async def call(name: str) -> list[Ack]:
            sent.append(name)
            if len(sent) == changes:
                stop.set()
            acks: list[Ack] = await step(name)
            return acks

        return call

    fleet.start_acknowledged = counted(fleet.start_acknowledged)
    fleet.stop_graceful = counted(fleet.stop_graceful)

    async def run() -> int:
        try:
            return await _churn(context, stop)
        finally:
            await context.fleet.close()

    assert asyncio.run(run()) == changes
    writer.close()
    rows = list(iter_rows(tmp_path / "run", "operations"))
    return context, [r for r in rows if r["kind"] in (KIND_REGISTER, KIND_UNREGISTER)]


def test_two_spare_brokers_take_turns_and_never_repeat_a_route(tmp_path: Path) -> None:
    context, writes = _churned(tmp_path, CHANGES)
    x, y = CHURN_BROKERS
    churn = [(r["process"], r["kind"]) for r in writes if r["topic"] == TOPICS[0]][1:]
    assert churn == [
        (x, KIND_REGISTER),
        (y, KIND_REGISTER),
        (x, KIND_UNREGISTER),
        (x, KIND_REGISTER),
        (y, KIND_UNREGISTER),
        (y, KIND_REGISTER),
        (x, KIND_UNREGISTER),
        (x, KIND_REGISTER),
        (y, KIND_UNREGISTER),
    ]
    for topic in TOPICS:
        values = [r["value"] for r in writes if r["topic"] == topic]
        assert len(values) == CHANGES + 1
        assert len(set(values)) == len(values), values
        baseline = values[0]
        # Each value is the baseline plus one or both spare brokers' shares.
        spare = [route_brokers(v) - route_brokers(baseline) for v in values]
        assert spare[1:] == [{x}, {x, y}, {y}, {y, x}, {x}, {x, y}, {y}, {y, x}, {x}]
        assert values[-1] == context.fleet.truth(topic) != baseline, "never back to B"


def test_the_nemesis_never_targets_a_churn_broker() -> None:
    assert set(CHURN_BROKERS) == set(NEMESIS_SPARE_BROKERS)
