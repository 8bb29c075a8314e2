"""One node of a running local cluster started again: ``cluster restart ID`` and
``cluster up --node ID``.

A node of a local cluster owns two recorded processes, its gateway (which starts its
read front and helpers, all in the gateway's process group) and its web process; Redis,
Celery and the demo brokers are the cluster's. Both verbs are :func:`_relaunch`:
``restart`` first stops whichever of the two still runs, ``up --node`` keeps a live one
and refuses a node whose processes all run. Either way the node starts from the files
it first started from: its ``node.toml`` (checked against the ports cluster.json
records for it), its folder, so its Raft journal and snapshot (raft mode: it rejoins
and catches up) or its KV file (eventual mode), and its logs, appended to. cluster.json
then records the new pids, so ``status`` and ``down`` see them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from localcluster.argv import (
    NODE_CONFIG_FILE_NAME,
    NODE_CONFIG_HEADER,
    ClusterEnv,
    node_config,
)
from localcluster.lifecycle import (
    _node_summary,
    _Starter,
    known_node_ids,
    running_processes,
    stopping,
    tls_client_config,
)
from localcluster.membership import _raft_statuses, _wait_caught_up, plan_from_cluster_file
from localcluster.plan import (
    CLUSTER_FILE_NAME,
    CONNECT_TIMEOUT_S,
    LOOPBACK,
    MODE_RAFT,
    POLL_INTERVAL_S,
    PROCESS_ORDER,
    READY_TIMEOUT_S,
    STOP_GRACE_S,
    ClusterPlan,
    LauncherError,
    NodePlan,
    PortInUseError,
    port_is_free,
)
from localcluster.processes import PidRecord, is_alive, read_pid_file, stop_processes
from localcluster.readiness import accepts_connections, gateway_ready, node_status
from localcluster.run_folder import ProcessSlot, process_slots, read_cluster_file, read_secrets
from node import force, processes as node_processes
from node.config import NodeConfig, NodeConfigError, load_node_config, write_node_config
from node.files import atomic_write
from tools import process_facts

NODE_KINDS = ("web", "gateway")
"""The recorded processes a node owns in a local cluster, in stop order (PROCESS_ORDER)."""
START_ORDER = ("gateway", "web")
"""The gateway first: the web process asks it for everything it shows."""


@dataclasses.dataclass(frozen=True, slots=True)
class Relaunch:
    """What ``cluster recover`` asks of a relaunch besides the verbs' defaults."""

    catch_up: bool = True
    """Raft: wait until the node applied the leader's commit index (False: a node that
    lost its quorum has no leader to catch up with)."""
    restore_state: Path | None = None
    """Start the gateway with ``--restore-state`` (an empty Raft folder by then)."""
    before_start: Callable[[], None] | None = None
    """Called once the node's processes are stopped and its ports free, before it starts."""


def cluster_restart_node(
    run_dir: Path,
    node_id: str,
    *,
    extra_env: Mapping[str, str] | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
    grace_s: float = STOP_GRACE_S,
    how: Relaunch = Relaunch(),
) -> dict[str, Any]:
    """``cluster restart ID``: stop ``node_id``'s gateway and web process if they still
    run (SIGTERM, SIGKILL after ``grace_s``), then start both again. The summary."""
    return _relaunch(
        Path(run_dir),
        node_id,
        stop_first=True,
        extra_env=extra_env,
        ready_timeout_s=ready_timeout_s,
        grace_s=grace_s,
        how=how,
    )


def cluster_start_node(
    run_dir: Path,
    node_id: str,
    *,
    extra_env: Mapping[str, str] | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
    grace_s: float = STOP_GRACE_S,
    how: Relaunch = Relaunch(),
) -> dict[str, Any]:
    """``cluster up --node ID``: start whichever of ``node_id``'s gateway and web process
    is not running; refused when both run. The summary."""
    return _relaunch(
        Path(run_dir),
        node_id,
        stop_first=False,
        extra_env=extra_env,
        ready_timeout_s=ready_timeout_s,
        grace_s=grace_s,
        how=how,
    )


def _relaunch(
    run_dir: Path,
    node_id: str,
    *,
    stop_first: bool,
    extra_env: Mapping[str, str] | None,
    ready_timeout_s: float,
    grace_s: float,
    how: Relaunch,
) -> dict[str, Any]:
    """The one implementation behind both verbs (see the module's docstring)."""
    run_dir = run_dir.resolve()
    plan, node = _running_cluster_node(run_dir, node_id)
    slots = [s for s in process_slots(run_dir, [node_id]) if s.kind in NODE_KINDS]
    live = {
        s.name: r for s in slots if (r := read_pid_file(s.pid_path)) is not None and is_alive(r)
    }
    if not stop_first and len(live) == len(slots):
        running = ", ".join(f"{name} (pid {r.pid})" for name, r in live.items())
        raise LauncherError(
            f"{node_id} is already running in {run_dir}: {running}. "
            f"`manage.py cluster restart {node_id} --run-dir {run_dir}` stops and starts it."
        )
    run_secrets = read_secrets(run_dir, acl=plan.acl)
    env = ClusterEnv(
        redis_url=f"redis://{LOOPBACK}:{plan.redis_port}/0",
        secret=run_secrets.internal,
        cluster_file=run_dir / CLUSTER_FILE_NAME,
        mode=plan.mode,
        extra=dict(extra_env or {}),
        secrets=run_secrets,
        tls_client_config=tls_client_config(plan),
    )
    config, peers_updated = _node_file(plan, node, env)
    if how.restore_state is not None:
        config = dataclasses.replace(config, restore_state_file=how.restore_state.resolve())
    stopped, killed = _stop_live(slots, live, grace_s) if stop_first else ([], [])
    kept = {} if stop_first else {name: r.pid for name, r in live.items()}
    to_start = [s for s in slots if s.name not in kept]
    leftovers = _end_leftovers(to_start, grace_s)
    _wait_ports_free(_ports_of(plan, node, {s.kind for s in to_start}), grace_s)
    if how.before_start is not None:
        how.before_start()
    started = _start(plan, node, config, env, to_start, ready_timeout_s)
    pids = {**kept, **started}
    _record_pids(run_dir, node_id, pids)
    summary: dict[str, Any] = {
        "run_dir": str(run_dir),
        "mode": plan.mode,
        "verb": "restart" if stop_first else "up",
        "node": _node_summary(plan, node, pids),
        "config": str(config.source),
        "peers_updated": peers_updated,
        "stopped": stopped,
        "killed": killed,
        "leftovers_ended": leftovers,
        "kept": kept,
        "started": started,
        "caught_up": None,
    }
    if how.catch_up and plan.mode == MODE_RAFT and "gateway" in {s.kind for s in to_start}:
        # After the pids are recorded: a node slow to catch up runs on and is the
        # cluster's, whatever this wait says.
        summary["caught_up"] = _catch_up(plan, node, run_secrets.internal, ready_timeout_s)
    return summary


def _running_cluster_node(run_dir: Path, node_id: str) -> tuple[ClusterPlan, NodePlan]:
    """The plan in cluster.json and its node ``node_id``; LauncherError, saying what to do
    instead, for an unknown node or a cluster that is not running at all."""
    up_instead = f"start it with `manage.py cluster up --run-dir {run_dir}`"
    if not (run_dir / CLUSTER_FILE_NAME).exists():
        raise LauncherError(
            f"no cluster is recorded in {run_dir} (no {CLUSTER_FILE_NAME}); start one with "
            f"`manage.py cluster up --run-dir {run_dir}`"
        )
    plan = plan_from_cluster_file(run_dir)
    node = next((n for n in plan.nodes if n.node_id == node_id), None)
    if node is None:
        known = ", ".join(n.node_id for n in plan.nodes) or "none"
        raise LauncherError(
            f"{node_id} is not a node of the cluster in {run_dir} (its nodes: {known})"
        )
    if stopping(run_dir):
        raise LauncherError(
            f"`cluster down` is stopping the cluster in {run_dir}; once it is done, {up_instead}"
        )
    if not running_processes(run_dir, known_node_ids(run_dir)):
        raise LauncherError(
            f"no cluster is running in {run_dir}: none of its recorded processes is alive; "
            f"{up_instead} (a node is started again only within a running cluster)"
        )
    return plan, node


def _node_file(plan: ClusterPlan, node: NodePlan, env: ClusterEnv) -> tuple[NodeConfig, bool]:
    """The node's ``node.toml`` as it first started from it, and whether its peers were
    brought up to date.

    Its ports and mode must be those cluster.json records (the other nodes, the console
    and Celery reach it there). Its peers follow cluster.json: ``add-node`` and
    ``remove-node`` change the membership without touching the other nodes' files, and a
    node must not start with a member list the cluster left behind (the Raft log holds
    the membership, but the processes' environment and checks read the file's)."""
    path = plan.node_dir(node.node_id) / NODE_CONFIG_FILE_NAME
    try:
        config = load_node_config(path)
    except NodeConfigError as exc:
        raise LauncherError(f"{node.node_id} cannot start from its config: {exc}") from exc
    recorded = {
        "mode": (plan.mode, config.mode),
        "remoting port": (node.remoting_port, config.remoting.port),
        "web port": (node.web_port, config.web.port),
        "internal port": (node.internal_port, config.internal_port),
        "metrics port": (node.metrics_port, config.metrics.port if config.metrics else 0),
    }
    if plan.mode == MODE_RAFT:
        recorded["raft port"] = (node.raft_port, config.raft.port if config.raft else 0)
    differ = [
        f"{what} {file!r} (cluster.json: {json_!r})"
        for what, (json_, file) in recorded.items()
        if json_ != file
    ]
    if differ:
        raise LauncherError(
            f"{path} does not match {CLUSTER_FILE_NAME}: {'; '.join(differ)}. "
            "Put the recorded values back, or stop the cluster and start a new one."
        )
    peers = node_config(plan, node, env).peers
    try:
        # The check every later start makes after `cluster recover` (node/force.py): the
        # peers cluster.json gives never name a lost member, but the file is the guard.
        force.refuse_previous_members(dataclasses.replace(config, peers=peers))
    except force.ForceError as exc:
        raise LauncherError(f"{node.node_id} cannot start: {exc}") from exc
    if config.peers == peers:
        return config, False
    config = dataclasses.replace(config, peers=peers)
    write_node_config(config, path, NODE_CONFIG_HEADER)
    return config, True


def _stop_live(
    slots: list[ProcessSlot], live: Mapping[str, PidRecord], grace_s: float
) -> tuple[list[str], list[str]]:
    """Stop the node's live processes kind by kind, in ``down``'s order (the web process,
    a client of the gateway, first); the names stopped and those that needed SIGKILL."""
    stopped: list[str] = []
    killed: list[str] = []
    for kind in (k for k in PROCESS_ORDER if k in NODE_KINDS):
        records = [live[s.name] for s in slots if s.kind == kind and s.name in live]
        killed += [r.name for r in stop_processes(records, grace_s)]
        stopped += [r.name for r in records]
    return stopped, killed


def _end_leftovers(slots: list[ProcessSlot], grace_s: float) -> list[int]:
    """End what the dead processes of ``slots`` left in their process groups (the pids).

    A gateway's read front dies with it, but a SIGKILLed web process with several
    workers leaves them serving its port; the new process could not bind it."""
    ended: list[int] = []
    for slot in slots:
        record = read_pid_file(slot.pid_path)
        if record is not None:
            ended += process_facts.end_orphaned_group(record.pid, grace_s)
    return ended


def _ports_of(plan: ClusterPlan, node: NodePlan, kinds: set[str]) -> dict[str, int]:
    """The ports the processes of ``kinds`` bind, labelled."""
    ports: dict[str, int] = {}
    if "gateway" in kinds:
        ports[f"{node.node_id} remoting"] = node.remoting_port
        ports[f"{node.node_id} internal"] = node.internal_port
        if plan.mode == MODE_RAFT:
            ports[f"{node.node_id} raft"] = node.raft_port
        if node.metrics_port:
            ports[f"{node.node_id} metrics"] = node.metrics_port
    if "web" in kinds:
        ports[f"{node.node_id} web"] = node.web_port
    return ports


def _wait_ports_free(ports: Mapping[str, int], timeout_s: float) -> None:
    """Wait (up to ``timeout_s``) until every port can be bound; PortInUseError naming
    those still taken (by a process this launcher did not record)."""
    deadline = time.monotonic() + timeout_s
    while busy := [
        f"{label} port {port}" for label, port in ports.items() if not port_is_free(port)
    ]:
        if time.monotonic() > deadline:
            raise PortInUseError(
                f"already in use on {LOOPBACK}: {', '.join(busy)}. Something else holds "
                "them; stop it, then try again."
            )
        time.sleep(POLL_INTERVAL_S)


def _start(
    plan: ClusterPlan,
    node: NodePlan,
    config: NodeConfig,
    env: ClusterEnv,
    slots: list[ProcessSlot],
    ready_timeout_s: float,
) -> dict[str, int]:
    """Start the processes of ``slots`` from ``config`` and wait until each is ready (the
    gateway answers NODE_STATUS, the web port accepts); name to pid. A failure stops
    what this call started."""
    kinds = {s.kind for s in slots}
    node_env = env.for_node(plan, node, config)
    # What run_node does at every start: the TLS settings file follows node.toml.
    node_processes.write_tls_properties(config)
    starter = _Starter(plan, env)
    gateway, web = f"{node.node_id}-gateway", f"{node.node_id}-web"
    try:
        if "gateway" in kinds:
            # The readiness check below must see this start's ready file, not the last one.
            node_processes.ready_file(config).unlink(missing_ok=True)
            starter.start(gateway, node_processes.gateway_argv(config), node_env)
        if "web" in kinds:
            node_processes.reset_metrics_dir(config)
            starter.start(web, node_processes.web_argv(config), node_env)
        if "gateway" in kinds:
            check = functools.partial(
                gateway_ready, node_processes.ready_file(config), node.internal_port, env.secret
            )
            starter.wait(gateway, check, f"{node.node_id} gateway", ready_timeout_s)
        if "web" in kinds:
            check = functools.partial(accepts_connections, node.web_port)
            starter.wait(web, check, f"{node.node_id} web", ready_timeout_s)
    except BaseException:
        starter.rollback()
        raise
    return {name: pid for name, pid in starter.pids().items() if pid is not None}


def _record_pids(run_dir: Path, node_id: str, pids: Mapping[str, int]) -> None:
    """Put the node's new pids into cluster.json, leaving every other field as it is."""
    path = run_dir / CLUSTER_FILE_NAME
    data = read_cluster_file(path)
    for entry in data.get("nodes", []):
        if entry.get("id") == node_id:
            for kind in NODE_KINDS:
                if f"{node_id}-{kind}" in pids:
                    entry[f"{kind}_pid"] = pids[f"{node_id}-{kind}"]
    atomic_write(path, json.dumps(data, indent=2) + "\n")


def _catch_up(
    plan: ClusterPlan, node: NodePlan, secret: str, timeout_s: float
) -> dict[str, Any] | None:
    """Raft mode: wait until the restarted node has applied what the leader had committed,
    so a client sent to it right away sees what the others show. None when the others
    agree on no leader (no quorum without it, say): there is nothing to catch up with.
    LauncherError when it does not catch up in ``timeout_s`` (it keeps running)."""
    statuses = _raft_statuses(plan, secret)
    leaders = {s.get("leader") for n, s in statuses.items() if n != node.node_id} - {None}
    by_addr = {n.raft_addr: n for n in plan.nodes}
    if len(leaders) != 1 or (leader := by_addr.get(str(leaders.pop()))) is None:
        return None
    _wait_caught_up(leader, node, secret, timeout_s)
    applied = node_status(node.internal_port, secret, CONNECT_TIMEOUT_S)["applied_index"]
    return {"leader": leader.node_id, "applied_index": int(applied)}


def restart_text(summary: Mapping[str, Any]) -> str:
    """What ``cluster restart`` and ``cluster up --node`` print without ``--json``."""
    node = summary["node"]
    done = "restarted" if summary["verb"] == "restart" else "started again"
    lines = [
        f"{node['id']} {done} in {summary['run_dir']} ({summary['mode']} mode), "
        f"from {summary['config']}"
    ]
    if summary["peers_updated"]:
        lines.append(
            f"  its peers brought up to date with {CLUSTER_FILE_NAME} (the membership "
            "changed since the file was written)"
        )
    if summary["stopped"]:
        killed = f" (killed after the grace period: {', '.join(summary['killed'])})"
        lines.append(
            f"  stopped first: {', '.join(summary['stopped'])}{killed if summary['killed'] else ''}"
        )
    if summary["leftovers_ended"]:
        pids = ", ".join(str(p) for p in summary["leftovers_ended"])
        lines.append(f"  ended what the dead processes left running: pid {pids}")
    for name, pid in summary["kept"].items():
        lines.append(f"  kept {name} (pid {pid}), still running")
    for name, pid in summary["started"].items():
        lines.append(f"  started {name} (pid {pid})")
    lines.append(
        f"  {node['id']}: remoting {node['remoting_addr']}  console "
        f"{node['console_url']}  logs {node['log_dir']}"
    )
    caught_up = summary["caught_up"]
    if caught_up is not None:
        lines.append(
            f"  caught up with the leader {caught_up['leader']} (applied index "
            f"{caught_up['applied_index']})"
        )
    elif summary["mode"] == MODE_RAFT and f"{node['id']}-gateway" in summary["started"]:
        lines.append(
            "  the other members agree on no leader yet; `cluster status` shows "
            "when it has caught up"
        )
    return "\n".join(lines)
