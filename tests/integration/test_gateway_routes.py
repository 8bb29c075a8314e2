"""A real gateway process: brokers register over TCP, clients read routes, the DB follows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from remoting import bodies
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.integration.gateway_harness import (
    BROKER,
    MASTER_ADDR,
    MASTER_HA,
    SLAVE_ADDR,
    SLAVE_HA,
    TOPICS,
    WAIT_S,
    GatewayProcess,
    register_request,
    route_request,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

GO_CLIENT_VERSION = 317
JAVA_5_VERSION = 479


def new_gateway(tmp_path: Path, node_id: str = "n1") -> GatewayProcess:
    """A gateway (not started) with its files under ``tmp_path``."""
    return GatewayProcess(
        node_id=node_id,
        db_path=tmp_path / f"{node_id}.sqlite3",
        ready_file=tmp_path / f"{node_id}.ready.json",
        log_path=tmp_path / f"{node_id}.log",
    )


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    """One running gateway, stopped with SIGTERM afterwards."""
    process = new_gateway(tmp_path).start()
    yield process
    process.terminate()


def test_a_master_and_a_slave_register_and_clients_read_both_json_styles(
    gateway: GatewayProcess,
) -> None:
    """Registration answers, both route styles and the projection rows, end to end."""
    with gateway.client() as master, gateway.client() as slave, gateway.client() as client:
        answer = master.invoke(register_request(0, MASTER_ADDR, MASTER_HA))
        assert (answer.code, answer.ext_fields) == (ResponseCode.SUCCESS, {})
        answer = slave.invoke(register_request(1, SLAVE_ADDR, SLAVE_HA))
        assert answer.ext_fields == {"haServerAddr": MASTER_HA, "masterAddr": MASTER_ADDR}

        old = client.invoke(route_request("TopicTest", GO_CLIENT_VERSION))
        assert old.body is not None
        assert f'{{0:"{MASTER_ADDR}",1:"{SLAVE_ADDR}"}}'.encode() in old.body
        new = client.invoke(route_request("TopicTest", JAVA_5_VERSION))
        assert new.body is not None
        assert f'{{"0":"{MASTER_ADDR}","1":"{SLAVE_ADDR}"}}'.encode() in new.body
        route = bodies.decode_topic_route_data(new.body)
        assert route.broker_datas[0].broker_addrs == {0: MASTER_ADDR, 1: SLAVE_ADDR}

        gateway.wait_for_projection()
        assert gateway.db_rows(
            "select topic, broker_name, read_queue_nums, perm from namesrv_app_queuedata "
            "order by topic"
        ) == [(t, BROKER, 4, 6) for t in sorted(TOPICS)]
        assert gateway.db_rows(
            "select broker_id, addr from namesrv_app_brokeraddress order by broker_id"
        ) == [(0, MASTER_ADDR), (1, SLAVE_ADDR)]


def test_closing_a_broker_connection_drops_what_it_registered(gateway: GatewayProcess) -> None:
    """Channel destroy: the master's close removes it, the slave's close removes the route."""
    with gateway.client() as client:
        master = gateway.client()
        slave = gateway.client()
        master.invoke(register_request(0, MASTER_ADDR, MASTER_HA))
        slave.invoke(register_request(1, SLAVE_ADDR, SLAVE_HA))
        master.close()

        def only_slave_left() -> bool:
            body = client.invoke(route_request("TopicTest", JAVA_5_VERSION)).body
            return body is not None and MASTER_ADDR.encode() not in body

        wait_until(only_slave_left, what="only the slave in the route", timeout_s=WAIT_S)
        slave.close()
        wait_until(
            lambda: (
                client.invoke(route_request("TopicTest", JAVA_5_VERSION)).code
                == ResponseCode.TOPIC_NOT_EXIST
            ),
            what="the route gone",
            timeout_s=WAIT_S,
        )
        gateway.wait_for_projection()
        assert gateway.db_rows("select count(*) from namesrv_app_queuedata") == [(0,)]
        assert gateway.db_rows("select count(*) from namesrv_app_livebroker") == [(0,)]


def test_sigterm_stops_the_gateway_cleanly(tmp_path: Path) -> None:
    """SIGTERM drains, flushes the projection and exits 0; the rows keep the last state."""
    process = new_gateway(tmp_path).start()
    with process.client() as broker:
        broker.invoke(register_request(0, MASTER_ADDR, MASTER_HA))
        status = process.node_status()
        assert process.terminate() == 0
    assert process.db_rows("select applied_version from namesrv_app_nodestate") == [
        (status["applied_version"],)
    ]
    assert process.db_rows("select count(*) from namesrv_app_queuedata") == [(len(TOPICS),)]


def test_a_restart_rebuilds_the_projection_equal_to_the_table(tmp_path: Path) -> None:
    """Eventual state lives in memory: a restart starts empty, rebuilds, then follows again."""
    process = new_gateway(tmp_path).start()
    broker = process.client()
    broker.invoke(register_request(0, MASTER_ADDR, MASTER_HA))
    process.wait_for_projection()
    broker.close()
    process.terminate()

    process.start(migrate=False)
    try:
        process.wait_for_projection()
        assert process.db_rows("select count(*) from namesrv_app_queuedata") == [(0,)]
        with process.client() as broker_again:
            broker_again.invoke(register_request(0, MASTER_ADDR, MASTER_HA))
            broker_again.invoke(register_request(1, SLAVE_ADDR, SLAVE_HA))
            status = process.wait_for_projection()
            assert status["applied_version"] > 0
            assert process.db_rows("select topic from namesrv_app_queuedata order by topic") == [
                (t,) for t in sorted(TOPICS)
            ]
            assert process.db_rows(
                "select cluster_name, broker_addr from namesrv_app_livebroker order by broker_addr"
            ) == [("DefaultCluster", MASTER_ADDR), ("DefaultCluster", SLAVE_ADDR)]
    finally:
        assert process.terminate() == 0


def test_kv_config_survives_a_restart_in_eventual_mode(tmp_path: Path) -> None:
    """Upstream persists kvConfig.json after every put and delete and loads it at start."""
    process = new_gateway(tmp_path).start()
    with process.admin_client() as admin:
        for key, value in (("TopicTest", "broker-a:8"), ("Gone", "x")):
            put = RemotingCommand.request(
                RequestCode.PUT_KV_CONFIG,
                {"namespace": "ORDER_TOPIC_CONFIG", "key": key, "value": value},
            )
            assert admin.invoke(put).code == ResponseCode.SUCCESS
        delete = RemotingCommand.request(
            RequestCode.DELETE_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "Gone"}
        )
        assert admin.invoke(delete).code == ResponseCode.SUCCESS
    assert process.terminate() == 0

    process.start(migrate=False)
    try:
        with process.client() as admin:
            kv_list = admin.invoke(
                RemotingCommand.request(
                    RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ORDER_TOPIC_CONFIG"}
                )
            )
        assert kv_list.code == ResponseCode.SUCCESS and kv_list.body is not None
        assert bodies.decode_kv_table(kv_list.body).table == {"TopicTest": "broker-a:8"}
        assert (tmp_path / "n1.kvConfig.json").exists()
    finally:
        assert process.terminate() == 0


def test_a_properties_file_configures_the_node_like_upstreams_dash_c(tmp_path: Path) -> None:
    """run_gateway --config FILE sets NamesrvConfig; GET_NAMESRV_CONFIG reports it."""
    config = tmp_path / "namesrv.properties"
    config.write_text("# order topics\norderMessageEnable=true\nscanNotActiveBrokerInterval=7000\n")
    process = new_gateway(tmp_path)
    process.extra_args = ("--config", str(config))
    process.start()
    try:
        with process.client() as admin:
            answer = admin.invoke(RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG))
        assert answer.code == ResponseCode.SUCCESS and answer.body is not None
        properties = bodies.decode_properties(answer.body)
        assert properties["orderMessageEnable"] == "true"
        assert properties["scanNotActiveBrokerInterval"] == "7000"
    finally:
        assert process.terminate() == 0
