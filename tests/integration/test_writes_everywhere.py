"""Eventual mode: a console or API write goes to every node and says where it landed;
a node that misses it turns the answer into a warning naming the node and the reason."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from remoting.blocking import BlockingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.integration.cluster_fixtures import (
    api,
    create_operator,
    remoting_addr,
    start_cluster,
    stop_cluster,
)

pytestmark = pytest.mark.slow


def _post(base: str, token: str, body: dict[str, Any]) -> tuple[int, Any]:
    return api(base, "/api/v1/kv/", token, body)


def _kv(addr: str, namespace: str, key: str) -> str | None:
    request = RemotingCommand.request(
        RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key}
    )
    with BlockingClient(addr, timeout_s=5.0) as client:
        answer = client.invoke(request)
    if answer.code != ResponseCode.SUCCESS:
        return None
    return (answer.ext_fields or {}).get("value")


def test_an_api_write_reaches_every_node_and_a_missed_node_is_named(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary = start_cluster(run_dir, nodes=3)
    try:
        token = create_operator(run_dir, "writer", token=True)
        base = f"http://127.0.0.1:{summary['nodes'][0]['web_port']}"

        status, body = _post(base, token, {"namespace": "ns", "key": "all", "value": "1"})

        assert status == 200, body
        assert body["detail"] == "stored ns/all on n1, n2, n3."
        assert [n["node"] for n in body["nodes"] if n["ok"]] == ["n1", "n2", "n3"]
        assert [_kv(remoting_addr(summary, i), "ns", "all") for i in range(3)] == ["1"] * 3

        # n3's gateway is gone: the write lands on n1 and n2 and says so, as a warning.
        os.kill(int(summary["nodes"][2]["gateway_pid"]), signal.SIGKILL)
        status, body = _post(base, token, {"namespace": "ns", "key": "partial", "value": "2"})

        assert status == 207, body
        assert body["partial"] is True and body["ok"] is False
        assert "FAILED on 1 of 3 nodes (n3: " in body["detail"], body["detail"]
        failed = [n for n in body["nodes"] if not n["ok"]]
        assert [n["node"] for n in failed] == ["n3"] and failed[0]["error"]
        assert [_kv(remoting_addr(summary, i), "ns", "partial") for i in range(2)] == ["2"] * 2
    finally:
        stop_cluster(run_dir)
