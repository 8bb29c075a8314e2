"""The simulated cluster of :mod:`experiment_history.simulate`: its layout and what is
really true in it."""

from __future__ import annotations

import random

from experiment_history.schema import RouteItem
from experiment_history.simulate import SimConfig

PERM_READ_WRITE = 6


class SimWorld:
    """The cluster's fixed layout (its nodes, brokers and topics, and which brokers serve
    which topic) and what is really true in it (which brokers are alive, which nodes up).

    The node tables, the faults and the clients all read it; only the faults change it.
    """

    def __init__(self, config: SimConfig, rng: random.Random) -> None:
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
            sorted(rng.sample(range(config.brokers), config.brokers_per_topic))
            for _ in range(config.topics)
        ]
        self.broker_topics: list[list[int]] = [[] for _ in range(config.brokers)]
        for topic, brokers in enumerate(self.topic_brokers):
            for b in brokers:
                self.broker_topics[b].append(topic)
        self.alive = [True] * config.brokers
        self.node_up = [True] * config.nodes

    def truth(self, topic: int) -> str:
        """The route ``topic`` really has: the items of its brokers that are alive."""
        return ",".join(self.items[b] for b in self.topic_brokers[topic] if self.alive[b])
