"""The NameServer nodes' route tables in the model of :mod:`experiment_history.simulate`,
one class per design: what each node answers, and how hearing, scanning and a node's
restart change it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from bisect import bisect_right

from experiment_history.schema import KIND_EXPIRE, KIND_REGISTER, ORIGIN_HARNESS, ORIGIN_NODE
from experiment_history.simulate import SimConfig
from experiment_history.simulate_events import Latencies
from experiment_history.simulate_rows import HistoryRows
from experiment_history.simulate_world import SimWorld

RAFT_LEADER_PROCESS = "raft-leader"


class NodeTables(ABC):
    """What the nodes know of the brokers, and the writes by which it changes.

    A subclass keeps one design's tables; the driver tells it what happened (a heartbeat
    heard, a scan due, a node stopped or started) and it writes each resulting change.
    """

    def __init__(self, config: SimConfig, world: SimWorld) -> None:
        self.cfg = config
        self.world = world

    @abstractmethod
    def sees(self, node: int, broker: int, now_ms: int) -> bool:
        """Whether ``node`` answers with ``broker`` in its routes at ``now_ms``."""

    @abstractmethod
    def version(self, node: int, now_ms: int) -> int:
        """The version of ``node``'s table at ``now_ms``."""

    @abstractmethod
    def heard(self, broker: int, heard_by: list[int], now_ms: int, rows: HistoryRows) -> None:
        """``broker``'s heartbeat reached the nodes ``heard_by`` (maybe none)."""

    @abstractmethod
    def scan(self, node: int, now_ms: int, rows: HistoryRows) -> None:
        """``node`` (up) runs its scan for silent brokers."""

    @abstractmethod
    def node_stopped(self, node: int, now_ms: int) -> None:
        """``node`` went down."""

    @abstractmethod
    def node_restarted(self, node: int, now_ms: int) -> None:
        """``node`` came back up."""

    @abstractmethod
    def register_initially(self, topic: int, value: str, rows: HistoryRows) -> None:
        """At time 0 every broker is registered everywhere: the harness's writes."""

    def route_value(self, node: int, topic: int, now_ms: int) -> str:
        """The canonical route ``node`` answers for ``topic`` at ``now_ms``."""
        world = self.world
        return ",".join(
            world.items[b] for b in world.topic_brokers[topic] if self.sees(node, b, now_ms)
        )

    def _deadline_ms(self, now_ms: int) -> int:
        """A broker last heard before this is silent for too long."""
        return now_ms - self.cfg.broker_timeout_ms - self.cfg.expiry_extra_ms


class EventualTables(NodeTables):
    """Upstream's design: each node keeps its own live table; it registers a broker when it
    hears it and expires it on its own scan, and each change is a write of that node."""

    def __init__(self, config: SimConfig, world: SimWorld) -> None:
        super().__init__(config, world)
        brokers, nodes = config.brokers, config.nodes
        self.heard_ms: list[list[int]] = [[0] * brokers for _ in range(nodes)]
        self.registered: list[list[bool]] = [[True] * brokers for _ in range(nodes)]
        self.node_version = [0] * nodes

    def sees(self, node: int, broker: int, now_ms: int) -> bool:
        return self.registered[node][broker]

    def version(self, node: int, now_ms: int) -> int:
        return self.node_version[node]

    def heard(self, broker: int, heard_by: list[int], now_ms: int, rows: HistoryRows) -> None:
        for node in heard_by:
            self.heard_ms[node][broker] = now_ms
            if not self.registered[node][broker]:
                self._change(node, broker, True, now_ms, rows)

    def scan(self, node: int, now_ms: int, rows: HistoryRows) -> None:
        deadline = self._deadline_ms(now_ms)
        table, heard = self.registered[node], self.heard_ms[node]
        for b in [b for b in range(self.cfg.brokers) if table[b] and heard[b] < deadline]:
            self._change(node, b, False, now_ms, rows)

    def node_stopped(self, node: int, now_ms: int) -> None:
        """Nothing to do: an eventual node is its own table, and no other node notices."""

    def node_restarted(self, node: int, now_ms: int) -> None:
        # S3: a restarted node has an empty table until brokers register again.
        self.registered[node] = [False] * self.cfg.brokers
        self.heard_ms[node] = [0] * self.cfg.brokers

    def register_initially(self, topic: int, value: str, rows: HistoryRows) -> None:
        for name in self.world.node_names:
            topic_name = self.world.topic_names[topic]
            rows.change(name, KIND_REGISTER, name, topic_name, 0, 0, value, 0, "", ORIGIN_HARNESS)

    def _change(self, node: int, broker: int, state: bool, now_ms: int, rows: HistoryRows) -> None:
        self.registered[node][broker] = state
        self.node_version[node] += 1
        kind = KIND_REGISTER if state else KIND_EXPIRE
        world = self.world
        for topic in world.broker_topics[broker]:
            rows.change(
                world.node_names[node],
                kind,
                world.node_names[node],
                world.topic_names[topic],
                now_ms,
                now_ms,
                self.route_value(node, topic, now_ms),
                self.node_version[node],
                world.broker_names[broker],
                ORIGIN_NODE,
            )


class RaftTables(NodeTables):
    """The replicated design: one table with a log of its changes. A heartbeat heard by any
    node refreshes the replicated last-heard time, only the leader scans, a change commits
    after a commit latency and a follower applies it ``apply_lag_ms`` later; while a new
    leader is elected (``election_ms``) nothing commits."""

    def __init__(self, config: SimConfig, world: SimWorld, latencies: Latencies) -> None:
        super().__init__(config, world)
        brokers = config.brokers
        self.latencies = latencies
        self.heard_ms = [0] * brokers
        self.registered = [True] * brokers
        # Per broker, its (commit time, registered) changes in order; all commit times.
        self.changes: list[list[tuple[int, bool]]] = [[] for _ in range(brokers)]
        self.commit_times: list[int] = []
        self.leader = 0
        self.leader_ready_ms = 0

    def sees(self, node: int, broker: int, now_ms: int) -> bool:
        lag = 0 if node == self.leader else self.cfg.apply_lag_ms
        for commit_ms, state in reversed(self.changes[broker]):
            if commit_ms + lag <= now_ms:
                return state
        return True

    def version(self, node: int, now_ms: int) -> int:
        lag = 0 if node == self.leader else self.cfg.apply_lag_ms
        return bisect_right(self.commit_times, now_ms - lag)

    def heard(self, broker: int, heard_by: list[int], now_ms: int, rows: HistoryRows) -> None:
        if heard_by and now_ms >= self.leader_ready_ms:
            self.heard_ms[broker] = max(self.heard_ms[broker], now_ms)
            if not self.registered[broker]:
                self._change(broker, True, now_ms, rows)

    def scan(self, node: int, now_ms: int, rows: HistoryRows) -> None:
        if node != self.leader or now_ms < self.leader_ready_ms:
            return
        deadline = self._deadline_ms(now_ms)
        for b in [
            b for b in range(self.cfg.brokers) if self.registered[b] and self.heard_ms[b] < deadline
        ]:
            self._change(b, False, now_ms, rows)

    def node_stopped(self, node: int, now_ms: int) -> None:
        # With three nodes or more the other two elect the next one; with two there is no
        # majority left and the table stays where it is.
        if node == self.leader and self.cfg.nodes > 2:
            self.leader = (node + 1) % self.cfg.nodes
            self.leader_ready_ms = now_ms + self.cfg.election_ms

    def node_restarted(self, node: int, now_ms: int) -> None:
        """Nothing to do: a restarted member catches up from the leader's log."""

    def register_initially(self, topic: int, value: str, rows: HistoryRows) -> None:
        leader, topic_name = self.world.node_names[self.leader], self.world.topic_names[topic]
        rows.change(
            RAFT_LEADER_PROCESS,
            KIND_REGISTER,
            leader,
            topic_name,
            0,
            0,
            value,
            0,
            "",
            ORIGIN_HARNESS,
        )

    def _change(self, broker: int, state: bool, now_ms: int, rows: HistoryRows) -> None:
        commit_ms = max(now_ms, self.leader_ready_ms) + self.latencies.commit()
        if self.commit_times:
            # Entries commit in log order: a later entry never commits before an earlier
            # one, however short its own draw (and version() bisects these times).
            commit_ms = max(commit_ms, self.commit_times[-1])
        self.registered[broker] = state
        self.changes[broker].append((commit_ms, state))
        self.commit_times.append(commit_ms)
        kind = KIND_REGISTER if state else KIND_EXPIRE
        world = self.world
        for topic in world.broker_topics[broker]:
            rows.change(
                RAFT_LEADER_PROCESS,
                kind,
                world.node_names[self.leader],
                world.topic_names[topic],
                now_ms,
                commit_ms,
                self.route_value(self.leader, topic, commit_ms),
                len(self.commit_times),
                world.broker_names[broker],
                ORIGIN_NODE,
            )
