"""``manage.py cluster up|status|down`` with three eventual-mode nodes on loopback.

One cluster serves the module; the tests run in file order and the last one
takes it down (the fixture's own ``down`` then finds nothing left to stop).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster import launcher
from remoting.blocking import BlockingClient
from remoting.codes import ResponseCode
from tests.integration.cluster_fixtures import (
    cluster_cli,
    make_broker,
    query_route,
    register_broker,
    remoting_addr,
    start_cluster,
    stop_cluster,
)
from tests.integration.static_links import assert_served_for_good, console_static_links

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NODES = 3
TOPIC = "LifecycleTopic"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh run folder for the module's cluster."""
    return tmp_path_factory.mktemp("cluster")


@pytest.fixture(scope="module")
def summary(run_dir: Path) -> Iterator[dict[str, Any]]:
    """A running 3-node cluster, as ``up --json`` described it."""
    started = start_cluster(run_dir, nodes=NODES)
    try:
        yield started
    finally:
        stop_cluster(run_dir)


def summary_pids(summary: dict[str, Any]) -> list[int]:
    """Every pid the summary names."""
    pids = [summary["redis"]["pid"], summary["celery"]["worker_pid"], summary["celery"]["beat_pid"]]
    for node in summary["nodes"]:
        pids += [node["gateway_pid"], node["web_pid"]]
    return pids


def test_up_prints_every_node_with_its_ports_and_pids(
    summary: dict[str, Any], run_dir: Path
) -> None:
    assert summary["run_dir"] == str(run_dir.resolve())
    assert [node["id"] for node in summary["nodes"]] == ["n1", "n2", "n3"]
    ports = [summary["redis"]["port"]]
    for node in summary["nodes"]:
        ports += [node["remoting_port"], node["web_port"], node["internal_port"]]
        assert launcher.accepts_connections(node["remoting_port"])
        assert launcher.accepts_connections(node["web_port"])
    assert len(set(ports)) == len(ports)
    assert all(isinstance(pid, int) and pid > 0 for pid in summary_pids(summary))
    assert json.loads((run_dir / "cluster.json").read_text())["nodes"] == summary["nodes"]


def test_status_reports_every_process_alive(summary: dict[str, Any], run_dir: Path) -> None:
    done = cluster_cli("status", "--run-dir", str(run_dir), "--json")

    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["running"] is True
    assert sorted(p["pid"] for p in status["processes"]) == sorted(summary_pids(summary))
    assert all(p["alive"] for p in status["processes"])


def test_status_shows_what_each_gateway_answers_to_node_status(
    summary: dict[str, Any], run_dir: Path
) -> None:
    done = cluster_cli("status", "--run-dir", str(run_dir), "--json")

    status = json.loads(done.stdout)
    nodes = status["nodes"]
    assert [node["id"] for node in nodes] == ["n1", "n2", "n3"]
    assert [node["status"]["node_id"] for node in nodes] == ["n1", "n2", "n3"]
    assert {node["status"]["mode"] for node in nodes} == {"eventual"}
    assert status["agree"] is True  # compared on what clients see
    text = cluster_cli("status", "--run-dir", str(run_dir)).stdout
    assert "the nodes agree on what clients see" in text


def test_a_broker_registered_on_node_one_is_not_visible_on_node_two(
    summary: dict[str, Any],
) -> None:
    with BlockingClient(remoting_addr(summary, 0), timeout_s=5.0) as client:
        register_broker(client, make_broker("broker-a", 10911), [TOPIC])

        code_n1, route_n1 = query_route(remoting_addr(summary, 0), TOPIC)
        code_n2, route_n2 = query_route(remoting_addr(summary, 1), TOPIC)

    assert code_n1 == ResponseCode.SUCCESS
    assert route_n1 is not None
    assert [q.broker_name for q in route_n1.queue_datas] == ["broker-a"]
    assert route_n1.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}
    # Eventual mode: nodes never talk, so node 2 never heard of the broker.
    assert code_n2 == ResponseCode.TOPIC_NOT_EXIST
    assert route_n2 is None


def test_every_web_process_serves_the_consoles_static_files_hashed_and_cached_for_good(
    summary: dict[str, Any], run_dir: Path
) -> None:
    # cluster up collected them once into the run folder; every node serves that copy.
    assert (run_dir / "static" / "staticfiles.json").is_file()
    for node in summary["nodes"]:
        base = f"http://127.0.0.1:{node['web_port']}"
        links = console_static_links(base)
        assert {link.split("/")[-1].split(".")[0] for link in links} >= {"console", "favicon"}
        for link in links:
            assert_served_for_good(base, link)


def test_a_second_up_in_the_same_run_folder_is_refused(
    summary: dict[str, Any], run_dir: Path
) -> None:
    done = cluster_cli(
        "up",
        "--nodes",
        "1",
        "--run-dir",
        str(run_dir),
        "--base-port",
        "0",
        "--web-base-port",
        "0",
        "--internal-base-port",
        "0",
        "--redis-port",
        "0",
    )

    assert done.returncode != 0
    assert "already running" in done.stderr


def test_down_stops_every_process_it_started(summary: dict[str, Any], run_dir: Path) -> None:
    result = stop_cluster(run_dir)

    assert len(result["stopped"]) == 2 * NODES + 3
    for pid in summary_pids(summary):
        assert launcher.process_start_ticks(pid) is None, f"pid {pid} survived down"
    done = cluster_cli("status", "--run-dir", str(run_dir), "--json")
    assert json.loads(done.stdout)["running"] is False
    assert done.returncode == 3


def test_up_again_in_the_same_folder_migrates_and_collects_nothing(run_dir: Path) -> None:
    # cluster up left a stamp beside every database and the static folder (node.preparation).
    stamps = sorted(p.name for p in run_dir.rglob("*.prepared"))
    assert stamps.count("namesrv.sqlite3.prepared") == NODES and "static.prepared" in stamps
    logs = sorted([*run_dir.glob("*/migrate.log"), run_dir / "collectstatic.log"])
    before = {log: log.stat().st_size if log.exists() else None for log in logs}

    summary = start_cluster(run_dir, nodes=NODES)
    try:
        # Nothing ran: no log grew, and no command left a new one.
        assert {log: log.stat().st_size if log.exists() else None for log in logs} == before
        for node in summary["nodes"]:
            base = f"http://127.0.0.1:{node['web_port']}"
            for link in console_static_links(base):
                assert_served_for_good(base, link)
        # The migrated databases work: the projection and the gateway answer a route.
        with BlockingClient(remoting_addr(summary, 0), timeout_s=5.0) as client:
            register_broker(client, make_broker("broker-a", 10911), [TOPIC])
            code, route = query_route(remoting_addr(summary, 0), TOPIC)
        assert code == ResponseCode.SUCCESS and route is not None
    finally:
        stop_cluster(run_dir)
