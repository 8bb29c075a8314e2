"""Backup a launched raft cluster, restore it into a new one (docs/RAFT.md, "Backup and
restore").

One 3-node raft cluster from the real CLI: two brokers register topics, KV entries and
a config value are put (signed as the run's admin), and its answers over the wire are
kept. It is backed up three ways: ``cluster backup`` (the internal port),
``GET /api/v1/backup/`` with an operator's token (a viewer's is refused, both are in the
audit log) and ``raft-namesrv backup --from`` (the installed command line). Then it is
stopped, and ``cluster up --restore`` starts a new cluster from the first file in
another run folder: every node answers routes, topics, KV and config exactly as the old
one did, and a restored broker that does not register again is dropped within its
heartbeat timeout while one that registers stays. A damaged file, a file of another kind
and a run folder that already holds a node's state are refused before anything starts.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from localcluster.demo import register_request, topic_table
from localcluster.run_secrets import read_run_secrets
from raftstore.backup import FILE_MODE, read_backup, read_backup_file
from raftstore.config import NODE_KEYS
from remoting import bodies
from remoting.blocking import BlockingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.model import DataVersion
from tests.integration.cluster_fixtures import (
    FREE_PORTS,
    PROJECT_DIR,
    WEB_TIMEOUT_S,
    api,
    cluster_cli,
    create_operator,
    make_broker,
    query_route,
    register_broker,
    remoting_addr,
    start_cluster,
    stop_cluster,
)
from tests.integration.gateway_harness import WAIT_S
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NODES = 3
RAFT = ("--mode", "raft", "--raft-base-port", "0")
KEEP, GONE = make_broker("broker-keep", 24_000), make_broker("broker-gone", 24_010)
TOPICS = {KEEP.broker_name: ["Orders", "KeptOnly"], GONE.broker_name: ["Orders", "GoneOnly"]}
BROKER_TIMEOUT_MS = 30_000
"""Long enough for the comparisons after the restore, short enough to wait out."""
SKEW_ALLOWANCE_MS = 1_000
KV = {("ORDER_TOPIC_CONFIG", "Orders"): "broker-keep:4", ("ops", "owner"): "team-a"}
CONFIG = {"orderMessageEnable": "true", "returnOrderTopicConfigToBroker": "false"}
EXPIRY_TIMEOUT_S = BROKER_TIMEOUT_MS / 1000 + 30
REGISTER_EVERY_S = 2.0
FILENAME = re.compile(r'attachment; filename="namesrv-([\w.-]+)-(\d+)-\d{8}T\d{6}Z\.nsbackup"')


@dataclass
class Original:
    run_dir: Path
    summary: dict[str, Any]
    expected: dict[str, Any]
    backup_file: Path
    operator_token: str
    viewer_token: str
    brokers: list[BlockingClient] = field(default_factory=list)

    def web(self, index: int = 0) -> str:
        return f"http://127.0.0.1:{self.summary['nodes'][index]['web_port']}"


def _signed(run_dir: Path, addr: str, request: RemotingCommand) -> RemotingCommand:
    admin = read_run_secrets(run_dir).admin_credentials()
    with BlockingClient(addr, timeout_s=8.0, credentials=admin) as client:
        return client.invoke(request)


def answers(addr: str) -> dict[str, Any]:
    """What a client sees of the state: every route, the topic list, KV and config."""
    seen: dict[str, Any] = {}
    for topic in sorted({t for topics in TOPICS.values() for t in topics} | set(TOPICS)):
        seen[f"route {topic}"] = query_route(addr, topic)
    with BlockingClient(addr, timeout_s=8.0) as client:
        topics = client.invoke(
            RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {})
        )
        seen["topics"] = json.loads(topics.body or b"{}")
        for namespace in sorted({ns for ns, _ in KV}):
            kv = client.invoke(
                RemotingCommand.request(
                    RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace}
                )
            )
            seen[f"kv {namespace}"] = (kv.code, json.loads(kv.body or b"{}"))
        config = client.invoke(RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG, {}))
        properties = bodies.decode_properties(config.body or b"")
        seen["config"] = {k: v for k, v in properties.items() if k not in NODE_KEYS}
    return seen


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Original]:
    """The old cluster, its state, its answers and its `cluster backup` file."""
    folder = tmp_path_factory.mktemp("backup")
    run_dir = folder / "old-cluster"
    summary = start_cluster(run_dir, *RAFT, nodes=NODES)
    brokers: list[BlockingClient] = []
    try:
        addr = remoting_addr(summary, 0)
        for broker in (KEEP, GONE):
            client = BlockingClient(addr, timeout_s=8.0)
            brokers.append(client)
            register_broker(
                client, broker, TOPICS[broker.broker_name], heartbeat_timeout_ms=BROKER_TIMEOUT_MS
            )
        for (namespace, key), value in KV.items():
            fields = {"namespace": namespace, "key": key, "value": value}
            put = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, fields)
            assert _signed(run_dir, addr, put).code == ResponseCode.SUCCESS
        body = bodies.encode_properties(CONFIG)
        update = RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, {}, body)
        assert _signed(run_dir, addr, update).code == ResponseCode.SUCCESS
        wait_until(
            lambda: answers(remoting_addr(summary, 2))["config"]["orderMessageEnable"] == "true",
            what="the config change on node 3",
            timeout_s=WAIT_S,
        )
        expected = answers(remoting_addr(summary, 1))
        backup_file = folder / "old.nsbackup"
        done = cluster_cli("backup", "--run-dir", str(run_dir), str(backup_file), "--json")
        assert done.returncode == 0, done.stderr
        yield Original(
            run_dir,
            summary,
            expected,
            backup_file,
            create_operator(run_dir, "backup-robot", token=True),
            create_operator(run_dir, "backup-viewer", role="viewer", token=True),
            brokers,
        )
    finally:
        for client in brokers:
            client.close()
        stop_cluster(run_dir)


# ---------------------------------------------------------------- backing up


def test_cluster_backup_writes_a_checked_owner_only_file(original: Original) -> None:
    read = read_backup_file(original.backup_file)

    assert original.backup_file.stat().st_mode & 0o777 == FILE_MODE
    assert (read.header.cluster, read.header.mode) == ("old-cluster", "raft")
    members = sorted(n["raft_addr"] for n in original.summary["nodes"])
    assert list(read.header.members) == members and read.header.index > 0
    assert read.table.kv_get("ops", "owner") == "team-a"
    assert read.table.config.order_message_enable is True
    assert read.table.pickup_topic_route("GoneOnly") is not None


def test_the_api_gives_operators_the_file_and_refuses_viewers_both_audited(
    original: Original,
) -> None:
    request = urllib.request.Request(
        original.web(1) + "/api/v1/backup/",
        headers={"Authorization": f"Token {original.operator_token}"},
    )
    with urllib.request.urlopen(request, timeout=WEB_TIMEOUT_S) as answer:
        data = answer.read()
        disposition = answer.headers["Content-Disposition"]
        assert answer.headers["Content-Type"] == "application/octet-stream"
        assert answer.headers["Cache-Control"] == "no-store"
    read = read_backup(data)
    matched = FILENAME.fullmatch(disposition)
    assert matched is not None, disposition
    assert matched.groups() == ("old-cluster", str(read.header.index))
    assert read.header.node == "n2" and read.table.kv_get("ops", "owner") == "team-a"

    status, body = api(original.web(1), "/api/v1/backup/", original.viewer_token)
    assert status == 403 and "operator role" in body["detail"]

    status, audit = api(original.web(), "/api/v1/audit/?node=n2", original.operator_token)
    entries = [e for e in audit["results"] if e["action"] == "backup"]
    assert {(e["username"], e["status"], e["ok"]) for e in entries} == {
        ("backup-robot", 200, True),
        ("backup-viewer", 403, False),
    }
    assert any(f"index {read.header.index}" in e["result"] for e in entries)


def _raft_namesrv(*args: str, token: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "namesrv_site.cli", *args],
        cwd=PROJECT_DIR,
        env={**os.environ, "BACKUP_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_raft_namesrv_backup_saves_a_checked_file_through_the_web_api(
    original: Original, tmp_path: Path
) -> None:
    web = original.web(2).removeprefix("http://")
    target = tmp_path / "cli.nsbackup"

    done = _raft_namesrv(
        "backup",
        "--from",
        web,
        "--token-env",
        "BACKUP_TOKEN",
        str(target),
        token=original.operator_token,
    )
    refused = _raft_namesrv(
        "backup",
        "--from",
        web,
        "--token-env",
        "BACKUP_TOKEN",
        str(tmp_path / "viewer.nsbackup"),
        token=original.viewer_token,
    )

    assert done.returncode == 0, done.stderr
    assert "bytes written to" in done.stdout and "from n3" in done.stdout
    assert target.stat().st_mode & 0o777 == FILE_MODE
    assert read_backup_file(target).table.kv_get("ops", "owner") == "team-a"
    assert refused.returncode != 0 and "answered 403" in refused.stderr
    assert not (tmp_path / "viewer.nsbackup").exists()


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("kind", ["flipped byte", "raft journal"])
def test_a_damaged_or_foreign_file_is_refused_and_nothing_starts(
    original: Original, tmp_path: Path, kind: str
) -> None:
    bad = tmp_path / "bad.nsbackup"
    if kind == "flipped byte":
        data = bytearray(original.backup_file.read_bytes())
        data[len(data) // 2] ^= 0x40
        bad.write_bytes(bytes(data))
        reason = "damaged backup"
    else:
        bad.write_bytes((original.run_dir / "n1" / "raft" / "raft.journal").read_bytes())
        reason = "not a raft-namesrv backup"
    run_dir = tmp_path / "never"

    done = cluster_cli(
        "up",
        "--run-dir",
        str(run_dir),
        *RAFT,
        "--restore",
        str(bad),
        *FREE_PORTS,
    )

    assert done.returncode != 0
    assert reason in done.stderr and "Nothing was started" in done.stderr
    assert not run_dir.exists()


# ---------------------------------------------------------------- restoring


@pytest.fixture(scope="module")
def restored(
    original: Original, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """The old cluster stopped, a new one started from its backup in another folder."""
    stop_cluster(original.run_dir)
    run_dir = tmp_path_factory.mktemp("restored") / "new-cluster"
    extra = ("--restore", str(original.backup_file), "--skew-allowance-ms", str(SKEW_ALLOWANCE_MS))
    summary = start_cluster(run_dir, *RAFT, *extra, nodes=NODES)
    try:
        yield summary
    finally:
        stop_cluster(run_dir)


def test_every_restored_node_answers_as_the_old_cluster_did(
    original: Original, restored: dict[str, Any]
) -> None:
    assert restored["restored"]["cluster"] == "old-cluster"
    for index in range(NODES):
        assert answers(remoting_addr(restored, index)) == original.expected
    # The restore is in the new cluster's audit log, with the backup's header.
    run_dir = Path(restored["run_dir"])
    with sqlite3.connect(run_dir / "shared.sqlite3") as db:
        entries = db.execute(
            "SELECT channel, action, target, ok, detail FROM namesrv_app_auditentry"
            " WHERE action = 'cluster up --restore'"
        ).fetchall()
    assert [e[:4] for e in entries] == [("cli", "cluster up --restore", "cluster", 1)]
    assert json.loads(entries[0][4])["cluster"] == "old-cluster"


def test_a_restore_into_a_folder_holding_a_node_is_refused(
    original: Original, restored: dict[str, Any]
) -> None:
    done = cluster_cli(
        "up",
        "--run-dir",
        str(original.run_dir),
        *RAFT,
        "--restore",
        str(original.backup_file),
        *FREE_PORTS,
    )

    assert done.returncode != 0
    assert "holds a node's state (raft/raft.journal" in done.stderr
    assert "Nothing was started" in done.stderr
    with sqlite3.connect(original.run_dir / "shared.sqlite3") as db:
        refusals = db.execute(
            "SELECT ok, result FROM namesrv_app_auditentry WHERE action = 'cluster up --restore'"
        ).fetchall()
    assert len(refusals) == 1 and refusals[0][0] == 0 and "holds a node's state" in refusals[0][1]


def test_a_restored_broker_is_dropped_unless_it_registers_again(
    restored: dict[str, Any],
) -> None:
    addrs = [remoting_addr(restored, index) for index in range(NODES)]
    counter = 1
    with BlockingClient(addrs[0], timeout_s=8.0) as keep:
        deadline = time.monotonic() + EXPIRY_TIMEOUT_S
        while any(query_route(addr, "GoneOnly")[0] == ResponseCode.SUCCESS for addr in addrs):
            assert time.monotonic() < deadline, "the restored broker-gone was never dropped"
            counter += 1  # a new DataVersion: a real registration, never coalesced away
            request = register_request(
                KEEP,
                topic_table([*TOPICS[KEEP.broker_name], KEEP.broker_name]),
                DataVersion(timestamp=counter, counter=counter),
                heartbeat_timeout_ms=BROKER_TIMEOUT_MS,
            )
            assert keep.invoke(request).code == ResponseCode.SUCCESS
            time.sleep(REGISTER_EVERY_S)

    for addr in addrs:
        assert query_route(addr, "GoneOnly")[0] == ResponseCode.TOPIC_NOT_EXIST
        code, route = query_route(addr, "Orders")
        assert code == ResponseCode.SUCCESS and route is not None
        assert [b.broker_name for b in route.broker_datas] == [KEEP.broker_name]
