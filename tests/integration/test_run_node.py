"""``run_node``: three raft nodes, each started only from its own config file, on three
addresses (loopback aliases stand in for hosts here; the network-namespace test puts
them on hosts of their own)."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from localcluster.demo import DemoBroker
from remoting.blocking import BlockingClient
from remoting.codes import ResponseCode
from tests.integration.cluster_fixtures import TEST_CLUSTER, query_route, register_broker
from tests.node.hosts import (
    PROJECT_DIR,
    NodeProcess,
    free_host_ports,
    http_status,
    wait_for,
    write_configs,
)

pytestmark = pytest.mark.slow
ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3")


def http_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5.0) as response:
        return str(response.read().decode("utf-8"))


def _closed(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1.0):
            return False
    except OSError:
        return True


def test_three_nodes_from_their_config_files_replicate_and_stop_cleanly(tmp_path: Path) -> None:
    hosts = free_host_ports(ADDRESSES)
    paths, _secrets = write_configs(tmp_path, hosts)
    nodes = [NodeProcess(path).start() for path in paths]
    try:
        for host in hosts:
            wait_for(
                lambda h=host: http_status(f"http://{h.address}:{h.web}/readyz") == 200,
                f"/readyz of {host.address}",
                processes=nodes,
            )
        assert http_status(f"http://{hosts[0].address}:{hosts[0].web}/healthz") == 200
        # Each gateway serves its metrics on the configured address.
        for host in hosts:
            text = http_text(f"http://{host.address}:{host.metrics}/metrics")
            assert "namesrv_raft_term" in text and "namesrv_raft_is_leader" in text
            assert "namesrv_projection_lag_versions" in text
        # Each web process answers on its own address only: nothing binds every interface.
        assert _closed("127.0.0.4", hosts[0].web) and _closed("127.0.0.4", hosts[0].remoting)

        broker = DemoBroker(TEST_CLUSTER, "broker-x", 0, "127.0.0.1:30911", "127.0.0.1:30912")
        with BlockingClient(f"{hosts[1].address}:{hosts[1].remoting}", timeout_s=5.0) as client:
            register_broker(client, broker, ["HostOrders"])
        for host in hosts:
            wait_for(
                lambda h=host: (
                    query_route(f"{h.address}:{h.remoting}", "HostOrders")[0]
                    == ResponseCode.SUCCESS
                ),
                f"route on {host.address}",
            )

        # One node stops: its supervisor takes its processes down, the majority commits on.
        assert nodes[2].stop() == 0
        assert _closed(hosts[2].address, hosts[2].remoting)
        assert _closed(hosts[2].address, hosts[2].web)
        other = DemoBroker(TEST_CLUSTER, "broker-y", 0, "127.0.0.1:30921", "127.0.0.1:30922")
        with BlockingClient(f"{hosts[0].address}:{hosts[0].remoting}", timeout_s=5.0) as client:
            register_broker(client, other, ["AfterStop"])
        wait_for(
            lambda: (
                query_route(f"{hosts[1].address}:{hosts[1].remoting}", "AfterStop")[0]
                == ResponseCode.SUCCESS
            ),
            "route after one node stopped",
        )
        # The node's own files hold its config, its logs and its Raft journal.
        data = paths[0].parent / "data"
        assert (data / "gateway.log").exists() and (data / "raft").is_dir()
        # ... and the static files the supervisor collected for the web process (these
        # nodes run the production profile, which redirects plain HTTP: the files are
        # fetched in test_cluster_lifecycle.py).
        assert (data / "static" / "staticfiles.json").is_file()
        assert (data / "internal.secret").stat().st_mode & 0o077 == 0
    finally:
        for node in nodes:
            node.stop()
    for host in hosts:
        assert _closed(host.address, host.remoting) and _closed(host.address, host.raft)


def test_a_bad_config_file_stops_run_node_with_one_line_naming_the_key(tmp_path: Path) -> None:
    paths, _ = write_configs(tmp_path, free_host_ports(ADDRESSES[:2]))
    text = paths[0].read_text(encoding="utf-8").replace('mode = "raft"', 'mode = "rafts"')
    paths[0].write_text(text, encoding="utf-8")

    done = subprocess.run(
        [sys.executable, str(PROJECT_DIR / "manage.py"), "run_node", "--config", str(paths[0])],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        f"CommandError: {paths[0]}: mode: must be one of eventual, raft, not 'rafts'"
    ]
    assert not (paths[0].parent / "data").exists()  # nothing was started or made
