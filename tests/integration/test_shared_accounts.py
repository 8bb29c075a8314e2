"""A local cluster's nodes share one account database: a token made once works on every
node, and a change made on one node is in the audit log every node shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.cluster_fixtures import api, create_operator, start_cluster, stop_cluster

pytestmark = pytest.mark.slow


def test_one_token_works_on_every_node_and_the_audit_log_is_shared(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary = start_cluster(run_dir, nodes=2)
    try:
        token = create_operator(run_dir, "ops-bot", token=True)
        n1, n2 = (f"http://127.0.0.1:{node['web_port']}" for node in summary["nodes"])

        for base in (n1, n2):
            assert api(base, "/api/v1/topics/", token)[0] == 200
        assert api(n1, "/api/v1/topics/", "0" * 40)[0] == 401

        status, _ = api(n1, "/api/v1/kv/", token, {"namespace": "ops", "key": "k", "value": "v"})
        assert status == 200
        status, listed = api(n2, "/api/v1/audit/", token)
        assert status == 200
        entry = listed["results"][0]
        assert (entry["username"], entry["node_id"], entry["action"], entry["ok"]) == (
            "ops-bot",
            "n1",
            "kv POST",
            True,
        )
    finally:
        stop_cluster(run_dir)
