"""RocketMQ client models against worked examples of RocketMQ's client classes."""

from __future__ import annotations

from experiment_history.clients import (
    JavaRandom,
    MessageQueue,
    MQFaultStrategy,
    ThreadLocalIndex,
    allocate_averagely,
    allocate_by_circle,
    allocate_by_config,
    allocate_by_machine_room,
    allocate_consistent_hash,
    allocate_machine_room_nearby,
    md5_hash,
    not_available_duration_ms,
    rebalance_allocate,
    route_from_value,
    topic_route_to_publish_info,
    topic_route_to_subscribe_info,
)

CIDS = ["c0", "c1", "c2"]


def queues(n, broker="b", topic="T"):
    return [MessageQueue(topic, broker, i) for i in range(n)]


def ids(mqs):
    return [mq.queue_id for mq in mqs]


def test_averagely_gives_contiguous_blocks_with_the_extra_queues_first():
    mqs = queues(8)
    assert [ids(allocate_averagely("g", c, mqs, CIDS)) for c in CIDS] == [
        [0, 1, 2],
        [3, 4, 5],
        [6, 7],
    ]


def test_averagely_leaves_consumers_past_the_queue_count_empty():
    assert [ids(allocate_averagely("g", c, queues(2), CIDS)) for c in CIDS] == [[0], [1], []]
    assert allocate_averagely("g", "stranger", queues(2), CIDS) == []


def test_by_circle_deals_queues_round_robin():
    assert [ids(allocate_by_circle("g", c, queues(8), CIDS)) for c in CIDS] == [
        [0, 3, 6],
        [1, 4, 7],
        [2, 5],
    ]


def test_consistent_hash_uses_the_md5_ring_and_covers_every_queue_once():
    assert md5_hash("") == 0xD41D8CD9
    mqs = queues(16)
    shares = [allocate_consistent_hash("g", c, mqs, CIDS) for c in CIDS]
    assert sorted(mq for share in shares for mq in share) == mqs
    assert all(shares)
    assert str(mqs[3]) == "MessageQueue [topic=T, brokerName=b, queueId=3]"


def test_by_config_returns_the_configured_list_to_everyone():
    chosen = queues(2)
    assert allocate_by_config(chosen)("g", "anyone", queues(8), CIDS) == chosen


def test_by_machine_room_shares_the_queues_of_the_consumer_rooms():
    mqs = sorted(queues(3, "idc1@b1") + queues(2, "idc2@b2") + queues(2, "b3"))
    strategy = allocate_by_machine_room({"idc1"})
    assert [ids(strategy("g", c, mqs, ["c0", "c1"])) for c in ("c0", "c1")] == [[0, 2], [1]]


def test_machine_room_nearby_keeps_local_queues_and_shares_orphan_rooms():
    mqs = sorted(queues(2, "r1@b1") + queues(2, "r2@b2") + queues(2, "r3@b3"))
    rooms = {"r1-c": "r1", "r2-c": "r2"}
    strategy = allocate_machine_room_nearby(
        allocate_averagely, lambda mq: mq.broker_name.split("@")[0], rooms.__getitem__
    )
    mine = strategy("g", "r1-c", mqs, sorted(rooms))
    assert [(mq.broker_name, mq.queue_id) for mq in mine] == [
        ("r1@b1", 0),
        ("r1@b1", 1),
        ("r3@b3", 0),
    ]


def test_rebalance_sorts_queues_and_consumers_before_allocating():
    mqs = set(queues(4, "b2") + queues(4, "b1"))
    mine = rebalance_allocate(allocate_averagely, "g", "c0", mqs, ["c1", "c0"])
    assert [(mq.broker_name, mq.queue_id) for mq in mine] == [("b1", i) for i in range(4)]


def test_java_random_matches_the_jvm_sequence():
    assert JavaRandom(42).next_int() == -1170105035


def test_publish_info_needs_a_writable_master_and_subscribe_info_only_readability():
    route = route_from_value("a:h1:1:2:2:6,b:-:2:2:6,c:h3:1:2:2:4")
    publish = topic_route_to_publish_info("T", route)
    assert [(mq.broker_name, mq.queue_id) for mq in publish.message_queue_list] == [
        ("a", 0),
        ("a", 1),
    ]
    assert {mq.broker_name for mq in topic_route_to_subscribe_info("T", route)} == {"a", "b", "c"}


def test_queue_selection_round_robins_and_skips_the_last_failed_broker():
    route = route_from_value("a:h1:1:2:2:6,b:h2:1:2:2:6")
    info = topic_route_to_publish_info("T", route, ThreadLocalIndex(JavaRandom(7)))
    strategy = MQFaultStrategy()
    picks = [strategy.select_one_message_queue(info, None, False) for _ in range(4)]
    assert len({(mq.broker_name, mq.queue_id) for mq in picks}) == 4
    for _ in range(8):
        assert strategy.select_one_message_queue(info, "a", True).broker_name == "b"


def test_latency_fault_tolerance_isolates_a_slow_broker_for_a_while():
    route = route_from_value("a:h1:1:2:2:6,b:h2:1:2:2:6")
    info = topic_route_to_publish_info("T", route, ThreadLocalIndex(JavaRandom(1)))
    strategy = MQFaultStrategy(send_latency_fault_enable=True)
    strategy.update_fault_item("a", 600, isolation=False, reachable=True, now_ms=1000)
    assert not_available_duration_ms(600) == 2000
    assert {
        strategy.select_one_message_queue(info, None, False, 1500).broker_name for _ in range(6)
    } == {"b"}
    assert {
        strategy.select_one_message_queue(info, None, False, 3000).broker_name for _ in range(6)
    } == {"a", "b"}
