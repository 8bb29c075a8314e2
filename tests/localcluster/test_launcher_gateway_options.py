"""Per-node gateway options of the launcher: --raft-dial and --skew-allowance-ms."""

from __future__ import annotations

from pathlib import Path

import pytest

from localcluster.launcher import (
    ClusterPlan,
    LauncherError,
    gateway_argv,
    parse_node_raft_dial,
    parse_node_skew_allowance,
    plan_from_cluster_file,
    plan_ports,
    with_gateway_options,
    write_cluster_file,
)
from node.config_schema import DEFAULT_SKEW_ALLOWANCE_MS


def _raft_plan(tmp_path: Path) -> ClusterPlan:
    return plan_ports(
        tmp_path,
        nodes=3,
        mode="raft",
        base_port=0,
        web_base_port=0,
        internal_base_port=0,
        redis_port=0,
        raft_base_port=0,
    )


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_each_gateway_gets_its_own_dial_map_and_allowance(tmp_path: Path) -> None:
    plan = _raft_plan(tmp_path)
    n1, n2, n3 = plan.nodes
    dialled = with_gateway_options(
        plan,
        raft_dial={"n1": {n2.raft_addr: "127.0.0.1:40001", n3.raft_addr: "127.0.0.1:40002"}},
        skew_allowance_ms={"n1": 0, "n2": 750},
    )

    first, second, third = (gateway_argv(dialled, node) for node in dialled.nodes)

    assert _flag(first, "--raft-dial") == (
        ",".join(sorted([f"{n2.raft_addr}=127.0.0.1:40001", f"{n3.raft_addr}=127.0.0.1:40002"]))
    )
    assert _flag(first, "--skew-allowance-ms") == "0"
    assert _flag(second, "--raft-dial") is None and _flag(second, "--skew-allowance-ms") == "750"
    # Not planned: the node config's default, written out like every other setting.
    assert _flag(third, "--raft-dial") is None
    assert _flag(third, "--skew-allowance-ms") == str(DEFAULT_SKEW_ALLOWANCE_MS)
    # The identity stays the real Raft port: only the dialling changes.
    assert _flag(first, "--raft-port") == str(n1.raft_port)


def test_later_calls_keep_options_they_do_not_name(tmp_path: Path) -> None:
    plan = _raft_plan(tmp_path)
    peer = plan.nodes[1].raft_addr
    step = with_gateway_options(plan, skew_allowance_ms={"n1": 100})
    both = with_gateway_options(step, raft_dial={"n1": {peer: "127.0.0.1:40001"}})
    assert both.nodes[0].skew_allowance_ms == 100
    assert both.nodes[0].raft_dial == ((peer, "127.0.0.1:40001"),)


def test_the_options_survive_the_cluster_file(tmp_path: Path) -> None:
    plan = _raft_plan(tmp_path)
    peer = plan.nodes[0].raft_addr
    dialled = with_gateway_options(
        plan, raft_dial={"n2": {peer: "127.0.0.1:40003"}}, skew_allowance_ms={"n3": 0}
    )
    write_cluster_file(dialled, {})

    assert plan_from_cluster_file(tmp_path) == dialled


@pytest.mark.parametrize(
    ("dial", "skew", "message"),
    [
        ({"n9": {}}, {}, "no such node"),
        ({}, {"n1": -1}, "non-negative"),
        ({"n1": {"127.0.0.1:1": "127.0.0.1:40001"}}, {}, "not another member"),
        ({"n1": {"SELF": "127.0.0.1:40001"}}, {}, "not another member"),
        ({"n1": {"PEER": "nowhere"}}, {}, "host:port"),
    ],
)
def test_bad_options_are_refused_and_change_nothing(
    tmp_path: Path,
    dial: dict[str, dict[str, str]],
    skew: dict[str, int],
    message: str,
) -> None:
    plan = _raft_plan(tmp_path)
    names = {"SELF": plan.nodes[0].raft_addr, "PEER": plan.nodes[1].raft_addr}
    dial = {n: {names.get(p, p): a for p, a in m.items()} for n, m in dial.items()}
    with pytest.raises(LauncherError, match=message):
        with_gateway_options(plan, raft_dial=dial, skew_allowance_ms=skew)
    assert all(not n.raft_dial and n.skew_allowance_ms is None for n in plan.nodes)


def test_eventual_mode_refuses_raft_options(tmp_path: Path) -> None:
    plan = plan_ports(
        tmp_path, nodes=2, base_port=0, web_base_port=0, internal_base_port=0, redis_port=0
    )
    with pytest.raises(LauncherError, match="need --mode raft"):
        with_gateway_options(plan, skew_allowance_ms={"n1": 0})
    assert "--skew-allowance-ms" not in gateway_argv(plan, plan.nodes[0])


def test_command_line_forms_parse() -> None:
    assert parse_node_raft_dial(["n1:127.0.0.1:7102=127.0.0.1:17102,127.0.0.1:7103=h:9"]) == {
        "n1": {"127.0.0.1:7102": "127.0.0.1:17102", "127.0.0.1:7103": "h:9"}
    }
    assert parse_node_skew_allowance(["500", "n2=0"], ["n1", "n2"]) == {"n1": 500, "n2": 0}
    for bad in (["n1"], ["n1:127.0.0.1:7102"], ["n1:127.0.0.1:7102=x"], [":a=b:1"]):
        with pytest.raises(LauncherError):
            parse_node_raft_dial(bad)
    for bad_skew in (["-5"], ["n1=x"], ["n1="]):
        with pytest.raises(LauncherError):
            parse_node_skew_allowance(bad_skew, ["n1"])
