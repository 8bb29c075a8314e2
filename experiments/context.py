"""What a scenario sees while it runs: :class:`ExperimentContext`.

Below both the scenarios and the runner: the runner builds the context, a scenario's fault
acts through it, and neither module needs the other for its types.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from experiments.config import ExperimentConfig
from experiments.faults import ClusterHandle, ProxyMesh, RaftMesh
from experiments.follow_up import FollowUpReader
from experiments.progress import Progress, silent
from experiments.workload import BrokerFleet, Recorder, now_ms
from remoting.client import RemotingClient


@dataclass(slots=True)
class ExperimentContext:
    """What scenarios see: the cluster, the proxies, the fleet and the truth model."""

    config: ExperimentConfig
    cluster: ClusterHandle
    mesh: ProxyMesh
    fleet: BrokerFleet
    recorder: Recorder
    rng: random.Random
    topics: list[str]
    admin: RemotingClient
    raft_mesh: RaftMesh | None = None
    follow_up: FollowUpReader | None = None
    progress: Progress = field(default_factory=silent)
    lane_brokers: dict[str, list[str]] = field(default_factory=dict)
    truth_overrides: dict[str, str] = field(default_factory=dict)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    _truth: dict[str, str] = field(default_factory=dict)

    @property
    def raft(self) -> bool:
        """True in raft mode."""
        return self.config.mode == "raft"

    @property
    def nodes(self) -> dict[str, str]:
        """Node id to remoting address."""
        return self.cluster.remoting_addrs()

    @property
    def timeout_s(self) -> float:
        """The request timeout of admin calls."""
        return self.config.request_timeout_s

    @property
    def focus_topic(self) -> str:
        """The topic the faults aim at (the first consumer group reads it too)."""
        return self.topics[0]

    def brokers_of(self, topic: str) -> list[str]:
        """The brokers that hold ``topic``, by name."""
        return sorted(n for n, b in self.fleet.brokers.items() if topic in b.topics)

    def truth_of(self, topic: str) -> str:
        """The route ``topic`` should have now."""
        if topic in self.truth_overrides:
            return self.truth_overrides[topic]
        return self.fleet.truth(topic)

    def record_truth(self, broker: str, kind: str, stamp_ms: int | None = None) -> list[str]:
        """Append a ground-truth write, at ``stamp_ms`` (default now), for every topic whose
        true route changed; returns those topics."""
        stamp = now_ms() if stamp_ms is None else stamp_ms
        changed = []
        for topic in self.topics:
            value = self.truth_of(topic)
            if self._truth.get(topic) != value:
                self._truth[topic] = value
                self.recorder.truth(stamp, topic, broker, kind, value)
                changed.append(topic)
        return changed

    def truth_changed(self, broker: str, kind: str) -> None:
        """The fleet model changed (a broker died or left): update the ground truth."""
        self.record_truth(broker, kind)

    def acknowledged(self, broker: str, kind: str, acks: list[tuple[str, int]]) -> None:
        """A write of ``broker`` was acknowledged by the nodes in ``acks`` (node, ack ms):
        the truth changes at the first ack, and the follow-up reader (when there is one)
        then reads the changed topics from the other nodes. No ack: the model changed
        anyway (a broker that stopped is gone), stamped now."""
        if not acks:
            self.record_truth(broker, kind)
            return
        node, ack_ms = min(acks, key=lambda ack: ack[1])
        changed = self.record_truth(broker, kind, ack_ms)
        if self.follow_up is not None and changed:
            self.follow_up.after_ack(node, ack_ms, changed)

    def truth_topic(self, topic: str, value: str, kind: str) -> None:
        """A topic's true route is now ``value`` (created or deleted by an admin)."""
        self.truth_overrides[topic] = value
        self.record_truth("", kind)
