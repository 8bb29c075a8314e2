"""Simulated time for the model of :mod:`experiment_history.simulate`: the queue that says
when each thing happens, and the draws that say how long a read or a commit takes."""

from __future__ import annotations

import heapq
import random

from experiment_history.simulate import SimConfig

# The kinds of event on the queue; the argument is a broker, a node or a client index.
HEARTBEAT, SCAN, POLL, REBALANCE, SAMPLE, FAULT_START, FAULT_END = range(7)


class EventQueue:
    """The model's clock: pending events in (time, sequence) order.

    The sequence number breaks ties between events due in the same millisecond by the
    order they were scheduled in, so a seed replays the same history exactly.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, int, int]] = []
        self._seq = 0

    def push(self, at_ms: int, event: int, arg: int) -> None:
        """Schedule ``event`` with ``arg`` at ``at_ms`` of simulated time."""
        self._seq += 1
        heapq.heappush(self._heap, (at_ms, self._seq, event, arg))

    def pop(self) -> tuple[int, int, int] | None:
        """The next event as ``(at_ms, event, arg)``; None when nothing is pending."""
        if not self._heap:
            return None
        at_ms, _, event, arg = heapq.heappop(self._heap)
        return at_ms, event, arg


class Latencies:
    """How long a route read or a Raft commit takes, drawn from calibrated quantiles or
    fixed.

    The draws use their own generator, so calibrating latencies does not reshuffle the
    model's other random choices.
    """

    def __init__(self, config: SimConfig) -> None:
        self._cfg = config
        self._rng = random.Random(f"latency-{config.seed}")

    def rpc(self) -> int:
        """One route read's latency in ms."""
        return self._draw(self._cfg.rpc_latency_quantiles_ms, self._cfg.rpc_latency_ms)

    def commit(self) -> int:
        """One Raft commit's latency in ms."""
        return self._draw(self._cfg.commit_latency_quantiles_ms, self._cfg.commit_latency_ms)

    def _draw(self, points: tuple[float, ...], fixed: int) -> int:
        """A latency from evenly spaced quantiles (linear between them), or ``fixed``."""
        if not points:
            return fixed
        position = self._rng.random() * (len(points) - 1)
        low = int(position)
        high = min(low + 1, len(points) - 1)
        return round(points[low] + (points[high] - points[low]) * (position - low))
