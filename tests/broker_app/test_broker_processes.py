"""Real broker processes (manage.py run_broker) against a recording NameServer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from remoting.acl import signature_matches
from remoting.blocking import BlockingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.broker_app.support import BROKER_WAIT_S, BrokerProcess, FakeNameServer, send
from tests.integration.gateway_harness import ADMIN
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def namesrv() -> Iterator[FakeNameServer]:
    server = FakeNameServer().start()
    yield server
    server.stop()


@pytest.fixture
def pair(tmp_path: Path, namesrv: FakeNameServer) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    master = BrokerProcess(
        tmp_path,
        "master",
        role="SYNC_MASTER",
        broker_id=0,
        namesrv=namesrv.addr,
        extra={"slave_timeout_ms": "1000"},
    )
    slave = BrokerProcess(tmp_path, "slave", role="SLAVE", broker_id=1, namesrv=namesrv.addr)
    try:
        wait_until(
            lambda: slave.runtime_info()["haConnected"] == "true",
            what="HA link",
            timeout_s=BROKER_WAIT_S,
        )
        yield master, slave
    finally:
        slave.terminate()
        master.terminate()


def test_messages_replicate_byte_identical_and_sync_sends_wait_for_the_slave(
    pair: tuple[BrokerProcess, BrokerProcess],
) -> None:
    master, slave = pair
    for index in range(200):
        response = send(master.addr, "TopicA", f"message-{index}".encode() * 40, queue_id=index % 4)
        assert response.code == ResponseCode.SUCCESS, response.remark
        assert response.ext_fields is not None and len(response.ext_fields["msgId"]) == 32
    assert response.ext_fields["queueOffset"] == "49"
    master_max = master.runtime_info()["commitLogMaxOffset"]
    wait_until(
        lambda: slave.runtime_info()["commitLogMaxOffset"] == master_max,
        what="the slave caught up",
        timeout_s=BROKER_WAIT_S,
    )
    assert slave.commit_log_files() == master.commit_log_files()
    assert len(master.commit_log_files()) >= 2


def test_a_stopped_slave_turns_sync_sends_into_flush_slave_timeout(
    pair: tuple[BrokerProcess, BrokerProcess],
) -> None:
    master, slave = pair
    assert send(master.addr, "TopicA", b"before").code == ResponseCode.SUCCESS
    slave.pause()
    try:
        response = send(master.addr, "TopicA", b"while stopped")
    finally:
        slave.resume()
    assert response.code == ResponseCode.FLUSH_SLAVE_TIMEOUT
    assert int(master.runtime_info()["commitLogMaxOffset"]) > 0
    wait_until(
        lambda: send(master.addr, "TopicA", b"after").code == ResponseCode.SUCCESS,
        what="a send accepted again",
        timeout_s=BROKER_WAIT_S,
    )


def test_a_topic_created_on_the_master_reaches_the_slave_and_the_namesrv(
    pair: tuple[BrokerProcess, BrokerProcess],
    namesrv: FakeNameServer,
) -> None:
    master, slave = pair
    request = RemotingCommand.request(
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        {
            "topic": "CreatedTopic",
            "readQueueNums": "6",
            "writeQueueNums": "6",
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": "false",
        },
    )
    with BlockingClient(master.addr, timeout_s=5.0) as client:
        refused = client.invoke(request)
    assert refused.code == ResponseCode.NO_PERMISSION, "topic creation needs an admin"
    with BlockingClient(master.addr, timeout_s=5.0, credentials=ADMIN) as client:
        assert client.invoke(request).code == ResponseCode.SUCCESS

    def slave_has_topic() -> bool:
        with BlockingClient(slave.addr, timeout_s=5.0) as client:
            body = client.invoke(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG)).body
        return body is not None and b'"CreatedTopic"' in body

    wait_until(slave_has_topic, what="topic on the slave", timeout_s=BROKER_WAIT_S)
    incremental = [
        r
        for r in namesrv.of(RequestCode.REGISTER_BROKER)
        if r.register_body is not None
        and list(r.register_body.topic_config_wrapper.topic_config_table) == ["CreatedTopic"]
    ]
    assert incremental and incremental[0].crc_ok


def test_a_sync_master_without_a_slave_answers_slave_not_available(
    tmp_path: Path,
    namesrv: FakeNameServer,
) -> None:
    master = BrokerProcess(
        tmp_path, "lonely", role="SYNC_MASTER", broker_id=0, namesrv=namesrv.addr
    )
    try:
        response = send(master.addr, "TopicA", b"alone")
        assert response.code == ResponseCode.SLAVE_NOT_AVAILABLE
        assert response.ext_fields is not None and response.ext_fields["queueOffset"] == "0"
        assert master.runtime_info()["commitLogMaxOffset"] != "0"
    finally:
        master.terminate()


def test_sigterm_unregisters_from_the_namesrv_and_heartbeats_flow_when_enabled(
    tmp_path: Path,
    namesrv: FakeNameServer,
) -> None:
    broker = BrokerProcess(
        tmp_path,
        "beating",
        role="ASYNC_MASTER",
        broker_id=0,
        namesrv=namesrv.addr,
        extra={"fast_heartbeat": "true", "heartbeat_interval_ms": "100"},
    )
    [register] = namesrv.wait_for(RequestCode.REGISTER_BROKER)
    assert register.ext["heartbeatTimeoutMillis"] == "10000"
    beats = namesrv.wait_for(RequestCode.BROKER_HEARTBEAT, count=3)
    assert all(beat.oneway for beat in beats)
    assert beats[0].ext["heartbeatTimeoutMills"] == "10000"
    assert broker.terminate() == 0
    [unregister] = namesrv.of(RequestCode.UNREGISTER_BROKER)
    assert unregister.ext["brokerAddr"] == broker.addr
    assert unregister.ext["brokerId"] == "0"


def test_a_min_broker_id_notification_is_recorded_and_exposed(
    tmp_path: Path,
    namesrv: FakeNameServer,
) -> None:
    broker = BrokerProcess(tmp_path, "notified", role="SLAVE", broker_id=1, namesrv=namesrv.addr)
    notify = RemotingCommand.request(
        RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE,
        {
            "minBrokerId": "1",
            "minBrokerAddr": broker.addr,
            "offlineBrokerAddr": "127.0.0.1:1",
            "haBrokerAddr": "127.0.0.1:2",
        },
    )
    try:
        with BlockingClient(broker.addr, timeout_s=5.0) as client:
            client.invoke_oneway(notify)
        wait_until(
            lambda: broker.runtime_info().get("minBrokerId") == "1",
            what="minBrokerId 1 after the notify",
            timeout_s=BROKER_WAIT_S,
        )
        assert broker.runtime_info()["minBrokerAddr"] == broker.addr
    finally:
        broker.terminate()


def test_a_broker_with_an_account_signs_everything_it_sends_the_namesrv(
    tmp_path: Path,
    namesrv: FakeNameServer,
) -> None:
    secret_file = tmp_path / "broker.secret"
    secret_file.write_text("broker-secret-key\n")
    secret_file.chmod(0o600)
    broker = BrokerProcess(
        tmp_path,
        "signing",
        role="ASYNC_MASTER",
        broker_id=0,
        namesrv=namesrv.addr,
        extra={
            "fast_heartbeat": "true",
            "heartbeat_interval_ms": "100",
            "namesrvAccessKey": "brokers",
            "namesrvSecretKeyFile": str(secret_file),
        },
    )
    [register] = namesrv.wait_for(RequestCode.REGISTER_BROKER)
    [beat, *_] = namesrv.wait_for(RequestCode.BROKER_HEARTBEAT)
    assert broker.terminate() == 0
    [unregister] = namesrv.of(RequestCode.UNREGISTER_BROKER)

    for received in (register, beat, unregister):
        request = RemotingCommand.request(received.code, received.ext, received.body)
        assert received.ext["AccessKey"] == "brokers"
        assert signature_matches(request, "broker-secret-key"), received.code


def test_brokers_without_an_ha_secret_replicate_nothing_and_their_logs_say_why(
    tmp_path: Path,
    namesrv: FakeNameServer,
) -> None:
    # Both processes start from the same run_broker command line as any broker, minus
    # haSecretFile: they run and serve, but the HA link is refused on both ends.
    master = BrokerProcess(
        tmp_path,
        "master",
        role="SYNC_MASTER",
        broker_id=0,
        namesrv=namesrv.addr,
        extra={"haSecretFile": ""},
    )
    slave = BrokerProcess(
        tmp_path,
        "slave",
        role="SLAVE",
        broker_id=1,
        namesrv=namesrv.addr,
        extra={"haSecretFile": ""},
    )
    try:
        assert send(master.addr, "TopicA", b"alone").code == ResponseCode.SLAVE_NOT_AVAILABLE
        wait_until(
            lambda: "no haSecretFile: not following" in slave.log_path.read_text(),
            what="the slave's log line",
            timeout_s=BROKER_WAIT_S,
        )
        info = master.runtime_info()
        assert info["haAuth"] == "refused (no haSecretFile)" and info["haConnections"] == "0"
        assert slave.runtime_info()["haConnected"] == "false"
        assert slave.runtime_info()["commitLogMaxOffset"] == "0"
        assert "no haSecretFile: HA connections refused" in master.log_path.read_text()
    finally:
        slave.terminate()
        master.terminate()


def test_an_unreadable_ha_secret_file_stops_run_broker_with_the_setting_named(
    tmp_path: Path,
) -> None:
    with pytest.raises(AssertionError, match="haSecretFile: cannot read"):
        BrokerProcess(
            tmp_path,
            "broken",
            role="SLAVE",
            broker_id=1,
            extra={"haSecretFile": str(tmp_path / "nowhere.secret")},
        )
