"""DELETE_TOPIC_IN_BROKER (215): a real broker registered with a real gateway.

The broker drops the topic, its consumer offsets and consume queues, persists,
and registers again; a gateway with ``deleteTopicWithBrokerRegistration`` then
drops the topic from that broker's route. System topics and unsigned requests
are refused, as upstream's ``AdminBrokerProcessor.deleteTopic`` and our ACL do.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_app.config import DELETE_TOPIC_IN_BROKER
from broker_app.metadata import (
    BrokerMetadata,
    MetadataSnapshot,
    default_topics,
    is_system_topic,
)
from broker_app.store.message_store import MessageInput, MessageStore, StoreConfig
from localcluster import broker_control
from localcluster.broker_control import BrokerControlError
from remoting.blocking import BlockingClient
from remoting.bodies import decode_topic_config_serialize_wrapper
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.model import DataVersion, TopicConfig
from tests.broker_app.support import BROKER_WAIT_S, BrokerProcess, send
from tests.integration.gateway_harness import ADMIN, GatewayProcess, config_args, route_request
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

TOPIC = "DoomedTopic"


# ------------------------------------------------------------------- in process


def test_the_metadata_drops_the_topic_and_its_offsets_and_bumps_the_version() -> None:
    topics = default_topics("DefaultCluster", "broker-a", auto_create=True, queue_nums=4)
    metadata = BrokerMetadata(
        MetadataSnapshot(
            topics={**topics, TOPIC: TopicConfig(TOPIC, 4, 4)}, topic_version=DataVersion(0, 5, 1)
        )
    )
    metadata.commit_offset(TOPIC, "g1", 0, 7)
    metadata.commit_offset("Kept", "g1", 0, 3)
    metadata.commit_offset(f"{TOPIC}x", "g1", 0, 3)

    assert metadata.delete_topic(TOPIC, now_ms=99) is True
    assert TOPIC not in metadata.snapshot.topics
    assert metadata.snapshot.topic_version == DataVersion(0, 99, 2)
    assert set(metadata.snapshot.consumer_offsets) == {"Kept@g1", f"{TOPIC}x@g1"}

    assert metadata.delete_topic(TOPIC, now_ms=100) is False, "unknown: no new version"
    assert metadata.snapshot.topic_version == DataVersion(0, 99, 2)


def test_system_topics_are_the_upstream_set_and_prefix() -> None:
    for topic in (
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRACE_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "rmq_sys_anything",
        "BenchmarkTest",
    ):
        assert is_system_topic(topic), topic
    assert not is_system_topic("TopicTest")
    assert not is_system_topic("RMQ_SYS_TRACE_TOPIC_X")


def test_a_deleted_topic_stays_out_of_the_consume_queues_across_a_restart(tmp_path: Path) -> None:
    config = StoreConfig(
        store_dir=tmp_path / "store", segment_bytes=64 * 1024, record_bytes_max=16 * 1024
    )
    store = MessageStore(config)
    for index in range(3):
        store.put_message(MessageInput(TOPIC, 0, f"old-{index}".encode()), 1_000 + index)
    store.put_message(MessageInput("Kept", 0, b"kept"), 2_000)
    assert store.queue_max_offset(TOPIC, 0) == 3

    assert store.delete_topic(TOPIC) == 1
    assert not (config.store_dir / "consumequeue" / TOPIC).exists()
    assert store.queue_max_offset(TOPIC, 0) == 0
    # Created again: its queue starts over at 0, as upstream.
    assert store.put_message(MessageInput(TOPIC, 0, b"new"), 3_000).queue_offset == 0
    store.close()

    # Recovery indexes the whole commit log again, but not the deleted generation.
    reopened = MessageStore(config)
    try:
        assert reopened.queue_max_offset(TOPIC, 0) == 1
        message = reopened.get_message(TOPIC, 0, 0)
        assert message is not None and message.body == b"new"
        assert reopened.queue_max_offset("Kept", 0) == 1
    finally:
        reopened.close()


# ------------------------------------------------------------------- real processes


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    """A gateway that drops a broker's unlisted topics at its registration (5.x
    ``deleteTopicWithBrokerRegistration``), so the broker's own re-registration is seen."""
    folder = tmp_path / "gateway"
    folder.mkdir()
    process = GatewayProcess(
        "n1",
        folder / "db.sqlite3",
        folder / "ready.json",
        folder / "gateway.log",
        extra_args=config_args(folder, deleteTopicWithBrokerRegistration="true"),
    ).start()
    yield process
    process.terminate()


@pytest.fixture
def master(tmp_path: Path, gateway: GatewayProcess) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(
        tmp_path, "master", role="ASYNC_MASTER", broker_id=0, namesrv=gateway.addr
    )
    yield broker
    broker.terminate()


def route_code(gateway: GatewayProcess, topic: str) -> int:
    with gateway.client() as client:
        return client.invoke(route_request(topic, 479)).code


def broker_topics(addr: str) -> set[str]:
    with BlockingClient(addr, timeout_s=5.0) as client:
        response = client.invoke(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
    assert response.code == ResponseCode.SUCCESS and response.body is not None
    return set(decode_topic_config_serialize_wrapper(response.body).topic_config_table)


def create(addr: str, topic: str = TOPIC) -> None:
    broker_control.create_topic(
        addr, topic, read_queue_nums=4, write_queue_nums=4, perm=6, credentials=ADMIN
    )


def test_a_deleted_topic_leaves_the_master_the_slave_and_the_route(
    tmp_path: Path, gateway: GatewayProcess, master: BrokerProcess
) -> None:
    slave = BrokerProcess(tmp_path, "slave", role="SLAVE", broker_id=1, namesrv=gateway.addr)
    try:
        create(master.addr)
        wait_until(
            lambda: route_code(gateway, TOPIC) == ResponseCode.SUCCESS,
            what="the topic in the gateway's route",
            timeout_s=BROKER_WAIT_S,
        )
        wait_until(
            lambda: TOPIC in broker_topics(slave.addr),
            what="the topic on the slave",
            timeout_s=BROKER_WAIT_S,
        )
        assert send(master.addr, TOPIC, b"soon gone").code == ResponseCode.SUCCESS
        queues = master.store_dir / "consumequeue" / TOPIC
        assert queues.is_dir()

        # As the dashboard does: every broker of the topic, masters first.
        broker_control.delete_topic(master.addr, TOPIC, ADMIN)
        broker_control.delete_topic(slave.addr, TOPIC, ADMIN)

        assert TOPIC not in broker_topics(master.addr)
        assert TOPIC not in broker_topics(slave.addr)
        assert "TBW102" in broker_topics(master.addr)
        assert not queues.exists()
        # The master registered its table without the topic: the gateway dropped it.
        wait_until(
            lambda: route_code(gateway, TOPIC) == ResponseCode.TOPIC_NOT_EXIST,
            what="the route gone after the re-registration",
            timeout_s=BROKER_WAIT_S,
        )
        # The slave keeps it deleted through its next metadata sync from the master.
        wait_until(
            lambda: TOPIC not in broker_topics(slave.addr),
            what="the topic gone from the slave",
            timeout_s=2.0,
        )
    finally:
        slave.terminate()


def test_a_deleted_topic_stays_deleted_after_a_broker_restart(
    tmp_path: Path, gateway: GatewayProcess, master: BrokerProcess
) -> None:
    create(master.addr)
    assert send(master.addr, TOPIC, b"before").code == ResponseCode.SUCCESS
    broker_control.delete_topic(master.addr, TOPIC, ADMIN)
    # Deleting a topic the broker does not hold succeeds, as upstream.
    broker_control.delete_topic(master.addr, "NeverThere", ADMIN)
    master.terminate()
    master.ready_file.unlink()

    again = BrokerProcess(
        tmp_path, "master", role="ASYNC_MASTER", broker_id=0, namesrv=gateway.addr
    )
    try:
        assert TOPIC not in broker_topics(again.addr)
        assert not (again.store_dir / "consumequeue" / TOPIC).exists()
        assert route_code(gateway, TOPIC) == ResponseCode.TOPIC_NOT_EXIST
        create(again.addr)
        response = send(again.addr, TOPIC, b"after")
        assert response.code == ResponseCode.SUCCESS
        assert response.ext_fields is not None and response.ext_fields["queueOffset"] == "0"
    finally:
        again.terminate()


def test_system_topics_and_illegal_names_are_refused(master: BrokerProcess) -> None:
    for topic in ("TBW102", "SCHEDULE_TOPIC_XXXX", "rmq_sys_anything"):
        with pytest.raises(BrokerControlError, match=r"is conflict with system topic"):
            broker_control.delete_topic(master.addr, topic, ADMIN)
    request = RemotingCommand.request(DELETE_TOPIC_IN_BROKER, {"topic": "no spaces"})
    with BlockingClient(master.addr, timeout_s=5.0, credentials=ADMIN) as client:
        refused = client.invoke(request)
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert refused.remark is not None and "illegal characters" in refused.remark
    assert "TBW102" in broker_topics(master.addr)


def test_an_unsigned_delete_is_refused_while_the_acl_is_on(
    gateway: GatewayProcess, master: BrokerProcess
) -> None:
    create(master.addr)
    request = RemotingCommand.request(DELETE_TOPIC_IN_BROKER, {"topic": TOPIC})
    with BlockingClient(master.addr, timeout_s=5.0) as client:
        refused = client.invoke(request)
    assert refused.code == ResponseCode.NO_PERMISSION
    assert TOPIC in broker_topics(master.addr)
    with pytest.raises(BrokerControlError, match="refused to delete"):
        broker_control.delete_topic(master.addr, TOPIC)
    assert TOPIC in broker_topics(master.addr)
    wait_until(
        lambda: route_code(gateway, TOPIC) == ResponseCode.SUCCESS,
        what="the topic (not deleted) routed",
        timeout_s=BROKER_WAIT_S,
    )


def test_a_broker_that_splits_its_registration_keeps_every_other_topic_routed(
    tmp_path: Path, gateway: GatewayProcess
) -> None:
    """``enableSplitRegistration`` with parts of 2 topics: the gateway registers the
    merged table at the last part, so the deleted topic goes and every topic of the
    other parts stays (registered part by part, each would delete the others')."""
    split = BrokerProcess(
        tmp_path,
        "split",
        role="ASYNC_MASTER",
        broker_id=0,
        namesrv=gateway.addr,
        extra={"enableSplitRegistration": "true", "splitRegistrationSize": "2"},
    )
    try:
        create(split.addr)
        kept = broker_topics(split.addr) - {TOPIC}
        assert len(kept) >= 4, "the broker's table spans several parts"
        wait_until(
            lambda: route_code(gateway, TOPIC) == ResponseCode.SUCCESS,
            what="the created topic routed",
            timeout_s=BROKER_WAIT_S,
        )
        broker_control.delete_topic(split.addr, TOPIC, ADMIN)
        wait_until(
            lambda: route_code(gateway, TOPIC) == ResponseCode.TOPIC_NOT_EXIST,
            what="the route gone after the split re-registration",
            timeout_s=BROKER_WAIT_S,
        )
        assert {t for t in kept if route_code(gateway, t) != ResponseCode.SUCCESS} == set()
    finally:
        split.terminate()
