"""One run of the model of :mod:`experiment_history.simulate` (which says what it models):
the driver that builds its parts, runs its events in time order and writes the run
directory; :func:`simulate` is the entry point (``python -m spark_jobs.cli simulate``)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from experiment_history.runs import HistoryWriter, RunMeta
from experiment_history.schema import KIND_REGISTER
from experiment_history.simulate import MODE_EVENTUAL, SCENARIO_NONE, SimConfig
from experiment_history.simulate_events import (
    FAULT_END,
    FAULT_START,
    HEARTBEAT,
    POLL,
    REBALANCE,
    SAMPLE,
    SCAN,
    EventQueue,
    Latencies,
)
from experiment_history.simulate_faults import FaultPlan
from experiment_history.simulate_rows import HistoryRows
from experiment_history.simulate_tables import EventualTables, NodeTables, RaftTables
from experiment_history.simulate_workload import Workload
from experiment_history.simulate_world import SimWorld


class Simulation:
    """One run of the model: builds the world, the mode's node tables, the fault plan and
    the clients from one seeded generator, schedules every periodic event, and dispatches
    the events in time order until ``duration_ms``, rescheduling each periodic one;
    :meth:`run` writes the history and returns its metadata.

    The parts draw from the generator in a fixed order (the topics' brokers, the faults'
    victims, the clients' topics, the sampled topics, then the events' phases), which is
    what makes a seed reproduce its history.
    """

    def __init__(self, config: SimConfig, out_dir: Path | str, run_id: str | None = None):
        config.validate()
        self.cfg = config
        self.rng = random.Random(config.seed)
        self.run_id = run_id or f"sim-{config.mode}-{config.scenario}-s{config.seed}"
        self.out_dir = Path(out_dir)
        self.world = SimWorld(config, self.rng)
        self.latencies = Latencies(config)
        self.tables: NodeTables = (
            EventualTables(config, self.world)
            if config.mode == MODE_EVENTUAL
            else RaftTables(config, self.world, self.latencies)
        )
        self.faults = FaultPlan(config, self.world, self.tables, self.rng)
        focus_topics = self.faults.focus_topics()
        self.workload = Workload(
            config, self.world, self.tables, self.latencies, focus_topics, self.rng
        )
        self.sample_topics = self._pick_sample_topics(focus_topics)
        self.queue = EventQueue()

    def _pick_sample_topics(self, focus_topics: list[int]) -> list[int]:
        """The topics whose answers every node reports at each sample: the faulted brokers'
        topics first, then random others up to ``sample_topics``."""
        cfg = self.cfg
        sample = focus_topics[: cfg.sample_topics]
        rest = [t for t in range(cfg.topics) if t not in set(sample)]
        extra = max(0, min(cfg.sample_topics - len(sample), len(rest)))
        return sorted(sample + self.rng.sample(rest, extra))

    # ------------------------------------------------------------------ events

    def _on_heartbeat(self, now_ms: int, broker: int, rows: HistoryRows) -> None:
        # A dead broker stops heart-beating for good: its heartbeat is not rescheduled.
        if not self.world.alive[broker]:
            return
        heard_by = [n for n in range(self.cfg.nodes) if self.faults.link_up(broker, n)]
        self.tables.heard(broker, heard_by, now_ms, rows)
        self.queue.push(now_ms + self.cfg.heartbeat_interval_ms, HEARTBEAT, broker)

    def _on_scan(self, now_ms: int, node: int, rows: HistoryRows) -> None:
        self.queue.push(now_ms + self.cfg.scan_interval_ms, SCAN, node)
        if self.world.node_up[node]:
            self.tables.scan(node, now_ms, rows)

    def _on_poll(self, now_ms: int, client_index: int, rows: HistoryRows) -> None:
        self.queue.push(now_ms + self.cfg.poll_interval_ms, POLL, client_index)
        self.workload.poll(now_ms, client_index, rows)

    def _on_rebalance(self, now_ms: int, client_index: int, rows: HistoryRows) -> None:
        self.queue.push(now_ms + self.cfg.rebalance_interval_ms, REBALANCE, client_index)
        self.workload.rebalance(now_ms, client_index, rows)

    def _on_sample(self, now_ms: int, rows: HistoryRows) -> None:
        self.queue.push(now_ms + self.cfg.sample_interval_ms, SAMPLE, 0)
        world, tables = self.world, self.tables
        for topic in self.sample_topics:
            for node in range(self.cfg.nodes):
                if world.node_up[node]:
                    rows.node_state(
                        now_ms,
                        world.node_names[node],
                        world.topic_names[topic],
                        tables.route_value(node, topic, now_ms),
                        tables.version(node, now_ms),
                    )

    # ------------------------------------------------------------------ driver

    def _schedule_start(self, rows: HistoryRows) -> None:
        cfg, queue = self.cfg, self.queue
        for b in range(cfg.brokers):
            queue.push(self.rng.randrange(cfg.heartbeat_interval_ms), HEARTBEAT, b)
        for n in range(cfg.nodes):
            queue.push(self.rng.randrange(cfg.scan_interval_ms), SCAN, n)
        for c, client in enumerate(self.workload.clients):
            queue.push(self.rng.randrange(cfg.poll_interval_ms), POLL, c)
            if client.group >= 0:
                queue.push(self.rng.randrange(cfg.rebalance_interval_ms), REBALANCE, c)
        queue.push(0, SAMPLE, 0)
        if cfg.scenario != SCENARIO_NONE:
            queue.push(cfg.fault_start_ms, FAULT_START, 0)
            queue.push(cfg.fault_end_ms, FAULT_END, 0)
        # Every broker is registered everywhere at time 0: the initial writes.
        for topic in range(cfg.topics):
            value = self.world.truth(topic)
            rows.true_write(0, self.world.topic_names[topic], "", KIND_REGISTER, value)
            self.tables.register_initially(topic, value, rows)

    def run(self) -> RunMeta:
        """Simulate ``duration_ms`` and write the run directory; return its metadata."""
        began = time.monotonic()
        meta = RunMeta(
            run_id=self.run_id,
            scenario=self.cfg.scenario,
            mode=self.cfg.mode,
            seed=self.cfg.seed,
            nodes=list(self.world.node_names),
            params={"simulated": True, **asdict(self.cfg)},
        )
        run_dir = self.out_dir / self.run_id
        with HistoryWriter(run_dir, meta, self.cfg.chunk_rows) as out:
            rows = HistoryRows(out)
            self._schedule_start(rows)
            self.faults.write_rows(rows)
            handlers: dict[int, Callable[[int, int, HistoryRows], None]] = {
                HEARTBEAT: self._on_heartbeat,
                SCAN: self._on_scan,
                POLL: self._on_poll,
                REBALANCE: self._on_rebalance,
            }
            while (due := self.queue.pop()) is not None:
                now_ms, event, arg = due
                if now_ms >= self.cfg.duration_ms:
                    break
                if event == SAMPLE:
                    self._on_sample(now_ms, rows)
                elif event in (FAULT_START, FAULT_END):
                    self.faults.apply(now_ms, event == FAULT_START, rows)
                else:
                    handlers[event](now_ms, arg, rows)
            meta.timings = {
                "wall_s": round(time.monotonic() - began, 3),
                "simulated_ms": self.cfg.duration_ms,
                "reads": self.workload.reads_done,
            }
        return meta


def simulate(config: SimConfig, out_dir: Path | str) -> RunMeta:
    """Run one simulation into ``out_dir/<run_id>`` and return its metadata."""
    return Simulation(config, out_dir).run()
