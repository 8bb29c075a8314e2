"""The sans-IO rules of the consumer side: wire format, subscriptions, groups, allocation,
delay levels and send-back decisions."""

from __future__ import annotations

import pytest

from broker_app.clients import (
    ClientChannel,
    ConsumerData,
    ConsumerManager,
    QueueKey,
    RebalanceLockManager,
    SubscriptionError,
    build_subscription,
    decode_heartbeat,
)
from broker_app.consumer import allocate_averagely
from broker_app.redelivery import (
    SCHEDULE_TOPIC,
    DelayLevelError,
    ScheduleService,
    parse_delay_levels,
    schedule,
    send_back,
)
from broker_app.store.message_store import MessageInput
from broker_app.store.record import MessageRecord, format_properties, parse_properties, tag_hash
from remoting.errors import BodyDecodeError
from remoting.message_codec import (
    MessageDecodeError,
    MessageExt,
    decode_messages,
    encode_message_ext,
    message_id,
)


class FakeConnection:
    def __init__(self, name: str) -> None:
        self.id = name
        self.peer_host = "127.0.0.1"
        self.peer_port = 40000
        self.is_closed = False


def test_pulled_messages_round_trip_and_carry_upstreams_message_id() -> None:
    messages = [
        MessageExt(
            topic="T",
            queue_id=q,
            queue_offset=q * 10,
            commit_log_offset=1000 + q,
            body=b"x" * q,
            properties=format_properties({"TAGS": "A"}),
            sys_flag=0x30,
            store_host="10.1.2.3:10911",
            reconsume_times=q,
        )
        for q in range(3)
    ]
    body = b"".join(encode_message_ext(m) for m in messages)
    decoded = decode_messages(body)
    assert [m.body for m in decoded] == [b"", b"x", b"xx"]
    assert [m.reconsume_times for m in decoded] == [0, 1, 2]
    assert decoded[1].sys_flag == 0, "the IPv6 host bits are cleared: hosts are IPv4"
    assert decoded[2].msg_id == message_id("10.1.2.3:10911", 1002)
    assert decoded[2].msg_id == "0A010203" + "00002A9F" + f"{1002:016X}"
    with pytest.raises(MessageDecodeError):
        decode_messages(body[:-3])
    with pytest.raises(MessageDecodeError):
        decode_messages(b"\x00" * 100)


def test_subscriptions_are_star_or_tags_and_sql_is_refused() -> None:
    assert build_subscription("T", None).takes_all
    assert build_subscription("T", " * ").takes_all
    tags = build_subscription("T", "TagA || TagB ||TagA")
    assert tags.tags == ("TagA", "TagB")
    assert tags.tag_hashes() == {tag_hash("TagA"), tag_hash("TagB")}
    with pytest.raises(SubscriptionError):
        build_subscription("T", "a > 1", expression_type="SQL92")
    with pytest.raises(SubscriptionError):
        build_subscription("T", "||")


@pytest.mark.parametrize(
    "body",
    [
        None,
        b"",
        b"[]",
        b"{}",
        b'{"clientID":"c","consumerDataSet":5}',
        b'{"clientID":"c","consumerDataSet":[{"groupName":""}]}',
    ],
)
def test_malformed_heartbeats_are_refused(body: bytes | None) -> None:
    with pytest.raises(BodyDecodeError):
        decode_heartbeat(body)


def test_the_consumer_manager_reports_changes_only_when_members_or_filters_change() -> None:
    manager = ConsumerManager(channel_expired_ms=1_000)
    data = ConsumerData(
        "g",
        "CONSUME_PASSIVELY",
        "CLUSTERING",
        "CONSUME_FROM_LAST_OFFSET",
        (build_subscription("T", "*", sub_version=1),),
    )
    first, second = FakeConnection("c1"), FakeConnection("c2")
    assert manager.register(data, ClientChannel("id1", first, "JAVA", 1, 0), 0)
    assert not manager.register(data, ClientChannel("id1", first, "JAVA", 1, 100), 100)
    assert manager.register(data, ClientChannel("id2", second, "JAVA", 1, 100), 100)
    narrower = ConsumerData(
        "g",
        "CONSUME_PASSIVELY",
        "CLUSTERING",
        "CONSUME_FROM_LAST_OFFSET",
        (build_subscription("T", "TagA", sub_version=2),),
    )
    assert manager.register(narrower, ClientChannel("id2", second, "JAVA", 1, 200), 200)
    assert manager.subscription("g", "T").tags == ("TagA",)  # type: ignore[union-attr]
    assert manager.connection_closed(second) == ["g"]
    removed = manager.expire(1_200)
    assert [(group, channel.client_id) for group, channel in removed] == [("g", "id1")]
    assert manager.group("g") is None


def test_allocate_averagely_matches_rocketmqs_blocks() -> None:
    queues = [QueueKey("T", b, q) for b in ("broker-a", "broker-b") for q in range(4)]
    ids = ["c1", "c2", "c3"]
    shares = {
        c: [f"{q.broker_name[-1]}{q.queue_id}" for q in allocate_averagely(queues, ids, c)]
        for c in ids
    }
    assert shares == {"c1": ["a0", "a1", "a2"], "c2": ["a3", "b0", "b1"], "c3": ["b2", "b3"]}
    assert allocate_averagely(queues[:2], ids, "c3") == []
    assert allocate_averagely(queues, ids, "stranger") == []
    assert sorted(q for c in ids for q in allocate_averagely(queues, ids, c)) == sorted(queues)


def test_queue_locks_belong_to_one_client_until_they_expire() -> None:
    locks = RebalanceLockManager(max_live_ms=1_000)
    queue = QueueKey("T", "broker-a", 0)
    assert locks.try_lock("g", [queue], "c1", 0) == {queue}
    assert locks.try_lock("g", [queue], "c2", 500) == set()
    assert locks.try_lock("g", [queue], "c2", 1_600) == {queue}
    assert locks.holder("g", queue, 1_700) == "c2"


def test_delay_levels_parse_and_refuse_nonsense() -> None:
    assert parse_delay_levels("1s 5s 2m 1h 1d") == (1_000, 5_000, 120_000, 3_600_000, 86_400_000)
    for bad in ("", "1x", "fast", "-1s"):
        with pytest.raises(DelayLevelError):
            parse_delay_levels(bad)


def _record(topic: str, properties: dict[str, str], store_ms: int = 0) -> MessageRecord:
    return MessageRecord(
        queue_id=0,
        flag=0,
        queue_offset=0,
        physical_offset=64,
        sys_flag=0,
        born_timestamp_ms=1,
        store_timestamp_ms=store_ms,
        topic=topic,
        properties=format_properties(properties),
        body=b"b",
    )


def test_send_back_retries_with_growing_delay_then_dead_letters() -> None:
    first = send_back(
        _record("Orders", {"TAGS": "A"}),
        group="g",
        delay_level=0,
        max_reconsume_times=2,
        origin_msg_id="",
        original_msg_id="ID1",
    )
    props = parse_properties(first.message.properties)
    assert (first.message.topic, first.dead_letter) == ("%RETRY%g", False)
    assert props["DELAY"] == "3" and props["RECONSUME_TIME"] == "1"
    assert props["RETRY_TOPIC"] == "Orders" and props["ORIGIN_MESSAGE_ID"] == "ID1"
    second = send_back(
        _record("%RETRY%g", {**props, "DELAY": "3"}),
        group="g",
        delay_level=0,
        max_reconsume_times=2,
        origin_msg_id="ID1",
        original_msg_id="ID2",
    )
    assert parse_properties(second.message.properties)["DELAY"] == "4"
    third = send_back(
        _record("%RETRY%g", parse_properties(second.message.properties)),
        group="g",
        delay_level=0,
        max_reconsume_times=2,
        origin_msg_id="ID1",
        original_msg_id="ID3",
    )
    assert (third.message.topic, third.dead_letter) == ("%DLQ%g", True)
    assert "DELAY" not in parse_properties(third.message.properties)
    assert parse_properties(third.message.properties)["RETRY_TOPIC"] == "Orders"


def test_delayed_messages_wait_in_the_schedule_topic_until_due() -> None:
    levels = parse_delay_levels("1s 5s")
    delayed = schedule(MessageInput("Orders", 2, b"b", format_properties({"DELAY": "9"})), levels)
    assert (delayed.topic, delayed.queue_id) == (SCHEDULE_TOPIC, 1), "clamped to the last level"
    props = parse_properties(delayed.properties)
    assert (props["REAL_TOPIC"], props["REAL_QID"], props["DELAY"]) == ("Orders", "2", "2")
    plain = MessageInput("Orders", 0, b"b")
    assert schedule(plain, levels) is plain

    stored = {
        0: [
            _record(SCHEDULE_TOPIC, {"REAL_TOPIC": "Orders", "REAL_QID": "1"}, 1_000),
            _record(SCHEDULE_TOPIC, {"REAL_TOPIC": "Orders", "REAL_QID": "3"}, 1_500),
        ]
    }
    service = ScheduleService(levels)

    def due(now_ms: int, offsets: dict[int, int]) -> tuple[list[MessageInput], dict[int, int]]:
        return service.due(
            offsets, lambda q: len(stored.get(q, [])), lambda q, o: stored[q][o], now_ms
        )

    ready, offsets = due(2_100, {})
    assert [(m.topic, m.queue_id) for m in ready] == [("Orders", 1)]
    assert offsets == {1: 1}
    ready, offsets = due(2_600, offsets)
    assert [(m.topic, m.queue_id) for m in ready] == [("Orders", 3)]
    assert "DELAY" not in parse_properties(ready[0].properties)
    assert due(9_999, offsets) == ([], offsets)
