"""Reads right after an acknowledged write, on the nodes that did not acknowledge it.

The clients poll a route about once a second, so few reads land within 100 ms of a write,
where the designs differ: a raft follower may not have applied an entry its leader already
acknowledged, and an eventual node may not yet have the registration another node
answered. :class:`FollowUpReader` reads every changed topic from every other node at
fixed offsets after each acknowledged write, so the t-visibility buckets under 100 ms and
just past it have reads in every run (docs/EXPERIMENTS.md "Running an experiment").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from experiment_history.schema import OUTCOME_NOT_FOUND, OUTCOME_OK, follow_up_process
from experiments.registers import RegisterLog
from experiments.workload import Recorder, now_ms, read_route
from remoting.client import RemotingClient

FOLLOW_UP_OFFSETS_MS = (0, 20, 40, 60, 80, 150, 300)
"""When each other node is asked after an ack: five reads inside the first 100 ms, two
after it (where a correct raft node answers the new route)."""
FOLLOW_UPS_IN_FLIGHT_MAX = 16
"""Acknowledged writes followed at once; a write beyond that is not followed (counted)."""


class FollowUpReader:
    """After each acknowledged write, reads its topics from the other nodes at
    :data:`FOLLOW_UP_OFFSETS_MS` after the ack; the reads are ``route_read`` operations,
    one process per node read (:func:`follow_up_process`)."""

    def __init__(
        self,
        nodes: dict[str, str],
        recorder: Recorder,
        timeout_s: float,
        consistency: str,
        registers: RegisterLog | None = None,
        offsets_ms: Sequence[int] = FOLLOW_UP_OFFSETS_MS,
    ) -> None:
        self.nodes = nodes
        self.registers = registers
        self.recorder = recorder
        self.timeout_s = timeout_s
        self.consistency = consistency
        self.offsets_ms = tuple(offsets_ms)
        self.client = RemotingClient()
        self.followed = 0
        self.skipped = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def after_ack(self, acked_by: str, ack_ms: int, topics: Sequence[str]) -> None:
        """Follow the write ``acked_by`` acknowledged at ``ack_ms`` (wall-clock ms)."""
        if len(self._tasks) >= FOLLOW_UPS_IN_FLIGHT_MAX:
            self.skipped += 1
            return
        others = [n for n in sorted(self.nodes) if n != acked_by]
        task = asyncio.get_running_loop().create_task(self._follow(others, ack_ms, list(topics)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self.followed += 1

    async def _follow(self, nodes: list[str], ack_ms: int, topics: list[str]) -> None:
        for offset in self.offsets_ms:
            delay_s = (ack_ms + offset - now_ms()) / 1000
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            await asyncio.gather(*(self._read(n, t) for n in nodes for t in topics))

    async def _read(self, node: str, topic: str) -> None:
        result = await read_route(
            self.client, self.nodes[node], topic, self.timeout_s, self.consistency
        )
        self.recorder.route_read(follow_up_process(node), node, topic, result)
        if self.registers is not None and result.outcome in (OUTCOME_OK, OUTCOME_NOT_FOUND):
            self.registers.note_read(topic, result.value, result.invoke_us)

    async def close(self) -> None:
        """Wait for the reads in flight (they end within the last offset plus a timeout),
        then close the connections."""
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.client.close()
