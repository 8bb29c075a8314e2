"""The synchronous answer path (``RequestDispatcher.answer_now``) and its route cache.

Cached route queries are answered without awaiting anything, so the remoting
server writes them without a Task. These tests check that this path gives the
same bytes as the waiting path and as a fresh encoding of the table, in both
JSON styles and both serialize types, that it never serves an older body, and
that a change drops only the routes it may change.
"""

from __future__ import annotations

import threading

import pytest

from gateway.dispatch import PENDING, RequestDispatcher
from gateway.route_cache import RouteCache
from gateway.services import NameServerService
from raftstore.commands import (
    AddWritePerm,
    PutKV,
    RegisterBroker,
    UpdateNamesrvConfig,
    WipeWritePerm,
)
from raftstore.replicator import LocalReplicator
from raftstore.route_table import RouteTable
from remoting.bodies import encode_topic_route_data
from remoting.codes import RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand
from remoting.frame import encode_frame
from remoting.model import (
    NAMESPACE_ORDER_TOPIC_CONFIG,
    DataVersion,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from tests.gateway.conftest import DEFAULT_BROKER, START_MS, UNIT_TOPICS

Node = tuple[LocalReplicator, NameServerService, RequestDispatcher]

OLD_CLIENT_VERSION = 317
NEW_CLIENT_VERSION = 479

# (request version, extra fields, expected JSON style: True = standard/quoted keys)
STYLES = [
    (OLD_CLIENT_VERSION, {}, False),
    (NEW_CLIENT_VERSION, {}, True),
    (OLD_CLIENT_VERSION, {"acceptStandardJsonOnly": "true"}, True),
    (OLD_CLIENT_VERSION, {"acceptStandardJsonOnly": "TRUE"}, True),
    (OLD_CLIENT_VERSION, {"acceptStandardJsonOnly": "no"}, False),
]


def route_request(
    topic: str,
    version: int,
    serialize_type: SerializeType = SerializeType.JSON,
    opaque: int = 7,
    **extra: str,
) -> RemotingCommand:
    """A route query of a client of ``version``."""
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        {"topic": topic, **extra},
        version=version,
        opaque=opaque,
        serialize_type=serialize_type,
    )


def expected_body(replicator: LocalReplicator, topic: str, *, standard: bool) -> bytes:
    """The route of ``topic`` encoded afresh from the table (no cache involved)."""

    def read(table: RouteTable) -> bytes:
        route = table.pickup_topic_route(topic)
        assert route is not None
        return encode_topic_route_data(route, standard=standard)

    return replicator.read(read)


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
@pytest.mark.parametrize(("version", "extra", "standard"), STYLES)
async def test_the_fast_answer_equals_the_waiting_answer_and_a_fresh_encoding(
    registered_node: Node,
    serialize_type: SerializeType,
    version: int,
    extra: dict[str, str],
    standard: bool,
) -> None:
    """Same frame bytes as the linearizable (awaited) path; body as the table encodes it."""
    replicator, _, dispatcher = registered_node
    for topic in UNIT_TOPICS:
        for _ in range(2):  # a miss that fills the cache, then a hit
            fast = dispatcher.answer_now(route_request(topic, version, serialize_type, **extra))
            assert fast is not PENDING and fast is not None
            slow_request = route_request(
                topic, version, serialize_type, consistency="linearizable", **extra
            )
            assert dispatcher.answer_now(slow_request) is PENDING
            slow = await dispatcher.handle(slow_request)
            assert slow is not None
            assert encode_frame(fast) == encode_frame(slow)
            assert fast.code == ResponseCode.SUCCESS
            assert fast.serialize_type == serialize_type
            assert fast.opaque == 7
            assert fast.body == expected_body(replicator, topic, standard=standard)
    assert dispatcher.route_cache.hits >= len(UNIT_TOPICS)


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
async def test_unknown_topics_and_missing_topic_fields_answer_17_on_both_paths(
    registered_node: Node, serialize_type: SerializeType
) -> None:
    """17 with the 5.x remark, from the fast path and from the waiting path alike."""
    dispatcher = registered_node[2]
    requests = [
        route_request("no-such-topic", NEW_CLIENT_VERSION, serialize_type),
        RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, None, opaque=7, serialize_type=serialize_type
        ),
    ]
    for request in requests:
        for _ in range(2):
            fast = dispatcher.answer_now(request)
            assert fast is not PENDING and fast is not None
            assert fast.code == ResponseCode.TOPIC_NOT_EXIST
            assert fast.remark is not None and "No topic route info" in fast.remark
            slow = await dispatcher.handle_async(request)
            assert slow is not None and encode_frame(slow) == encode_frame(fast)


async def test_a_route_change_is_served_by_the_next_query(registered_node: Node) -> None:
    """Every write that changes the route shows in the very next fast answer."""
    replicator, service, dispatcher = registered_node
    request = route_request(UNIT_TOPICS[0], NEW_CLIENT_VERSION)
    for round_index in range(6):
        if round_index % 2:
            await service.add_write_perm(DEFAULT_BROKER)
        else:
            await service.wipe_write_perm(DEFAULT_BROKER)
        answer = dispatcher.answer_now(request)
        assert answer is not PENDING and answer is not None
        assert answer.body == expected_body(replicator, UNIT_TOPICS[0], standard=True)
        assert (b'"perm":4' in answer.body) == (round_index % 2 == 0)


async def test_a_config_change_reaches_the_fast_path_at_once(registered_node: Node) -> None:
    """needWaitForService switched on by UPDATE_NAMESRV_CONFIG: the next query is refused."""
    replicator, _, dispatcher = registered_node
    request = route_request(UNIT_TOPICS[0], NEW_CLIENT_VERSION)
    first = dispatcher.answer_now(request)
    assert first is not PENDING and first is not None and first.code == ResponseCode.SUCCESS
    replicator.apply_now(UpdateNamesrvConfig((("needWaitForService", "true"),)))
    refused = dispatcher.answer_now(request)
    assert refused is not PENDING and refused is not None
    assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR, "name server not ready")


def test_concurrent_applies_never_leave_an_older_body_behind(registered_node: Node) -> None:
    """A writer thread flips the broker's write permission while queries run.

    Each answer must be the route of a version current at some point during
    that query: when no route change happened across the query, exactly the
    body of that version. Afterwards, the answer is the final state's.
    """
    replicator, _, dispatcher = registered_node
    topic = UNIT_TOPICS[0]
    writable_body = expected_body(replicator, topic, standard=True)
    replicator.apply_now(WipeWritePerm(DEFAULT_BROKER))
    bodies = {False: writable_body, True: expected_body(replicator, topic, standard=True)}
    assert bodies[False] != bodies[True]
    replicator.apply_now(AddWritePerm(DEFAULT_BROKER))
    start_version = replicator.read(lambda table: table.routes_version)
    stop = threading.Event()
    flips = 400

    def flip() -> None:
        for index in range(flips):
            if index % 2 == 0:
                replicator.apply_now(WipeWritePerm(DEFAULT_BROKER))
            else:
                replicator.apply_now(AddWritePerm(DEFAULT_BROKER))
        stop.set()

    def wiped_at(version: int) -> bool:
        # Each flip moves routes_version by one, starting from the added state.
        return (version - start_version) % 2 == 1

    request = route_request(topic, NEW_CLIENT_VERSION)
    writer = threading.Thread(target=flip)
    writer.start()
    checked = 0
    while not stop.is_set() or checked == 0:
        before = replicator.read(lambda table: table.routes_version)
        answer = dispatcher.answer_now(request)
        after = replicator.read(lambda table: table.routes_version)
        assert answer is not PENDING and answer is not None
        allowed = {bodies[wiped_at(version)] for version in range(before, after + 1)}
        assert answer.body in allowed, (before, after)
        checked += 1
    writer.join()
    final = dispatcher.answer_now(request)
    assert final is not PENDING and final is not None
    assert final.body == expected_body(replicator, topic, standard=True)


async def test_a_cleared_cache_reads_the_table_again(registered_node: Node) -> None:
    """clear() (a snapshot replaced the table) drops every body and the view."""
    _, _, dispatcher = registered_node
    cache = dispatcher.route_cache
    request = route_request(UNIT_TOPICS[0], NEW_CLIENT_VERSION)
    dispatcher.answer_now(request)
    assert len(cache) == 1
    cache.clear()
    assert len(cache) == 0
    misses = cache.misses
    answer = dispatcher.answer_now(request)
    assert answer is not PENDING and answer is not None and answer.code == ResponseCode.SUCCESS
    assert cache.misses == misses + 1


def _register(
    replicator: LocalReplicator,
    broker: str,
    addr: str,
    topics: dict[str, int],
    counter: int = 1,
    broker_id: int = 0,
) -> None:
    replicator.apply_now(
        RegisterBroker(
            cluster_name="c1",
            broker_addr=addr,
            broker_name=broker,
            broker_id=broker_id,
            ha_server_addr="",
            now_ms=START_MS,
            topic_config_wrapper=TopicConfigSerializeWrapper(
                data_version=DataVersion(timestamp=START_MS, counter=counter),
                topic_config_table={
                    name: TopicConfig(topic_name=name, read_queue_nums=n, write_queue_nums=n)
                    for name, n in topics.items()
                },
            ),
        )
    )


def test_a_change_drops_only_the_routes_it_may_change() -> None:
    """A registration storm must not evict unrelated topics: each apply drops the
    bodies of its own topics and of the topics naming its brokers, nothing else."""
    replicator = LocalReplicator("n1")
    cache = RouteCache(replicator)
    # Two topics each: a one-topic first registration is refused (the 5.x guard).
    _register(replicator, "b-stable", "10.0.0.1:10911", {"Stable": 4, "Stable2": 1})
    _register(replicator, "b-busy", "10.0.0.2:10911", {"Busy": 4, "Shared": 4})
    _register(replicator, "b-other", "10.0.0.3:10911", {"Shared": 2, "Other": 1})
    for topic in ("Stable", "Busy", "Shared", "Unknown"):
        cache.route_body(topic, standard=True)
    assert cache.route_body("Unknown", standard=True) is None
    misses = cache.misses

    # Other topics' registrations (new topics, new queue counts) leave Stable cached.
    for counter in range(2, 50):
        _register(
            replicator,
            "b-busy",
            "10.0.0.2:10911",
            {"Busy": counter, "Shared": 4, f"New{counter}": 1},
            counter,
        )
    assert ("Stable", True) in cache and ("Shared", True) in cache
    assert ("Busy", True) not in cache
    assert cache.route_body("Stable", standard=True) == expected_body(
        replicator, "Stable", standard=True
    )
    assert cache.misses == misses

    # A new slave of b-other changes its BrokerData: Shared (which names it) goes,
    # Stable stays.
    _register(replicator, "b-other", "10.0.0.4:10911", {"Shared": 2, "Other": 1}, broker_id=1)
    assert ("Shared", True) not in cache and ("Stable", True) in cache
    assert cache.route_body("Shared", standard=True) == expected_body(
        replicator, "Shared", standard=True
    )

    # A topic that had no route is found once it is registered.
    _register(
        replicator, "b-stable", "10.0.0.1:10911", {"Stable": 4, "Stable2": 1, "Unknown": 1}, 2
    )
    assert cache.route_body("Unknown", standard=True) == expected_body(
        replicator, "Unknown", standard=True
    )

    # An ORDER_TOPIC_CONFIG key changes one route; a config change drops everything.
    replicator.apply_now(UpdateNamesrvConfig((("orderMessageEnable", "true"),)))
    assert len(cache) == 0 and cache.config.order_message_enable
    cache.route_body("Stable", standard=True)
    cache.route_body("Shared", standard=True)
    replicator.apply_now(PutKV(NAMESPACE_ORDER_TOPIC_CONFIG, "Stable", "b-stable:4"))
    assert ("Stable", True) not in cache and ("Shared", True) in cache
    assert b"b-stable:4" in (cache.route_body("Stable", standard=True) or b"")


@pytest.mark.parametrize(
    ("code", "fields"),
    [
        (RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"}),
        (RequestCode.GET_BROKER_CLUSTER_INFO, None),
        (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, None),
        (RequestCode.GET_NAMESRV_CONFIG, None),
        (RequestCode.GET_BROKER_MEMBER_GROUP, {"clusterName": "c", "brokerName": "b"}),
        (9999, None),
    ],
)
async def test_reads_answer_now_and_match_the_awaited_handler(
    registered_node: Node, code: int, fields: dict[str, str] | None
) -> None:
    """Reads that never wait are answered synchronously, with the same frame."""
    dispatcher = registered_node[2]
    request = RemotingCommand.request(code, fields, opaque=3)
    now = dispatcher.answer_now(request)
    assert now is not PENDING and now is not None
    awaited = await dispatcher.handle(request)
    assert awaited is not None and encode_frame(now) == encode_frame(awaited)


async def test_writes_wait_and_one_way_reads_get_no_answer(registered_node: Node) -> None:
    """Writes go to handle_async; a one-way read is answered by nothing at all."""
    dispatcher = registered_node[2]
    put = RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"}
    )
    assert dispatcher.answer_now(put) is PENDING
    answer = await dispatcher.handle_async(put)
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    oneway = route_request(UNIT_TOPICS[0], NEW_CLIENT_VERSION)
    oneway.flag = 2
    assert dispatcher.answer_now(oneway) is None
    bad_header = RemotingCommand.request(RequestCode.GET_TOPICS_BY_CLUSTER, {})
    refused = dispatcher.answer_now(bad_header)
    assert refused is not PENDING and refused is not None
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert refused.remark is not None and "cluster" in refused.remark
