"""Models of the RocketMQ client behaviour that turns a route view into traffic.

Exact re-statements (by name, of RocketMQ's client classes) of: topicRouteData2TopicPublishInfo
and ...SubscribeInfo, ThreadLocalIndex, MQFaultStrategy (5.x) with LatencyFaultTolerance,
and the AllocateMessageQueue strategies (Averagely, AveragelyByCircle, ConsistentHash,
ByConfig, ByMachineRoom, MachineRoomNearby). Time is always an argument (``now_ms``) and
randomness is a seeded ``JavaRandom``, so the simulator stays deterministic.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from experiment_history.schema import NO_MASTER_ADDR, RouteItem, parse_route
from remoting.model import (
    MASTER_ID,
    BrokerData,
    QueueData,
    TopicRouteData,
    is_readable,
    is_writeable,
)

INT_MASK = 0xFFFFFFFF
POSITIVE_MASK = 0x7FFFFFFF
JAVA_RANDOM_MULTIPLIER = 0x5DEECE66D
JAVA_RANDOM_MASK = (1 << 48) - 1
CONSISTENT_HASH_VIRTUAL_NODES = 10
LATENCY_MAX_MS = (50, 100, 550, 1800, 3000, 5000, 15000)
NOT_AVAILABLE_DURATION_MS = (0, 0, 2000, 5000, 6000, 10000, 30000)
ISOLATION_LATENCY_MS = 10000
SEND_ATTEMPTS_MAX = 3
"""``retryTimesWhenSendFailed`` = 2: three attempts in DefaultMQProducer's sync send loop."""


def _to_int32(value: int) -> int:
    """Wrap to a Java ``int``."""
    value &= INT_MASK
    return value - (1 << 32) if value & 0x80000000 else value


class JavaRandom:
    """``java.util.Random``'s 48-bit LCG, so seeded choices match the JVM's."""

    def __init__(self, seed: int) -> None:
        self._seed = (seed ^ JAVA_RANDOM_MULTIPLIER) & JAVA_RANDOM_MASK

    def _next(self, bits: int) -> int:
        self._seed = (self._seed * JAVA_RANDOM_MULTIPLIER + 0xB) & JAVA_RANDOM_MASK
        return _to_int32(self._seed >> (48 - bits))

    def next_int(self, bound: int | None = None) -> int:
        """``nextInt()`` or ``nextInt(bound)`` with the JVM's rejection loop."""
        if bound is None:
            return self._next(32)
        if bound <= 0:
            raise ValueError("bound must be positive")
        if bound & -bound == bound:
            return (bound * self._next(31)) >> 31
        while True:
            bits = self._next(31)
            value = bits % bound
            if bits - value + (bound - 1) < (1 << 31):
                return value


@dataclass(frozen=True, order=True, slots=True)
class MessageQueue:
    """``MessageQueue``; ordering is topic, brokerName, queueId as RebalanceImpl sorts."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return (
            f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, "
            f"queueId={self.queue_id}]"
        )


# ----------------------------------------------------------------------------- routes


def route_from_items(items: Sequence[RouteItem], cluster: str = "DefaultCluster") -> TopicRouteData:
    """A ``TopicRouteData`` equivalent to a canonical route value's items."""
    queues = [QueueData(i.broker, i.read_queues, i.write_queues, i.perm) for i in items]
    brokers = [
        BrokerData(
            cluster, i.broker, {} if i.master_addr == NO_MASTER_ADDR else {MASTER_ID: i.master_addr}
        )
        for i in items
    ]
    return TopicRouteData(queue_datas=queues, broker_datas=brokers)


def route_from_value(value: str | None) -> TopicRouteData:
    """A ``TopicRouteData`` from a canonical route string."""
    return route_from_items(parse_route(value))


@dataclass(slots=True)
class TopicPublishInfo:
    """The producer's view of a topic: its writable queues and a ThreadLocalIndex."""

    message_queue_list: list[MessageQueue]
    order_topic: bool = False
    index: ThreadLocalIndex = field(default_factory=lambda: ThreadLocalIndex(JavaRandom(0)))

    def ok(self) -> bool:
        """``TopicPublishInfo.ok``: there is at least one queue."""
        return bool(self.message_queue_list)

    def select_one(self, *filters: Callable[[MessageQueue], bool]) -> MessageQueue | None:
        """``selectOneMessageQueue(QueueFilter...)``: up to ``size`` round-robin tries."""
        queues = self.message_queue_list
        if not queues:
            return None
        if not filters:
            return queues[abs(_java_rem(self.index.increment_and_get(), len(queues)))]
        for _ in range(len(queues)):
            mq = queues[abs(_java_rem(self.index.increment_and_get(), len(queues)))]
            if all(f(mq) for f in filters):
                return mq
        return None


def _java_rem(a: int, b: int) -> int:
    """Java's ``%`` (sign of the dividend)."""
    rem = abs(a) % abs(b)
    return -rem if a < 0 else rem


def topic_route_to_publish_info(
    topic: str, route: TopicRouteData, index: ThreadLocalIndex | None = None
) -> TopicPublishInfo:
    """``topicRouteData2TopicPublishInfo`` (static-topic mappings are not modelled)."""
    queues: list[MessageQueue] = []
    order = False
    if route.order_topic_conf:
        order = True
        for item in route.order_topic_conf.split(";"):
            name, nums = item.split(":")
            queues.extend(MessageQueue(topic, name, q) for q in range(int(nums)))
    else:
        brokers = {b.broker_name: b for b in route.broker_datas}
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if not is_writeable(qd.perm):
                continue
            broker = brokers.get(qd.broker_name)
            if broker is None or MASTER_ID not in broker.broker_addrs:
                continue
            queues.extend(
                MessageQueue(topic, qd.broker_name, q) for q in range(qd.write_queue_nums)
            )
    info = TopicPublishInfo(queues, order)
    if index is not None:
        info.index = index
    return info


def topic_route_to_subscribe_info(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    """``topicRouteData2TopicSubscribeInfo``: every readable queue, master or not."""
    return {
        MessageQueue(topic, qd.broker_name, q)
        for qd in route.queue_datas
        if is_readable(qd.perm)
        for q in range(qd.read_queue_nums)
    }


# ----------------------------------------------------------------------- queue selection


class ThreadLocalIndex:
    """``ThreadLocalIndex``: a random start, then ``++index & 0x7FFFFFFF`` (Java int)."""

    def __init__(self, random: JavaRandom) -> None:
        self._random = random
        self._value: int | None = None

    def increment_and_get(self) -> int:
        """The next index (non-negative)."""
        current = self._random.next_int() if self._value is None else self._value
        self._value = _to_int32(current + 1)
        return self._value & POSITIVE_MASK

    def reset(self) -> None:
        """``reset()``: a fresh random start in [0, Integer.MAX_VALUE)."""
        self._value = self._random.next_int(POSITIVE_MASK)


@dataclass(slots=True)
class FaultItem:
    """One broker's entry in ``LatencyFaultToleranceImpl``."""

    current_latency_ms: int
    start_ms: int
    reachable: bool = True

    def available(self, now_ms: int) -> bool:
        """The isolation period is over."""
        return now_ms >= self.start_ms


class LatencyFaultTolerance:
    """``LatencyFaultToleranceImpl``: brokers isolated after slow or failed sends."""

    def __init__(self) -> None:
        self.items: dict[str, FaultItem] = {}

    def update(
        self, broker: str, latency_ms: int, duration_ms: int, reachable: bool, now_ms: int
    ) -> None:
        """``updateFaultItem``: isolate ``broker`` until ``now + duration``."""
        self.items[broker] = FaultItem(latency_ms, now_ms + duration_ms, reachable)

    def is_available(self, broker: str, now_ms: int) -> bool:
        """No entry, or its isolation period has passed."""
        item = self.items.get(broker)
        return item is None or item.available(now_ms)

    def is_reachable(self, broker: str) -> bool:
        """No entry, or the last probe/send reached it."""
        item = self.items.get(broker)
        return item is None or item.reachable


class MQFaultStrategy:
    """5.x ``MQFaultStrategy``: round robin that avoids the last failed broker."""

    def __init__(self, send_latency_fault_enable: bool = False) -> None:
        self.send_latency_fault_enable = send_latency_fault_enable
        self.fault = LatencyFaultTolerance()

    def select_one_message_queue(
        self,
        info: TopicPublishInfo,
        last_broker_name: str | None,
        reset_index: bool,
        now_ms: int = 0,
    ) -> MessageQueue | None:
        """``selectOneMessageQueue(tpInfo, lastBrokerName, resetIndex)``."""

        def not_last(mq: MessageQueue) -> bool:
            return last_broker_name is None or mq.broker_name != last_broker_name

        if self.send_latency_fault_enable:
            if reset_index:
                info.index.reset()
            mq = info.select_one(lambda m: self.fault.is_available(m.broker_name, now_ms), not_last)
            if mq is None:
                mq = info.select_one(lambda m: self.fault.is_reachable(m.broker_name), not_last)
            return mq if mq is not None else info.select_one()
        mq = info.select_one(not_last)
        return mq if mq is not None else info.select_one()

    def update_fault_item(
        self, broker: str, latency_ms: int, isolation: bool, reachable: bool, now_ms: int
    ) -> None:
        """``updateFaultItem``: only with latency fault tolerance enabled."""
        if not self.send_latency_fault_enable:
            return
        duration = not_available_duration_ms(ISOLATION_LATENCY_MS if isolation else latency_ms)
        self.fault.update(broker, latency_ms, duration, reachable, now_ms)


def not_available_duration_ms(latency_ms: int) -> int:
    """``computeNotAvailableDuration``: the step for the largest latencyMax ≤ latency."""
    for limit, duration in zip(
        reversed(LATENCY_MAX_MS), reversed(NOT_AVAILABLE_DURATION_MS), strict=True
    ):
        if latency_ms >= limit:
            return duration
    return 0


# ---------------------------------------------------------------------- allocation


AllocateFn = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    """``AbstractAllocateMessageQueueStrategy.check``."""
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all:
        raise ValueError("mqAll is null or mqAll empty")
    if not cid_all:
        raise ValueError("cidAll is null or cidAll empty")
    return current_cid in cid_all


def allocate_averagely(
    group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """``AllocateMessageQueueAveragely``: contiguous blocks, the first ``mod`` get one more."""
    if not _check(current_cid, mq_all, cid_all):
        return []
    index = list(cid_all).index(current_cid)
    n_mq, n_cid = len(mq_all), len(cid_all)
    mod = n_mq % n_cid
    if n_mq <= n_cid:
        average = 1
    elif mod > 0 and index < mod:
        average = n_mq // n_cid + 1
    else:
        average = n_mq // n_cid
    start = index * average if mod > 0 and index < mod else index * average + mod
    count = min(average, n_mq - start)
    return [mq_all[start + i] for i in range(max(count, 0))]


def allocate_by_circle(
    group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """``AllocateMessageQueueAveragelyByCircle``: deal the queues round robin."""
    if not _check(current_cid, mq_all, cid_all):
        return []
    index = list(cid_all).index(current_cid)
    return [mq_all[i] for i in range(index, len(mq_all)) if i % len(cid_all) == index]


def md5_hash(key: str) -> int:
    """``ConsistentHashRouter.MD5Hash``: first 4 digest bytes, big-endian, unsigned."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


class ConsistentHashRouter:
    """``ConsistentHashRouter``: a sorted ring of ``clientId-i`` virtual nodes."""

    def __init__(self, nodes: Sequence[str], virtual_nodes: int) -> None:
        ring: dict[int, str] = {}
        for node in nodes:
            for i in range(virtual_nodes):
                # A TreeMap put: a later virtual node with the same hash replaces it.
                ring[md5_hash(f"{node}-{i}")] = node
        self._keys = sorted(ring)
        self._nodes = [ring[k] for k in self._keys]

    def route_node(self, key: str) -> str | None:
        """The first ring entry at or after the key's hash, wrapping to the first."""
        if not self._keys:
            return None
        position = bisect_left(self._keys, md5_hash(key))
        return self._nodes[position if position < len(self._keys) else 0]


def allocate_consistent_hash(
    group: str,
    current_cid: str,
    mq_all: Sequence[MessageQueue],
    cid_all: Sequence[str],
    virtual_nodes: int = CONSISTENT_HASH_VIRTUAL_NODES,
) -> list[MessageQueue]:
    """``AllocateMessageQueueConsistentHash`` keyed by ``MessageQueue.toString()``."""
    if not _check(current_cid, mq_all, cid_all):
        return []
    router = ConsistentHashRouter(cid_all, virtual_nodes)
    return [mq for mq in mq_all if router.route_node(str(mq)) == current_cid]


def allocate_by_config(message_queue_list: Sequence[MessageQueue]) -> AllocateFn:
    """``AllocateMessageQueueByConfig``: the configured list for everyone, unchecked."""

    def allocate(
        group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        return list(message_queue_list)

    return allocate


def _java_split_at(text: str) -> list[str]:
    """``String.split("@")``: trailing empty strings are dropped."""
    parts = text.split("@")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def allocate_by_machine_room(consumer_idcs: set[str]) -> AllocateFn:
    """``AllocateMessageQueueByMachineRoom`` for brokers named ``idc@name``."""

    def allocate(
        group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        pre = [
            mq
            for mq in mq_all
            if len(parts := _java_split_at(mq.broker_name)) == 2 and parts[0] in consumer_idcs
        ]
        mod, rem = divmod(len(pre), len(cid_all))
        result = pre[index * mod : index * mod + mod]
        if rem > index:
            result.append(pre[index + mod * len(cid_all)])
        return result

    return allocate


def allocate_machine_room_nearby(
    inner: AllocateFn,
    broker_room: Callable[[MessageQueue], str],
    consumer_room: Callable[[str], str],
) -> AllocateFn:
    """``AllocateMachineRoomNearby``: own room first; rooms without consumers shared by all."""

    def allocate(
        group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        mq_by_room: dict[str, list[MessageQueue]] = {}
        for mq in mq_all:
            room = broker_room(mq)
            if not room:
                raise ValueError(f"machine room is null for mq {mq}")
            mq_by_room.setdefault(room, []).append(mq)
        cid_by_room: dict[str, list[str]] = {}
        for cid in cid_all:
            room = consumer_room(cid)
            if not room:
                raise ValueError(f"machine room is null for consumer id {cid}")
            cid_by_room.setdefault(room, []).append(cid)
        own_room = consumer_room(current_cid)
        result: list[MessageQueue] = []
        own_queues = mq_by_room.pop(own_room, None)
        if own_queues:
            result.extend(inner(group, current_cid, own_queues, cid_by_room[own_room]))
        for room in sorted(mq_by_room):
            if room not in cid_by_room:
                result.extend(inner(group, current_cid, mq_by_room[room], cid_all))
        return result

    return allocate


def rebalance_allocate(
    strategy: AllocateFn,
    group: str,
    current_cid: str,
    mq_set: set[MessageQueue],
    cid_all: Sequence[str],
) -> list[MessageQueue]:
    """``RebalanceImpl``: sort queues and consumer ids, then call the strategy."""
    return strategy(group, current_cid, sorted(mq_set), sorted(cid_all))
