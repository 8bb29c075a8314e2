"""A TLS client certificate as a broker's identity (``certificateSubject`` in the
accounts file, remoting/acl_policy.py), against a real in-process gateway whose public
port requires client certificates (``tls.server.need.client.auth=require``).

broker-a's account names the subject ``CN=broker-a`` and binds the name broker-a: a
broker presenting that certificate registers unsigned, and changes its entry from any
of its connections; a broker with another certificate of the same CA cannot name
broker-a at all, signed or not.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.options import GatewayOptions
from gateway.server import Gateway
from localcluster.demo import DemoBroker, register_request, topic_table
from localcluster.tls_files import CertFiles, RunTls, ensure_run_tls, issue_cert, load_pair
from node.files import write_secret_file
from remoting.acl_policy import AclConfigError, load_acl_file, parse_acl
from remoting.client import RemotingClient, RemotingClientError
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.model import DataVersion
from remoting.tls import TlsClientConfig, client_context

MASTER = "127.0.0.1:10911"
WAIT_S = 5.0
ACCOUNTS = """\
globalWhiteRemoteAddresses: [127.0.0.0/8]
accounts:
  - accessKey: broker-a
    certificateSubject: CN=broker-a
    brokerNames: [broker-a]
"""


def register(name: str, ha_addr: str = "127.0.0.1:10912") -> RemotingCommand:
    broker = DemoBroker("DefaultCluster", name, 0, MASTER, ha_addr)
    return register_request(broker, topic_table(["TopicTest", name]), DataVersion(1, 1, 1))


def require_client_certificates(folder: Path) -> tuple[RunTls, Path, Path]:
    """A CA with a server certificate, a tls.properties that enforces TLS and requires
    client certificates, and the accounts file binding ``CN=broker-a`` to broker-a."""
    run_tls = ensure_run_tls(folder / "tls", {"n1": ()})
    server = run_tls.nodes["n1"]
    tls_file = folder / "tls.properties"
    tls_file.write_text(
        "tls.server.mode=enforcing\n"
        f"tls.server.certPath={server.cert}\n"
        f"tls.server.keyPath={server.key}\n"
        f"tls.server.trustCertPath={run_tls.ca.cert}\n"
        "tls.server.need.client.auth=require\n",
        encoding="utf-8",
    )
    accounts = folder / "plain_acl.yml"
    write_secret_file(accounts, ACCOUNTS)
    return run_tls, tls_file, accounts


def client_certificate(run_tls: RunTls, folder: Path, common_name: str | None) -> ssl.SSLContext:
    """A client context trusting the run's CA and presenting a certificate it issued for
    ``common_name`` (None: no certificate)."""
    own = None
    if common_name is not None:
        own = CertFiles(folder / f"{common_name}.pem", folder / f"{common_name}.key")
        ca = load_pair(run_tls.ca)
        assert ca is not None
        issue_cert(ca, own, common_name)
    return client_context(
        TlsClientConfig(
            enabled=True,
            trust_cert_path=run_tls.ca.cert,
            cert_path=None if own is None else own.cert,
            key_path=None if own is None else own.key,
        )
    )


class Node:
    def __init__(self, gateway: Gateway, run_tls: RunTls, folder: Path) -> None:
        self.gateway = gateway
        self.run_tls = run_tls
        self.folder = folder
        self.addr = f"127.0.0.1:{gateway.port}"
        self._clients: list[RemotingClient] = []

    def connection(self, common_name: str | None) -> RemotingClient:
        """A TLS connection presenting a certificate of the run's CA for ``common_name``
        (None: no certificate)."""
        client = RemotingClient(tls=client_certificate(self.run_tls, self.folder, common_name))
        self._clients.append(client)
        return client

    async def send(self, client: RemotingClient, request: RemotingCommand) -> RemotingCommand:
        return await client.invoke(self.addr, request, WAIT_S)

    def ha_of_master(self) -> str | None:
        entry = self.gateway.replicator.read(
            lambda table: table.live_broker("DefaultCluster", MASTER)
        )
        return None if entry is None else entry.ha_server_addr

    async def close(self) -> None:
        for client in self._clients:
            await client.close()


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    run_tls, tls_file, accounts = require_client_certificates(tmp_path)
    gateway = Gateway(
        GatewayOptions(node_id="n1", port=0, acl_file=accounts, tls_config_file=tls_file)
    )
    await gateway.start()
    running = Node(gateway, run_tls, tmp_path)
    try:
        yield running
    finally:
        await running.close()
        await gateway.stop()


async def test_the_bound_certificate_registers_its_broker_unsigned(node: Node) -> None:
    answer = await node.send(node.connection("broker-a"), register("broker-a"))

    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert node.ha_of_master() == "127.0.0.1:10912"


@pytest.mark.parametrize("common_name", ["broker-x", None], ids=["other-certificate", "none"])
async def test_another_certificate_cannot_name_the_bound_broker(
    node: Node, common_name: str | None
) -> None:
    if common_name is None:
        with pytest.raises(RemotingClientError):  # the server refuses the handshake
            await node.send(node.connection(None), register("broker-a"))
        return
    answer = await node.send(node.connection(common_name), register("broker-a"))

    assert answer.code == ResponseCode.NO_PERMISSION
    assert answer.remark is not None and "bound to AccessKey 'broker-a'" in answer.remark
    assert node.ha_of_master() is None


async def test_the_certificate_changes_its_entry_from_any_of_its_connections(node: Node) -> None:
    """The holder rule gives way to the broker's own identity: a second connection of the
    same certificate moves the HA address, which a mere second connection may not."""
    assert (await node.send(node.connection("broker-a"), register("broker-a"))).code == 0

    answer = await node.send(
        node.connection("broker-a"), register("broker-a", ha_addr="127.0.0.1:10999")
    )

    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert node.ha_of_master() == "127.0.0.1:10999"


def test_an_account_may_leave_its_secret_out_only_with_a_certificate_subject(
    tmp_path: Path,
) -> None:
    config = parse_acl(
        {"accounts": [{"accessKey": "b", "certificateSubject": "O=Example, CN=broker-b"}]}
    )
    assert config.accounts["b"].secret_key is None
    assert set(config.by_subject) == {"CN=broker-b,O=Example"}
    with pytest.raises(AclConfigError, match="secretKey"):
        parse_acl({"accounts": [{"accessKey": "b"}]})
    with pytest.raises(AclConfigError, match="not ATTR=value"):
        parse_acl({"accounts": [{"accessKey": "b", "certificateSubject": "broker-b"}]})
    path = tmp_path / "acl.yml"
    write_secret_file(path, ACCOUNTS)
    assert load_acl_file(path).accounts["broker-a"].certificate_subject == "CN=broker-a"
