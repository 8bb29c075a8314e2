"""A local cluster's nodes share one account database: a token made once works on every
node, and a change made on one node is in the audit log every node shows."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cluster_fixtures import PROJECT_DIR, start_cluster, stop_cluster

pytestmark = pytest.mark.slow


def _api(base: str, path: str, token: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(
        base + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status), json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return int(exc.code), None


def test_one_token_works_on_every_node_and_the_audit_log_is_shared(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary = start_cluster(run_dir, nodes=2)
    try:
        made = subprocess.run(
            [sys.executable, "manage.py", "create_operator", "ops-bot", "--token",
             "--run-dir", str(run_dir)],
            cwd=PROJECT_DIR, capture_output=True, text=True, timeout=60, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        token = made.stdout.strip().splitlines()[-1]
        n1, n2 = (f"http://127.0.0.1:{node['web_port']}" for node in summary["nodes"])

        for base in (n1, n2):
            assert _api(base, "/api/v1/topics/", token)[0] == 200
        assert _api(n1, "/api/v1/topics/", "0" * 40)[0] == 401

        status, _ = _api(n1, "/api/v1/kv/", token, {"namespace": "ops", "key": "k", "value": "v"})
        assert status == 200
        status, listed = _api(n2, "/api/v1/audit/", token)
        assert status == 200
        entry = listed["results"][0]
        assert (entry["username"], entry["node_id"], entry["action"], entry["ok"]) == (
            "ops-bot", "n1", "kv POST", True)  # fmt: skip
    finally:
        stop_cluster(run_dir)
