"""The workload of an experiment, all asyncio in one process, over the real wire protocol.

- :class:`BrokerFleet`: simulated brokers. Each owns one :class:`RemotingClient`, so it keeps
  one connection per NameServer node open between rounds, the way a broker's channel stays
  up, and sends REGISTER_BROKER (a full RegisterBrokerBody, as a 5.x broker) to every node of
  its NameServer list every ``heartbeat_ms``, with ``heartbeatTimeoutMillis`` set to the
  compressed expiry. A hard kill stops the rounds and keeps the sockets open (no FIN reaches
  the nodes, as when a machine dies); a graceful stop sends UNREGISTER_BROKER and closes.
  The brokers store no messages: a send "succeeds" when the broker is alive in the model.

The clients that read routes from the nodes (producers, consumer groups, the prober) are in
:mod:`experiments.traffic`; they record through this module's :class:`Recorder`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from experiment_history.runs import HistoryWriter
from experiment_history.schema import (
    KIND_REGISTER,
    KIND_ROUTE_READ,
    NO_MASTER_ADDR,
    NO_VERSION,
    ORIGIN_CLIENT,
    OUTCOME_ERROR,
    OUTCOME_NOT_FOUND,
    OUTCOME_OK,
    OUTCOME_TIMEOUT,
    RouteItem,
    canonical_route,
)
from experiment_history.superseding import TIME_MAX_US
from experiments.node_views import NodeViews
from localcluster.demo import DemoBroker, register_request, topic_table
from remoting.bodies import decode_topic_route_data, encode_topic_route_data
from remoting.client import RemotingClient, RemotingClientError
from remoting.codes import STANDARD_JSON_VERSION, RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.consistency import (
    CONSISTENCY_FIELD,
    CONSISTENCY_LINEARIZABLE,
    CONSISTENCY_LOCAL,
    ROUTES_VERSION_FIELD,
)
from remoting.errors import BodyDecodeError
from remoting.headers import header_int
from remoting.model import MASTER_ID, DataVersion, QueueData, TopicConfig, TopicRouteData
from remoting.register_request import APPLIED_VERSION_FIELD, RAFT_LOG_INDEX_FIELD

CLUSTER_NAME = "DefaultCluster"
BROKER_HOST = "127.0.0.1"
FIRST_BROKER_PORT = 30911
BROKER_PORT_STEP = 2
KIND_HEARTBEAT = "heartbeat"
"""Each node's answer to a broker's periodic registration, recorded for availability.
A round that changes a register is also a ``register`` write (:attr:`BrokerFleet.
record_round`); the other route changes come from :class:`~experiments.traffic.Prober`."""


class Ack(NamedTuple):
    """One node's acknowledgement of a write: the node, when its answer came (µs on the
    harness's clock) and, in raft mode, where the command that applied the write sits
    in the log: the entry's index and the table version the command left (both 0: the
    answer named none, e.g. it was answered from the applied state)."""

    node: str
    at_us: int
    log_index: int = 0
    applied_version: int = 0


def log_position(acks: Sequence[Ack]) -> int:
    """Where a raft write sits in the log order: the table version its command left,
    as its acknowledgements name it (the first, when copies of it were proposed twice;
    a version, not the entry's index, because one entry can carry several commands);
    0 when none names one."""
    return min((a.applied_version for a in acks if a.applied_version), default=0)


def log_index(acks: Sequence[Ack]) -> int:
    """The index of the log entry that carried a raft write (0: none named)."""
    return min((a.log_index for a in acks if a.log_index), default=0)


class RoundRecorder(Protocol):
    """Records one registration round of a broker: (broker, kind, the round, origin) ->
    ``ExperimentContext.broker_write``."""

    def __call__(
        self,
        broker: str,
        kind: str,
        call: Callable[[], Awaitable[list[Ack]]],
        *,
        origin: str = ...,
    ) -> Awaitable[object]: ...


KIND_UNREGISTER_CALL = "unregister_call"


_WALL_AT_START_NS = time.time_ns()
_MONOTONIC_AT_START_NS = time.monotonic_ns()


def answer_log_place(answer: RemotingCommand) -> tuple[int, int]:
    """Where a raft node's REGISTER_BROKER or UNREGISTER_BROKER answer says its command
    sits in the log: (entry index, table version after it); (0, 0): nowhere named."""
    return (
        header_int(answer, RAFT_LOG_INDEX_FIELD) or 0,
        header_int(answer, APPLIED_VERSION_FIELD) or 0,
    )


def now_us() -> int:
    """Microseconds on the harness's one clock, the time base of every history row: the
    monotonic clock (it never steps back, so an answer is never stamped before its
    call), anchored to the wall clock when the harness started (so it stays comparable
    with the nodes' own wall-clock stamps)."""
    return (_WALL_AT_START_NS + time.monotonic_ns() - _MONOTONIC_AT_START_NS) // 1_000


def now_ms() -> int:
    """:func:`now_us` in milliseconds."""
    return now_us() // 1_000


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
        self._span_us: tuple[int, int] | None = None

    def start(self) -> int:
        """Begin recording; returns the start time."""
        self.recording = True
        self.started_ms = now_ms()
        self._span_us = (self.started_ms * 1_000, TIME_MAX_US)
        return self.started_ms

    def stop(self) -> None:
        """Stop recording (rows offered afterwards are dropped, unless forced:
        :meth:`sent_while_recording`)."""
        self.recording = False
        if self._span_us is not None:
            self._span_us = (self._span_us[0], now_us())

    def sent_while_recording(self, invoke_us: int) -> bool:
        """True when an operation invoked at ``invoke_us`` was sent while recording: a
        write on its way when the recording stops is still part of the history (reads
        recorded before the stop may already show it)."""
        return self._span_us is not None and self._span_us[0] <= invoke_us < self._span_us[1]

    def route_read(self, process: str, node: str, topic: str, result: ReadResult) -> int:
        """Append one route read of ``topic`` from ``node`` (:func:`read_route`'s answer)."""
        return self.operation(
            process=process,
            kind=KIND_ROUTE_READ,
            node=node,
            topic=topic,
            outcome=result.outcome,
            value=result.value,
            version=result.version,
            invoke_us=result.invoke_us,
            complete_us=result.complete_us,
        )

    def operation(
        self,
        *,
        process: str,
        kind: str,
        node: str,
        topic: str,
        invoke_us: int,
        complete_us: int,
        outcome: str,
        value: str = "",
        version: int = NO_VERSION,
        broker: str = "",
        extra: dict[str, Any] | None = None,
        origin: str | None = None,
        force: bool = False,
    ) -> int:
        """Append one client operation (times in microseconds on :func:`now_us`'s clock;
        the millisecond columns follow from them); returns its op id (0 when not
        recording). ``origin``: where a write came from (``experiment_history.schema``
        ``ORIGIN_*``); None for every other operation."""
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
                invoke_us // 1_000,
                complete_us // 1_000,
                outcome,
                value,
                version,
                broker,
                json.dumps(extra or {}, sort_keys=True),
                invoke_us,
                complete_us,
                origin,
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
    """The canonical value (experiment_history.schema) of a decoded GET_ROUTEINFO_BY_TOPIC body."""
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
    invoke_us: int
    complete_us: int
    version: int = NO_VERSION
    """The answering node's routes version (ext ``routesVersion``), when it answered."""

    @property
    def invoke_ms(self) -> int:
        """The call time in milliseconds."""
        return self.invoke_us // 1_000

    @property
    def complete_ms(self) -> int:
        """The answer time in milliseconds."""
        return self.complete_us // 1_000


def answered_version(answer: RemotingCommand) -> int:
    """Ext ``routesVersion`` of a route answer; :data:`NO_VERSION` when absent or garbled
    (a node of an older release)."""
    text = (answer.ext_fields or {}).get(ROUTES_VERSION_FIELD, "")
    return int(text) if text.isdigit() else NO_VERSION


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
        ext[CONSISTENCY_FIELD] = CONSISTENCY_LINEARIZABLE
    request = RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, ext, version=STANDARD_JSON_VERSION
    )
    invoke = now_us()
    try:
        answer = await client.invoke(addr, request, timeout_s)
    except RemotingClientError as exc:
        outcome = OUTCOME_TIMEOUT if "no answer" in str(exc) else OUTCOME_ERROR
        return ReadResult(outcome, "", invoke, now_us())
    done = now_us()
    if answer.code == ResponseCode.TOPIC_NOT_EXIST:
        return ReadResult(OUTCOME_NOT_FOUND, "", invoke, done, answered_version(answer))
    if answer.code != ResponseCode.SUCCESS or not answer.body:
        return ReadResult(OUTCOME_ERROR, "", invoke, done)
    try:
        value = route_value(decode_topic_route_data(answer.body))
    except BodyDecodeError:
        return ReadResult(OUTCOME_ERROR, "", invoke, done)
    return ReadResult(OUTCOME_OK, value, invoke, done, answered_version(answer))


# ---------------------------------------------------------------------------- brokers

FRESH_SHARE_SPAN = 32
"""Distinct write (and read) queue counts a broker's fresh shares walk through
(:meth:`SimBroker.fresh_share`)."""


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
    share_round: int = 0
    """Fresh shares announced so far (:meth:`fresh_share`)."""
    base_queues: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Each topic's (write, read) queue counts before the first fresh share."""

    def demo(self) -> DemoBroker:
        """The header view :func:`localcluster.demo.register_request` needs."""
        return DemoBroker(CLUSTER_NAME, self.name, MASTER_ID, self.addr, self.addr)

    def bump_version(self) -> None:
        """A new topic-config DataVersion, as TopicConfigManager does on every change."""
        self.data_version = DataVersion(timestamp=now_ms(), counter=self.data_version.counter + 1)

    def fresh_share(self) -> None:
        """A share of every topic no earlier round of this broker announced, and a new
        DataVersion: the next (write, read) queue counts of a walk over the
        :data:`FRESH_SHARE_SPAN` x :data:`FRESH_SHARE_SPAN` grid above the topic's first
        counts (write steps by one each round, read by one each time write wraps). The
        counts stay within the first ones plus ``FRESH_SHARE_SPAN`` - 1 (35 queues from 4),
        so the routes, the clients' queue lists and the wire bodies stay small however
        long the run; the walk comes back to a share it had only after
        ``FRESH_SHARE_SPAN`` ** 2 rounds (1,024: 17 minutes of 1 s rounds), and from then
        on ``unique_write_values`` would say so. The topic table is changed in place."""
        self.share_round += 1
        step = self.share_round % (FRESH_SHARE_SPAN * FRESH_SHARE_SPAN)
        for name, config in list(self.topics.items()):
            write, read = self.base_queues.setdefault(
                name, (config.write_queue_nums, config.read_queue_nums)
            )
            self.topics[name] = dataclasses.replace(
                config,
                write_queue_nums=write + step % FRESH_SHARE_SPAN,
                read_queue_nums=read + step // FRESH_SHARE_SPAN,
            )
        self.bump_version()

    def next_incarnation(self, *, fresh: bool = False) -> None:
        """The broker stopped: it starts again with one more read and write queue in
        every topic, so the route share each start brings back differs from every earlier
        one of this broker, and the registration that brings it back writes a route no
        earlier write of the topic had (a read of it names that one write;
        ``spark_jobs.register_zones`` decides unique-value topics without a cap). Called
        when the broker stops, before any write of its next start is predicted (a stopped
        broker's share leaves the routes by name, whatever its queues). The topic table
        is changed in place: whoever holds it sees the new queues. ``fresh``: the broker
        announces a fresh share every round (:meth:`fresh_share`): the next one."""
        if fresh:
            self.fresh_share()
            return
        for name, config in list(self.topics.items()):
            self.topics[name] = dataclasses.replace(
                config,
                read_queue_nums=config.read_queue_nums + 1,
                write_queue_nums=config.write_queue_nums + 1,
            )

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
        self.views = NodeViews()
        """Each node's table as the acknowledgements left it (eventual mode's expiries
        are valued on it, ``NodeChanges``)."""
        self.fresh_shares = False
        """While set, every recorded registration round announces a share no earlier round
        of its broker did (:meth:`SimBroker.fresh_share`): a share a scan removed never
        comes back with an earlier value, and every round is a write with a value of its
        own (the nemesis)."""
        self.record_round: RoundRecorder | None = None
        """While set (the recording phase), every periodic registration round goes through
        it (``ExperimentContext.broker_write``), so one that puts a broker's share back
        in a register, after an expiry of a live broker, is an acknowledged write."""

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
        return len(await self.register_acks(broker, node_ids))

    async def register_acks(
        self, broker: SimBroker, node_ids: Iterable[str] | None = None
    ) -> list[Ack]:
        """One registration round of ``broker``: (node, ack µs) of every node that
        acknowledged it."""
        targets = list(broker.namesrv if node_ids is None else node_ids)
        acks = await asyncio.gather(*(self._register_at(broker, n) for n in targets))
        return [ack for ack in acks if ack is not None]

    async def _register_at(self, broker: SimBroker, node: str) -> Ack | None:
        """One REGISTER_BROKER to ``node``, recorded; its acknowledgement when it succeeded."""
        request = register_request(
            broker.demo(), broker.topics, broker.data_version, heartbeat_timeout_ms=self.expiry_ms
        )
        shares = {topic: broker.route_item(topic) for topic in broker.topics}
        invoke = now_us()
        place = (0, 0)
        try:
            answer = await broker.client.invoke(
                self.dial(broker.name, node), request, self.timeout_s
            )
            outcome = OUTCOME_OK if answer.code == ResponseCode.SUCCESS else OUTCOME_ERROR
            remark = answer.remark or ""
            place = answer_log_place(answer)
        except RemotingClientError as exc:
            outcome = OUTCOME_TIMEOUT if "no answer" in str(exc) else OUTCOME_ERROR
            remark = str(exc)
        done = now_us()
        self.recorder.operation(
            process=broker.name,
            kind=KIND_HEARTBEAT,
            node=node,
            topic="",
            outcome=outcome,
            broker=broker.name,
            extra={"remark": remark[:200]} if outcome != OUTCOME_OK else None,
            invoke_us=invoke,
            complete_us=done,
        )
        if outcome != OUTCOME_OK:
            return None
        self.views.acked(node, broker.name, shares, done)
        return Ack(node, done, *place)

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
            record = self.record_round
            if record is None:
                await self.register(broker)
            else:
                if self.fresh_shares:
                    broker.fresh_share()
                await record(
                    broker.name,
                    KIND_REGISTER,
                    functools.partial(self.register_acks, broker),
                    origin=ORIGIN_CLIENT,
                )
            await asyncio.sleep(self.heartbeat_ms / 1000)

    # -- faults on brokers ----------------------------------------------------------

    def kill_hard(self, name: str) -> None:
        """Like ``kill -9`` of the machine: no more rounds, sockets stay open (no FIN)."""
        broker = self.brokers[name]
        broker.alive = False
        broker.heartbeating = False
        broker.next_incarnation(fresh=self.fresh_shares)
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()
        # Keep the client (and so its connections) open until the fleet closes.
        self._retired.append(broker.client)
        broker.client = RemotingClient()

    async def stop_graceful(self, name: str) -> list[Ack]:
        """Like a broker shutdown: UNREGISTER_BROKER to every node, then close the sockets.
        Returns (node, ack µs) of every node that acknowledged."""
        broker = self.brokers[name]
        broker.alive = False
        broker.heartbeating = False
        broker.next_incarnation(fresh=self.fresh_shares)
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()
        ext = {
            "brokerAddr": broker.addr,
            "clusterName": CLUSTER_NAME,
            "brokerName": broker.name,
            "brokerId": str(MASTER_ID),
        }
        nodes = list(broker.namesrv)
        acks = await asyncio.gather(*(self._unregister_one(broker, n, ext) for n in nodes))
        await broker.client.close()
        broker.client = RemotingClient()
        return [ack for ack in acks if ack is not None]

    async def _unregister_one(
        self, broker: SimBroker, node: str, ext: dict[str, str]
    ) -> Ack | None:
        request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, ext)
        gone: dict[str, RouteItem | None] = dict.fromkeys(broker.topics)
        invoke = now_us()
        place = (0, 0)
        try:
            answer = await broker.client.invoke(
                self.dial(broker.name, node), request, self.timeout_s
            )
            outcome = OUTCOME_OK if answer.code == ResponseCode.SUCCESS else OUTCOME_ERROR
            place = answer_log_place(answer)
        except RemotingClientError:
            outcome = OUTCOME_ERROR
        done = now_us()
        self.recorder.operation(
            process=broker.name,
            kind=KIND_UNREGISTER_CALL,
            node=node,
            topic="",
            outcome=outcome,
            broker=broker.name,
            invoke_us=invoke,
            complete_us=done,
        )
        if outcome != OUTCOME_OK:
            return None
        self.views.acked(node, broker.name, gone, done)
        return Ack(node, done, *place)

    def start_broker(self, name: str) -> None:
        """A stopped broker starts again: a new topic-config version, alive, heartbeating."""
        broker = self.brokers[name]
        broker.alive = broker.heartbeating = True
        broker.bump_version()
        self._start_task(broker)

    async def start_acknowledged(self, name: str) -> list[Ack]:
        """:meth:`start_broker`, but its first registration round goes out now and is
        awaited: (node, ack µs) of every node that acknowledged it. The heartbeat then
        goes on every period."""
        broker = self.brokers[name]
        broker.alive = broker.heartbeating = True
        broker.bump_version()
        acks = await self.register_acks(broker)
        self._start_task(broker)
        return acks

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
