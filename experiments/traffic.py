"""The clients of an experiment's workload: what reads routes and turns them into traffic.

- :class:`Producer`: polls each topic's route from a random node every ``poll_ms``
  (``updateTopicRouteInfoFromNameServer``; a failed query keeps the old route), then sends
  through ``MQFaultStrategy`` with up to three attempts avoiding the last failed broker.
- :class:`ConsumerGroup`: every consumer polls on its own (random node) and rebalances every
  ``rebalance_ms`` with ``AllocateMessageQueueAveragely`` over its own route view.
- :class:`Prober`: every ``sample_ms`` asks every node for every watched topic
  (``node_states``) and turns each first-seen route change into a register write of the
  per-topic register (see docs/EXPERIMENTS.md "Running an experiment").

They share the brokers' model of time, the run's seeded generators and the history writer
through :mod:`experiments.workload` (the brokers, the recorder, route reads).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

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
from experiment_history.schema import (
    KIND_CONSUME_ALLOC,
    KIND_CREATE_TOPIC,
    KIND_DELETE_TOPIC,
    KIND_EXPIRE,
    KIND_REGISTER,
    KIND_SEND,
    ORIGIN_HARNESS,
    ORIGIN_INFERRED,
    OUTCOME_ERROR,
    OUTCOME_NOT_FOUND,
    OUTCOME_OK,
    canonical_queues,
    route_brokers,
)
from experiments.node_views import NodeViews
from experiments.registers import RegisterLog
from experiments.workload import (
    BrokerFleet,
    ReadResult,
    Recorder,
    now_ms,
    read_route,
)
from remoting.client import RemotingClient
from remoting.consistency import CONSISTENCY_LOCAL

JOURNAL_RECHECKS = 2
JOURNAL_RECHECK_S = 0.05
"""A probe round that saw a change nothing explains reads the nodes' journals again up
to :data:`JOURNAL_RECHECKS` times, this many seconds apart, before it infers a write."""


@dataclass(frozen=True, slots=True)
class ClientTiming:
    """The compressed client-side periods and timeouts of one run."""

    poll_ms: int
    rebalance_ms: int
    send_timeout_ms: int
    request_timeout_s: float
    consistency: str = CONSISTENCY_LOCAL


class RouteView:
    """One client's route table: a random node per poll, old route kept on failure."""

    def __init__(
        self,
        name: str,
        topics: Sequence[str],
        nodes: dict[str, str],
        recorder: Recorder,
        timing: ClientTiming,
        rng: random.Random,
    ) -> None:
        self.name = name
        self.topics = list(topics)
        self.nodes = nodes
        self.recorder = recorder
        self.timing = timing
        self.rng = rng
        self.views: dict[str, str] = {}
        self.client = RemotingClient()

    async def poll(self) -> None:
        """``updateTopicRouteInfoFromNameServer`` for every topic, from one random node."""
        node = self.rng.choice(sorted(self.nodes))
        for topic in self.topics:
            result = await read_route(
                self.client,
                self.nodes[node],
                topic,
                self.timing.request_timeout_s,
                self.timing.consistency,
            )
            self.recorder.route_read(self.name, node, topic, result)
            # topicRouteDataChanged: only a successful answer replaces the route.
            if result.outcome == OUTCOME_OK:
                self.views[topic] = result.value

    async def close(self) -> None:
        """Close the client's connections."""
        await self.client.close()


class Producer(RouteView):
    """A producer: polls routes, sends one message per topic per poll as RocketMQ picks."""

    def __init__(
        self,
        name: str,
        topics: Sequence[str],
        nodes: dict[str, str],
        recorder: Recorder,
        timing: ClientTiming,
        rng: random.Random,
        fleet: BrokerFleet,
        seed: int,
    ) -> None:
        super().__init__(name, topics, nodes, recorder, timing, rng)
        self.fleet = fleet
        self.index = ThreadLocalIndex(JavaRandom(seed))
        self.strategy = MQFaultStrategy()

    def send(self, topic: str) -> list[tuple[str, int, bool]]:
        """One ``sendDefaultImpl`` loop; records and returns (broker, queue, ok) per attempt.

        An attempt on a dead broker costs ``send_timeout_ms`` and is retried on another
        broker (``selectOneMessageQueue(lastBrokerName)``), as the sync send does.
        """
        info = topic_route_to_publish_info(
            topic, route_from_value(self.views.get(topic)), self.index
        )
        attempts: list[tuple[str, int, bool]] = []
        last: str | None = None
        start = now_ms()
        for attempt in range(SEND_ATTEMPTS_MAX):
            mq = self.strategy.select_one_message_queue(info, last, attempt > 0, start)
            if mq is None:
                self.recorder.operation(
                    process=self.name,
                    kind=KIND_SEND,
                    node="",
                    topic=topic,
                    invoke_us=start * 1_000,
                    complete_us=start * 1_000,
                    outcome=OUTCOME_NOT_FOUND,
                    extra={"attempt": attempt},
                )
                break
            ok = self.fleet.accepts(mq.broker_name)
            done = start + (0 if ok else self.timing.send_timeout_ms)
            self.recorder.operation(
                process=self.name,
                kind=KIND_SEND,
                node="",
                topic=topic,
                invoke_us=start * 1_000,
                complete_us=done * 1_000,
                outcome=OUTCOME_OK if ok else OUTCOME_ERROR,
                value=str(mq.queue_id),
                broker=mq.broker_name,
                extra={"attempt": attempt},
            )
            attempts.append((mq.broker_name, mq.queue_id, ok))
            if ok:
                break
            last, start = mq.broker_name, done
        return attempts

    async def run(self, stop: asyncio.Event) -> None:
        """Poll and send every ``poll_ms`` until ``stop``."""
        await asyncio.sleep(self.rng.random() * self.timing.poll_ms / 1000)
        while not stop.is_set():
            await self.poll()
            for topic in self.topics:
                self.send(topic)
            await _wait(stop, self.timing.poll_ms)


class Consumer(RouteView):
    """One member of a consumer group with its own route view."""

    def __init__(
        self,
        name: str,
        group: ConsumerGroup,
        topic: str,
        nodes: dict[str, str],
        recorder: Recorder,
        timing: ClientTiming,
        rng: random.Random,
    ) -> None:
        super().__init__(name, [topic], nodes, recorder, timing, rng)
        self.group = group

    def rebalance(self) -> list[tuple[str, int]]:
        """``RebalanceImpl`` with AllocateMessageQueueAveragely over this consumer's view."""
        topic = self.topics[0]
        mq_set = topic_route_to_subscribe_info(topic, route_from_value(self.views.get(topic)))
        if not mq_set:
            return []
        mine = rebalance_allocate(
            allocate_averagely, self.group.name, self.name, mq_set, self.group.member_names()
        )
        queues = [(mq.broker_name, mq.queue_id) for mq in mine]
        stamp = now_ms()
        self.recorder.operation(
            process=self.name,
            kind=KIND_CONSUME_ALLOC,
            node="",
            topic=topic,
            invoke_us=stamp * 1_000,
            complete_us=stamp * 1_000,
            outcome=OUTCOME_OK,
            value=canonical_queues(queues),
            extra={"group": self.group.name},
        )
        return queues

    async def run(self, stop: asyncio.Event) -> None:
        """Poll every ``poll_ms`` and rebalance every ``rebalance_ms`` until ``stop``."""
        await asyncio.sleep(self.rng.random() * self.timing.poll_ms / 1000)
        next_rebalance = 0.0
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            await self.poll()
            if loop.time() >= next_rebalance:
                self.rebalance()
                next_rebalance = loop.time() + self.timing.rebalance_ms / 1000
            await _wait(stop, self.timing.poll_ms)


class ConsumerGroup:
    """A consumer group subscribed to one topic; members share the group's member list."""

    def __init__(
        self,
        name: str,
        topic: str,
        members: int,
        nodes: dict[str, str],
        recorder: Recorder,
        timing: ClientTiming,
        rng: random.Random,
    ) -> None:
        self.name = name
        self.topic = topic
        self.consumers = [
            Consumer(
                f"{name}-c{i}", self, topic, nodes, recorder, timing, random.Random(rng.random())
            )
            for i in range(members)
        ]

    def member_names(self) -> list[str]:
        """The client ids the broker would report (every member is online)."""
        return [c.name for c in self.consumers]


async def _wait(stop: asyncio.Event, period_ms: int) -> None:
    """Sleep ``period_ms`` or until ``stop`` is set, whichever comes first."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), period_ms / 1000)


# ----------------------------------------------------------------------------- probe


def change_kind(old: str, new: str) -> str:
    """The write kind that turned route ``old`` into ``new``."""
    if not old:
        return KIND_CREATE_TOPIC
    if not new:
        return KIND_DELETE_TOPIC
    if route_brokers(new) - route_brokers(old):
        return KIND_REGISTER
    return KIND_EXPIRE


class Prober:
    """Samples every node's route of every watched topic; infers the writes the system
    makes on its own.

    A node's route for a topic changes only through a write applied there. Writes the
    harness sent are recorded at their RPC (``ExperimentContext.acknowledged``); what is
    left is what the system does by itself, which the nodes' journals report and
    ``before_round`` records first (``NodeJournals.collect``): what remains
    is a change nobody reported, a detector's find. When a node changes to a value no
    recorded write can explain (:meth:`RegisterLog.candidates`), and that is not the
    recorded writes' shares put together in another order
    (:meth:`RegisterLog.shares_written`, a read), that is such a write: it
    completes when the probe that saw it completes, and it took effect on that node after
    the node's previous probe was sent. A node that keeps answering an old value changes
    nothing: that is a stale read, never a write.
    """

    def __init__(
        self,
        nodes: dict[str, str],
        topics: Sequence[str],
        recorder: Recorder,
        registers: RegisterLog,
        *,
        sample_ms: int,
        timeout_s: float,
        process: Callable[[str], str],
        before_round: Callable[[], Awaitable[None]] | None = None,
        journal_read_since: Callable[[str, str, int], bool] | None = None,
        views: NodeViews | None = None,
    ) -> None:
        self.nodes = dict(nodes)
        self.views = views
        """Eventual mode: each node's table as far as the harness saw it; an answer equal
        to it is a read, and every answer taken refreshes it."""
        self.before_round = before_round
        self.journal_read_since = journal_read_since
        """(node, topic, µs) -> True when a read of ``node``'s journal that began after
        that moment came back and no entry read is still held back for the topic
        (``ExperimentContext.journals_read_since``): a change is inferred only then,
        since until then a journal entry may explain it."""
        self.topics = list(topics)
        self.recorder = recorder
        self.registers = registers
        self.sample_ms = sample_ms
        self.timeout_s = timeout_s
        self.process = process
        self.client = RemotingClient()
        self.last_seen: dict[tuple[str, str], ReadResult] = {}
        self.writes = 0
        """Writes inferred: changes no recorded write explains (0 in a correct run)."""
        self.composed = 0
        """Changes to a value no write had, made of recorded writes' shares (a node that
        applied them in another order): reads, not writes."""
        self.deferred = 0
        """Unexplained answers left for a later round because the node's journal had not
        been read since (a slow or unreachable node): nothing is inferred from them."""

    async def sample(self) -> dict[tuple[str, str], ReadResult]:
        """One round: every (node, topic) read in parallel; records and returns them."""
        keys = [(n, t) for n in sorted(self.nodes) for t in self.topics]
        results = await asyncio.gather(
            *(read_route(self.client, self.nodes[n], t, self.timeout_s) for n, t in keys)
        )
        round_ms = min(r.invoke_ms for r in results) if results else now_ms()
        answers = {}
        unexplained: list[tuple[str, str, ReadResult]] = []
        for (node, topic), result in zip(keys, results, strict=True):
            if result.outcome not in (OUTCOME_OK, OUTCOME_NOT_FOUND):
                continue
            answers[(node, topic)] = result
            self.recorder.node_state(round_ms, node, topic, result.value, result.version)
            if not self.observe(node, topic, result, infer=self.before_round is None):
                unexplained.append((node, topic, result))
        # A change the journals did not explain when the round began may have been
        # committed between the journal reads and the route reads: read them again
        # (twice, a moment apart: the node journals an entry just after applying it)
        # before anything is inferred.
        for _ in range(JOURNAL_RECHECKS):
            if not unexplained or self.before_round is None:
                break
            await asyncio.sleep(JOURNAL_RECHECK_S)
            await self.before_round()
            unexplained = [u for u in unexplained if not self.observe(*u, infer=False)]
        for node, topic, result in unexplained:
            if self.journal_read_since is None or self.journal_read_since(
                node, topic, result.complete_us
            ):
                self.observe(node, topic, result)
            else:
                # Not yet: the node's journal, unread since this answer, may report it.
                self.deferred += 1
        return answers

    def baseline(self, answers: dict[tuple[str, str], ReadResult], since_ms: int) -> None:
        """Record the agreed value of every topic as its initial write at recording start."""
        start = self.recorder.started_ms
        self.writes = self.composed = 0
        self.registers.clear()
        for topic in self.topics:
            found = [r for (n, t), r in answers.items() if t == topic]
            value = found[0].value if found else ""
            for node in self.nodes:
                if (node, topic) in answers:
                    self.last_seen[(node, topic)] = answers[(node, topic)]
            if value:
                self.registers.record(topic, since_ms * 1_000, start * 1_000, value)
                self.recorder.operation(
                    process="warmup",
                    kind=KIND_REGISTER,
                    node="",
                    topic=topic,
                    invoke_us=since_ms * 1_000,
                    complete_us=start * 1_000,
                    outcome=OUTCOME_OK,
                    value=value,
                    origin=ORIGIN_HARNESS,
                )

    def observe(self, node: str, topic: str, result: ReadResult, *, infer: bool = True) -> bool:
        """Take one answer of ``node`` for ``topic``; records a write when it is one.
        ``infer`` False: a change no recorded write explains is left for a later call
        (nothing is recorded or remembered of this answer) and False returned."""
        previous = self.last_seen.get((node, topic))
        # Asked first, so that any answer ends what the node's journal last reported.
        journaled = self.registers.journal_reached(node, topic, result.value)
        explained = (
            previous is None
            or previous.value == result.value
            or journaled
            or result.value
            in self.registers.candidates(topic, result.invoke_us, result.complete_us)
        )
        # Eventual mode: the node's own table as its acknowledgements and journaled
        # changes since its last answer left it (experiments.node_views).
        own = self.views is not None and result.value == self.views.value(node, topic)
        if not explained and not own and not infer:
            return False
        if self.views is not None:
            self.views.answered(node, topic, result.value, result.invoke_us)
        self.last_seen[(node, topic)] = result
        self.registers.note_read(topic, result.value, result.invoke_us)
        if explained or previous is None:
            return True
        if (
            own
            or self.registers.moved_on(topic, previous.value, result.value)
            or self.registers.shares_written(topic, result.value, node)
        ):
            # An eventual node at what its own recorded changes left it at, a lagging
            # node catching up part of the way, or recorded writes put together out of
            # order: a read for the checker to judge, not a write
            # (RegisterLog.moved_on, RegisterLog.shares_written).
            self.composed += 1
            return True
        self.writes += 1
        kind = change_kind(self.registers.latest(topic), result.value)
        self.registers.record(topic, previous.invoke_us, result.complete_us, result.value)
        self.recorder.operation(
            process=self.process(node),
            kind=kind,
            node=node,
            topic=topic,
            outcome=OUTCOME_OK,
            value=result.value,
            extra={"inferred": True},
            origin=ORIGIN_INFERRED,
            invoke_us=previous.invoke_us,
            complete_us=result.complete_us,
        )
        return True

    async def run(self, stop: asyncio.Event) -> None:
        """Sample every ``sample_ms`` until ``stop``."""
        while not stop.is_set():
            # Writes the system reports (raft expiries) first, so a change they explain
            # is never inferred.
            if self.before_round is not None:
                await self.before_round()
            await self.sample()
            await _wait(stop, self.sample_ms)

    async def close(self) -> None:
        """Close the probe's connections."""
        await self.client.close()
