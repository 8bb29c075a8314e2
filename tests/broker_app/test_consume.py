"""The consumer side of the broker port, in one process over real loopback sockets.

broker-a's master (and, where a test needs it, its slave) run as ``BrokerController``
objects; the tests speak the wire protocol to them with a ``RemotingClient`` the
way RocketMQ's clients do: HEART_BEAT, PULL_MESSAGE (held by long polling), offsets,
CONSUMER_SEND_MSG_BACK, LOCK_BATCH_MQ, and the queries of 29-32.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker_app.broker import BrokerController
from broker_app.clients import dlq_topic, retry_topic
from broker_app.config import BrokerConfig, BrokerRole
from broker_app.consume_processor import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, FLAG_SUSPEND
from broker_app.ha.config import HAConfig
from broker_app.metadata import MemoryRepository
from broker_app.store.message_store import MessageInput
from broker_app.store.record import format_properties
from localcluster.run_secrets import ha_secret
from node.files import write_secret_file
from remoting.acl_policy import Account, AclConfig, dump_acl
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.message_codec import MessageExt, decode_messages
from remoting.model import TopicConfig
from tests.broker_app.support import FakeNameServer
from tests.integration.gateway_harness import ADMIN
from tests.waiting import eventually

FAST_HA = HAConfig(heartbeat_interval_ms=100, housekeeping_interval_ms=2000, reconnect_delay_ms=100)
TOPIC = "ConsumeTopic"
GROUP = "cg-test"


def broker_config(root: Path, namesrv: str, *, broker_id: int, **extra: object) -> BrokerConfig:
    """A fast member of broker-a; retries wait 1 s per delay level."""
    settings: dict[str, object] = dict(
        store_dir=root / f"store-{broker_id}",
        broker_id=broker_id,
        role=BrokerRole.SLAVE if broker_id else BrokerRole.ASYNC_MASTER,
        namesrv_addrs=(namesrv,),
        register_initial_delay_ms=60_000,
        slave_sync_initial_delay_ms=100,
        slave_sync_interval_ms=200,
        segment_bytes=64 * 1024,
        record_bytes_max=16 * 1024,
        flush_interval_ms=100,
        ha=FAST_HA,
        ha_secret_file=ha_secret(root),
        message_delay_level="1s 1s 1s 1s 1s 1s",
    )
    settings.update(extra)
    return BrokerConfig(**settings)  # type: ignore[arg-type]


WAIT_S = 10.0
"""How long a test waits for the brokers to get somewhere."""


@pytest.fixture
async def master(tmp_path: Path) -> AsyncIterator[BrokerController]:
    namesrv = FakeNameServer().start()
    broker = BrokerController(
        broker_config(tmp_path, namesrv.addr, broker_id=0), MemoryRepository()
    )
    await broker.start()
    broker.topics.create(TopicConfig(TOPIC, 2, 2))
    try:
        yield broker
    finally:
        await broker.stop(unregister=False)
        namesrv.stop()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    pushed: list[RemotingCommand] = []

    async def on_request(request: RemotingCommand, _peer: object) -> RemotingCommand | None:
        pushed.append(request)
        return None

    remoting = RemotingClient(on_request=on_request)
    remoting.pushed = pushed  # type: ignore[attr-defined]
    try:
        yield remoting
    finally:
        await remoting.close()


def heartbeat_body(client_id: str, *, expression: str = "*", sub_version: int = 1) -> bytes:
    """A HEART_BEAT body as the Java client writes it."""
    return json.dumps(
        {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "groupName": GROUP,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "unitMode": False,
                    "subscriptionDataSet": [
                        {
                            "topic": TOPIC,
                            "subString": expression,
                            "tagsSet": [],
                            "codeSet": [],
                            "subVersion": sub_version,
                            "expressionType": "TAG",
                            "classFilterMode": False,
                        }
                    ],
                }
            ],
            "producerDataSet": [{"groupName": "pg-test"}],
        }
    ).encode()


async def call(
    client: RemotingClient,
    broker: BrokerController,
    code: int,
    fields: dict[str, str],
    body: bytes | None = None,
    timeout_s: float = 5.0,
) -> RemotingCommand:
    return await client.invoke(
        broker.broker_addr, RemotingCommand.request(code, fields, body), timeout_s
    )


def pull_fields(
    offset: int,
    *,
    queue_id: int = 0,
    suspend_ms: int = 0,
    sys_flag: int = 0,
    commit: int = 0,
    group: str = GROUP,
    topic: str = TOPIC,
) -> dict[str, str]:
    return {
        "consumerGroup": group,
        "topic": topic,
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": "32",
        "sysFlag": str(sys_flag),
        "commitOffset": str(commit),
        "suspendTimeoutMillis": str(suspend_ms),
        "subscription": "*",
        "subVersion": "1",
        "expressionType": "TAG",
    }


async def put(
    broker: BrokerController, body: bytes, *, queue_id: int = 0, tags: str | None = None
) -> None:
    properties = format_properties({"TAGS": tags}) if tags else ""
    await broker.put_message(MessageInput(TOPIC, queue_id, body, properties))


async def test_a_heartbeat_joins_the_group_and_creates_its_retry_topic(
    master: BrokerController, client: RemotingClient
) -> None:
    answer = await call(client, master, RequestCode.HEART_BEAT, {}, heartbeat_body("c1"))
    assert answer.code == ResponseCode.SUCCESS
    listed = await call(
        client, master, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP}
    )
    assert json.loads(listed.body or b"") == {"consumerIdList": ["c1"]}
    assert master.metadata.topic(retry_topic(GROUP)) is not None
    assert master.metadata.subscription_group(GROUP) is not None
    connections = await call(
        client, master, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": GROUP}
    )
    assert json.loads(connections.body or b"")["subscriptionTable"][TOPIC]["subString"] == "*"

    unknown = await call(
        client, master, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "nobody"}
    )
    assert unknown.code == ResponseCode.SYSTEM_ERROR
    bad = await call(client, master, RequestCode.HEART_BEAT, {}, b"{not json")
    assert bad.code == ResponseCode.SYSTEM_ERROR and "heartbeat" in (bad.remark or "")

    await call(
        client, master, RequestCode.UNREGISTER_CLIENT, {"clientID": "c1", "consumerGroup": GROUP}
    )
    assert master.consumers.group(GROUP) is None


async def test_a_second_client_makes_the_broker_notify_the_first(
    master: BrokerController, client: RemotingClient
) -> None:
    await call(client, master, RequestCode.HEART_BEAT, {}, heartbeat_body("c1"))
    other = RemotingClient()
    try:
        await other.invoke(
            master.broker_addr,
            RemotingCommand.request(RequestCode.HEART_BEAT, {}, heartbeat_body("c2")),
        )
        pushed = client.pushed  # type: ignore[attr-defined]
        await eventually(
            lambda: any(p.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED for p in pushed),
            what="a NOTIFY_CONSUMER_IDS_CHANGED push",
            timeout_s=WAIT_S,
        )
        assert sorted(master.consumers.group(GROUP).client_ids()) == ["c1", "c2"]  # type: ignore[union-attr]
        pushed.clear()
    finally:
        await other.close()
    # The second client's connection closed: it leaves and the first hears of it.
    await eventually(
        lambda: (
            (group := master.consumers.group(GROUP)) is not None and group.client_ids() == ["c1"]
        ),
        what="only c1 in the group",
        timeout_s=WAIT_S,
    )
    await eventually(
        lambda: any(p.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED for p in pushed),
        what="a NOTIFY_CONSUMER_IDS_CHANGED push",
        timeout_s=WAIT_S,
    )


async def test_pull_returns_stored_messages_in_the_wire_format_clients_decode(
    master: BrokerController, client: RemotingClient
) -> None:
    await call(client, master, RequestCode.HEART_BEAT, {}, heartbeat_body("c1"))
    for index in range(5):
        await put(master, f"m{index}".encode())
    answer = await call(client, master, RequestCode.PULL_MESSAGE, pull_fields(0))
    assert answer.code == ResponseCode.SUCCESS
    messages = decode_messages(answer.body or b"")
    assert [m.body for m in messages] == [b"m0", b"m1", b"m2", b"m3", b"m4"]
    assert [m.queue_offset for m in messages] == [0, 1, 2, 3, 4]
    assert all(m.store_host == master.broker_addr and m.topic == TOPIC for m in messages)
    assert answer.ext_fields is not None
    assert answer.ext_fields["nextBeginOffset"] == "5"
    assert answer.ext_fields["maxOffset"] == "5" and answer.ext_fields["minOffset"] == "0"
    assert answer.ext_fields["suggestWhichBrokerId"] == "0"

    at_end = await call(client, master, RequestCode.PULL_MESSAGE, pull_fields(5))
    assert at_end.code == ResponseCode.PULL_NOT_FOUND
    beyond = await call(client, master, RequestCode.PULL_MESSAGE, pull_fields(50))
    assert beyond.code == ResponseCode.PULL_OFFSET_MOVED
    # Upstream's correction: past the end of a queue that still starts at 0, back to 0.
    assert (beyond.ext_fields or {})["nextBeginOffset"] == "0"


async def test_a_pull_with_nothing_new_is_held_until_a_message_arrives(
    master: BrokerController, client: RemotingClient
) -> None:
    await call(client, master, RequestCode.HEART_BEAT, {}, heartbeat_body("c1"))
    pending = asyncio.create_task(
        call(
            client,
            master,
            RequestCode.PULL_MESSAGE,
            pull_fields(0, suspend_ms=10_000, sys_flag=FLAG_SUSPEND),
            timeout_s=15.0,
        )
    )
    await eventually(
        lambda: master.pull_hold.waiting() == 1,
        what="one pull held",
        timeout_s=WAIT_S,
    )
    assert not pending.done()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await put(master, b"late")
    answer = await pending
    assert loop.time() - started < 1.0, "the held pull answers as soon as the message lands"
    assert answer.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_messages(answer.body or b"")] == [b"late"]

    timed_out = await call(
        client,
        master,
        RequestCode.PULL_MESSAGE,
        pull_fields(1, suspend_ms=300, sys_flag=FLAG_SUSPEND),
    )
    assert timed_out.code == ResponseCode.PULL_NOT_FOUND
    assert master.pull_hold.waiting() == 0


async def test_tags_filter_on_the_broker_by_the_heartbeat_subscription(
    master: BrokerController, client: RemotingClient
) -> None:
    await call(
        client, master, RequestCode.HEART_BEAT, {}, heartbeat_body("c1", expression="TagA || TagC")
    )
    for tags in ("TagA", "TagB", "TagC", None):
        await put(master, (tags or "none").encode(), tags=tags)
    answer = await call(client, master, RequestCode.PULL_MESSAGE, pull_fields(0))
    assert [m.body for m in decode_messages(answer.body or b"")] == [b"TagA", b"TagC"]
    assert (answer.ext_fields or {})["nextBeginOffset"] == "4"

    sql = await call(
        client,
        master,
        RequestCode.PULL_MESSAGE,
        {
            **pull_fields(0),
            "sysFlag": str(FLAG_SUBSCRIPTION),
            "expressionType": "SQL92",
            "subscription": "a > 1",
        },
    )
    assert sql.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    newer = await call(
        client, master, RequestCode.PULL_MESSAGE, {**pull_fields(0), "subVersion": "99"}
    )
    assert newer.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
    stranger = await call(client, master, RequestCode.PULL_MESSAGE, pull_fields(0, group="nobody"))
    assert stranger.code == ResponseCode.SUBSCRIPTION_NOT_EXIST


async def test_offsets_are_committed_queried_and_bad_requests_change_nothing(
    master: BrokerController, client: RemotingClient
) -> None:
    await call(client, master, RequestCode.HEART_BEAT, {}, heartbeat_body("c1"))
    query = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "1"}
    fresh = await call(client, master, RequestCode.QUERY_CONSUMER_OFFSET, query)
    assert (fresh.code, (fresh.ext_fields or {}).get("offset")) == (ResponseCode.SUCCESS, "0")
    await call(client, master, RequestCode.UPDATE_CONSUMER_OFFSET, {**query, "commitOffset": "7"})
    stored = await call(client, master, RequestCode.QUERY_CONSUMER_OFFSET, query)
    assert (stored.ext_fields or {})["offset"] == "7"
    # A pull carries its commit offset too.
    await call(
        client,
        master,
        RequestCode.PULL_MESSAGE,
        pull_fields(0, queue_id=1, sys_flag=FLAG_COMMIT_OFFSET, commit=9),
    )
    assert master.metadata.consumer_offset(TOPIC, GROUP, 1) == 9

    for fields in ({**query, "queueId": "x"}, {"consumerGroup": GROUP}):
        bad = await call(
            client, master, RequestCode.UPDATE_CONSUMER_OFFSET, {**fields, "commitOffset": "1"}
        )
        assert bad.code == ResponseCode.SYSTEM_ERROR
    illegal = await call(client, master, RequestCode.PULL_MESSAGE, pull_fields(0, queue_id=9))
    assert illegal.code == ResponseCode.SYSTEM_ERROR and "queueId[9]" in (illegal.remark or "")
    missing = await call(
        client, master, RequestCode.PULL_MESSAGE, pull_fields(0, topic="NoSuchTopic")
    )
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    assert master.metadata.consumer_offset(TOPIC, GROUP, 1) == 9


async def test_max_min_search_and_earliest_store_time(
    master: BrokerController, client: RemotingClient
) -> None:
    times = iter(range(1_000, 100_000, 1_000))
    master.clock_ms = lambda: next(times)
    for index in range(4):
        await put(master, f"t{index}".encode(), queue_id=1)  # stored at 1000 .. 4000
    queue = {"topic": TOPIC, "queueId": "1"}
    answers = {
        code: await call(client, master, code, fields)
        for code, fields in (
            (RequestCode.GET_MAX_OFFSET, queue),
            (RequestCode.GET_MIN_OFFSET, queue),
            (RequestCode.GET_EARLIEST_MSG_STORETIME, queue),
            (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "timestamp": "2500"}),
        )
    }
    assert (answers[RequestCode.GET_MAX_OFFSET].ext_fields or {})["offset"] == "4"
    assert (answers[RequestCode.GET_MIN_OFFSET].ext_fields or {})["offset"] == "0"
    assert (answers[RequestCode.GET_EARLIEST_MSG_STORETIME].ext_fields or {})["timestamp"] == "1000"
    assert (answers[RequestCode.SEARCH_OFFSET_BY_TIMESTAMP].ext_fields or {})["offset"] == "2"


async def test_a_sent_back_message_is_retried_then_dead_lettered(
    master: BrokerController, client: RemotingClient
) -> None:
    await call(client, master, RequestCode.HEART_BEAT, {}, heartbeat_body("c1"))
    await put(master, b"poison")
    first = decode_messages(
        (await call(client, master, RequestCode.PULL_MESSAGE, pull_fields(0))).body or b""
    )[0]
    retry = retry_topic(GROUP)

    async def send_back(message: MessageExt) -> RemotingCommand:
        return await call(
            client,
            master,
            RequestCode.CONSUMER_SEND_MSG_BACK,
            {
                "offset": str(message.commit_log_offset),
                "group": GROUP,
                "delayLevel": "0",
                "originMsgId": first.msg_id,
                "originTopic": TOPIC,
                "maxReconsumeTimes": "2",
            },
        )

    seen: list[MessageExt] = []
    current = first
    store = master.require_store()

    def retried(count: int) -> bool:
        return store.queue_max_offset(retry, 0) == count

    for round_number in range(2):
        answer = await send_back(current)
        assert answer.code == ResponseCode.SUCCESS
        # Delay level 3 + reconsumeTimes: 1 s each in this broker's table.
        await eventually(
            functools.partial(retried, round_number + 1),
            what=f"retry round {round_number + 1}",
            timeout_s=8.0,
        )
        pulled = await call(
            client,
            master,
            RequestCode.PULL_MESSAGE,
            pull_fields(round_number, topic=retry, sys_flag=FLAG_SUBSCRIPTION),
        )
        current = decode_messages(pulled.body or b"")[0]
        seen.append(current)
    assert [m.body for m in seen] == [b"poison", b"poison"]
    assert [m.reconsume_times for m in seen] == [1, 2]
    assert "RETRY_TOPIC\x01ConsumeTopic" in seen[0].properties
    assert f"ORIGIN_MESSAGE_ID\x01{first.msg_id}" in seen[1].properties

    dead = await send_back(current)
    assert dead.code == ResponseCode.SUCCESS
    assert master.require_store().queue_max_offset(dlq_topic(GROUP), 0) == 1
    assert master.metadata.topic(dlq_topic(GROUP)) is not None

    lost = await call(
        client,
        master,
        RequestCode.CONSUMER_SEND_MSG_BACK,
        {"offset": "999999999", "group": GROUP, "delayLevel": "0", "maxReconsumeTimes": "2"},
    )
    assert lost.code == ResponseCode.SYSTEM_ERROR


async def test_orderly_consumers_lock_queues_one_client_at_a_time(
    master: BrokerController, client: RemotingClient
) -> None:
    queues = [{"topic": TOPIC, "brokerName": "broker-a", "queueId": i} for i in range(2)]

    async def lock(client_id: str, code: int = RequestCode.LOCK_BATCH_MQ) -> RemotingCommand:
        body = json.dumps({"consumerGroup": GROUP, "clientId": client_id, "mqSet": queues})
        return await call(client, master, code, {}, body.encode())

    first = await lock("c1")
    assert len(json.loads(first.body or b"")["lockOKMQSet"]) == 2
    assert json.loads((await lock("c2")).body or b"")["lockOKMQSet"] == []
    await lock("c1", RequestCode.UNLOCK_BATCH_MQ)
    assert len(json.loads((await lock("c2")).body or b"")["lockOKMQSet"]) == 2
    garbage = await call(client, master, RequestCode.LOCK_BATCH_MQ, {}, b"[1,2]")
    assert garbage.code == ResponseCode.SYSTEM_ERROR


async def test_the_slave_serves_pulls_and_offsets_follow_the_master(
    tmp_path: Path, client: RemotingClient
) -> None:
    namesrv = FakeNameServer().start()
    small_memory = broker_config(
        tmp_path,
        namesrv.addr,
        broker_id=0,
        memory_bytes=4096,
        access_message_in_memory_max_ratio=50,
    )
    master = BrokerController(small_memory, MemoryRepository())
    await master.start()
    slave = BrokerController(broker_config(tmp_path, namesrv.addr, broker_id=1), MemoryRepository())
    await slave.start()
    try:
        master.topics.create(TopicConfig(TOPIC, 2, 2))
        await call(client, master, RequestCode.HEART_BEAT, {}, heartbeat_body("c1"))
        for index in range(40):
            await put(master, b"x" * 200 + str(index).encode())
        # 40 x ~270 bytes behind the first message: more than half of 4 KiB "memory".
        far_behind = await call(client, master, RequestCode.PULL_MESSAGE, pull_fields(0))
        assert (far_behind.ext_fields or {})["suggestWhichBrokerId"] == "1"
        await call(
            client,
            master,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "commitOffset": "30"},
        )
        await eventually(
            lambda: (
                slave.metadata.topic(TOPIC) is not None
                and slave.require_store().queue_max_offset(TOPIC, 0) == 40
                and slave.metadata.consumer_offset(TOPIC, GROUP, 0) == 30
            ),
            what="the topic, its messages and the offset on the slave",
            timeout_s=WAIT_S,
        )
        await call(client, slave, RequestCode.HEART_BEAT, {}, heartbeat_body("c1"))
        from_slave = await call(client, slave, RequestCode.PULL_MESSAGE, pull_fields(30))
        assert from_slave.code == ResponseCode.SUCCESS
        bodies = [m.body for m in decode_messages(from_slave.body or b"")]
        assert bodies == [b"x" * 200 + str(i).encode() for i in range(30, 40)]
        assert (from_slave.ext_fields or {})["suggestWhichBrokerId"] == "0"
        # A slave never moves a consumer's offset: past its end it says retry, same offset.
        beyond = await call(client, slave, RequestCode.PULL_MESSAGE, pull_fields(90))
        assert beyond.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert (beyond.ext_fields or {})["nextBeginOffset"] == "90"
        # A topic whose config the slave has not copied yet: its replicated messages
        # are served all the same.
        slave.replication.synchronizer = (
            None  # SlaveSynchronize stops: the slave never learns the topic
        )
        master.topics.create(TopicConfig("FreshTopic", 1, 1))
        await master.put_message(MessageInput("FreshTopic", 0, b"fresh"))
        await eventually(
            lambda: slave.require_store().queue_max_offset("FreshTopic", 0) == 1,
            what="FreshTopic's message on the slave",
            timeout_s=WAIT_S,
        )
        assert slave.metadata.topic("FreshTopic") is None
        fresh = await call(
            client,
            slave,
            RequestCode.PULL_MESSAGE,
            {**pull_fields(0, topic="FreshTopic"), "sysFlag": str(FLAG_SUBSCRIPTION)},
        )
        assert [m.body for m in decode_messages(fresh.body or b"")] == [b"fresh"]
        refused = await call(
            client,
            slave,
            RequestCode.CONSUMER_SEND_MSG_BACK,
            {"offset": "0", "group": GROUP, "delayLevel": "0"},
        )
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
    finally:
        for broker in (slave, master):
            await broker.stop(unregister=False)
        namesrv.stop()


async def test_offsets_and_retry_topics_survive_a_restart(
    tmp_path: Path, client: RemotingClient
) -> None:
    namesrv = FakeNameServer().start()
    repository = MemoryRepository()
    config = broker_config(tmp_path, namesrv.addr, broker_id=0)
    try:
        first = BrokerController(config, repository)
        await first.start()
        first.topics.create(TopicConfig(TOPIC, 2, 2))
        await call(client, first, RequestCode.HEART_BEAT, {}, heartbeat_body("c1"))
        await call(
            client,
            first,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "1", "commitOffset": "12"},
        )
        await first.stop(unregister=False)
        await client.close()

        again = BrokerController(config, repository)
        await again.start()
        try:
            assert again.metadata.consumer_offset(TOPIC, GROUP, 1) == 12
            assert again.metadata.topic(retry_topic(GROUP)) is not None
            assert again.metadata.subscription_group(GROUP) is not None
        finally:
            await again.stop(unregister=False)
    finally:
        namesrv.stop()


async def test_with_reads_need_signature_consumer_requests_must_be_signed(
    tmp_path: Path, client: RemotingClient
) -> None:
    accounts = AclConfig(
        {ADMIN.access_key: Account(ADMIN.access_key, ADMIN.secret_key, admin=True)},
        (),
        reads_need_signature=True,
    )
    acl_file = tmp_path / "acl.yml"
    write_secret_file(acl_file, dump_acl(accounts))  # it holds secret keys: mode 0600
    namesrv = FakeNameServer().start()
    broker = BrokerController(
        broker_config(tmp_path, namesrv.addr, broker_id=0, acl_file=acl_file), MemoryRepository()
    )
    await broker.start()
    signed = RemotingClient(credentials=ADMIN)
    try:
        refused = await call(client, broker, RequestCode.HEART_BEAT, {}, heartbeat_body("c1"))
        assert refused.code == ResponseCode.NO_PERMISSION
        assert broker.consumers.group(GROUP) is None, "nothing changed"
        accepted = await signed.invoke(
            broker.broker_addr,
            RemotingCommand.request(RequestCode.HEART_BEAT, {}, heartbeat_body("c1")),
        )
        assert accepted.code == ResponseCode.SUCCESS
        assert broker.consumers.group(GROUP) is not None
    finally:
        await signed.close()
        await broker.stop(unregister=False)
        namesrv.stop()
