"""An :class:`ExperimentContext` for unit tests: a real recorder writing a history and a
real broker fleet, with no cluster behind them (a test passes a stand-in when the code
under test asks one)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, cast

from experiment_history.runs import HistoryWriter, RunMeta
from experiments.config import ExperimentConfig
from experiments.context import ExperimentContext
from experiments.workload import BrokerFleet, Recorder, SimBroker, make_brokers


def unit_context(
    tmp_path: Path,
    scenario: str,
    *,
    topics: list[str],
    nodes: list[str],
    brokers: int,
    seed: int,
    cluster: Any = None,
    watched: list[str] | None = None,
    mode: str = "raft",
) -> tuple[ExperimentContext, HistoryWriter, list[SimBroker]]:
    """A ``mode`` (raft by default) context of ``brokers`` simulated brokers serving
    ``topics`` (two brokers a topic), the recorder started; it watches ``watched``
    (default: ``topics``). Returns the context, the history's writer and the brokers."""
    writer = HistoryWriter(tmp_path / "run", RunMeta("r", scenario, mode, 1, nodes))
    recorder = Recorder(writer)
    recorder.start()
    rng = random.Random(seed)
    sim_brokers = make_brokers(brokers, topics, 2, 4, rng, nodes)
    fleet = BrokerFleet(
        sim_brokers,
        lambda broker, node: node,
        recorder,
        heartbeat_ms=1_000,
        expiry_ms=4_000,
        timeout_s=1.0,
        rng=rng,
    )
    context = ExperimentContext(
        config=ExperimentConfig(scenario=scenario, mode=mode, out_dir=tmp_path),
        cluster=cast(Any, cluster),
        mesh=cast(Any, None),
        fleet=fleet,
        recorder=recorder,
        rng=rng,
        topics=list(topics if watched is None else watched),
        admin=cast(Any, None),
    )
    return context, writer, sim_brokers
