"""What ``cluster up`` secures by default: per-run secrets, the ACL, DEBUG off.

One raft-mode node (so the Raft secret goes through the launcher as well) serves
the module; a second, short-lived cluster shows ``--no-acl``.
"""

from __future__ import annotations

import stat
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster import launcher
from localcluster.run_secrets import read_run_secrets
from remoting.blocking import BlockingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.integration.cluster_fixtures import (
    FREE_PORTS,
    cluster_cli,
    remoting_addr,
    stop_cluster,
)
from tools import process_facts

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PUBLIC_DEV_KEY = "dev-only-insecure-key-change-me"


def up(run_dir: Path, *args: str) -> dict[str, Any]:
    import json

    done = cluster_cli(
        "up",
        "--nodes",
        "1",
        "--run-dir",
        str(run_dir),
        "--json",
        "--raft-base-port",
        "0",
        *FREE_PORTS,
        *args,
    )
    assert done.returncode == 0, f"cluster up failed:\n{done.stdout}\n{done.stderr}"
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary


@pytest.fixture(scope="module")
def raft_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    run_dir = tmp_path_factory.mktemp("secure-cluster")
    summary = up(run_dir, "--mode", "raft")
    try:
        yield summary
    finally:
        stop_cluster(run_dir)


def put_kv() -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "who", "value": "admin"}
    )


def test_up_reports_the_acl_and_where_the_admin_secret_is(
    raft_cluster: dict[str, Any],
) -> None:
    acl = raft_cluster["acl"]

    assert acl["enabled"] is True
    assert acl["admin_access_key"] == "namesrv-admin"
    assert Path(acl["admin_secret_file"]).is_file() and Path(acl["file"]).is_file()


def test_every_secret_file_is_readable_by_its_owner_only(raft_cluster: dict[str, Any]) -> None:
    run_dir = Path(raft_cluster["run_dir"])
    names = (
        "secret",
        "raft.secret",
        "django.secret",
        "redis.secret",
        "ha.secret",
        "redis/redis.conf",
    )
    files = [run_dir / name for name in names]
    files += sorted((run_dir / "acl").iterdir())

    modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in files}

    assert modes == dict.fromkeys(modes, 0o600)
    assert len(modes) == 9


def test_redis_answers_only_clients_that_know_its_password(
    raft_cluster: dict[str, Any],
) -> None:
    port = raft_cluster["redis"]["port"]
    password = read_run_secrets(Path(raft_cluster["run_dir"])).redis_password()

    assert not launcher.redis_answers(port)
    assert launcher.redis_answers(port, password)


def test_processes_are_told_where_the_secrets_are_never_the_secrets(
    raft_cluster: dict[str, Any],
) -> None:
    secrets = read_run_secrets(Path(raft_cluster["run_dir"]))
    values = [
        Path(path).read_text().strip()
        for path in (
            secrets.raft_secret_file,
            secrets.django_secret_file,
            secrets.admin_secret_file,
        )
    ]
    node = raft_cluster["nodes"][0]

    for pid in (node["gateway_pid"], node["web_pid"]):
        environ = " ".join(f"{k}={v}" for k, v in process_facts.environment(pid).items())
        assert "NAMESRV_ACL_FILE=" in environ or "DJANGO_SECRET_KEY_FILE=" in environ
        assert not any(value in environ for value in values)


def test_an_unsigned_admin_write_is_refused_and_the_admin_account_is_accepted(
    raft_cluster: dict[str, Any],
) -> None:
    admin = read_run_secrets(Path(raft_cluster["run_dir"])).admin_credentials()
    addr = remoting_addr(raft_cluster, 0)

    with BlockingClient(addr, timeout_s=8.0) as anyone:
        refused = anyone.invoke(put_kv())
    with BlockingClient(addr, timeout_s=8.0, credentials=admin) as operator:
        accepted = operator.invoke(put_kv())

    assert refused.code == ResponseCode.NO_PERMISSION
    assert accepted.code == ResponseCode.SUCCESS


def test_the_web_process_runs_without_debug_and_without_a_public_key(
    raft_cluster: dict[str, Any],
) -> None:
    node = raft_cluster["nodes"][0]
    url = f"http://127.0.0.1:{node['web_port']}/no-such-page/"

    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(url, timeout=10)

    page = caught.value.read().decode(errors="replace")
    assert caught.value.code == 404
    assert "URLconf" not in page and "DEBUG = True" not in page
    django_key = (Path(raft_cluster["run_dir"]) / "django.secret").read_text().strip()
    assert len(django_key) >= 40 and django_key != PUBLIC_DEV_KEY


def test_every_raft_node_is_ready_once_a_leader_is_known(raft_cluster: dict[str, Any]) -> None:
    """/readyz on each node's web port: the gateway answers, a leader is known, applied."""
    for node in raft_cluster["nodes"]:
        base = f"http://127.0.0.1:{node['web_port']}"
        with urllib.request.urlopen(f"{base}/readyz", timeout=10) as ready:
            assert (ready.status, ready.read()) == (200, b"ready\n")
        with urllib.request.urlopen(f"{base}/healthz", timeout=10) as healthy:
            assert (healthy.status, healthy.read()) == (200, b"ok\n")


def test_up_with_no_acl_lets_anyone_write(tmp_path: Path) -> None:
    summary = up(tmp_path, "--no-acl")
    try:
        with BlockingClient(remoting_addr(summary, 0), timeout_s=8.0) as anyone:
            answer = anyone.invoke(put_kv())
        assert summary["acl"] == {"enabled": False}
        assert answer.code == ResponseCode.SUCCESS
        assert not (tmp_path / "acl").exists()
    finally:
        stop_cluster(tmp_path)
