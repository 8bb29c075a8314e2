"""A discrete-event model of both NameServer designs, writing histories in the run schema.

No processes and no sockets: brokers heart-beat every 30 s to each NameServer node over
links that a scenario may cut or make lossy, nodes scan for silent brokers, and clients
poll a random node every 30 s, send through the MQFaultStrategy model and (consumers)
rebalance with AllocateMessageQueueAveragely every 20 s.

- ``eventual``: every node keeps its own live table, registers a broker when it hears it
  and expires it on its own scan (120 s of silence), exactly as the original.
- ``raft``: one replicated table. A heartbeat heard by any node that reaches the leader
  refreshes the replicated last-heard time; only the leader scans; a change commits after
  ``commit_latency_ms`` and a follower applies it ``apply_lag_ms`` later. While the leader
  is down nothing commits until ``election_ms`` has passed.

Every write's ``origin`` is ``node`` (the node's own change, or the leader's commit) but
the initial ones at time 0, the harness's (``harness``); other operations have none.

The parameters are documented in docs/EXPERIMENTS.md "Simulation"; the timing ones can be
measured from real runs (``spark_jobs.calibrate``; ``python -m spark_jobs.cli simulate
--calibrate-from``, the command line that runs this model).
Everything is driven by one seeded RNG (latencies by a second one) and a heap ordered by
(time, sequence), so a seed reproduces a history exactly. Rows stream to
Parquet in chunks, so memory holds the model state, not the history.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import random
import time
from bisect import bisect_right
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from experiment_history.clients import (
    JavaRandom,
    MQFaultStrategy,
    ThreadLocalIndex,
    allocate_averagely,
    rebalance_allocate,
    route_from_value,
    topic_route_to_publish_info,
    topic_route_to_subscribe_info,
)
from experiment_history.runs import HistoryWriter, RunMeta
from experiment_history.schema import (
    FAULT_ASYMMETRIC_PARTITION,
    FAULT_KILL_BROKER,
    FAULT_KILL_NAMESRV,
    KIND_BROKER_DOWN,
    KIND_CONSUME_ALLOC,
    KIND_EXPIRE,
    KIND_REGISTER,
    KIND_ROUTE_READ,
    KIND_SEND,
    NO_VERSION,
    ORIGIN_HARNESS,
    ORIGIN_NODE,
    OUTCOME_ERROR,
    OUTCOME_NOT_FOUND,
    OUTCOME_OK,
    OUTCOME_TIMEOUT,
    RouteItem,
    canonical_queues,
)
from raftstore import vocab

MODE_EVENTUAL = vocab.MODE_EVENTUAL
MODE_RAFT = vocab.MODE_RAFT
SCENARIO_NONE = "none"
SCENARIO_ASYMMETRIC = "asymmetric_partition"
SCENARIO_BROKER_KILL = "broker_kill"
SCENARIO_NAMESRV_RESTART = "namesrv_restart"
SCENARIOS = (SCENARIO_NONE, SCENARIO_ASYMMETRIC, SCENARIO_BROKER_KILL, SCENARIO_NAMESRV_RESTART)
SEND_ATTEMPTS_MAX = 3  # retryTimesWhenSendFailed = 2, so three attempts in the sync loop
PERM_READ_WRITE = 6
RAFT_LEADER_PROCESS = "raft-leader"

_HEARTBEAT, _SCAN, _POLL, _REBALANCE, _SAMPLE, _FAULT_START, _FAULT_END = range(7)


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Every knob of the model; times in ms of simulated time."""

    brokers: int = 30
    topics: int = 100
    reads: int = 2_000
    mode: str = MODE_EVENTUAL
    seed: int = 1
    scenario: str = SCENARIO_ASYMMETRIC
    nodes: int = 3
    brokers_per_topic: int = 2
    queues_per_broker: int = 4
    duration_ms: int = 600_000
    heartbeat_interval_ms: int = 30_000
    broker_timeout_ms: int = 120_000
    scan_interval_ms: int = 5_000
    poll_interval_ms: int = 30_000
    rebalance_interval_ms: int = 20_000
    rpc_latency_ms: int = 2
    request_timeout_ms: int = 3_000
    fault_start_ms: int = 60_000
    fault_end_ms: int = 420_000
    fault_share: float = 0.01
    link_loss: float = 0.0
    commit_latency_ms: int = 3
    apply_lag_ms: int = 2
    election_ms: int = 2_000
    topics_per_client: int = 10
    sends_per_poll: int = 1
    consumer_groups: int = 4
    consumers_per_group: int = 3
    sample_topics: int = 200
    sample_interval_ms: int = 5_000
    chunk_rows: int = 50_000
    rpc_latency_quantiles_ms: tuple[float, ...] = ()
    """Route-read latency as evenly spaced quantiles (0 %, ..., 100 %), each read drawing
    from them; empty: every read takes ``rpc_latency_ms``."""
    commit_latency_quantiles_ms: tuple[float, ...] = ()
    """Raft commit latency the same way; empty: ``commit_latency_ms``."""
    expiry_extra_ms: int = 0
    """Detection delay beyond ``broker_timeout_ms`` (raft's skew allowance and the like)."""
    calibration_source: str = ""
    """Where the calibrated values came from (``spark_jobs.calibrate``), for run.json."""

    def validate(self) -> None:
        """Refuse settings the model cannot run."""
        if self.mode not in (MODE_EVENTUAL, MODE_RAFT):
            raise ValueError(f"unknown mode {self.mode!r}")
        if self.scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {self.scenario!r}")
        if self.nodes < 1 or self.brokers < self.brokers_per_topic or self.topics < 1:
            raise ValueError("need nodes >= 1, topics >= 1, brokers >= brokers_per_topic")
        if not 0 <= self.fault_start_ms <= self.fault_end_ms <= self.duration_ms:
            raise ValueError("need 0 <= fault_start_ms <= fault_end_ms <= duration_ms")
        for name in ("rpc_latency_quantiles_ms", "commit_latency_quantiles_ms"):
            points = getattr(self, name)
            if points and (
                len(points) < 2
                or points[0] < 0
                or any(b < a for a, b in itertools.pairwise(points))
            ):
                raise ValueError(
                    f"{name} must be at least 2 non-negative, non-decreasing values, got {points!r}"
                )
        if self.expiry_extra_ms < 0 or self.election_ms < 0:
            raise ValueError("expiry_extra_ms and election_ms must be >= 0")
        if (
            min(
                self.heartbeat_interval_ms,
                self.scan_interval_ms,
                self.poll_interval_ms,
                self.rebalance_interval_ms,
                self.sample_interval_ms,
            )
            <= 0
        ):
            raise ValueError("every interval must be positive")


@dataclass(slots=True)
class _Client:
    """A producer (or a consumer when ``group`` is set) with its own route views."""

    name: str
    topics: list[int]
    views: dict[int, str] = field(default_factory=dict)
    group: int = -1
    index: ThreadLocalIndex | None = None
    strategy: MQFaultStrategy = field(default_factory=MQFaultStrategy)


class Simulation:
    """One run of the model; :meth:`run` writes the history and returns its metadata."""

    def __init__(self, config: SimConfig, out_dir: Path | str, run_id: str | None = None):
        config.validate()
        self.cfg = config
        self.rng = random.Random(config.seed)
        self.run_id = run_id or f"sim-{config.mode}-{config.scenario}-s{config.seed}"
        self.out_dir = Path(out_dir)
        self.node_names = [f"ns{i}" for i in range(config.nodes)]
        self.broker_names = [f"broker-{b:05d}" for b in range(config.brokers)]
        self.items = [
            RouteItem(
                name,
                f"host-{b:05d}:10911",
                config.queues_per_broker,
                config.queues_per_broker,
                PERM_READ_WRITE,
            ).encode()
            for b, name in enumerate(self.broker_names)
        ]
        self.topic_names = [f"topic-{t:06d}" for t in range(config.topics)]
        self.topic_brokers = [
            sorted(self.rng.sample(range(config.brokers), config.brokers_per_topic))
            for _ in range(config.topics)
        ]
        self.broker_topics: list[list[int]] = [[] for _ in range(config.brokers)]
        for topic, brokers in enumerate(self.topic_brokers):
            for b in brokers:
                self.broker_topics[b].append(topic)
        self._init_state()
        self._init_faults()
        self._init_clients()
        self.heap: list[tuple[int, int, int, int]] = []
        # Latency draws use their own generator, so calibrating latencies does not
        # reshuffle the model's other random choices.
        self.latency_rng = random.Random(f"latency-{config.seed}")
        self.seq = 0
        self.op_id = 0
        self.reads_done = 0

    # ------------------------------------------------------------------ set-up

    def _init_state(self) -> None:
        brokers, nodes = self.cfg.brokers, self.cfg.nodes
        self.alive = [True] * brokers
        self.node_up = [True] * nodes
        # eventual: per-node live tables; raft: one replicated table with a change log.
        self.heard: list[list[int]] = [[0] * brokers for _ in range(nodes)]
        self.registered: list[list[bool]] = [[True] * brokers for _ in range(nodes)]
        self.node_version = [0] * nodes
        self.raft_heard = [0] * brokers
        self.raft_registered = [True] * brokers
        self.raft_changes: list[list[tuple[int, bool]]] = [[] for _ in range(brokers)]
        self.commit_times: list[int] = []
        self.leader = 0
        self.leader_ready_ms = 0

    def _init_faults(self) -> None:
        cfg = self.cfg
        count = max(1, int(cfg.brokers * cfg.fault_share))
        order = list(range(cfg.brokers))
        self.rng.shuffle(order)
        self.cut: dict[int, set[int]] = {}
        self.killed: list[int] = []
        if cfg.scenario == SCENARIO_ASYMMETRIC:
            # S1: ns0 loses one set of brokers, ns1 another; the rest hear everybody.
            self.cut[0] = set(order[:count])
            if cfg.nodes > 1:
                self.cut[1] = set(order[count : 2 * count])
        elif cfg.scenario == SCENARIO_BROKER_KILL:
            self.killed = order[:count]
        self.partition_active = False
        self.focus_brokers = sorted(set().union(*self.cut.values()) | set(self.killed))

    def _init_clients(self) -> None:
        cfg = self.cfg
        polls = max(1, cfg.duration_ms // cfg.poll_interval_ms)
        subscriptions = max(1, math.ceil(cfg.reads / polls))
        per_client = max(1, min(cfg.topics_per_client, cfg.topics))
        focus_topics = sorted({t for b in self.focus_brokers for t in self.broker_topics[b]})
        self.clients: list[_Client] = []
        for c in range(math.ceil(subscriptions / per_client)):
            topics = self.rng.sample(range(cfg.topics), per_client)
            index = ThreadLocalIndex(JavaRandom(cfg.seed * 1_000_003 + c))
            self.clients.append(_Client(f"producer-{c:05d}", topics, index=index))
        group_topics = focus_topics + self.rng.sample(range(cfg.topics), cfg.consumer_groups)
        for g in range(cfg.consumer_groups):
            for i in range(cfg.consumers_per_group):
                self.clients.append(_Client(f"cg{g}-c{i}", [group_topics[g]], group=g))
        sample = focus_topics[: cfg.sample_topics]
        rest = [t for t in range(cfg.topics) if t not in set(sample)]
        extra = max(0, min(cfg.sample_topics - len(sample), len(rest)))
        self.sample_topics = sorted(sample + self.rng.sample(rest, extra))

    # --------------------------------------------------------------- the model

    def _draw(self, points: tuple[float, ...], fixed: int) -> int:
        """A latency from evenly spaced quantiles (linear between them), or ``fixed``."""
        if not points:
            return fixed
        position = self.latency_rng.random() * (len(points) - 1)
        low = int(position)
        high = min(low + 1, len(points) - 1)
        return round(points[low] + (points[high] - points[low]) * (position - low))

    def _rpc_latency(self) -> int:
        return self._draw(self.cfg.rpc_latency_quantiles_ms, self.cfg.rpc_latency_ms)

    def _commit_latency(self) -> int:
        return self._draw(self.cfg.commit_latency_quantiles_ms, self.cfg.commit_latency_ms)

    def _push(self, at_ms: int, event: int, arg: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (at_ms, self.seq, event, arg))

    def _next_op(self) -> int:
        self.op_id += 1
        return self.op_id

    def _sees(self, node: int, broker: int, now_ms: int) -> bool:
        """Whether ``node`` answers with ``broker`` in its routes at ``now_ms``."""
        if self.cfg.mode == MODE_EVENTUAL:
            return self.registered[node][broker]
        lag = 0 if node == self.leader else self.cfg.apply_lag_ms
        for commit_ms, state in reversed(self.raft_changes[broker]):
            if commit_ms + lag <= now_ms:
                return state
        return True

    def _version(self, node: int, now_ms: int) -> int:
        if self.cfg.mode == MODE_EVENTUAL:
            return self.node_version[node]
        lag = 0 if node == self.leader else self.cfg.apply_lag_ms
        return bisect_right(self.commit_times, now_ms - lag)

    def route_value(self, node: int, topic: int, now_ms: int) -> str:
        """The canonical route ``node`` answers for ``topic`` at ``now_ms``."""
        return ",".join(
            self.items[b] for b in self.topic_brokers[topic] if self._sees(node, b, now_ms)
        )

    def _truth(self, topic: int) -> str:
        return ",".join(self.items[b] for b in self.topic_brokers[topic] if self.alive[b])

    def _link_up(self, broker: int, node: int) -> bool:
        if not self.node_up[node]:
            return False
        if self.partition_active and broker in self.cut.get(node, ()):
            return False
        return not (self.cfg.link_loss and self.rng.random() < self.cfg.link_loss)

    def _on_heartbeat(self, now_ms: int, broker: int, out: HistoryWriter) -> None:
        if not self.alive[broker]:
            return
        heard_by = [n for n in range(self.cfg.nodes) if self._link_up(broker, n)]
        if self.cfg.mode == MODE_EVENTUAL:
            for node in heard_by:
                self.heard[node][broker] = now_ms
                if not self.registered[node][broker]:
                    self._eventual_change(node, broker, True, now_ms, out)
        elif heard_by and now_ms >= self.leader_ready_ms:
            self.raft_heard[broker] = max(self.raft_heard[broker], now_ms)
            if not self.raft_registered[broker]:
                self._raft_change(broker, True, now_ms, out)
        self._push(now_ms + self.cfg.heartbeat_interval_ms, _HEARTBEAT, broker)

    def _on_scan(self, now_ms: int, node: int, out: HistoryWriter) -> None:
        self._push(now_ms + self.cfg.scan_interval_ms, _SCAN, node)
        if not self.node_up[node]:
            return
        deadline = now_ms - self.cfg.broker_timeout_ms - self.cfg.expiry_extra_ms
        if self.cfg.mode == MODE_EVENTUAL:
            table, heard = self.registered[node], self.heard[node]
            for b in [b for b in range(self.cfg.brokers) if table[b] and heard[b] < deadline]:
                self._eventual_change(node, b, False, now_ms, out)
        elif node == self.leader and now_ms >= self.leader_ready_ms:
            for b in [
                b
                for b in range(self.cfg.brokers)
                if self.raft_registered[b] and self.raft_heard[b] < deadline
            ]:
                self._raft_change(b, False, now_ms, out)

    def _eventual_change(
        self, node: int, broker: int, state: bool, now_ms: int, out: HistoryWriter
    ) -> None:
        self.registered[node][broker] = state
        self.node_version[node] += 1
        kind = KIND_REGISTER if state else KIND_EXPIRE
        for topic in self.broker_topics[broker]:
            out.operation(
                (
                    self._next_op(),
                    self.node_names[node],
                    kind,
                    self.node_names[node],
                    self.topic_names[topic],
                    now_ms,
                    now_ms,
                    OUTCOME_OK,
                    self.route_value(node, topic, now_ms),
                    self.node_version[node],
                    self.broker_names[broker],
                    "{}",
                    now_ms * 1_000,
                    now_ms * 1_000,
                    ORIGIN_NODE,
                )
            )

    def _raft_change(self, broker: int, state: bool, now_ms: int, out: HistoryWriter) -> None:
        commit_ms = max(now_ms, self.leader_ready_ms) + self._commit_latency()
        self.raft_registered[broker] = state
        self.raft_changes[broker].append((commit_ms, state))
        self.commit_times.append(commit_ms)
        kind = KIND_REGISTER if state else KIND_EXPIRE
        for topic in self.broker_topics[broker]:
            out.operation(
                (
                    self._next_op(),
                    RAFT_LEADER_PROCESS,
                    kind,
                    self.node_names[self.leader],
                    self.topic_names[topic],
                    now_ms,
                    commit_ms,
                    OUTCOME_OK,
                    self.route_value(self.leader, topic, commit_ms),
                    len(self.commit_times),
                    self.broker_names[broker],
                    "{}",
                    now_ms * 1_000,
                    commit_ms * 1_000,
                    ORIGIN_NODE,
                )
            )

    def _on_poll(self, now_ms: int, client_index: int, out: HistoryWriter) -> None:
        client = self.clients[client_index]
        self._push(now_ms + self.cfg.poll_interval_ms, _POLL, client_index)
        node = self.rng.randrange(self.cfg.nodes)
        name = self.node_names[node]
        for topic in client.topics:
            self.reads_done += 1
            if not self.node_up[node]:
                out.operation(
                    (
                        self._next_op(),
                        client.name,
                        KIND_ROUTE_READ,
                        name,
                        self.topic_names[topic],
                        now_ms,
                        now_ms + self.cfg.request_timeout_ms,
                        OUTCOME_TIMEOUT,
                        "",
                        NO_VERSION,
                        "",
                        "{}",
                        now_ms * 1_000,
                        (now_ms + self.cfg.request_timeout_ms) * 1_000,
                    )
                )
                continue
            done_ms = now_ms + self._rpc_latency()
            value = self.route_value(node, topic, now_ms)
            outcome = OUTCOME_OK if value else OUTCOME_NOT_FOUND
            out.operation(
                (
                    self._next_op(),
                    client.name,
                    KIND_ROUTE_READ,
                    name,
                    self.topic_names[topic],
                    now_ms,
                    done_ms,
                    outcome,
                    value,
                    self._version(node, now_ms),
                    "",
                    "{}",
                    now_ms * 1_000,
                    done_ms * 1_000,
                )
            )
            # As topicRouteDataChanged: a failed query keeps the old route.
            if value:
                client.views[topic] = value
        if client.group < 0:
            for _ in range(self.cfg.sends_per_poll):
                self._send(client, now_ms + self.cfg.rpc_latency_ms, out)

    def _send(self, client: _Client, now_ms: int, out: HistoryWriter) -> None:
        topic = client.topics[self.rng.randrange(len(client.topics))]
        info = topic_route_to_publish_info(
            self.topic_names[topic], route_from_value(client.views.get(topic)), client.index
        )
        last: str | None = None
        for attempt in range(SEND_ATTEMPTS_MAX):
            mq = client.strategy.select_one_message_queue(info, last, attempt > 0, now_ms)
            if mq is None:
                return
            broker = int(mq.broker_name.rsplit("-", 1)[1])
            ok = self.alive[broker]
            done_ms = now_ms + (self.cfg.rpc_latency_ms if ok else self.cfg.request_timeout_ms)
            out.operation(
                (
                    self._next_op(),
                    client.name,
                    KIND_SEND,
                    "",
                    self.topic_names[topic],
                    now_ms,
                    done_ms,
                    OUTCOME_OK if ok else OUTCOME_ERROR,
                    str(mq.queue_id),
                    NO_VERSION,
                    mq.broker_name,
                    json.dumps({"attempt": attempt}),
                    now_ms * 1_000,
                    done_ms * 1_000,
                )
            )
            if ok:
                return
            last, now_ms = mq.broker_name, done_ms

    def _on_rebalance(self, now_ms: int, client_index: int, out: HistoryWriter) -> None:
        client = self.clients[client_index]
        self._push(now_ms + self.cfg.rebalance_interval_ms, _REBALANCE, client_index)
        topic = client.topics[0]
        mq_set = topic_route_to_subscribe_info(
            self.topic_names[topic], route_from_value(client.views.get(topic))
        )
        if not mq_set:
            return
        members = [f"cg{client.group}-c{i}" for i in range(self.cfg.consumers_per_group)]
        mine = rebalance_allocate(
            allocate_averagely, f"cg{client.group}", client.name, mq_set, members
        )
        out.operation(
            (
                self._next_op(),
                client.name,
                KIND_CONSUME_ALLOC,
                "",
                self.topic_names[topic],
                now_ms,
                now_ms,
                OUTCOME_OK,
                canonical_queues((mq.broker_name, mq.queue_id) for mq in mine),
                NO_VERSION,
                "",
                json.dumps({"group": f"cg{client.group}"}),
                now_ms * 1_000,
                now_ms * 1_000,
            )
        )

    def _on_sample(self, now_ms: int, out: HistoryWriter) -> None:
        self._push(now_ms + self.cfg.sample_interval_ms, _SAMPLE, 0)
        for topic in self.sample_topics:
            for node in range(self.cfg.nodes):
                if self.node_up[node]:
                    out.node_state(
                        (
                            now_ms,
                            self.node_names[node],
                            self.topic_names[topic],
                            self.route_value(node, topic, now_ms),
                            self._version(node, now_ms),
                        )
                    )

    # ---------------------------------------------------------------- faults

    def _on_fault(self, now_ms: int, starting: bool, out: HistoryWriter) -> None:
        scenario = self.cfg.scenario
        if scenario == SCENARIO_ASYMMETRIC:
            self.partition_active = starting
        elif scenario == SCENARIO_BROKER_KILL and starting:
            for b in self.killed:
                self.alive[b] = False
                for topic in self.broker_topics[b]:
                    out.write(
                        (
                            now_ms,
                            self.topic_names[topic],
                            self.broker_names[b],
                            KIND_BROKER_DOWN,
                            self._truth(topic),
                            NO_VERSION,
                        )
                    )
        elif scenario == SCENARIO_NAMESRV_RESTART:
            self._namesrv_fault(now_ms, starting)

    def _namesrv_fault(self, now_ms: int, starting: bool) -> None:
        self.node_up[0] = not starting
        if self.cfg.mode == MODE_EVENTUAL and not starting:
            # S3: a restarted node has an empty table until brokers register again.
            self.registered[0] = [False] * self.cfg.brokers
            self.heard[0] = [0] * self.cfg.brokers
        if self.cfg.mode == MODE_RAFT and starting and self.leader == 0 and self.cfg.nodes > 2:
            self.leader = 1
            self.leader_ready_ms = now_ms + self.cfg.election_ms

    def _fault_rows(self, out: HistoryWriter) -> None:
        cfg = self.cfg
        if cfg.scenario == SCENARIO_ASYMMETRIC:
            for node, brokers in sorted(self.cut.items()):
                detail = json.dumps(
                    {"lost_brokers": [self.broker_names[b] for b in sorted(brokers)]}
                )
                out.fault(
                    (
                        cfg.fault_start_ms,
                        cfg.fault_end_ms,
                        FAULT_ASYMMETRIC_PARTITION,
                        self.node_names[node],
                        detail,
                    )
                )
        for b in self.killed:
            out.fault((cfg.fault_start_ms, -1, FAULT_KILL_BROKER, self.broker_names[b], "{}"))
        if cfg.scenario == SCENARIO_NAMESRV_RESTART:
            out.fault(
                (cfg.fault_start_ms, cfg.fault_end_ms, FAULT_KILL_NAMESRV, self.node_names[0], "{}")
            )

    # ------------------------------------------------------------------ driver

    def _schedule_start(self, out: HistoryWriter) -> None:
        cfg = self.cfg
        for b in range(cfg.brokers):
            self._push(self.rng.randrange(cfg.heartbeat_interval_ms), _HEARTBEAT, b)
        for n in range(cfg.nodes):
            self._push(self.rng.randrange(cfg.scan_interval_ms), _SCAN, n)
        for c, client in enumerate(self.clients):
            self._push(self.rng.randrange(cfg.poll_interval_ms), _POLL, c)
            if client.group >= 0:
                self._push(self.rng.randrange(cfg.rebalance_interval_ms), _REBALANCE, c)
        self._push(0, _SAMPLE, 0)
        if cfg.scenario != SCENARIO_NONE:
            self._push(cfg.fault_start_ms, _FAULT_START, 0)
            self._push(cfg.fault_end_ms, _FAULT_END, 0)
        # Every broker is registered everywhere at time 0: the initial writes.
        for topic in range(cfg.topics):
            value = self._truth(topic)
            out.write((0, self.topic_names[topic], "", KIND_REGISTER, value, NO_VERSION))
            for n in range(cfg.nodes) if cfg.mode == MODE_EVENTUAL else [self.leader]:
                process = self.node_names[n] if cfg.mode == MODE_EVENTUAL else RAFT_LEADER_PROCESS
                out.operation(
                    (
                        self._next_op(),
                        process,
                        KIND_REGISTER,
                        self.node_names[n],
                        self.topic_names[topic],
                        0,
                        0,
                        OUTCOME_OK,
                        value,
                        0,
                        "",
                        "{}",
                        0 * 1_000,
                        0 * 1_000,
                        ORIGIN_HARNESS,
                    )
                )

    def run(self) -> RunMeta:
        """Simulate ``duration_ms`` and write the run directory; return its metadata."""
        began = time.monotonic()
        meta = RunMeta(
            run_id=self.run_id,
            scenario=self.cfg.scenario,
            mode=self.cfg.mode,
            seed=self.cfg.seed,
            nodes=list(self.node_names),
            params={"simulated": True, **asdict(self.cfg)},
        )
        run_dir = self.out_dir / self.run_id
        with HistoryWriter(run_dir, meta, self.cfg.chunk_rows) as out:
            self._schedule_start(out)
            self._fault_rows(out)
            handlers: dict[int, Any] = {
                _HEARTBEAT: self._on_heartbeat,
                _SCAN: self._on_scan,
                _POLL: self._on_poll,
                _REBALANCE: self._on_rebalance,
            }
            while self.heap:
                now_ms, _, event, arg = heapq.heappop(self.heap)
                if now_ms >= self.cfg.duration_ms:
                    break
                if event == _SAMPLE:
                    self._on_sample(now_ms, out)
                elif event in (_FAULT_START, _FAULT_END):
                    self._on_fault(now_ms, event == _FAULT_START, out)
                else:
                    handlers[event](now_ms, arg, out)
            meta.timings = {
                "wall_s": round(time.monotonic() - began, 3),
                "simulated_ms": self.cfg.duration_ms,
                "reads": self.reads_done,
            }
        return meta


def simulate(config: SimConfig, out_dir: Path | str) -> RunMeta:
    """Run one simulation into ``out_dir/<run_id>`` and return its metadata."""
    return Simulation(config, out_dir).run()
