"""``manage.py cluster restart ID`` and ``cluster up --node ID``: one node of a running
raft cluster started again, from its node.toml and folder, catching up on what the
others took while it was down.

One 3-node raft cluster serves the module; the tests run in file order and the last
one takes it down (the fixture's own ``down`` then finds nothing left to stop).
"""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster import launcher
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

TOPIC = "RestartTopic"
KV = {"namespace": "restart", "key": "written-while-n2-was-down", "value": "v1"}
CATCH_UP_BOUND_S = 20.0
"""From the restart's return to n2 answering as n1 does and every digest being equal;
the restart itself waits until n2 has applied the leader's commit index."""
GONE_BOUND_S = 5.0


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A running 3-node raft cluster started by the real CLI on free ports."""
    folder = tmp_path_factory.mktemp("restart-cluster")
    start_cluster(folder, "--mode", "raft", "--raft-base-port", "0", nodes=3)
    try:
        yield folder
    finally:
        stop_cluster(folder)


def _node(run_dir: Path, node_id: str) -> dict[str, Any]:
    return next(n for n in recorded_cluster(run_dir)["nodes"] if n["id"] == node_id)


def _kill(pid: int) -> None:
    """SIGKILL one process (not its group: a crash, not a stop) and wait until it is gone."""
    os.kill(pid, signal.SIGKILL)
    wait_until(
        lambda: launcher.process_start_ticks(pid) is None,
        what=f"pid {pid} gone",
        timeout_s=GONE_BOUND_S,
    )


def _pid_argv(run_dir: Path, node_id: str, kind: str) -> tuple[str, ...]:
    record = launcher.read_pid_file(run_dir / node_id / f"{kind}.pid")
    assert record is not None
    return record.argv


def _status(run_dir: Path) -> dict[str, Any]:
    return cli_json(cluster_cli("status", "--run-dir", str(run_dir), "--json"))


def _all_equal_and_running(run_dir: Path) -> bool:
    """Every process alive, every node answering NODE_STATUS with one digest."""
    done = cluster_cli("status", "--run-dir", str(run_dir), "--json")
    if done.returncode != 0:
        return False
    status = json.loads(done.stdout)
    digests = {(node["status"] or {}).get("digest") for node in status["nodes"]}
    return bool(status["running"] and status["agree"] and len(digests) == 1 and None not in digests)


def test_restart_brings_back_a_killed_node_with_what_it_missed(run_dir: Path) -> None:
    """SIGKILL n2's gateway and web process, register a broker and put a KV pair through
    n1, then ``cluster restart n2``: n2 runs the same command lines again, cluster.json
    has its new pids, and it answers the route and the KV pair as n1 does, digest equal."""
    summary = recorded_cluster(run_dir)
    n1, n2 = remoting_addr(summary, 0), remoting_addr(summary, 1)
    before = _node(run_dir, "n2")
    argv = {kind: _pid_argv(run_dir, "n2", kind) for kind in ("gateway", "web")}
    _kill(before["gateway_pid"])
    _kill(before["web_pid"])

    # The broker's connection stays open to the end: its entry lives as long as it does.
    with BlockingClient(n1, timeout_s=8.0) as broker:
        register_broker(broker, make_broker("broker-r", 24_000), [TOPIC])
        put = admin_request(run_dir, n1, RequestCode.PUT_KV_CONFIG, KV)
        assert put.code == ResponseCode.SUCCESS, put.remark
        restarted = cli_json(cluster_cli("restart", "n2", "--run-dir", str(run_dir), "--json"))
        assert restarted["node"]["id"] == "n2" and restarted["verb"] == "restart"
        assert set(restarted["started"]) == {"n2-gateway", "n2-web"}
        assert restarted["stopped"] == [] and restarted["kept"] == {}
        assert restarted["caught_up"] is not None and restarted["caught_up"]["leader"] != "n2"
        after = _node(run_dir, "n2")
        assert (after["gateway_pid"], after["web_pid"]) == (
            restarted["started"]["n2-gateway"],
            restarted["started"]["n2-web"],
        )
        assert {after["gateway_pid"], after["web_pid"]}.isdisjoint(
            {before["gateway_pid"], before["web_pid"]}
        )
        assert {kind: _pid_argv(run_dir, "n2", kind) for kind in argv} == argv
        # What n1 took while n2 was down, now answered by n2 itself.
        code, route = query_route(n2, TOPIC)
        assert code == ResponseCode.SUCCESS and route == query_route(n1, TOPIC)[1]
        fields = {"namespace": KV["namespace"], "key": KV["key"]}
        got = admin_request(run_dir, n2, RequestCode.GET_KV_CONFIG, fields)
        assert (got.code, (got.ext_fields or {}).get("value")) == (ResponseCode.SUCCESS, "v1")
        wait_until(
            lambda: _all_equal_and_running(run_dir),
            what="every node equal and running",
            timeout_s=CATCH_UP_BOUND_S,
        )
    with urllib.request.urlopen(f"http://127.0.0.1:{after['web_port']}/healthz", timeout=10) as ok:
        assert ok.status == 200


def test_up_node_completes_a_half_dead_node_either_way(run_dir: Path) -> None:
    """n3's gateway dead, its web process alive: ``up --node n3`` starts the gateway only
    and keeps the web process; then the reverse."""
    before = _node(run_dir, "n3")
    _kill(before["gateway_pid"])

    gateway_back = cli_json(cluster_cli("up", "--node", "n3", "--run-dir", str(run_dir), "--json"))

    assert gateway_back["kept"] == {"n3-web": before["web_pid"]}
    assert list(gateway_back["started"]) == ["n3-gateway"]
    assert gateway_back["caught_up"] is not None
    _kill(before["web_pid"])

    web_back = cli_json(cluster_cli("up", "--node", "n3", "--run-dir", str(run_dir), "--json"))

    assert web_back["kept"] == {"n3-gateway": gateway_back["started"]["n3-gateway"]}
    assert list(web_back["started"]) == ["n3-web"]
    after = _node(run_dir, "n3")
    assert (after["gateway_pid"], after["web_pid"]) == (
        gateway_back["started"]["n3-gateway"],
        web_back["started"]["n3-web"],
    )
    assert launcher.accepts_connections(after["web_port"])
    assert _status(run_dir)["running"] is True


def test_up_node_refuses_a_node_whose_processes_all_run(run_dir: Path) -> None:
    before = _node(run_dir, "n1")

    done = cluster_cli("up", "--node", "n1", "--run-dir", str(run_dir))

    assert done.returncode != 0
    assert "n1 is already running" in done.stderr and "cluster restart n1" in done.stderr
    assert _node(run_dir, "n1") == before


def test_an_unknown_node_is_refused_by_both_verbs(run_dir: Path) -> None:
    for verb in (("restart", "n9"), ("up", "--node", "n9")):
        done = cluster_cli(*verb, "--run-dir", str(run_dir))

        assert done.returncode != 0
        assert "n9 is not a node" in done.stderr and "n1, n2, n3" in done.stderr


def test_up_node_takes_no_option_that_plans_a_cluster(run_dir: Path) -> None:
    done = cluster_cli("up", "--node", "n2", "--nodes", "5", "--run-dir", str(run_dir))

    assert done.returncode != 0 and "it takes no --nodes" in done.stderr


def test_down_stops_the_restarted_processes_and_restart_then_asks_for_up(run_dir: Path) -> None:
    nodes = recorded_cluster(run_dir)["nodes"]
    pids = [pid for node in nodes for pid in (node["gateway_pid"], node["web_pid"])]

    result = stop_cluster(run_dir)

    assert {"n2-gateway", "n2-web", "n3-gateway", "n3-web"} <= set(result["stopped"])
    for pid in pids:
        assert launcher.process_start_ticks(pid) is None, f"pid {pid} survived down"
    done = cluster_cli("restart", "n2", "--run-dir", str(run_dir))
    assert done.returncode != 0
    assert "no cluster is running" in done.stderr and "cluster up --run-dir" in done.stderr
