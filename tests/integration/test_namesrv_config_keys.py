"""Every NamesrvConfig key is honoured or refused, on a real gateway process.

The per-process keys report what the node really runs (its port, idle timeout, scan
period, files); the keys this NameServer cannot honour are refused with their reason;
the queue capacities answer SYSTEM_BUSY; eventual mode keeps an accepted update in
``configStorePath`` across a restart.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster.demo import DemoBroker
from raftstore.config import HEARTBEAT_TIMEOUT_MS_MIN
from remoting import bodies
from remoting.acl import sign
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.frame import FRAME_BYTES_MAX, FrameDecoder, encode_frame
from tests.integration.cluster_fixtures import TEST_CLUSTER, query_route, register_broker
from tests.integration.gateway_harness import ADMIN, GatewayProcess
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

IDLE_S = 1
SCAN_PERIOD_MS = 300
HEARTBEAT_TIMEOUT_MS = HEARTBEAT_TIMEOUT_MS_MIN  # the shortest a broker may ask for
BURST_REQUESTS = 50
PROPERTIES = (
    f"serverChannelMaxIdleTimeSeconds={IDLE_S}\n"
    f"scanNotActiveBrokerInterval={SCAN_PERIOD_MS}\n"
    "defaultThreadPoolQueueCapacity=1\n"
)


def new_gateway(folder: Path, *extra_args: str) -> GatewayProcess:
    """A gateway (not started) with its files under ``folder``."""
    return GatewayProcess(
        node_id="n1",
        db_path=folder / "n1.sqlite3",
        ready_file=folder / "n1.ready.json",
        log_path=folder / "n1.log",
        extra_args=extra_args,
    )


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One eventual gateway started from a properties file with small values."""
    folder = tmp_path_factory.mktemp("config-keys")
    properties = folder / "namesrv.properties"
    properties.write_text(PROPERTIES)
    process = new_gateway(folder, "--config", str(properties)).start()
    yield process
    process.terminate()


def namesrv_config(gateway: GatewayProcess) -> dict[str, str]:
    """GET_NAMESRV_CONFIG of ``gateway``."""
    with gateway.client() as client:
        answer = client.invoke(RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG))
    assert answer.code == ResponseCode.SUCCESS
    return bodies.decode_properties(answer.body or b"")


def update(gateway: GatewayProcess, properties: dict[str, str]) -> RemotingCommand:
    """UPDATE_NAMESRV_CONFIG signed by the test admin."""
    body = bodies.encode_properties(properties)
    with gateway.admin_client() as admin:
        return admin.invoke(RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, body=body))


def test_it_reports_the_port_idle_time_scan_period_and_files_it_really_uses(
    gateway: GatewayProcess,
) -> None:
    config = namesrv_config(gateway)
    folder = gateway.db_path.parent
    assert config["listenPort"] == str(gateway.info["port"]) != "9876"
    assert config["serverChannelMaxIdleTimeSeconds"] == str(IDLE_S)
    assert config["scanNotActiveBrokerInterval"] == str(SCAN_PERIOD_MS)
    assert config["kvConfigPath"] == str(folder / "n1.kvConfig.json")
    assert config["configStorePath"] == str(folder / "n1.namesrv.properties")


def test_an_idle_connection_is_closed_after_the_configured_seconds(
    gateway: GatewayProcess,
) -> None:
    with socket.create_connection(("127.0.0.1", gateway.info["port"]), timeout=10) as sock:
        started_s = time.monotonic()
        assert sock.recv(1) == b""
        assert IDLE_S - 0.2 <= time.monotonic() - started_s < IDLE_S + 5


def test_the_gateway_scans_for_silent_brokers_at_the_configured_period(
    gateway: GatewayProcess,
) -> None:
    """The harness sends no scan and turns the fallback off: only the key's scan runs."""
    broker = DemoBroker(TEST_CLUSTER, "broker-scan", 0, "127.0.0.1:30911", "127.0.0.1:30912")
    with gateway.client() as held:
        register_broker(held, broker, ["ScanTopic"], heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS)
        wait_until(
            lambda: query_route(gateway.addr, "ScanTopic")[0] == ResponseCode.TOPIC_NOT_EXIST,
            what="the silent broker's route scanned out",
            timeout_s=5.0,
        )


@pytest.mark.parametrize(
    "key", ["listenPort", "serverChannelMaxIdleTimeSeconds", "scanNotActiveBrokerInterval"]
)
def test_an_update_of_a_start_time_setting_is_refused_with_the_reason(
    gateway: GatewayProcess, key: str
) -> None:
    before = namesrv_config(gateway)
    answer = update(gateway, {key: "7", "orderMessageEnable": "true"})
    assert answer.code == ResponseCode.NO_PERMISSION
    assert answer.remark == (
        f"Can not update config in black list. {key} is a start-time setting of each node."
    )
    assert namesrv_config(gateway) == before


def test_an_update_it_cannot_honour_is_refused_with_the_reason_and_changes_nothing(
    gateway: GatewayProcess,
) -> None:
    before = namesrv_config(gateway)
    answer = update(gateway, {"enableControllerInNamesrv": "true", "orderMessageEnable": "true"})
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark == (
        "enableControllerInNamesrv=true is refused: this NameServer embeds no controller "
        "(leave it at false)"
    )
    assert namesrv_config(gateway) == before


def test_requests_past_the_queue_capacity_answer_system_busy(gateway: GatewayProcess) -> None:
    """A burst of pipelined writes against defaultThreadPoolQueueCapacity=1."""
    requests = [
        dataclasses.replace(
            sign(
                RemotingCommand.request(
                    RequestCode.PUT_KV_CONFIG,
                    {"namespace": "burst", "key": f"k{opaque}", "value": "v"},
                ),
                ADMIN,
            ),
            opaque=opaque,
        )
        for opaque in range(1, BURST_REQUESTS + 1)
    ]
    decoder = FrameDecoder(FRAME_BYTES_MAX, header_bytes_max=FRAME_BYTES_MAX)
    answers: list[RemotingCommand] = []
    with socket.create_connection(("127.0.0.1", gateway.info["port"]), timeout=10) as sock:
        sock.sendall(b"".join(encode_frame(request) for request in requests))
        while len(answers) < BURST_REQUESTS:
            data = sock.recv(65_536)
            assert data, "the gateway closed the connection"
            answers.extend(decoder.feed(data))
    busy = [a for a in answers if a.code == ResponseCode.SYSTEM_BUSY]
    done = [a for a in answers if a.code == ResponseCode.SUCCESS]
    assert busy and done and len(busy) + len(done) == BURST_REQUESTS
    assert busy[0].remark is not None
    assert busy[0].remark.startswith("[OVERLOAD]system busy, start flow control for a while")
    assert "defaultThreadPoolQueueCapacity=1" in busy[0].remark


def test_an_eventual_node_keeps_an_accepted_update_across_a_restart(
    gateway: GatewayProcess,
) -> None:
    """Last in this module: it restarts the shared gateway."""
    assert update(gateway, {"orderMessageEnable": "true"}).code == ResponseCode.SUCCESS
    assert gateway.terminate() == 0
    stored = bodies.decode_properties(
        (gateway.db_path.parent / "n1.namesrv.properties").read_bytes()
    )
    assert stored["orderMessageEnable"] == "true" and "listenPort" not in stored
    gateway.start(migrate=False)
    assert namesrv_config(gateway)["orderMessageEnable"] == "true"
