"""``manage.py cluster recover --survivor ID``: a launched raft cluster loses two of its
three nodes for good (processes SIGKILLed, folders deleted), and the survivor becomes a
one-member cluster holding its applied state, commits at once, and ``add-node`` grows it
back to three members that agree (docs/RAFT.md, "Recovery after quorum loss").

One 3-node raft cluster serves the module; the tests run in file order and the last one
takes it down. Bad input is refused first, on the healthy cluster, and changes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster import launcher
from namesrv_app.management import cluster_text
from raftstore.backup import FILE_MODE, read_backup_file
from remoting.blocking import BlockingClient
from remoting.codes import RequestCode, ResponseCode
from tests.integration.cluster_fixtures import (
    admin_request,
    cli_json,
    cluster_cli,
    make_broker,
    query_route,
    recorded_cluster,
    register_broker,
    remoting_addr,
    start_cluster,
    stop_cluster,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPICS = {"broker-r1": ["Orders", "Payments"], "broker-r2": ["Orders", "Refunds"]}
KV = {("ops", "owner"): "team-a", ("ORDER_TOPIC_CONFIG", "Orders"): "broker-r1:4"}
COMMIT_BOUND_S = 10.0
"""From ``recover``'s return to a KV put acknowledged by the one-member cluster."""
GONE_BOUND_S = 5.0
AGREE_BOUND_S = 20.0


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A running 3-node raft cluster started by the real CLI on free ports."""
    folder = tmp_path_factory.mktemp("recover-cluster")
    start_cluster(folder, "--mode", "raft", "--raft-base-port", "0", nodes=3)
    try:
        yield folder
    finally:
        stop_cluster(folder)


def _answers(run_dir: Path, addr: str) -> dict[str, Any]:
    """What a client sees of the data written before the loss."""
    seen: dict[str, Any] = {}
    for topic in sorted({t for topics in TOPICS.values() for t in topics}):
        seen[topic] = query_route(addr, topic)
    for (namespace, key), _ in KV.items():
        got = admin_request(
            run_dir, addr, RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key}
        )
        seen[f"{namespace}/{key}"] = (got.code, (got.ext_fields or {}).get("value"))
    return seen


def _statuses(run_dir: Path) -> dict[str, dict[str, Any]]:
    status = cli_json(cluster_cli("status", "--run-dir", str(run_dir), "--json"))
    return {node["id"]: node["status"] or {} for node in status["nodes"]}


def _three_agree(run_dir: Path) -> bool:
    done = cluster_cli("status", "--run-dir", str(run_dir), "--json")
    if done.returncode != 0:
        return False
    status = json.loads(done.stdout)
    digests = {(node["status"] or {}).get("digest") for node in status["nodes"]}
    return len(status["nodes"]) == 3 and status["agree"] and len(digests) == 1


def _snapshot(run_dir: Path) -> tuple[str, list[str]]:
    """cluster.json and the run folder's entries: what a refusal must leave as it was."""
    return (run_dir / launcher.CLUSTER_FILE_NAME).read_text(), sorted(
        p.name for p in run_dir.iterdir()
    )


def test_bad_input_is_refused_and_changes_nothing(run_dir: Path, tmp_path: Path) -> None:
    """A healthy cluster (a majority runs), an unknown survivor, eventual mode, a
    survivor whose folder is not there: each refused with its reason, nothing changed.
    ``cluster status`` gives each node's applied index on a line of its own."""
    before = _snapshot(run_dir)

    refusals = {
        "majority": cluster_cli("recover", "--survivor", "n1", "--run-dir", str(run_dir)),
        "unknown": cluster_cli("recover", "--survivor", "n9", "--run-dir", str(run_dir)),
    }
    foreign = tmp_path / "copied"
    foreign.mkdir()
    recorded = recorded_cluster(run_dir)
    (foreign / "cluster.json").write_text(json.dumps(recorded))
    refusals["no folder"] = cluster_cli("recover", "--survivor", "n2", "--run-dir", str(foreign))
    (foreign / "cluster.json").write_text(json.dumps({**recorded, "mode": "eventual"}))
    refusals["eventual"] = cluster_cli("recover", "--survivor", "n2", "--run-dir", str(foreign))

    expected = {
        "majority": "a majority of the 3 members, so the cluster has not lost its quorum",
        "unknown": "n9 is not a node of the cluster",
        "no folder": f"n2 cannot be the survivor: {foreign}/n2/raft is not there",
        "eventual": "recover is for raft-mode clusters",
    }
    for case, done in refusals.items():
        assert done.returncode != 0 and expected[case] in done.stderr, (case, done.stderr)
    assert _snapshot(run_dir) == before
    assert sorted(p.name for p in foreign.iterdir()) == ["cluster.json"]
    text = cluster_cli("status", "--run-dir", str(run_dir)).stdout.splitlines()
    applied = {node: s["applied_index"] for node, s in _statuses(run_dir).items()}
    assert any(line.startswith("applied index: n1 ") for line in text), text
    assert set(applied) == {"n1", "n2", "n3"}


def test_a_lost_majority_is_recovered_from_the_survivor_and_grown_back(run_dir: Path) -> None:
    summary = recorded_cluster(run_dir)
    n1 = remoting_addr(summary, 0)
    # The brokers' connections stay open: their entries live as long as they do.
    brokers = [BlockingClient(n1, timeout_s=8.0) for _ in TOPICS]
    try:
        for client, (name, topics) in zip(brokers, TOPICS.items(), strict=True):
            register_broker(client, make_broker(name, 24_100 + 10 * len(name)), topics)
        for (namespace, key), value in KV.items():
            fields = {"namespace": namespace, "key": key, "value": value}
            put = admin_request(run_dir, n1, RequestCode.PUT_KV_CONFIG, fields)
            assert put.code == ResponseCode.SUCCESS, put.remark
        wait_until(
            lambda: _three_agree(run_dir), what="the three nodes agreeing", timeout_s=AGREE_BOUND_S
        )
        written = _answers(run_dir, n1)
        assert all(code == ResponseCode.SUCCESS for code, _ in written.values())

        lost = [node for node in summary["nodes"] if node["id"] != "n1"]
        for node in lost:
            for pid in (node["gateway_pid"], node["web_pid"]):
                os.kill(pid, signal.SIGKILL)
        for node in lost:
            for pid in (node["gateway_pid"], node["web_pid"]):
                wait_until(
                    lambda p=pid: launcher.process_start_ticks(p) is None,
                    what=f"pid {pid} gone",
                    timeout_s=GONE_BOUND_S,
                )
            shutil.rmtree(run_dir / node["id"])  # the disk is lost

        done = cluster_cli("recover", "--survivor", "n1", "--run-dir", str(run_dir), "--json")
        recovered_at = time.monotonic()
        recovered = cli_json(done)

        # A write commits on the one-member cluster, at once.
        put = admin_request(
            run_dir,
            n1,
            RequestCode.PUT_KV_CONFIG,
            {"namespace": "ops", "key": "after", "value": "1"},
        )
        assert put.code == ResponseCode.SUCCESS, put.remark
        assert time.monotonic() - recovered_at < COMMIT_BOUND_S
        assert recovered["committed"]["after_s"] < COMMIT_BOUND_S
        assert recovered["committed"]["members"] == [node_addr(summary, "n1")]
        assert _answers(run_dir, n1) == written
        _check_recovered(run_dir, summary, recovered, done.stderr)

        for _ in range(2):
            cli_json(cluster_cli("add-node", "--run-dir", str(run_dir), "--json"))
        nodes = recorded_cluster(run_dir)["nodes"]
        assert [n["id"] for n in nodes] == ["n1", "n4", "n5"]
        assert not {n["raft_addr"] for n in nodes} & {n["raft_addr"] for n in lost}
        wait_until(
            lambda: _three_agree(run_dir),
            what="the three nodes agreeing after the recovery",
            timeout_s=AGREE_BOUND_S,
        )
        statuses = _statuses(run_dir)
        assert {tuple(sorted(s["members"])) for s in statuses.values()} == {
            tuple(sorted(n["raft_addr"] for n in nodes))
        }
        assert len({s["digest"] for s in statuses.values()}) == 1
        for node in nodes[1:]:
            assert _answers(run_dir, node["remoting_addr"]) == written
    finally:
        for client in brokers:
            client.close()


def node_addr(summary: dict[str, Any], node_id: str) -> str:
    return next(str(n["raft_addr"]) for n in summary["nodes"] if n["id"] == node_id)


def _check_recovered(
    run_dir: Path, before: dict[str, Any], recovered: dict[str, Any], stderr: str
) -> None:
    """The summary, the files left behind, cluster.json and the audit entry."""
    state = recovered["state"]
    saved = Path(state["file"])
    assert saved.parent == run_dir and saved.stat().st_mode & 0o777 == FILE_MODE
    header = read_backup_file(saved).header
    assert not header.linearizable and header.node == "n1"
    assert (state["index"], state["term"]) == (header.index, header.term)
    assert sorted(header.members) == sorted(n["raft_addr"] for n in before["nodes"])
    assert state["index"] >= recovered["survivor_before"]["applied_index"] > 0
    assert [r["id"] for r in recovered["removed"]] == ["n2", "n3"]
    assert all(r["folder_moved_to"] is None for r in recovered["removed"])  # deleted
    moved = Path(recovered["raft_dir_moved_to"])
    assert moved.name.startswith("raft.before-recover-") and (moved / "raft.journal").exists()
    marker = json.loads(Path(recovered["marker"]).read_text())
    assert (marker["index"], marker["term"], marker["how"]) == (
        header.index,
        header.term,
        "cluster recover",
    )
    recorded = recorded_cluster(run_dir)
    assert [n["id"] for n in recorded["nodes"]] == ["n1"]
    assert [n["id"] for n in recorded["retired"]] == ["n2", "n3"]
    assert "FORCED into a new one-member raft cluster" in stderr
    text = cluster_text.recover_text(recovered)
    assert f"state taken at index {header.index}, term {header.term}" in text
    with sqlite3.connect(run_dir / "shared.sqlite3") as db:
        entries = db.execute(
            "SELECT node_id, channel, action, ok, result FROM namesrv_app_auditentry"
        ).fetchall()
    assert [(e[0], e[1], e[2], e[3]) for e in entries] == [("n1", "cli", "force-new-cluster", 1)]
    assert f"index {header.index}, term {header.term}" in entries[0][4]


def test_down_stops_the_grown_cluster(run_dir: Path) -> None:
    stopped = stop_cluster(run_dir)["stopped"]
    assert {"n1-gateway", "n4-gateway", "n5-gateway", "redis"} <= set(stopped)
