"""The KV config quota over the wire, against real ``run_gateway`` processes.

A refused PUT_KV_CONFIG is answered SYSTEM_ERROR with a remark that says the
maximum and what the put would have made, and changes nothing. An eventual-mode
KV file over the quota (written before there was one) does not stop the node.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from raftstore.config import DEFAULT_KV_CONFIG_BYTES_MAX
from remoting import bodies
from remoting.blocking import BlockingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.integration.gateway_harness import GatewayProcess

pytestmark = pytest.mark.integration

QUOTA_BYTES = 1024
NAMESPACE = "ns"
MIB = 1024 * 1024


def new_gateway(tmp_path: Path, *extra_args: str) -> GatewayProcess:
    """A gateway (not started) with its files under ``tmp_path``."""
    return GatewayProcess(
        "n1",
        tmp_path / "n1.sqlite3",
        tmp_path / "n1.ready.json",
        tmp_path / "n1.log",
        extra_args=extra_args,
    )


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    """A gateway whose NamesrvConfig (``--config``) allows 1 KiB of KV config."""
    properties = tmp_path / "namesrv.properties"
    properties.write_text(f"kvConfigBytesMax={QUOTA_BYTES}\n")
    process = new_gateway(tmp_path, "--config", str(properties)).start()
    yield process
    process.terminate()


def put(client: BlockingClient, key: str, value: str) -> RemotingCommand:
    """PUT_KV_CONFIG of ``NAMESPACE``/``key``."""
    return client.invoke(
        RemotingCommand.request(
            RequestCode.PUT_KV_CONFIG, {"namespace": NAMESPACE, "key": key, "value": value}
        )
    )


def get(client: BlockingClient, key: str) -> str | None:
    """GET_KV_CONFIG of ``NAMESPACE``/``key``; None when there is no such item."""
    answer = client.invoke(
        RemotingCommand.request(RequestCode.GET_KV_CONFIG, {"namespace": NAMESPACE, "key": key})
    )
    return None if answer.ext_fields is None else answer.ext_fields.get("value")


def state(gateway: GatewayProcess) -> tuple[str, int]:
    """The node's table digest and applied version."""
    status = gateway.node_status()
    return status["digest"], status["applied_version"]


def test_a_put_past_the_quota_is_answered_with_a_clear_remark_and_changes_nothing(
    gateway: GatewayProcess,
) -> None:
    with gateway.admin_client() as admin:
        assert put(admin, "first", "a" * 600).code == ResponseCode.SUCCESS
        before = state(gateway)

        refused = put(admin, "second", "b" * 600)

        assert (refused.code, refused.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "KV config quota exceeded: 1024 bytes max, the put would make 1215",
        )
        assert state(gateway) == before
        assert get(admin, "second") is None
        assert get(admin, "first") == "a" * 600


def test_smaller_values_and_deletes_are_taken_and_free_room_for_later_puts(
    gateway: GatewayProcess,
) -> None:
    with gateway.admin_client() as admin:
        assert put(admin, "first", "a" * 900).code == ResponseCode.SUCCESS
        assert put(admin, "second", "b" * 200).code == ResponseCode.SYSTEM_ERROR

        assert put(admin, "first", "a" * 100).code == ResponseCode.SUCCESS
        assert put(admin, "second", "b" * 200).code == ResponseCode.SUCCESS
        delete = RemotingCommand.request(
            RequestCode.DELETE_KV_CONFIG, {"namespace": NAMESPACE, "key": "first"}
        )
        assert admin.invoke(delete).code == ResponseCode.SUCCESS
        assert put(admin, "third", "c" * 700).code == ResponseCode.SUCCESS


def test_the_quota_is_reported_and_changed_as_a_namesrv_config_property(
    gateway: GatewayProcess,
) -> None:
    with gateway.admin_client() as admin:
        config = admin.invoke(RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG))
        assert bodies.decode_properties(config.body or b"")["kvConfigBytesMax"] == "1024"
        assert put(admin, "big", "x" * 2000).code == ResponseCode.SYSTEM_ERROR

        raised = admin.invoke(
            RemotingCommand.request(
                RequestCode.UPDATE_NAMESRV_CONFIG,
                body=bodies.encode_properties({"kvConfigBytesMax": "4096"}),
            )
        )

        assert raised.code == ResponseCode.SUCCESS
        assert put(admin, "big", "x" * 2000).code == ResponseCode.SUCCESS


def test_an_over_quota_kv_file_from_an_older_version_loads_what_fits_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    value = "v" * MIB  # five entries of 1 MiB: more than the default 4 MiB quota
    table = {NAMESPACE: {f"k{i}": value for i in range(5)}}
    kv_path = tmp_path / "n1.kvConfig.json"
    kv_path.write_bytes(bodies.encode_kv_config_wrapper(table))
    original = kv_path.read_bytes()

    process = new_gateway(tmp_path).start()
    try:
        with process.client() as client:
            loaded = {key: get(client, key) is not None for key in table[NAMESPACE]}
    finally:
        assert process.terminate() == 0

    # Loaded in key order until the next entry would pass 4 MiB.
    assert loaded == {"k0": True, "k1": True, "k2": True, "k3": False, "k4": False}
    assert 4 * (MIB + len("nsk0")) > DEFAULT_KV_CONFIG_BYTES_MAX
    assert (tmp_path / "n1.kvConfig.json.over-quota").read_bytes() == original
    assert "over kvConfigBytesMax" in process.log_path.read_text()
