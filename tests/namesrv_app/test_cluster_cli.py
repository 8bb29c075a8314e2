"""``manage.py cluster`` as an operator types it: exact options, the clearest reason first."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from localcluster import launcher
from tests.integration.cluster_fixtures import cluster_cli

QUIET = "import time; time.sleep(60)"


def test_an_abbreviated_option_is_refused_not_taken_for_another() -> None:
    done = cluster_cli("status", "--run-dir", "/nonexistent", "--node", "3")

    assert done.returncode == 2
    assert "unrecognized arguments: --node 3" in done.stderr


def test_up_over_a_running_cluster_says_so_before_naming_busy_ports(tmp_path: Path) -> None:
    slot = next(s for s in launcher.process_slots(tmp_path, []) if s.name == "redis")
    record = launcher.start_process(
        "redis",
        [sys.executable, "-c", QUIET],
        env={},
        log_path=slot.log_path,
        pid_path=slot.pid_path,
    )
    busy = socket.create_server(("127.0.0.1", 0))
    try:
        port = str(busy.getsockname()[1])
        done = cluster_cli("up", "--run-dir", str(tmp_path), "--nodes", "1", "--base-port", port)

        assert done.returncode != 0
        assert f"a cluster is already running in {tmp_path.resolve()}: redis" in done.stderr
        assert "in use" not in done.stderr
    finally:
        busy.close()
        launcher.cluster_down(tmp_path, grace_s=1.0)
        launcher.reap_children()
        assert not launcher.is_alive(record)


def test_a_verb_refuses_another_verbs_option_and_stops_nothing(tmp_path: Path) -> None:
    slot = next(s for s in launcher.process_slots(tmp_path, []) if s.name == "redis")
    record = launcher.start_process(
        "redis",
        [sys.executable, "-c", QUIET],
        env={},
        log_path=slot.log_path,
        pid_path=slot.pid_path,
    )
    try:
        # Before, the verb was one positional and `down` took --nodes without a word.
        done = cluster_cli("down", "--run-dir", str(tmp_path), "--nodes", "5")

        assert done.returncode == 2
        assert "unrecognized arguments: --nodes 5" in done.stderr
        assert launcher.is_alive(record)
    finally:
        launcher.cluster_down(tmp_path, grace_s=1.0)
        launcher.reap_children()


def test_remove_node_names_its_missing_node_id_in_its_own_usage() -> None:
    done = cluster_cli("remove-node", "--run-dir", "/nonexistent")

    assert done.returncode == 2
    assert "usage: manage.py cluster remove-node" in done.stderr
    assert "the following arguments are required: ID" in done.stderr
