"""``manage.py cluster up --mode raft``, ``add-node`` and ``remove-node``: the launcher
wires the Raft peers, grows and shrinks the membership, and cluster.json follows."""

from __future__ import annotations

import getpass
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from remoting.blocking import BlockingClient
from remoting.codes import ResponseCode
from tests.integration.cluster_fixtures import (
    FREE_PORTS,
    cluster_cli,
    make_broker,
    query_route,
    register_broker,
    remoting_addr,
    stop_cluster,
)
from tests.integration.gateway_harness import WAIT_S
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "MembershipTopic"


def _json(done: Any) -> dict[str, Any]:
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A 3-node raft cluster started by the real CLI on free ports."""
    folder: Path = tmp_path_factory.mktemp("raft-cluster")
    try:
        _json(
            cluster_cli(
                "up",
                "--nodes",
                "3",
                "--mode",
                "raft",
                "--run-dir",
                str(folder),
                "--json",
                "--raft-base-port",
                "0",
                *FREE_PORTS,
            )
        )
        yield folder
    finally:
        stop_cluster(folder)


def _raft_statuses(run_dir: Path) -> dict[str, dict[str, Any]]:
    status = _json(cluster_cli("status", "--run-dir", str(run_dir), "--json"))
    return {node["id"]: node["status"] for node in status["nodes"]}


def test_up_in_raft_mode_wires_every_node_as_a_peer(run_dir: Path) -> None:
    """status --json shows one leader and the three Raft addresses as members everywhere."""
    summary = json.loads((run_dir / "cluster.json").read_text())
    addrs = sorted(node["raft_addr"] for node in summary["nodes"])
    statuses = _raft_statuses(run_dir)
    assert {tuple(sorted(s["members"])) for s in statuses.values()} == {tuple(addrs)}
    assert len({s["leader"] for s in statuses.values()}) == 1
    with BlockingClient(remoting_addr(summary, 0), timeout_s=8) as client:
        register_broker(client, make_broker("broker-m", 23_000), [TOPIC])
    wait_until(
        lambda: query_route(remoting_addr(summary, 2), TOPIC)[0] == ResponseCode.SUCCESS,
        what="the route on the third node",
        timeout_s=WAIT_S,
    )


def test_add_node_then_remove_node_changes_the_membership(run_dir: Path) -> None:
    """add-node starts n4 and makes it a member that catches up; remove-node takes it out."""
    grown = _json(cluster_cli("add-node", "--run-dir", str(run_dir), "--json"))
    assert [n["id"] for n in grown["nodes"]] == ["n1", "n2", "n3", "n4"]
    new = grown["nodes"][3]
    statuses = _raft_statuses(run_dir)
    assert all(new["raft_addr"] in s["members"] for s in statuses.values())
    code, route = query_route(new["remoting_addr"], TOPIC)
    assert code == ResponseCode.SUCCESS and route is not None

    shrunk = _json(cluster_cli("remove-node", "n4", "--run-dir", str(run_dir), "--json"))
    assert [n["id"] for n in shrunk["nodes"]] == ["n1", "n2", "n3"]
    statuses = _raft_statuses(run_dir)
    assert set(statuses) == {"n1", "n2", "n3"}
    assert all(new["raft_addr"] not in s["members"] for s in statuses.values())

    # Each change is one audit entry in the cluster's shared database, a refusal too.
    refused = cluster_cli("remove-node", "n9", "--run-dir", str(run_dir))
    assert refused.returncode != 0 and "n9 is not a node" in refused.stderr
    with sqlite3.connect(run_dir / "shared.sqlite3") as db:
        entries = db.execute(
            "SELECT node_id, channel, action, ok, result, username FROM namesrv_app_auditentry"
        ).fetchall()
    assert [e[:4] for e in entries] == [
        ("n4", "cli", "cluster add-node", 1),
        ("n4", "cli", "cluster remove-node", 1),
        ("n9", "cli", "cluster remove-node", 0),
    ]
    assert "n9 is not a node" in entries[2][4]
    assert {e[5] for e in entries} == {getpass.getuser()}


def test_membership_changes_are_refused_in_eventual_mode(tmp_path: Path) -> None:
    """add-node on a cluster.json of an eventual cluster says why it refuses."""
    (tmp_path / "cluster.json").write_text(
        json.dumps({"mode": "eventual", "redis": {"port": 1}, "nodes": []})
    )
    done = cluster_cli("add-node", "--run-dir", str(tmp_path))
    assert done.returncode != 0 and "raft-mode cluster" in done.stderr
