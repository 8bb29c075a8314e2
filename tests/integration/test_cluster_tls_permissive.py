"""``cluster up --tls permissive``: one remoting port serves TLS and plain clients.

Upstream's permissive mode tells a TLS ClientHello from a plain frame by its first byte
(0x16). Here the port belongs to the node's read front, which answers route queries and
hands a broker's plain connection to its gateway. One raft node serves the module: a
broker registering in plain text and one registering over TLS are both routed, and both
kinds of client read both routes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster.demo import register_request, topic_table
from remoting.blocking import BlockingClient
from remoting.bodies import decode_topic_route_data
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.model import DataVersion
from remoting.tls import ClientTls, TlsClientConfig, client_context
from tests.integration.cluster_fixtures import make_broker, start_cluster, stop_cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WIRE_TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def permissive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    run_dir = tmp_path_factory.mktemp("tls-permissive")
    summary = start_cluster(
        run_dir, "--mode", "raft", "--raft-base-port", "0", "--tls", "permissive", nodes=1
    )
    try:
        yield summary
    finally:
        stop_cluster(run_dir)


def _tls(summary: dict[str, Any]) -> Any:
    ca_file = Path(summary["tls"]["ca_file"])
    return client_context(TlsClientConfig(enabled=True, trust_cert_path=ca_file))


def _route_request(topic: str) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, "acceptStandardJsonOnly": "true"}
    )


async def _invoke(addr: str, tls: Any, request: RemotingCommand) -> RemotingCommand:
    client = RemotingClient(tls=tls, connect_timeout_s=WIRE_TIMEOUT_S)
    try:
        return await client.invoke(addr, request, WIRE_TIMEOUT_S)
    finally:
        await client.close()


def _brokers_of(answer: RemotingCommand) -> set[str]:
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return {b.broker_name for b in decode_topic_route_data(answer.body or b"").broker_datas}


def test_plain_and_tls_brokers_and_clients_share_the_port(permissive: dict[str, Any]) -> None:
    assert permissive["tls"]["mode"] == "permissive"
    addr = permissive["nodes"][0]["remoting_addr"]
    tls = _tls(permissive)
    plain_broker, tls_broker = make_broker("broker-plain", 41000), make_broker("broker-tls", 41010)
    version = DataVersion(timestamp=1, counter=1)

    with BlockingClient(addr, timeout_s=WIRE_TIMEOUT_S) as plain:
        registered = plain.invoke(
            register_request(plain_broker, topic_table(["PlainTopic", "broker-plain"]), version)
        )
        assert registered.code == ResponseCode.SUCCESS, registered.remark
        over_tls = register_request(tls_broker, topic_table(["TlsTopic", "broker-tls"]), version)
        registered = asyncio.run(_invoke(addr, tls, over_tls))
        assert registered.code == ResponseCode.SUCCESS, registered.remark

        for topic, broker in (("PlainTopic", "broker-plain"), ("TlsTopic", "broker-tls")):
            assert _brokers_of(plain.invoke(_route_request(topic))) == {broker}
            assert _brokers_of(asyncio.run(_invoke(addr, tls, _route_request(topic)))) == {broker}
            answer = asyncio.run(_invoke(addr, ClientTls.PLAIN, _route_request(topic)))
            assert _brokers_of(answer) == {broker}
