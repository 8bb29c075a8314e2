"""The gateway's internal port: the liveness scan and node status, secret-protected."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from remoting.blocking import BlockingClient
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from tests.integration.gateway_harness import (
    MASTER_ADDR,
    MASTER_HA,
    NODE_STATUS,
    SCAN_NOT_ACTIVE_BROKER,
    SECRET,
    GatewayProcess,
    register_request,
    route_request,
)

pytestmark = pytest.mark.integration

FAR_FUTURE_MS = 4_000_000_000_000


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One gateway for the module."""
    folder: Path = tmp_path_factory.mktemp("internal")
    process = GatewayProcess(
        "n1", folder / "db.sqlite3", folder / "ready.json", folder / "gateway.log"
    ).start()
    yield process
    process.terminate()


@pytest.mark.parametrize("fields", [{}, {"secret": "wrong"}, {"secret": ""}])
def test_requests_without_the_secret_are_refused(
    gateway: GatewayProcess, fields: dict[str, str]
) -> None:
    """No secret, a wrong one or an empty one: NO_PERMISSION, no body."""
    with BlockingClient(gateway.internal_addr) as client:
        response = client.invoke(RemotingCommand.request(NODE_STATUS, fields))
    assert (response.code, response.body) == (ResponseCode.NO_PERMISSION, None)


def test_node_status_reports_replication_state_and_routes_version(gateway: GatewayProcess) -> None:
    """NODE_STATUS: ReplicatorStatus fields plus routes_version, as JSON."""
    status = gateway.node_status()
    assert (status["node_id"], status["mode"], status["state"]) == ("n1", "eventual", "standalone")
    assert {"applied_version", "routes_version", "digest", "has_quorum"} <= set(status)


def test_the_scan_expires_silent_brokers(gateway: GatewayProcess) -> None:
    """SCAN_NOT_ACTIVE_BROKER at a far-future now_ms drops the broker and answers the count."""
    with gateway.client() as broker, gateway.client() as client:
        broker.invoke(register_request(0, MASTER_ADDR, MASTER_HA))
        with BlockingClient(gateway.internal_addr) as internal:
            fresh = internal.invoke(
                RemotingCommand.request(SCAN_NOT_ACTIVE_BROKER, {"secret": SECRET})
            )
            assert fresh.ext_fields == {"expired": "0"}
            late = internal.invoke(
                RemotingCommand.request(
                    SCAN_NOT_ACTIVE_BROKER, {"secret": SECRET, "now_ms": str(FAR_FUTURE_MS)}
                )
            )
        assert (late.code, late.ext_fields) == (ResponseCode.SUCCESS, {"expired": "1"})
        answer = client.invoke(route_request("TopicTest", 479))
        assert answer.code == ResponseCode.TOPIC_NOT_EXIST
    # The expiring scan (not the one that expired nothing) is in the node's status.
    [report] = gateway.node_status()["expiries"]
    assert report["seq"] == 1 and report["started_us"] <= report["committed_us"]
    assert [entry["addr"] for entry in report["expired"]] == [MASTER_ADDR]
    assert json.loads(json.dumps(gateway.wait_for_projection()))["applied_version"] >= 2
