"""The remoting ACL of a real gateway: admin codes need an admin's signature, broker
codes a signature or a white-listed address, and a refusal changes nothing.

The gateway white-lists 127.0.0.1 only; "another address" is 127.0.0.2, which on
Linux reaches the same loopback listener with its own source address.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from node.files import write_secret_file
from remoting import bodies
from remoting.acl import Credentials, sign
from remoting.acl_policy import Account, AclConfig, dump_acl, parse_address_pattern
from remoting.codes import FLAG_ONEWAY, RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.frame import FrameDecoder, encode_frame
from remoting.model import DataVersion, QueueData, TopicRouteData
from tests.integration.gateway_harness import (
    ADMIN,
    BROKER,
    BROKER_ACCOUNT,
    CLUSTER,
    MASTER_ADDR,
    MASTER_HA,
    SLAVE_ADDR,
    SLAVE_HA,
    GatewayProcess,
    register_request,
    route_request,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

OTHER_HOST = "127.0.0.2"
SOCKET_TIMEOUT_S = 5.0
RELOAD_WAIT_S = 5.0


def write_acl(path: Path, *, reads_need_signature: bool = False) -> Path:
    """Admin + broker accounts; only 127.0.0.1 may send broker codes unsigned."""
    accounts = (
        Account(ADMIN.access_key, ADMIN.secret_key, admin=True),
        Account(BROKER_ACCOUNT.access_key, BROKER_ACCOUNT.secret_key),
    )
    config = AclConfig(
        {a.access_key: a for a in accounts},
        (parse_address_pattern("127.0.0.1/32"),),
        reads_need_signature,
    )
    write_secret_file(path, dump_acl(config))  # it holds secret keys: mode 0600
    return path


class SourceClient:
    """A raw connection from a chosen source address (BlockingClient has no bind)."""

    def __init__(self, addr: str, source_host: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((source_host, 0))
        self.sock.settimeout(SOCKET_TIMEOUT_S)
        self.sock.connect((host, int(port)))
        self.decoder = FrameDecoder()
        self.opaque = 100

    def invoke(self, request: RemotingCommand) -> RemotingCommand:
        self.opaque += 1
        request.opaque = self.opaque
        self.sock.sendall(encode_frame(request))
        while True:
            for answer in self.decoder.feed(self.sock.recv(65536)):
                if answer.opaque == self.opaque:
                    return answer

    def send_oneway(self, request: RemotingCommand) -> None:
        request.flag |= FLAG_ONEWAY
        self.sock.sendall(encode_frame(request))

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A gateway with broker-a's master and slave registered, KV and config to protect."""
    folder: Path = tmp_path_factory.mktemp("acl")
    acl_file = write_acl(folder / "acl.yml")
    process = GatewayProcess(
        "n1",
        folder / "db.sqlite3",
        folder / "ready.json",
        folder / "gateway.log",
        extra_args=("--acl-file", str(acl_file)),
    ).start()
    master, slave = process.client(), process.client()
    assert master.invoke(register_request(0, MASTER_ADDR, MASTER_HA)).code == 0
    assert slave.invoke(register_request(1, SLAVE_ADDR, SLAVE_HA)).code == 0
    with process.admin_client() as admin:
        put = RemotingCommand.request(
            RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "kept", "value": "v1"}
        )
        assert admin.invoke(put).code == ResponseCode.SUCCESS
    yield process
    master.close()
    slave.close()
    process.terminate()


def state_of(gateway: GatewayProcess) -> tuple[object, ...]:
    status = gateway.node_status()
    return (status["digest"], status["applied_index"], status["applied_version"])


def admin_requests() -> dict[str, Callable[[], RemotingCommand]]:
    """One state-changing request per admin code."""
    route = TopicRouteData(queue_datas=[QueueData(BROKER, 4, 4, 6, 0)])
    return {
        "PUT_KV_CONFIG": lambda: RemotingCommand.request(
            RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "new", "value": "x"}
        ),
        "DELETE_KV_CONFIG": lambda: RemotingCommand.request(
            RequestCode.DELETE_KV_CONFIG, {"namespace": "ns", "key": "kept"}
        ),
        "WIPE_WRITE_PERM_OF_BROKER": lambda: RemotingCommand.request(
            RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": BROKER}
        ),
        "ADD_WRITE_PERM_OF_BROKER": lambda: RemotingCommand.request(
            RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": BROKER}
        ),
        "DELETE_TOPIC_IN_NAMESRV": lambda: RemotingCommand.request(
            RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "TopicTest"}
        ),
        "REGISTER_TOPIC_IN_NAMESRV": lambda: RemotingCommand.request(
            RequestCode.REGISTER_TOPIC_IN_NAMESRV,
            {"topic": "Injected"},
            bodies.encode_topic_route_data(route, standard=True),
        ),
        "UPDATE_NAMESRV_CONFIG": lambda: RemotingCommand.request(
            RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n"
        ),
    }


WRONG_WAYS: dict[str, tuple[Callable[[RemotingCommand], RemotingCommand], str]] = {
    "unsigned": (lambda r: r, "needs an ACL signature (no AccessKey)"),
    "unknown key": (
        lambda r: sign(r, Credentials("intruder", "intruder-secret")),
        "unknown AccessKey 'intruder'",
    ),
    "wrong secret": (
        lambda r: sign(r, Credentials(ADMIN.access_key, "not-the-admin-secret")),
        "signature does not match",
    ),
    "broker account": (lambda r: sign(r, BROKER_ACCOUNT), "is not an admin account"),
}


@pytest.mark.parametrize("code_name", sorted(admin_requests()))
@pytest.mark.parametrize("way", sorted(WRONG_WAYS))
def test_an_admin_code_without_an_admins_signature_is_refused_and_changes_nothing(
    gateway: GatewayProcess, code_name: str, way: str
) -> None:
    before = state_of(gateway)
    spoil, remark = WRONG_WAYS[way]

    with gateway.client() as client:
        answer = client.invoke(spoil(admin_requests()[code_name]()))
        still_served = client.invoke(route_request("TopicTest", 479))

    assert answer.code == ResponseCode.NO_PERMISSION
    assert remark in (answer.remark or "") and code_name in (answer.remark or "")
    assert still_served.code == ResponseCode.SUCCESS, "the connection is kept"
    assert state_of(gateway) == before


def test_a_white_listed_address_does_not_make_an_admin_code_pass(
    gateway: GatewayProcess,
) -> None:
    before = state_of(gateway)

    with gateway.client() as client:
        answers = [client.invoke(make()).code for make in admin_requests().values()]

    assert set(answers) == {ResponseCode.NO_PERMISSION}
    assert state_of(gateway) == before


def test_the_admin_account_may_do_every_admin_operation(tmp_path: Path) -> None:
    process = GatewayProcess(
        "n1", tmp_path / "db.sqlite3", tmp_path / "ready.json", tmp_path / "gateway.log"
    ).start()
    try:
        with process.client() as broker:
            assert broker.invoke(register_request(0, MASTER_ADDR, MASTER_HA)).code == 0
            with process.admin_client() as admin:
                codes = {name: admin.invoke(make()).code for name, make in admin_requests().items()}
        assert codes == dict.fromkeys(admin_requests(), ResponseCode.SUCCESS)
    finally:
        process.terminate()


def test_a_broker_off_the_white_list_must_sign(gateway: GatewayProcess) -> None:
    before = state_of(gateway)
    other = SourceClient(gateway.addr, OTHER_HOST)
    try:
        refused = other.invoke(register_request(2, "127.0.0.2:10931", "127.0.0.2:10932"))
        assert refused.code == ResponseCode.NO_PERMISSION
        assert "from 127.0.0.2 needs a signature or a white-listed address" in (
            refused.remark or ""
        )
        for request in (
            RemotingCommand.request(
                RequestCode.UNREGISTER_BROKER,
                {
                    "brokerName": BROKER,
                    "brokerAddr": MASTER_ADDR,
                    "clusterName": CLUSTER,
                    "brokerId": "0",
                },
            ),
            RemotingCommand.request(
                RequestCode.QUERY_DATA_VERSION,
                {
                    "brokerName": BROKER,
                    "brokerAddr": MASTER_ADDR,
                    "clusterName": CLUSTER,
                    "brokerId": "0",
                },
                bodies.encode_data_version(DataVersion(timestamp=1_700_000_000_000, counter=1)),
            ),
        ):
            assert other.invoke(request).code == ResponseCode.NO_PERMISSION
        other.send_oneway(
            RemotingCommand.request(
                RequestCode.BROKER_HEARTBEAT, {"clusterName": CLUSTER, "brokerAddr": MASTER_ADDR}
            )
        )
        # The refused one-way heartbeat got no answer: the next answer is this read's.
        assert other.invoke(route_request("TopicTest", 479)).code == ResponseCode.SUCCESS
        assert state_of(gateway) == before

        signed = other.invoke(
            sign(register_request(2, "127.0.0.2:10931", "127.0.0.2:10932"), BROKER_ACCOUNT)
        )
        assert signed.code == ResponseCode.SUCCESS
        assert state_of(gateway) != before
    finally:
        other.close()


def test_a_forged_signature_is_refused_even_from_the_white_list(
    gateway: GatewayProcess,
) -> None:
    before = state_of(gateway)
    forged = sign(
        register_request(0, MASTER_ADDR, MASTER_HA),
        Credentials(BROKER_ACCOUNT.access_key, "guessed-broker-secret"),
    )

    with gateway.client() as client:
        answer = client.invoke(forged)

    assert answer.code == ResponseCode.NO_PERMISSION
    assert "signature does not match" in (answer.remark or "")
    assert state_of(gateway) == before


def test_reads_stay_open_to_anyone(gateway: GatewayProcess) -> None:
    other = SourceClient(gateway.addr, OTHER_HOST)
    try:
        assert other.invoke(route_request("TopicTest", 479)).code == ResponseCode.SUCCESS
        info = other.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        assert info.code == ResponseCode.SUCCESS
    finally:
        other.close()


def test_an_edited_accounts_file_takes_effect_without_a_restart(tmp_path: Path) -> None:
    acl_file = write_acl(tmp_path / "acl.yml")
    process = GatewayProcess(
        "n1",
        tmp_path / "db.sqlite3",
        tmp_path / "ready.json",
        tmp_path / "gateway.log",
        extra_args=("--acl-file", str(acl_file)),
    ).start()
    read = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
    try:
        with process.client() as client:
            assert client.invoke(read).code == ResponseCode.SUCCESS
            write_acl(acl_file, reads_need_signature=True)
            wait_until(
                lambda: client.invoke(read).code == ResponseCode.NO_PERMISSION,
                what="reads need a signature",
                timeout_s=RELOAD_WAIT_S,
                interval_s=0.1,
            )
            assert client.invoke(sign(read, BROKER_ACCOUNT)).code == ResponseCode.SUCCESS

            acl_file.write_text("accounts: [this is not yaml", encoding="utf-8")
            time.sleep(1.5)
            assert client.invoke(sign(read, BROKER_ACCOUNT)).code == ResponseCode.SUCCESS, (
                "a broken edit keeps the last good accounts"
            )
        assert "keeping the last good accounts" in process.log_path.read_text()
    finally:
        process.terminate()


def test_without_an_accounts_file_admin_codes_are_refused_and_loopback_brokers_pass(
    tmp_path: Path,
) -> None:
    process = GatewayProcess(
        "n1",
        tmp_path / "db.sqlite3",
        tmp_path / "ready.json",
        tmp_path / "gateway.log",
        with_test_acl=False,
    ).start()
    try:
        with process.client() as broker, process.admin_client() as admin:
            assert broker.invoke(register_request(0, MASTER_ADDR, MASTER_HA)).code == 0
            put = admin_requests()["PUT_KV_CONFIG"]()
            assert admin.invoke(put).code == ResponseCode.NO_PERMISSION
        assert "no ACL file: admin request codes are refused" in process.log_path.read_text()
    finally:
        process.terminate()


def test_an_operator_may_turn_the_acl_off(tmp_path: Path) -> None:
    process = GatewayProcess(
        "n1",
        tmp_path / "db.sqlite3",
        tmp_path / "ready.json",
        tmp_path / "gateway.log",
        with_test_acl=False,
        extra_args=("--no-acl",),
    ).start()
    try:
        other = SourceClient(process.addr, OTHER_HOST)
        try:
            put = admin_requests()["PUT_KV_CONFIG"]()
            assert other.invoke(put).code == ResponseCode.SUCCESS
        finally:
            other.close()
        assert "remoting ACL is OFF" in process.log_path.read_text()
    finally:
        process.terminate()


def test_a_malformed_accounts_file_stops_the_gateway_with_one_clear_line(
    tmp_path: Path,
) -> None:
    acl_file = tmp_path / "acl.yml"
    write_secret_file(acl_file, "accounts:\n  - accessKey: a\n    secretKey: short\n")
    process = GatewayProcess(
        "n1",
        tmp_path / "db.sqlite3",
        tmp_path / "ready.json",
        tmp_path / "gateway.log",
        with_test_acl=False,
        extra_args=("--acl-file", str(acl_file)),
    )

    with pytest.raises(RuntimeError, match="gateway did not start") as caught:
        process.start()

    assert "accounts[0].secretKey must be a string of at least 6 characters" in str(caught.value)
