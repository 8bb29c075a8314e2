"""The environment the launcher gives each node's processes."""

from __future__ import annotations

from pathlib import Path

from localcluster.launcher import LIVE_EVENT_PUBLISHER, ClusterEnv, plan_ports


def test_each_node_publishes_its_changes_to_the_consoles(tmp_path: Path) -> None:
    plan = plan_ports(
        tmp_path, nodes=2, base_port=0, web_base_port=0, internal_base_port=0, redis_port=0
    )
    env = ClusterEnv("redis://127.0.0.1:1/0", "s3cret", tmp_path / "cluster.json", "eventual")

    first, second = (env.for_node(plan, node) for node in plan.nodes)

    assert first["NAMESRV_EVENT_PUBLISHER"] == LIVE_EVENT_PUBLISHER
    assert (first["NAMESRV_NODE_ID"], second["NAMESRV_NODE_ID"]) == ("n1", "n2")
    assert first["NAMESRV_DB_PATH"] != second["NAMESRV_DB_PATH"]
    assert first["NAMESRV_INTERNAL_SECRET"] == second["NAMESRV_INTERNAL_SECRET"] == "s3cret"


def test_a_publisher_chosen_by_the_caller_is_kept(tmp_path: Path) -> None:
    plan = plan_ports(
        tmp_path, nodes=1, base_port=0, web_base_port=0, internal_base_port=0, redis_port=0
    )
    env = ClusterEnv(
        "redis://127.0.0.1:1/0",
        "s",
        tmp_path / "c.json",
        "eventual",
        extra={"NAMESRV_EVENT_PUBLISHER": ""},
    )

    assert env.for_node(plan, plan.nodes[0])["NAMESRV_EVENT_PUBLISHER"] == ""
