"""Reads right after an acknowledged write, on the nodes that did not acknowledge it.

The clients poll a route about once a second, so few reads land within 100 ms of a write,
where the designs differ: a raft follower may not have applied an entry its leader already
acknowledged, and an eventual node may not yet have the registration another node
answered. :class:`FollowUpReader` reads every changed topic from every other node at
fixed offsets after each acknowledged write, so the t-visibility buckets under 100 ms and
just past it have reads in every run (docs/EXPERIMENTS.md "Running an experiment").

After each acknowledged admin write (``ExperimentContext.admin_write``), and after each
acknowledged registration round of a nemesis broker (every round is a write there,
``BrokerFleet.fresh_shares``; one of its topics, :meth:`FollowUpReader.read_back_one`),
it also reads the topic back once as the writer, under the write's own process (``admin``
or the broker), from one node the write picks (:func:`read_back_node`),
:data:`READ_BACK_OFFSET_MS` after the ack: no client process otherwise both writes and
reads, and read-your-writes per session (``spark_jobs.sessions``) needs sessions that do.
"""

from __future__ import annotations

import asyncio
import contextlib
import zlib
from collections.abc import Sequence

from experiment_history.schema import (
    OUTCOME_NOT_FOUND,
    OUTCOME_OK,
    follow_up_process,
)
from experiments.registers import RegisterLog
from experiments.workload import Recorder, now_ms, read_route
from remoting.client import RemotingClient

FOLLOW_UP_OFFSETS_MS = (0, 20, 40, 60, 80, 150, 300)
"""When each other node is asked after an ack: five reads inside the first 100 ms, two
after it (where a correct raft node answers the new route)."""
FOLLOW_UPS_IN_FLIGHT_MAX = 16
"""Acknowledged writes followed at once; a write beyond that is not followed (counted)."""
READ_BACK_OFFSET_MS = 10
"""When the writer reads its own write back after the ack: soon, as a client that
checks what it just wrote would, and before the follow-up reads' 20 ms."""


def read_back_node(nodes: Sequence[str], process: str, topic: str, value: str) -> str:
    """The node a writer reads its write back from: picked by a checksum of the write
    (writer, topic, value) among all nodes, the acknowledging one included (a client's
    next request may go to any NameServer), so a replay of the same writes reads the same
    nodes and the writes of a run spread over every node."""
    ordered = sorted(nodes)
    key = f"{process}\n{topic}\n{value}".encode()
    return ordered[zlib.crc32(key) % len(ordered)]


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
        self.read_back = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def read_back_one(self, process: str, ack_ms: int, changes: Sequence[tuple[str, str]]) -> None:
        """:meth:`read_back_after` of one of the (topic, value) ``changes`` a write made,
        picked by a checksum of each (the same in a replay, spread over the topics): a
        broker round writes several topics, and reading back one per round keeps the
        reads near one per broker per second."""
        topic, value = min(changes, key=lambda c: zlib.crc32(f"{process}\n{c[0]}\n{c[1]}".encode()))
        self.read_back_after(process, ack_ms, topic, value)

    def read_back_after(self, process: str, ack_ms: int, topic: str, value: str) -> None:
        """Read ``topic`` once as ``process``, the writer of ``value`` acknowledged at
        ``ack_ms``, from :func:`read_back_node`, :data:`READ_BACK_OFFSET_MS` after the ack."""
        if len(self._tasks) >= FOLLOW_UPS_IN_FLIGHT_MAX:
            self.skipped += 1
            return
        node = read_back_node(list(self.nodes), process, topic, value)
        task = asyncio.get_running_loop().create_task(
            self._read_back(process, node, ack_ms + READ_BACK_OFFSET_MS, topic)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self.read_back += 1

    async def _read_back(self, process: str, node: str, at_ms: int, topic: str) -> None:
        delay_s = (at_ms - now_ms()) / 1000
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        await self._read(node, topic, process)

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

    async def _read(self, node: str, topic: str, process: str | None = None) -> None:
        """One read of ``topic`` from ``node``, recorded as ``process`` (default: the
        follow-up reader of that node)."""
        result = await read_route(
            self.client, self.nodes[node], topic, self.timeout_s, self.consistency
        )
        reader = follow_up_process(node) if process is None else process
        self.recorder.route_read(reader, node, topic, result)
        if self.registers is not None and result.outcome in (OUTCOME_OK, OUTCOME_NOT_FOUND):
            self.registers.note_read(topic, result.value, result.invoke_us)

    async def close(self) -> None:
        """Wait for the reads in flight (they end within the last offset plus a timeout),
        then close the connections."""
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.client.close()
