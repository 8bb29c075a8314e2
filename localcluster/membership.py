"""Raft membership of a local cluster: ``add-node`` and ``remove-node``."""

from __future__ import annotations

import contextlib
import functools
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from gateway.private_codes import InternalCode
from localcluster.argv import (
    ClusterEnv,
    gateway_argv,
    web_argv,
    write_node_config_file,
)
from localcluster.lifecycle import (
    _Starter,
    cluster_summary,
    ensure_plan_tls,
    known_node_ids,
    migrate_nodes,
    tls_client_config,
    write_cluster_file,
)
from localcluster.plan import (
    CLUSTER_FILE_NAME,
    CONNECT_TIMEOUT_S,
    DEFAULT_MODE,
    LOOPBACK,
    MEMBERSHIP_TIMEOUT_S,
    MODE_RAFT,
    POLL_INTERVAL_S,
    READY_TIMEOUT_S,
    STOP_GRACE_S,
    ClusterPlan,
    LauncherError,
    NodePlan,
    free_port,
    port_is_free,
)
from localcluster.processes import (
    is_alive,
    read_pid_file,
    stop_processes,
)
from localcluster.readiness import (
    gateway_ready,
    node_status,
)
from localcluster.run_folder import (
    process_slots,
    read_cluster_file,
    read_secret,
    read_secrets,
)
from node import processes as node_processes
from remoting.tls import TlsMode

# ------------------------------------------------------------------- raft membership


def plan_from_cluster_file(run_dir: Path) -> ClusterPlan:
    """The plan of the cluster recorded in ``run_dir``'s cluster.json."""
    run_dir = Path(run_dir).resolve()
    data = read_cluster_file(run_dir / CLUSTER_FILE_NAME)
    nodes = tuple(_node_plan(n) for n in data.get("nodes", []))
    acl = bool((data.get("acl") or {}).get("enabled", True))
    tls = TlsMode((data.get("tls") or {}).get("mode", TlsMode.DISABLED.value))
    retired = tuple(_node_plan(n) for n in data.get("retired", []))
    return ClusterPlan(
        run_dir,
        str(data.get("mode", DEFAULT_MODE)),
        int(data["redis"]["port"]),
        nodes,
        acl,
        tls,
        retired,
    )


def _node_plan(entry: dict[str, Any]) -> NodePlan:
    """A node's entry of cluster.json (or of its ``retired`` list) as a NodePlan."""
    return NodePlan(
        str(entry["id"]),
        int(entry["remoting_port"]),
        int(entry["web_port"]),
        int(entry["internal_port"]),
        int(entry.get("raft_port", 0)),
        tuple(sorted((str(p), str(a)) for p, a in (entry.get("raft_dial") or {}).items())),
        None if entry.get("skew_allowance_ms") is None else int(entry["skew_allowance_ms"]),
        int(entry.get("metrics_port") or 0),
    )


def _recorded_pids(run_dir: Path) -> dict[str, int | None]:
    """Name to pid of every process whose pid file is in ``run_dir``."""
    pids: dict[str, int | None] = {}
    for slot in process_slots(run_dir, known_node_ids(run_dir)):
        record = read_pid_file(slot.pid_path)
        if record is not None:
            pids[slot.name] = record.pid
    return pids


def _raft_statuses(plan: ClusterPlan, secret: str) -> dict[str, dict[str, Any]]:
    """NODE_STATUS of every node that answers."""
    from remoting.client import RemotingClientError

    answers = {}
    for node in plan.nodes:
        with contextlib.suppress(RemotingClientError, LauncherError, ValueError, OSError):
            answers[node.node_id] = node_status(node.internal_port, secret, CONNECT_TIMEOUT_S)
    return answers


def _membership_request(internal_port: int, secret: str, code: int, addr: str) -> None:
    """Ask one gateway to add or remove a Raft member; LauncherError with its refusal."""
    from remoting.blocking import BlockingClient
    from remoting.codes import ResponseCode
    from remoting.command import RemotingCommand
    from remoting.tls import ClientTls

    request = RemotingCommand.request(code, {"secret": secret, "addr": addr})
    with BlockingClient(
        f"{LOOPBACK}:{internal_port}", timeout_s=MEMBERSHIP_TIMEOUT_S, tls=ClientTls.PLAIN
    ) as client:
        response = client.invoke(request)
    if response.code != ResponseCode.SUCCESS:
        raise LauncherError(f"membership change refused: {response.remark}")


def _leader_node(plan: ClusterPlan, secret: str, *, besides: str | None = None) -> NodePlan:
    """The node the answering members call leader; refuses while a change is pending."""
    statuses = _raft_statuses(plan, secret)
    if any(s.get("membership_pending") for s in statuses.values()):
        raise LauncherError("a membership change is pending; try again when it is committed")
    by_addr = {node.raft_addr: node for node in plan.nodes}
    leaders = {s.get("leader") for s in statuses.values()} - {None}
    if len(leaders) != 1 or (leader := by_addr.get(str(leaders.pop()))) is None:
        raise LauncherError(f"no agreed raft leader among {sorted(statuses)}")
    if leader.node_id == besides:
        # A node never removes itself: ask another member that answers (it forwards).
        others = [n for n in plan.nodes if n.node_id != besides and n.node_id in statuses]
        if not others:
            raise LauncherError("no other member answers")
        return others[0]
    return leader


def _wait_caught_up(leader: NodePlan, node: NodePlan, secret: str, timeout_s: float) -> None:
    """Until ``node`` has applied what the leader had committed once it was a member.

    add-node returns when the new node answers what the others answer: a client sent
    to it right away must not get TOPIC_NOT_EXIST for a topic the cluster holds.
    """
    from remoting.client import RemotingClientError

    target = int(node_status(leader.internal_port, secret, CONNECT_TIMEOUT_S)["commit_index"])
    deadline = time.monotonic() + timeout_s
    applied = -1
    while time.monotonic() < deadline:
        with contextlib.suppress(RemotingClientError, LauncherError, ValueError, OSError):
            status = node_status(node.internal_port, secret, CONNECT_TIMEOUT_S)
            applied = int(status["applied_index"])
            if applied >= target:
                return
        time.sleep(POLL_INTERVAL_S)
    raise LauncherError(
        f"{node.node_id} applied entry {applied} of {target} within {timeout_s:g} s; "
        "it stays a member and keeps catching up (cluster status shows it)"
    )


def _next_port(used: set[int], after: int) -> int:
    """``after + 1`` when free and unused, else any free port."""
    candidate = after + 1
    if candidate not in used and port_is_free(candidate):
        used.add(candidate)
        return candidate
    port = free_port(avoid=used)
    used.add(port)
    return port


def _new_node_plan(plan: ClusterPlan) -> NodePlan:
    """The next node: the next free number and ports, never those of a retired node
    (one ``cluster recover`` took out: its Raft identity stays a lost member's)."""
    used = {plan.redis_port}
    for node in (*plan.nodes, *plan.retired):
        used |= {
            node.remoting_port,
            node.web_port,
            node.internal_port,
            node.raft_port,
            node.metrics_port,
        }
    known = (*plan.nodes, *plan.retired)
    number = 1 + max(int(n.node_id[1:]) for n in known if n.node_id[1:].isdigit())
    last = plan.nodes[-1]
    return NodePlan(
        f"n{number}",
        _next_port(used, last.remoting_port),
        _next_port(used, last.web_port),
        _next_port(used, last.internal_port),
        _next_port(used, last.raft_port),
        metrics_port=_next_port(used, last.metrics_port) if last.metrics_port else 0,
    )


def cluster_add_node(run_dir: Path, *, ready_timeout_s: float = READY_TIMEOUT_S) -> dict[str, Any]:
    """Start n(N+1) (gateway + web) with every member as a peer, then ask the leader to
    add it. Refused outside raft mode and while a change is pending; a refused add
    stops the new processes again. Returns the new cluster summary."""
    current = plan_from_cluster_file(run_dir)
    if current.mode != MODE_RAFT:
        raise LauncherError("add-node needs a raft-mode cluster (cluster up --mode raft)")
    run_secrets = read_secrets(current.run_dir, acl=current.acl)
    secret = run_secrets.internal
    leader = _leader_node(current, secret)
    node = _new_node_plan(current)
    grown = replace(current, nodes=(*current.nodes, node))
    env = ClusterEnv(
        redis_url=f"redis://{LOOPBACK}:{grown.redis_port}/0",
        secret=secret,
        cluster_file=grown.run_dir / CLUSTER_FILE_NAME,
        mode=grown.mode,
        secrets=run_secrets,
        tls_client_config=tls_client_config(grown),
    )
    grown.node_dir(node.node_id).mkdir(parents=True, exist_ok=True)
    ensure_plan_tls(grown)
    migrate_nodes(replace(grown, nodes=(node,)), env)
    starter = _Starter(grown, env)
    try:
        node_processes.reset_metrics_dir(write_node_config_file(grown, node, env))
        node_env = env.for_node(grown, node)
        starter.start(f"{node.node_id}-gateway", gateway_argv(grown, node, env), node_env)
        starter.start(f"{node.node_id}-web", web_argv(node, grown), node_env)
        ready_file = grown.node_dir(node.node_id) / "gateway.ready.json"
        starter.wait(
            f"{node.node_id}-gateway",
            functools.partial(gateway_ready, ready_file, node.internal_port, secret),
            f"{node.node_id} gateway",
            ready_timeout_s,
        )
        _membership_request(
            leader.internal_port, secret, InternalCode.RAFT_ADD_NODE, node.raft_addr
        )
        _wait_caught_up(leader, node, secret, ready_timeout_s)
    except BaseException:
        starter.rollback()
        raise
    write_cluster_file(grown, {**_recorded_pids(current.run_dir), **starter.pids()})
    return cluster_summary(grown, {**_recorded_pids(current.run_dir), **starter.pids()})


def cluster_remove_node(
    run_dir: Path, node_id: str, grace_s: float = STOP_GRACE_S
) -> dict[str, Any]:
    """Ask a member to remove ``node_id`` from the Raft configuration, then stop its
    gateway and web process and drop it from cluster.json (its folder stays)."""
    current = plan_from_cluster_file(run_dir)
    if current.mode != MODE_RAFT:
        raise LauncherError("remove-node needs a raft-mode cluster")
    gone = next((n for n in current.nodes if n.node_id == node_id), None)
    if gone is None:
        raise LauncherError(f"{node_id} is not a node of {current.run_dir}")
    secret = read_secret(current.run_dir)
    asked = _leader_node(current, secret, besides=node_id)
    _membership_request(asked.internal_port, secret, InternalCode.RAFT_REMOVE_NODE, gone.raft_addr)
    slots = [s for s in process_slots(current.run_dir, [node_id]) if s.kind in ("web", "gateway")]
    records = [r for s in slots if (r := read_pid_file(s.pid_path)) is not None and is_alive(r)]
    stop_processes(records, grace_s)
    for slot in slots:
        slot.pid_path.unlink(missing_ok=True)
    shrunk = replace(current, nodes=tuple(n for n in current.nodes if n.node_id != node_id))
    pids = _recorded_pids(current.run_dir)
    write_cluster_file(shrunk, pids)
    return cluster_summary(shrunk, pids)
