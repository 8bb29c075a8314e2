"""The clients of the model of :mod:`experiment_history.simulate`: producers and consumers
that read routes from the nodes and act on what they read."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from experiment_history.clients import (
    SEND_ATTEMPTS_MAX,
    JavaRandom,
    MQFaultStrategy,
    ThreadLocalIndex,
    allocate_averagely,
    rebalance_allocate,
    route_from_value,
    topic_route_to_publish_info,
    topic_route_to_subscribe_info,
)
from experiment_history.schema import NO_VERSION, OUTCOME_NOT_FOUND, OUTCOME_OK, OUTCOME_TIMEOUT
from experiment_history.simulate import SimConfig
from experiment_history.simulate_events import Latencies
from experiment_history.simulate_rows import HistoryRows
from experiment_history.simulate_tables import NodeTables
from experiment_history.simulate_world import SimWorld


@dataclass(slots=True)
class SimClient:
    """A producer (or a consumer when ``group`` is set) with its own route views."""

    name: str
    topics: list[int]
    views: dict[int, str] = field(default_factory=dict)
    group: int = -1
    index: ThreadLocalIndex | None = None
    strategy: MQFaultStrategy = field(default_factory=MQFaultStrategy)


class Workload:
    """The simulated clients and what each does when its turn comes: a poll reads every
    topic of the client at one random node (a producer then sends through MQFaultStrategy),
    a consumer's rebalance allocates queues from its own route view; each a row.

    Enough producers are made for ``reads`` route reads over the run; the consumer groups
    read the topics the faults hit first.
    """

    def __init__(
        self,
        config: SimConfig,
        world: SimWorld,
        tables: NodeTables,
        latencies: Latencies,
        focus_topics: list[int],
        rng: random.Random,
    ) -> None:
        self.cfg = config
        self.world = world
        self.tables = tables
        self.latencies = latencies
        self.rng = rng
        self.reads_done = 0
        polls = max(1, config.duration_ms // config.poll_interval_ms)
        subscriptions = max(1, math.ceil(config.reads / polls))
        per_client = max(1, min(config.topics_per_client, config.topics))
        self.clients: list[SimClient] = []
        for c in range(math.ceil(subscriptions / per_client)):
            topics = rng.sample(range(config.topics), per_client)
            index = ThreadLocalIndex(JavaRandom(config.seed * 1_000_003 + c))
            self.clients.append(SimClient(f"producer-{c:05d}", topics, index=index))
        group_topics = focus_topics + rng.sample(range(config.topics), config.consumer_groups)
        for g in range(config.consumer_groups):
            for i in range(config.consumers_per_group):
                self.clients.append(SimClient(f"cg{g}-c{i}", [group_topics[g]], group=g))

    def poll(self, now_ms: int, client_index: int, rows: HistoryRows) -> None:
        """The client's periodic route query of all its topics at one random node."""
        client = self.clients[client_index]
        world = self.world
        node = self.rng.randrange(self.cfg.nodes)
        name = world.node_names[node]
        for topic in client.topics:
            self.reads_done += 1
            if not world.node_up[node]:
                timeout_ms = now_ms + self.cfg.request_timeout_ms
                rows.route_read(
                    client.name,
                    name,
                    world.topic_names[topic],
                    now_ms,
                    timeout_ms,
                    OUTCOME_TIMEOUT,
                    "",
                    NO_VERSION,
                )
                continue
            done_ms = now_ms + self.latencies.rpc()
            value = self.tables.route_value(node, topic, now_ms)
            rows.route_read(
                client.name,
                name,
                world.topic_names[topic],
                now_ms,
                done_ms,
                OUTCOME_OK if value else OUTCOME_NOT_FOUND,
                value,
                self.tables.version(node, now_ms),
            )
            # As topicRouteDataChanged: a failed query keeps the old route.
            if value:
                client.views[topic] = value
        if client.group < 0:
            for _ in range(self.cfg.sends_per_poll):
                self._send(client, now_ms + self.cfg.rpc_latency_ms, rows)

    def _send(self, client: SimClient, now_ms: int, rows: HistoryRows) -> None:
        world = self.world
        topic = client.topics[self.rng.randrange(len(client.topics))]
        info = topic_route_to_publish_info(
            world.topic_names[topic], route_from_value(client.views.get(topic)), client.index
        )
        last: str | None = None
        for attempt in range(SEND_ATTEMPTS_MAX):
            mq = client.strategy.select_one_message_queue(info, last, attempt > 0, now_ms)
            if mq is None:
                return
            broker = int(mq.broker_name.rsplit("-", 1)[1])
            ok = world.alive[broker]
            done_ms = now_ms + (self.cfg.rpc_latency_ms if ok else self.cfg.request_timeout_ms)
            rows.send(
                client.name,
                world.topic_names[topic],
                now_ms,
                done_ms,
                ok,
                mq.broker_name,
                mq.queue_id,
                attempt,
            )
            if ok:
                return
            last, now_ms = mq.broker_name, done_ms

    def rebalance(self, now_ms: int, client_index: int, rows: HistoryRows) -> None:
        """A consumer's periodic rebalance over the queues its route view shows."""
        client = self.clients[client_index]
        topic = client.topics[0]
        topic_name = self.world.topic_names[topic]
        mq_set = topic_route_to_subscribe_info(
            topic_name, route_from_value(client.views.get(topic))
        )
        if not mq_set:
            return
        members = [f"cg{client.group}-c{i}" for i in range(self.cfg.consumers_per_group)]
        mine = rebalance_allocate(
            allocate_averagely, f"cg{client.group}", client.name, mq_set, members
        )
        rows.allocation(
            client.name,
            topic_name,
            now_ms,
            f"cg{client.group}",
            ((mq.broker_name, mq.queue_id) for mq in mine),
        )
