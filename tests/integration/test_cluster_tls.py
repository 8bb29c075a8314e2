"""``cluster up --tls enforcing``: every remoting client of the cluster speaks TLS.

One raft node with the demo brokers serves the module. The brokers register over TLS
(their ``tlsConfigFile``), the console's processes reach the gateway over TLS, a plain
client is turned away, and RocketMQ's Java client TLS (netty's SslContextBuilder with
the JDK provider, as NettyRemotingClient builds it) gets a route checked against the
run's CA.
"""

from __future__ import annotations

import asyncio
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster.tls_files import CertFiles, make_ca
from remoting.bodies import decode_topic_route_data
from remoting.client import RemotingClient, RemotingClientError
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.tls import ClientTls, TlsClientConfig, client_context
from tests.integration.cluster_fixtures import start_cluster, stop_cluster
from tests.interop.java_tls import JavaTlsClient, java_tls_client
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROUTE_WAIT_S = 60.0
TOPIC = "TopicTest"


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    run_dir = tmp_path_factory.mktemp("tls-cluster")
    summary = start_cluster(
        run_dir,
        *("--mode", "raft", "--raft-base-port", "0", "--tls", "enforcing", "--demo"),
        *("--demo-broker-base-port", "0"),
        nodes=1,
    )
    try:
        yield summary
    finally:
        stop_cluster(run_dir)


def route_request() -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC, "acceptStandardJsonOnly": "true"}
    )


async def ask_route(addr: str, tls: Any) -> RemotingCommand:
    client = RemotingClient(tls=tls, connect_timeout_s=5.0)
    try:
        return await client.invoke(addr, route_request(), 5.0)
    finally:
        await client.close()


def trusting(ca_file: str) -> Any:
    return client_context(TlsClientConfig(enabled=True, trust_cert_path=Path(ca_file)))


def wait_for_route(addr: str, ca_file: str) -> RemotingCommand:
    """The route once the demo brokers registered (within a few seconds of their start)."""
    last: list[RemotingCommand] = []

    def routed() -> RemotingCommand | None:
        last[:] = [asyncio.run(ask_route(addr, trusting(ca_file)))]
        return last[0] if last[0].code == ResponseCode.SUCCESS else None

    return wait_until(
        routed,
        what=lambda: f"the route from {addr} (last answer: {last[0].code} {last[0].remark})",
        timeout_s=ROUTE_WAIT_S,
        interval_s=0.5,
    )


def test_up_names_the_ca_and_keeps_the_keys_to_their_owner(tls_cluster: dict[str, Any]) -> None:
    tls = tls_cluster["tls"]
    folder = Path(tls["ca_file"]).parent

    assert tls["mode"] == "enforcing"
    assert Path(tls["ca_file"]).is_file() and Path(tls["client_config"]).is_file()
    keys = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.glob("*.key")}
    assert set(keys) == {"ca.key", "n1.key", "client.key", "broker.key"}
    assert set(keys.values()) == {0o600}


def test_brokers_register_over_tls_and_a_tls_client_gets_their_route(
    tls_cluster: dict[str, Any],
) -> None:
    node = tls_cluster["nodes"][0]

    answer = wait_for_route(node["remoting_addr"], tls_cluster["tls"]["ca_file"])

    assert answer.code == ResponseCode.SUCCESS, answer.remark
    route = decode_topic_route_data(answer.body or b"")
    assert {b.broker_name for b in route.broker_datas} == {"broker-a", "broker-b"}


def test_a_plain_client_is_turned_away(tls_cluster: dict[str, Any]) -> None:
    node = tls_cluster["nodes"][0]

    with pytest.raises(RemotingClientError):
        asyncio.run(ask_route(node["remoting_addr"], ClientTls.PLAIN))


def test_a_client_that_trusts_another_ca_refuses_the_node(
    tls_cluster: dict[str, Any], tmp_path: Path
) -> None:
    other = CertFiles(tmp_path / "ca.pem", tmp_path / "ca.key")
    make_ca(other, "not the run's CA")
    node = tls_cluster["nodes"][0]

    with pytest.raises(RemotingClientError, match="CERTIFICATE_VERIFY_FAILED"):
        asyncio.run(ask_route(node["remoting_addr"], trusting(str(other.cert))))


def test_rocketmq_java_client_tls_gets_the_route(
    tls_cluster: dict[str, Any], java_tls: JavaTlsClient
) -> None:
    node = tls_cluster["nodes"][0]
    wait_for_route(node["remoting_addr"], tls_cluster["tls"]["ca_file"])
    host, port = node["remoting_addr"].rsplit(":", 1)

    out = java_tls.route(
        host, int(port), TOPIC, auth_server=True, trust_cert=Path(tls_cluster["tls"]["ca_file"])
    )

    assert out["protocol"] in ("TLSv1.2", "TLSv1.3")
    assert out["code"] == "0", out
    assert '"brokerName":"broker-a"' in out["body"]


def test_rocketmq_java_client_checking_the_chain_refuses_another_ca(
    tls_cluster: dict[str, Any], java_tls: JavaTlsClient, tmp_path: Path
) -> None:
    other = CertFiles(tmp_path / "ca.pem", tmp_path / "ca.key")
    make_ca(other, "not the run's CA")
    host, port = tls_cluster["nodes"][0]["remoting_addr"].rsplit(":", 1)

    out = java_tls.route(host, int(port), TOPIC, auth_server=True, trust_cert=other.cert)

    assert "failed" in out and "certification path" in out["failed"], out


def test_the_console_reads_routes_from_its_gateway_over_tls(tls_cluster: dict[str, Any]) -> None:
    """The web process asks its gateway over the enforcing port (a linearizable read
    always goes to the gateway), so a route answer proves the console speaks TLS."""
    run_dir = tls_cluster["run_dir"]
    node = tls_cluster["nodes"][0]
    wait_for_route(node["remoting_addr"], tls_cluster["tls"]["ca_file"])
    made = subprocess.run(
        [
            *manage(),
            "create_operator",
            "tls-viewer",
            "--role",
            "viewer",
            "--token",
            "--run-dir",
            run_dir,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip().splitlines()[-1].split()[-1]
    url = f"{node['console_url'].rstrip('/')}/api/v1/routes/{TOPIC}/?consistency=linearizable"

    status, body = http_get(url, token, tls_cluster["tls"]["ca_file"])

    assert status == 200, body
    assert "broker-a" in body


def manage() -> list[str]:
    import sys

    from tests.integration.cluster_fixtures import PROJECT_DIR

    return [sys.executable, str(PROJECT_DIR / "manage.py")]


def http_get(url: str, token: str, ca_file: str) -> tuple[int, str]:
    import ssl
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={"Authorization": f"Token {token}"})
    context = ssl.create_default_context(cafile=ca_file) if url.startswith("https") else None
    try:
        with urllib.request.urlopen(request, timeout=15, context=context) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def java_tls(tmp_path_factory: pytest.TempPathFactory) -> JavaTlsClient:
    return java_tls_client(tmp_path_factory.mktemp("java-tls"))
