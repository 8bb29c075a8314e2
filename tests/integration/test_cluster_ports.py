"""``cluster up`` refuses ports that are taken, before it starts anything."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from localcluster import launcher
from tests.integration.cluster_fixtures import cluster_cli

pytestmark = pytest.mark.integration


def test_it_refuses_a_remoting_port_that_is_taken_and_starts_nothing(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]

        done = cluster_cli(
            "up",
            "--nodes",
            "1",
            "--run-dir",
            str(tmp_path),
            "--base-port",
            str(taken),
            "--web-base-port",
            "0",
            "--internal-base-port",
            "0",
            "--redis-port",
            "0",
        )

    assert done.returncode != 0
    assert f"n1 remoting port {taken}" in done.stderr
    assert "already in use" in done.stderr
    assert list(tmp_path.rglob("*.pid")) == []


def test_plan_ports_names_every_collision_at_once() -> None:
    with socket.socket() as first, socket.socket() as second:
        for sock in (first, second):
            sock.bind(("127.0.0.1", 0))
            sock.listen()
        web, redis = first.getsockname()[1], second.getsockname()[1]

        with pytest.raises(launcher.PortInUseError) as caught:
            launcher.plan_ports(
                Path("unused"),
                nodes=1,
                base_port=0,
                web_base_port=web,
                internal_base_port=0,
                redis_port=redis,
            )

    assert f"n1 web port {web}" in str(caught.value)
    assert f"redis port {redis}" in str(caught.value)


def test_planned_free_ports_never_repeat() -> None:
    plan = launcher.plan_ports(
        Path("unused"), nodes=3, base_port=0, web_base_port=0, internal_base_port=0, redis_port=0
    )

    ports = [plan.redis_port] + [
        port
        for node in plan.nodes
        for port in (node.remoting_port, node.web_port, node.internal_port)
    ]
    assert len(set(ports)) == len(ports) == 10
    assert [node.node_id for node in plan.nodes] == ["n1", "n2", "n3"]
