"""The address server of a launched raft cluster, followed by our own broker process.

One cluster (``cluster up --mode raft``) for the whole module, in order: every web port
serves ``/rocketmq/nsaddr`` with the three members, which each recorded its remoting
address in the replicated KV namespace; a broker started with only
``fetchNamesrvAddrByAddressServer=true`` and n1's web port as its domain registers with
all three; ``cluster add-node`` makes n4 appear on every node's list and the broker
registers with it; ``cluster remove-node n4`` takes it off everywhere again, and off the
broker's list. Eventual mode (the configured nodes) is tests/web/test_address_server.py.
"""

from __future__ import annotations

import http.client
import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.member_addrs import MEMBER_ADDRS_NAMESPACE
from remoting.blocking import BlockingClient
from remoting.bodies import decode_kv_table
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.broker_app.support import BrokerProcess
from tests.integration.cluster_fixtures import cluster_cli, start_cluster, stop_cluster
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HTTP_TIMEOUT_S = 5.0
LIST_TIMEOUT_S = 15.0
"""A member records its address within a second or two; each web process holds an
answer for a second."""
REGISTER_TIMEOUT_S = 30.0
"""A new NameServer gets the broker's next registration round (every 10 s here)."""
REGISTERS = re.compile(r'^namesrv_requests_total\{code="103"\} (?P<count>[0-9.e+]+)$', re.M)


def _json(done: Any) -> dict[str, Any]:
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A 3-node raft cluster started by the real CLI on free ports."""
    folder: Path = tmp_path_factory.mktemp("address-server")
    try:
        start_cluster(folder, "--mode", "raft", "--raft-base-port", "0", nodes=3)
        yield folder
    finally:
        stop_cluster(folder)


@pytest.fixture(scope="module")
def broker(run_dir: Path) -> Iterator[BrokerProcess]:
    """Our broker, told nothing but where n1's address server is; fetching every second."""
    web = _nodes(run_dir)[0]["web_port"]
    process = BrokerProcess(
        run_dir / "brokers",
        "follower",
        role="ASYNC_MASTER",
        broker_id=0,
        broker_name="broker-follower",
        extra={
            "fetchNamesrvAddrByAddressServer": "true",
            "rocketmq.namesrv.domain": f"127.0.0.1:{web}",
            "fetchNamesrvAddrInterval": "1000",
            "registerNameServerPeriod": "10000",
        },
    )
    try:
        yield process
    finally:
        process.terminate()


def _nodes(run_dir: Path) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = json.loads((run_dir / "cluster.json").read_text())["nodes"]
    return nodes


def _expected(nodes: list[dict[str, Any]]) -> str:
    # Every node is on 127.0.0.1: sorted by host and port is sorted by port number.
    return ";".join(sorted((n["remoting_addr"] for n in nodes), key=lambda a: int(a[10:])))


def _get(
    port: int, path: str = "/rocketmq/nsaddr", method: str = "GET", host: str = "127.0.0.1"
) -> tuple[int, dict[str, str], bytes]:
    """One request without following redirects: status, headers (lower-case names), body."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT_S)
    try:
        connection.request(method, path, headers={"Host": f"{host}:{port}"})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def _lists(nodes: list[dict[str, Any]], text: str) -> bool:
    return all(_get(n["web_port"])[2].decode() == text for n in nodes)


def _records(remoting_addr: str) -> dict[str, str]:
    request = RemotingCommand.request(
        RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": MEMBER_ADDRS_NAMESPACE}
    )
    with BlockingClient(remoting_addr, timeout_s=HTTP_TIMEOUT_S) as client:
        answer = client.invoke(request)
    if answer.code != ResponseCode.SUCCESS or answer.body is None:
        return {}
    return dict(decode_kv_table(answer.body).table)


def _registrations(node: dict[str, Any]) -> float:
    with urllib.request.urlopen(node["metrics_url"], timeout=HTTP_TIMEOUT_S) as response:
        found = REGISTERS.search(response.read().decode())
    return float(found.group("count")) if found else 0.0


def test_every_node_serves_the_three_members_publicly_and_read_only(run_dir: Path) -> None:
    nodes = _nodes(run_dir)
    expected = _expected(nodes)
    wait_until(
        lambda: _lists(nodes, expected),
        what="every node listing the members",
        timeout_s=LIST_TIMEOUT_S,
    )
    # Each member recorded its own remoting address, keyed by its Raft address.
    recorded = {n["raft_addr"]: n["remoting_addr"] for n in nodes}
    wait_until(
        lambda: all(_records(n["remoting_addr"]) == recorded for n in nodes),
        what="every member's own address recorded on every node",
        timeout_s=LIST_TIMEOUT_S,
    )
    port = nodes[1]["web_port"]
    status, headers, body = _get(port, "/rocketmq/nsaddr-unit1?nofix=1")
    assert (status, body.decode()) == (200, expected)
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert "set-cookie" not in headers and "location" not in headers
    assert _get(port, method="HEAD")[0] == 200
    assert _get(port, method="POST")[0] == 405
    assert _get(port, host="evil.example")[0] == 400


def test_a_broker_following_the_address_server_registers_with_every_member(
    run_dir: Path, broker: BrokerProcess
) -> None:
    nodes = _nodes(run_dir)
    wait_until(
        lambda: broker.runtime_info()["namesrvAddr"] == _expected(nodes),
        what="the broker's namesrvAddr from the address server",
        timeout_s=LIST_TIMEOUT_S,
    )
    # The first round went to each of them (the only broker of this cluster).
    wait_until(
        lambda: all(_registrations(n) >= 1 for n in nodes),
        what="a registration at every node",
        timeout_s=REGISTER_TIMEOUT_S,
    )


def test_add_node_lists_the_new_member_and_the_broker_registers_with_it(
    run_dir: Path, broker: BrokerProcess
) -> None:
    grown = _json(cluster_cli("add-node", "--run-dir", str(run_dir), "--json"))["nodes"]
    assert [n["id"] for n in grown] == ["n1", "n2", "n3", "n4"]
    expected = _expected(grown)
    wait_until(
        lambda: _lists(grown, expected),
        what="every node listing n4 (its own web port too)",
        timeout_s=LIST_TIMEOUT_S,
    )
    recorded = {n["raft_addr"]: n["remoting_addr"] for n in grown}
    wait_until(
        lambda: _records(grown[0]["remoting_addr"]) == recorded,
        what="n4's address recorded",
        timeout_s=LIST_TIMEOUT_S,
    )
    wait_until(
        lambda: broker.runtime_info()["namesrvAddr"] == expected,
        what="the broker's namesrvAddr with n4",
        timeout_s=LIST_TIMEOUT_S,
    )
    # In raft mode n4 learns the broker from the log as well: count the broker's own
    # REGISTER_BROKER requests arriving at n4.
    wait_until(
        lambda: _registrations(grown[3]) >= 1,
        what="a registration at n4",
        timeout_s=REGISTER_TIMEOUT_S,
    )


def test_remove_node_takes_the_member_off_every_list(run_dir: Path, broker: BrokerProcess) -> None:
    shrunk = _json(cluster_cli("remove-node", "n4", "--run-dir", str(run_dir), "--json"))["nodes"]
    assert [n["id"] for n in shrunk] == ["n1", "n2", "n3"]
    expected = _expected(shrunk)
    wait_until(
        lambda: _lists(shrunk, expected),
        what="every node listing the members without n4",
        timeout_s=LIST_TIMEOUT_S,
    )
    # The leader dropped n4's record: the namespace holds the members only.
    recorded = {n["raft_addr"]: n["remoting_addr"] for n in shrunk}
    wait_until(
        lambda: _records(shrunk[0]["remoting_addr"]) == recorded,
        what="n4's record dropped",
        timeout_s=LIST_TIMEOUT_S,
    )
    wait_until(
        lambda: broker.runtime_info()["namesrvAddr"] == expected,
        what="the broker's namesrvAddr without n4",
        timeout_s=LIST_TIMEOUT_S,
    )
