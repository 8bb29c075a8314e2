"""What a scenario of the model of :mod:`experiment_history.simulate` breaks, and when."""

from __future__ import annotations

import json
import random

from experiment_history.schema import (
    FAULT_ASYMMETRIC_PARTITION,
    FAULT_KILL_BROKER,
    FAULT_KILL_NAMESRV,
    KIND_BROKER_DOWN,
)
from experiment_history.simulate import (
    SCENARIO_ASYMMETRIC,
    SCENARIO_BROKER_KILL,
    SCENARIO_NAMESRV_RESTART,
    SimConfig,
)
from experiment_history.simulate_rows import HistoryRows
from experiment_history.simulate_tables import NodeTables
from experiment_history.simulate_world import SimWorld

RESTARTED_NODE = 0
"""The node ``namesrv_restart`` stops and starts again (ns0, the first leader in raft)."""


class FaultPlan:
    """The scenario's faults: which links are cut, which brokers die and which node stops,
    picked once from the seeded generator; applying them when the fault window opens and
    closes; whether a heartbeat gets through a link; and the ``faults`` rows."""

    def __init__(
        self, config: SimConfig, world: SimWorld, tables: NodeTables, rng: random.Random
    ) -> None:
        self.cfg = config
        self.world = world
        self.tables = tables
        self.rng = rng
        count = max(1, int(config.brokers * config.fault_share))
        order = list(range(config.brokers))
        rng.shuffle(order)
        self.cut: dict[int, set[int]] = {}
        self.killed: list[int] = []
        if config.scenario == SCENARIO_ASYMMETRIC:
            # S1: ns0 loses one set of brokers, ns1 another; the rest hear everybody.
            self.cut[0] = set(order[:count])
            if config.nodes > 1:
                self.cut[1] = set(order[count : 2 * count])
        elif config.scenario == SCENARIO_BROKER_KILL:
            self.killed = order[:count]
        self.partition_active = False
        self.focus_brokers = sorted(set().union(*self.cut.values()) | set(self.killed))

    def focus_topics(self) -> list[int]:
        """The topics of the brokers the faults hit, in order (sampled and consumed first)."""
        return sorted({t for b in self.focus_brokers for t in self.world.broker_topics[b]})

    def link_up(self, broker: int, node: int) -> bool:
        """Whether a heartbeat from ``broker`` reaches ``node`` now (a draw when lossy)."""
        if not self.world.node_up[node]:
            return False
        if self.partition_active and broker in self.cut.get(node, ()):
            return False
        return not (self.cfg.link_loss and self.rng.random() < self.cfg.link_loss)

    def apply(self, now_ms: int, starting: bool, rows: HistoryRows) -> None:
        """The fault window opens (``starting``) or closes at ``now_ms``."""
        scenario = self.cfg.scenario
        world = self.world
        if scenario == SCENARIO_ASYMMETRIC:
            self.partition_active = starting
        elif scenario == SCENARIO_BROKER_KILL and starting:
            for b in self.killed:
                world.alive[b] = False
                for topic in world.broker_topics[b]:
                    rows.true_write(
                        now_ms,
                        world.topic_names[topic],
                        world.broker_names[b],
                        KIND_BROKER_DOWN,
                        world.truth(topic),
                    )
        elif scenario == SCENARIO_NAMESRV_RESTART:
            world.node_up[RESTARTED_NODE] = not starting
            if starting:
                self.tables.node_stopped(RESTARTED_NODE, now_ms)
            else:
                self.tables.node_restarted(RESTARTED_NODE, now_ms)

    def write_rows(self, rows: HistoryRows) -> None:
        """The ``faults`` rows: each fault with its window (-1: a killed broker never
        returns)."""
        cfg, world = self.cfg, self.world
        if cfg.scenario == SCENARIO_ASYMMETRIC:
            for node, brokers in sorted(self.cut.items()):
                detail = json.dumps(
                    {"lost_brokers": [world.broker_names[b] for b in sorted(brokers)]}
                )
                rows.fault(
                    cfg.fault_start_ms,
                    cfg.fault_end_ms,
                    FAULT_ASYMMETRIC_PARTITION,
                    world.node_names[node],
                    detail,
                )
        for b in self.killed:
            rows.fault(cfg.fault_start_ms, -1, FAULT_KILL_BROKER, world.broker_names[b], "{}")
        if cfg.scenario == SCENARIO_NAMESRV_RESTART:
            rows.fault(
                cfg.fault_start_ms,
                cfg.fault_end_ms,
                FAULT_KILL_NAMESRV,
                world.node_names[RESTARTED_NODE],
                "{}",
            )
