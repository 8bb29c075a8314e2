"""The workload of an experiment, all asyncio in one process, over the real wire protocol.

- :class:`BrokerFleet`: simulated brokers. Each owns one :class:`RemotingClient`, so it keeps
  one connection per NameServer node open between rounds, the way a broker's channel stays
  up, and sends REGISTER_BROKER (a full RegisterBrokerBody, as a 5.x broker) to every node of
  its NameServer list every ``heartbeat_ms``, with ``heartbeatTimeoutMillis`` set to the
  compressed expiry. A hard kill stops the rounds and keeps the sockets open (no FIN reaches
  the nodes, as when a machine dies); a graceful stop sends UNREGISTER_BROKER and closes.
  The brokers store no messages: a send "succeeds" when the broker is alive in the model.
- :class:`Producer`: polls each topic's route from a random node every ``poll_ms``
  (``updateTopicRouteInfoFromNameServer``; a failed query keeps the old route), then sends
  through ``MQFaultStrategy`` with up to three attempts avoiding the last failed broker.
- :class:`ConsumerGroup`: every consumer polls on its own (random node) and rebalances every
  ``rebalance_ms`` with ``AllocateMessageQueueAveragely`` over its own route view.
- :class:`Prober`: every ``sample_ms`` asks every node for every watched topic
  (``node_states``) and turns each first-seen route change into a register write of the
  per-topic register (see docs/EXPERIMENTS.md "Running an experiment").

Why one module of ~670 lines: the four actors share one model of time, one
random generator per run and the history writer; apart, each would need the
others' internals to stay reproducible for a given seed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from localcluster.demo import DemoBroker, register_request, topic_table
from remoting.bodies import decode_topic_route_data, encode_topic_route_data
from remoting.client import RemotingClient, RemotingClientError
from remoting.codes import STANDARD_JSON_VERSION, RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import BodyDecodeError
from remoting.model import MASTER_ID, DataVersion, QueueData, TopicConfig, TopicRouteData
from spark_jobs.clients import (
    JavaRandom,
    MQFaultStrategy,
    ThreadLocalIndex,
    allocate_averagely,
    rebalance_allocate,
    route_from_value,
    topic_route_to_publish_info,
    topic_route_to_subscribe_info,
)
from spark_jobs.history import HistoryWriter
from spark_jobs.schema import (
    KIND_CONSUME_ALLOC,
    KIND_CREATE_TOPIC,
    KIND_DELETE_TOPIC,
    KIND_EXPIRE,
    KIND_REGISTER,
    KIND_ROUTE_READ,
    KIND_SEND,
    NO_MASTER_ADDR,
    NO_VERSION,
    OUTCOME_ERROR,
    OUTCOME_NOT_FOUND,
    OUTCOME_OK,
    OUTCOME_TIMEOUT,
    RouteItem,
    canonical_queues,
    canonical_route,
    route_brokers,
)

CLUSTER_NAME = "DefaultCluster"
BROKER_HOST = "127.0.0.1"
FIRST_BROKER_PORT = 30911
BROKER_PORT_STEP = 2
KIND_HEARTBEAT = "heartbeat"
"""Broker registrations: recorded for availability, not a register write (they do not
say which route value they produce); route changes come from :class:`Prober`."""
KIND_UNREGISTER_CALL = "unregister_call"
SEND_ATTEMPTS_MAX = 3
"""``retryTimesWhenSendFailed`` = 2: three attempts in the sync send loop."""
CONSISTENCY_LINEARIZABLE = "linearizable"
CONSISTENCY_LOCAL = "local"


def now_ms() -> int:
    """Wall-clock milliseconds, the time base of every history row (the nodes use it too)."""
    return time.time_ns() // 1_000_000


# ------------------------------------------------------------------------- recording


class Recorder:
    """Numbers operations and appends rows to the run's history writer.

    Rows are dropped until :meth:`start` (the warm-up is not part of the history) and
    after :meth:`stop` (tear-down noise is not either).
    """

    def __init__(self, writer: HistoryWriter) -> None:
        self.writer = writer
        self.recording = False
        self.started_ms = 0
        self._op_id = 0

    def start(self) -> int:
        """Begin recording; returns the start time."""
        self.recording = True
        self.started_ms = now_ms()
        return self.started_ms

    def stop(self) -> None:
        """Stop recording (rows offered afterwards are dropped)."""
        self.recording = False

    def operation(
        self,
        *,
        process: str,
        kind: str,
        node: str,
        topic: str,
        invoke_ms: int,
        complete_ms: int,
        outcome: str,
        value: str = "",
        version: int = NO_VERSION,
        broker: str = "",
        extra: dict[str, Any] | None = None,
        force: bool = False,
    ) -> int:
        """Append one client operation; returns its op id (0 when not recording)."""
        if not (self.recording or force):
            return 0
        self._op_id += 1
        self.writer.operation(
            (
                self._op_id,
                process,
                kind,
                node,
                topic,
                invoke_ms,
                complete_ms,
                outcome,
                value,
                version,
                broker,
                json.dumps(extra or {}, sort_keys=True),
            )
        )
        return self._op_id

    def truth(self, ts_ms: int, topic: str, broker: str, kind: str, value: str) -> None:
        """Append one ground-truth write (what the route should be from ``ts_ms`` on)."""
        self.writer.write((ts_ms, topic, broker, kind, value, NO_VERSION))

    def fault(
        self,
        start_ms: int,
        end_ms: int,
        kind: str,
        target: str,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Append one fault window (``end_ms`` -1: never healed)."""
        self.writer.fault(
            (start_ms, end_ms, kind, target, json.dumps(detail or {}, sort_keys=True))
        )

    def node_state(self, ts_ms: int, node: str, topic: str, value: str, version: int) -> None:
        """Append one sample of a node's route for a topic."""
        if self.recording:
            self.writer.node_state((ts_ms, node, topic, value, version))


# ---------------------------------------------------------------------------- routes


def route_value(route: TopicRouteData) -> str:
    """The canonical value (spark_jobs.schema) of a decoded GET_ROUTEINFO_BY_TOPIC body."""
    brokers = {b.broker_name: b for b in route.broker_datas}
    items = []
    for queue in route.queue_datas:
        broker = brokers.get(queue.broker_name)
        master = None if broker is None else broker.broker_addrs.get(MASTER_ID)
        items.append(
            RouteItem(
                queue.broker_name,
                master or NO_MASTER_ADDR,
                queue.write_queue_nums,
                queue.read_queue_nums,
                queue.perm,
            )
        )
    return canonical_route(items)


@dataclass(frozen=True, slots=True)
class ReadResult:
    """One GET_ROUTEINFO_BY_TOPIC answer as the history records it."""

    outcome: str
    value: str
    invoke_ms: int
    complete_ms: int


async def read_route(
    client: RemotingClient,
    addr: str,
    topic: str,
    timeout_s: float,
    consistency: str = CONSISTENCY_LOCAL,
) -> ReadResult:
    """Ask ``addr`` for the route of ``topic``; never raises for network trouble."""
    ext = {"topic": topic}
    if consistency == CONSISTENCY_LINEARIZABLE:
        ext["consistency"] = CONSISTENCY_LINEARIZABLE
    request = RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, ext, version=STANDARD_JSON_VERSION
    )
    invoke = now_ms()
    try:
        answer = await client.invoke(addr, request, timeout_s)
    except RemotingClientError as exc:
        outcome = OUTCOME_TIMEOUT if "no answer" in str(exc) else OUTCOME_ERROR
        return ReadResult(outcome, "", invoke, now_ms())
    done = now_ms()
    if answer.code == ResponseCode.TOPIC_NOT_EXIST:
        return ReadResult(OUTCOME_NOT_FOUND, "", invoke, done)
    if answer.code != ResponseCode.SUCCESS or not answer.body:
        return ReadResult(OUTCOME_ERROR, "", invoke, done)
    try:
        value = route_value(decode_topic_route_data(answer.body))
    except BodyDecodeError:
        return ReadResult(OUTCOME_ERROR, "", invoke, done)
    return ReadResult(OUTCOME_OK, value, invoke, done)


# ---------------------------------------------------------------------------- brokers


@dataclass(slots=True)
class SimBroker:
    """One simulated broker master: its name, address, topics and NameServer list."""

    name: str
    addr: str
    topics: dict[str, TopicConfig]
    namesrv: list[str]
    data_version: DataVersion
    alive: bool = True
    heartbeating: bool = True
    client: RemotingClient = field(default_factory=RemotingClient)

    def demo(self) -> DemoBroker:
        """The header view :func:`localcluster.demo.register_request` needs."""
        return DemoBroker(CLUSTER_NAME, self.name, MASTER_ID, self.addr, self.addr)

    def bump_version(self) -> None:
        """A new topic-config DataVersion, as TopicConfigManager does on every change."""
        self.data_version = DataVersion(timestamp=now_ms(), counter=self.data_version.counter + 1)

    def route_item(self, topic: str) -> RouteItem:
        """This broker's share of ``topic``'s canonical route."""
        config = self.topics[topic]
        return RouteItem(
            self.name, self.addr, config.write_queue_nums, config.read_queue_nums, config.perm
        )


def make_brokers(
    count: int,
    topics: Sequence[str],
    brokers_per_topic: int,
    queues: int,
    rng: random.Random,
    node_ids: Sequence[str],
) -> list[SimBroker]:
    """``count`` brokers; each topic lands on ``brokers_per_topic`` of them, chosen by ``rng``."""
    names = [f"broker-{i:03d}" for i in range(count)]
    owned: dict[str, list[str]] = {name: [] for name in names}
    for topic in topics:
        for name in rng.sample(names, min(brokers_per_topic, count)):
            owned[name].append(topic)
    version = DataVersion(timestamp=now_ms(), counter=1)
    # Real brokers always announce their system topics too (the broker-name and cluster
    # topics); without them a one-topic table looks like an incremental registration of
    # an unknown broker, which the NameServer refuses
    # (``RouteInfoManager.registerBroker`` drops a first one-topic registration).
    return [
        SimBroker(
            name,
            f"{BROKER_HOST}:{FIRST_BROKER_PORT + i * BROKER_PORT_STEP}",
            topic_table([name, CLUSTER_NAME, *owned[name]], queues),
            list(node_ids),
            version,
        )
        for i, name in enumerate(names)
    ]


Dialer = Callable[[str, str], str]
"""(broker name, node id) -> the address that broker dials for that node."""


class BrokerFleet:
    """Simulated brokers registering with the nodes over the wire, one task per broker."""

    def __init__(
        self,
        brokers: Sequence[SimBroker],
        dial: Dialer,
        recorder: Recorder,
        *,
        heartbeat_ms: int,
        expiry_ms: int,
        timeout_s: float,
        rng: random.Random,
    ) -> None:
        self.brokers = {b.name: b for b in brokers}
        self.dial = dial
        self.recorder = recorder
        self.heartbeat_ms = heartbeat_ms
        self.expiry_ms = expiry_ms
        self.timeout_s = timeout_s
        self.rng = rng
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._retired: list[RemotingClient] = []

    # -- what the model knows -----------------------------------------------------

    def accepts(self, broker: str) -> bool:
        """True when a send to ``broker`` would be stored (the broker process is alive)."""
        entry = self.brokers.get(broker)
        return entry is not None and entry.alive

    def truth(self, topic: str) -> str:
        """The route ``topic`` should have: every alive broker that holds it."""
        return canonical_route(
            b.route_item(topic) for b in self.brokers.values() if b.alive and topic in b.topics
        )

    # -- registration -------------------------------------------------------------

    async def register(self, broker: SimBroker, node_ids: Iterable[str] | None = None) -> int:
        """One registration round of ``broker`` (all its nodes in parallel); successes."""
        targets = list(broker.namesrv if node_ids is None else node_ids)
        results = await asyncio.gather(*(self._register_one(broker, n) for n in targets))
        return sum(results)

    async def _register_one(self, broker: SimBroker, node: str) -> int:
        request = register_request(
            broker.demo(), broker.topics, broker.data_version, heartbeat_timeout_ms=self.expiry_ms
        )
        invoke = now_ms()
        try:
            answer = await broker.client.invoke(
                self.dial(broker.name, node), request, self.timeout_s
            )
            outcome = OUTCOME_OK if answer.code == ResponseCode.SUCCESS else OUTCOME_ERROR
            remark = answer.remark or ""
        except RemotingClientError as exc:
            outcome = OUTCOME_TIMEOUT if "no answer" in str(exc) else OUTCOME_ERROR
            remark = str(exc)
        self.recorder.operation(
            process=broker.name,
            kind=KIND_HEARTBEAT,
            node=node,
            topic="",
            invoke_ms=invoke,
            complete_ms=now_ms(),
            outcome=outcome,
            broker=broker.name,
            extra={"remark": remark[:200]} if outcome != OUTCOME_OK else None,
        )
        return int(outcome == OUTCOME_OK)

    async def register_all(self) -> int:
        """Register every heart-beating broker once with all its nodes; successes."""
        live = [b for b in self.brokers.values() if b.heartbeating]
        return sum(await asyncio.gather(*(self.register(b) for b in live)))

    def start(self) -> None:
        """Start one heartbeat task per broker, each at a random phase of the period."""
        for broker in self.brokers.values():
            self._start_task(broker)

    def _start_task(self, broker: SimBroker) -> None:
        old = self._tasks.get(broker.name)
        if old is not None and not old.done():
            return
        self._tasks[broker.name] = asyncio.get_running_loop().create_task(self._beat(broker))

    async def _beat(self, broker: SimBroker) -> None:
        await asyncio.sleep(self.rng.random() * self.heartbeat_ms / 1000)
        while broker.heartbeating:
            await self.register(broker)
            await asyncio.sleep(self.heartbeat_ms / 1000)

    # -- faults on brokers ----------------------------------------------------------

    def kill_hard(self, name: str) -> None:
        """Like ``kill -9`` of the machine: no more rounds, sockets stay open (no FIN)."""
        broker = self.brokers[name]
        broker.alive = False
        broker.heartbeating = False
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()
        # Keep the client (and so its connections) open until the fleet closes.
        self._retired.append(broker.client)
        broker.client = RemotingClient()

    async def stop_graceful(self, name: str) -> None:
        """Like a broker shutdown: UNREGISTER_BROKER to every node, then close the sockets."""
        broker = self.brokers[name]
        broker.alive = False
        broker.heartbeating = False
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()
        ext = {
            "brokerAddr": broker.addr,
            "clusterName": CLUSTER_NAME,
            "brokerName": broker.name,
            "brokerId": str(MASTER_ID),
        }
        await asyncio.gather(*(self._unregister_one(broker, n, ext) for n in broker.namesrv))
        await broker.client.close()
        broker.client = RemotingClient()

    async def _unregister_one(self, broker: SimBroker, node: str, ext: dict[str, str]) -> None:
        request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, ext)
        invoke = now_ms()
        try:
            answer = await broker.client.invoke(
                self.dial(broker.name, node), request, self.timeout_s
            )
            outcome = OUTCOME_OK if answer.code == ResponseCode.SUCCESS else OUTCOME_ERROR
        except RemotingClientError:
            outcome = OUTCOME_ERROR
        self.recorder.operation(
            process=broker.name,
            kind=KIND_UNREGISTER_CALL,
            node=node,
            topic="",
            invoke_ms=invoke,
            complete_ms=now_ms(),
            outcome=outcome,
            broker=broker.name,
        )

    def start_broker(self, name: str) -> None:
        """A stopped broker starts again: a new topic-config version, alive, heartbeating."""
        broker = self.brokers[name]
        broker.alive = broker.heartbeating = True
        broker.bump_version()
        self._start_task(broker)

    def add(self, broker: SimBroker) -> None:
        """Add a broker to the fleet and start its heartbeat (a broker joining)."""
        self.brokers[broker.name] = broker
        self._start_task(broker)

    async def close(self) -> None:
        """Cancel every heartbeat and close every connection, killed brokers' included."""
        for task in self._tasks.values():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._tasks.clear()
        clients = [b.client for b in self.brokers.values()] + self._retired
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)


async def register_topic_on(
    client: RemotingClient, addr: str, topic: str, broker: SimBroker, timeout_s: float
) -> bool:
    """REGISTER_TOPIC_IN_NAMESRV (217) of ``topic`` on ``broker`` to one node only."""
    config = broker.topics[topic]
    route = TopicRouteData(
        queue_datas=[
            QueueData(broker.name, config.read_queue_nums, config.write_queue_nums, config.perm)
        ]
    )
    request = RemotingCommand.request(
        RequestCode.REGISTER_TOPIC_IN_NAMESRV,
        {"topic": topic},
        encode_topic_route_data(route, standard=True),
    )
    try:
        answer = await client.invoke(addr, request, timeout_s)
    except RemotingClientError:
        return False
    return answer.code == ResponseCode.SUCCESS


async def delete_topic_on(client: RemotingClient, addr: str, topic: str, timeout_s: float) -> bool:
    """DELETE_TOPIC_IN_NAMESRV (216) of ``topic`` on one node only."""
    request = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})
    try:
        answer = await client.invoke(addr, request, timeout_s)
    except RemotingClientError:
        return False
    return answer.code == ResponseCode.SUCCESS


# ---------------------------------------------------------------------------- clients


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
            self.recorder.operation(
                process=self.name,
                kind=KIND_ROUTE_READ,
                node=node,
                topic=topic,
                invoke_ms=result.invoke_ms,
                complete_ms=result.complete_ms,
                outcome=result.outcome,
                value=result.value,
            )
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
                    invoke_ms=start,
                    complete_ms=start,
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
                invoke_ms=start,
                complete_ms=done,
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
            invoke_ms=stamp,
            complete_ms=stamp,
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
    """Samples every node's route of every watched topic; infers the register's writes.

    A node's route for a topic changes only through a write applied there (a
    registration, an expiry, an unregister, a delete). The first time any node shows a
    value that differs from the latest inferred write, that is a new write: it completes
    when the probe that saw it completes, and it may have taken effect any time after the
    previous write of the topic completed (a deliberately loose window, so a reported
    violation is never an artefact of the window).
    """

    def __init__(
        self,
        nodes: dict[str, str],
        topics: Sequence[str],
        recorder: Recorder,
        *,
        sample_ms: int,
        timeout_s: float,
        process: Callable[[str], str],
    ) -> None:
        self.nodes = dict(nodes)
        self.topics = list(topics)
        self.recorder = recorder
        self.sample_ms = sample_ms
        self.timeout_s = timeout_s
        self.process = process
        self.client = RemotingClient()
        self.latest: dict[str, str] = {}
        self.latest_complete_ms: dict[str, int] = {}
        self.last_seen: dict[tuple[str, str], str] = {}
        self.writes = 0

    async def sample(self) -> dict[tuple[str, str], ReadResult]:
        """One round: every (node, topic) read in parallel; records and returns them."""
        keys = [(n, t) for n in sorted(self.nodes) for t in self.topics]
        results = await asyncio.gather(
            *(read_route(self.client, self.nodes[n], t, self.timeout_s) for n, t in keys)
        )
        round_ms = min(r.invoke_ms for r in results) if results else now_ms()
        answers = {}
        for (node, topic), result in zip(keys, results, strict=True):
            if result.outcome not in (OUTCOME_OK, OUTCOME_NOT_FOUND):
                continue
            answers[(node, topic)] = result
            self.recorder.node_state(round_ms, node, topic, result.value, NO_VERSION)
            self._observe(node, topic, result)
        return answers

    def baseline(self, answers: dict[tuple[str, str], ReadResult], since_ms: int) -> None:
        """Record the agreed value of every topic as its initial write at recording start."""
        start = self.recorder.started_ms
        self.writes = 0
        for topic in self.topics:
            values = [r.value for (n, t), r in answers.items() if t == topic]
            value = values[0] if values else ""
            self.latest[topic] = value
            self.latest_complete_ms[topic] = start
            for node in self.nodes:
                self.last_seen[(node, topic)] = value
            if value:
                self.recorder.operation(
                    process="warmup",
                    kind=KIND_REGISTER,
                    node="",
                    topic=topic,
                    invoke_ms=since_ms,
                    complete_ms=start,
                    outcome=OUTCOME_OK,
                    value=value,
                )

    def _observe(self, node: str, topic: str, result: ReadResult) -> None:
        previous = self.last_seen.get((node, topic))
        self.last_seen[(node, topic)] = result.value
        if previous is None or previous == result.value:
            return
        latest = self.latest.get(topic, "")
        if result.value == latest:
            return
        self.writes += 1
        # The previous write's probe may have completed after this one started (probes of
        # a round run in parallel): the window then opens at this probe's start, so a
        # write never completes before it is invoked.
        since = self.latest_complete_ms.get(topic, self.recorder.started_ms)
        self.recorder.operation(
            process=self.process(node),
            kind=change_kind(latest, result.value),
            node=node,
            topic=topic,
            invoke_ms=min(since, result.invoke_ms),
            complete_ms=result.complete_ms,
            outcome=OUTCOME_OK,
            value=result.value,
            extra={"inferred": True},
        )
        self.latest[topic] = result.value
        self.latest_complete_ms[topic] = result.complete_ms

    async def run(self, stop: asyncio.Event) -> None:
        """Sample every ``sample_ms`` until ``stop``."""
        while not stop.is_set():
            await self.sample()
            await _wait(stop, self.sample_ms)

    async def close(self) -> None:
        """Close the probe's connections."""
        await self.client.close()
