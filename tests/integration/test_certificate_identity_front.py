"""A TLS client certificate as a broker's identity behind the read front: the front
relays a TLS connection (it never hands it over), so it passes the certificate's subject
to the gateway with the client's address, and the gateway's ACL and holds see it.

The same accounts and certificates as tests/gateway/test_certificate_identity.py, on a
gateway process started as a launched node is (``--read-front``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster.tls_files import RunTls
from remoting.blocking import BlockingClient
from remoting.codes import ResponseCode
from tests.gateway.test_certificate_identity import (
    client_certificate,
    register,
    require_client_certificates,
)
from tests.integration.gateway_harness import GatewayProcess

pytestmark = pytest.mark.integration

WAIT_S = 10.0


@pytest.fixture(scope="module")
def fronted(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[GatewayProcess, Path, RunTls]]:
    folder = tmp_path_factory.mktemp("certificate-front")
    run_tls, tls_file, accounts = require_client_certificates(folder)
    gateway = GatewayProcess(
        "n1",
        folder / "db.sqlite3",
        folder / "ready.json",
        folder / "gateway.log",
        with_test_acl=False,
        extra_args=("--acl-file", str(accounts), "--tls-config", str(tls_file), "--read-front"),
    ).start()
    try:
        yield gateway, folder, run_tls
    finally:
        gateway.terminate()


def test_the_bound_certificate_registers_through_the_front_and_another_does_not(
    fronted: tuple[GatewayProcess, Path, RunTls],
) -> None:
    gateway, folder, run_tls = fronted

    def send(common_name: str) -> int:
        context = client_certificate(run_tls, folder, common_name)
        with BlockingClient(gateway.addr, timeout_s=WAIT_S, tls=context) as client:
            return client.invoke(register("broker-a")).code

    assert send("broker-x") == ResponseCode.NO_PERMISSION
    assert send("broker-a") == ResponseCode.SUCCESS
