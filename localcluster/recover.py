"""``cluster recover --survivor ID``: a local raft cluster that lost its quorum for good,
started again as a one-member cluster holding the survivor's applied state (etcd's
``--force-new-cluster``; the per-host steps are ``run_node --force-new-cluster``,
:mod:`node.force`, whose marker and checks this reuses).

Everything is checked first, and a refusal changes nothing: a run folder without a
cluster, eventual mode, an unknown survivor, a survivor whose folder or Raft state is not
there, a cluster that still has a majority of its gateways running (its quorum is not
lost: cluster restart or remove-node is the tool), a cluster being stopped. Then:

1. **The survivor's state.** Its gateway is started if it is not running (restart.py,
   without waiting for a leader that will not come: it replays its journal up to its
   persisted commit index, waits at most its ``ready_timeout_s`` for a leader, then
   serves local reads). Its applied state is read without a barrier (BACKUP with ext
   ``consistency=local``) and saved in the run folder (``recover-<id>-<UTC>.nsbackup``,
   0600).
2. **The others out.** In a local cluster the launcher owns every process, so each other
   node's processes that still run are stopped (two halves both accepting writes would be
   a split brain), its folder is renamed aside (``<id>.removed-by-recover-<UTC>``, never
   deleted) and it leaves cluster.json for its ``retired`` list, whose ids and ports
   add-node never hands out again.
3. **The new cluster.** The survivor is restarted (restart.py) with no peers (its
   node.toml follows cluster.json), its Raft folder moved aside
   (``raft.before-recover-<UTC>``) and replaced by one holding only the marker, and its
   gateway given ``--restore-state`` with the saved file: a one-member cluster that
   elects itself. It returns once the survivor commits a write (a linearizable
   NODE_STATUS: a barrier through the log) and has compacted the restored state into its
   snapshot, so ``add-node`` can grow it at once.

The caller (the management command) records the recovery in the audit log and warns.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from pathlib import Path
from typing import Any

from localcluster.backups import wait_restored
from localcluster.lifecycle import (
    _node_summary,
    known_node_ids,
    running_processes,
    stopping,
    write_cluster_file,
)
from localcluster.membership import _recorded_pids, plan_from_cluster_file
from localcluster.plan import (
    CLUSTER_FILE_NAME,
    MODE_RAFT,
    POLL_INTERVAL_S,
    RAFT_DIR_NAME,
    READY_TIMEOUT_S,
    STOP_GRACE_S,
    ClusterPlan,
    LauncherError,
    NodePlan,
)
from localcluster.processes import is_alive, read_pid_file, stop_processes
from localcluster.readiness import node_status
from localcluster.restart import (
    NODE_KINDS,
    Relaunch,
    _end_leftovers,
    cluster_restart_node,
    cluster_start_node,
)
from localcluster.run_folder import process_slots, read_secret
from node import force, internal
from raftstore import backup as backups

log = logging.getLogger(__name__)

COMMIT_TIMEOUT_S = 30.0
"""From the survivor's new start to its first committed write: an election (under a
second) and a barrier."""
COMMIT_ATTEMPT_TIMEOUT_S = 10.0
"""One linearizable NODE_STATUS: the barrier waits up to the propose timeout (3 s)."""
REMOVED_SUFFIX = ".removed-by-recover-"
BACKUP_PREFIX = "recover-"
RECOVER_HELP = (
    "raft mode, after a majority of the nodes is lost for good: start the survivor again "
    "as a one-member cluster from its applied state (read without a barrier), stop and "
    "take out every other node (folders renamed, never deleted); grow it back with "
    "add-node. Writes the lost majority acknowledged after the survivor's last applied "
    "entry are lost."
)


def recover_arguments(parser: Any) -> None:
    """``cluster recover``'s own arguments."""
    parser.add_argument(
        "--survivor",
        required=True,
        metavar="ID",
        help="the node to keep: the one with the highest applied index (cluster status)",
    )


def cluster_recover(
    run_dir: Path,
    survivor_id: str,
    *,
    ready_timeout_s: float = READY_TIMEOUT_S,
    grace_s: float = STOP_GRACE_S,
    commit_timeout_s: float = COMMIT_TIMEOUT_S,
) -> dict[str, Any]:
    """The steps of the module's docstring; the summary (``cluster recover --json``)."""
    began = time.monotonic()
    run_dir = Path(run_dir).resolve()
    plan, survivor = _checked(run_dir, survivor_id)
    secret = read_secret(run_dir)
    timings: dict[str, float] = {}

    started_first: dict[str, int] = {}
    if not _gateway_alive(run_dir, survivor_id):
        relaunch = Relaunch(catch_up=False)
        started = cluster_start_node(
            run_dir, survivor_id, ready_timeout_s=ready_timeout_s, grace_s=grace_s, how=relaunch
        )
        started_first = dict(started["started"])
    before = node_status(survivor.internal_port, secret)
    header, saved = _save_local_state(run_dir, plan, survivor, secret)
    timings["state_s"] = time.monotonic() - began

    mark = time.monotonic()
    at_ms = force.now_ms()
    removed = [_retire(plan, node, at_ms, grace_s) for node in plan.nodes if node != survivor]
    shrunk = dataclasses.replace(
        plan,
        nodes=(survivor,),
        retired=(*plan.retired, *(n for n in plan.nodes if n != survivor)),
    )
    write_cluster_file(shrunk, _recorded_pids(run_dir))
    timings["others_s"] = time.monotonic() - mark

    mark = time.monotonic()
    fresh: dict[str, Path] = {}
    relaunch = Relaunch(
        catch_up=False,
        restore_state=saved,
        before_start=functools.partial(
            _fresh_raft_folder, plan, survivor, header, saved, at_ms, fresh
        ),
    )
    restarted = cluster_restart_node(
        run_dir, survivor_id, ready_timeout_s=ready_timeout_s, grace_s=grace_s, how=relaunch
    )
    timings["restart_s"] = time.monotonic() - mark
    mark = time.monotonic()
    committed = _wait_commit(survivor, secret, commit_timeout_s)
    timings["commit_s"] = time.monotonic() - mark
    wait_restored(shrunk)
    timings["total_s"] = time.monotonic() - began

    summary = {
        "run_dir": str(run_dir),
        "mode": plan.mode,
        "verb": "recover",
        "survivor": survivor_id,
        "node": _node_summary(shrunk, survivor, _recorded_pids(run_dir)),
        "config": restarted["config"],
        "state": {"file": str(saved), **header.summary()},
        "survivor_before": {
            "applied_index": before.get("applied_index"),
            "commit_index": before.get("commit_index"),
            "term": before.get("term"),
            "started_to_read": started_first,
        },
        "removed": removed,
        "previous_members": list(header.members),
        "raft_dir_moved_to": str(fresh["moved_to"]),
        "marker": str(fresh["marker"]),
        "committed": committed,
        "timings_s": {key: round(value, 3) for key, value in timings.items()},
    }
    log.info(
        "cluster recover: %s forced into a new one-member cluster in %s from its applied "
        "state at index %d, term %d; removed %s",
        survivor_id,
        run_dir,
        header.index,
        header.term,
        ", ".join(r["id"] for r in removed),
    )
    return summary


def _checked(run_dir: Path, survivor_id: str) -> tuple[ClusterPlan, NodePlan]:
    """The plan and the survivor once every precondition holds; LauncherError (nothing
    changed) otherwise."""
    if not (run_dir / CLUSTER_FILE_NAME).exists():
        raise LauncherError(f"no cluster is recorded in {run_dir} (no {CLUSTER_FILE_NAME})")
    plan = plan_from_cluster_file(run_dir)
    if plan.mode != MODE_RAFT:
        raise LauncherError(
            f"recover is for raft-mode clusters; the cluster in {run_dir} runs {plan.mode} "
            "mode, which has no quorum to lose (each node applies what it hears itself)"
        )
    survivor = next((n for n in plan.nodes if n.node_id == survivor_id), None)
    if survivor is None:
        known = ", ".join(n.node_id for n in plan.nodes) or "none"
        raise LauncherError(
            f"{survivor_id} is not a node of the cluster in {run_dir} (its nodes: {known})"
        )
    if len(plan.nodes) == 1:
        raise LauncherError(f"the cluster in {run_dir} has one member already: nothing to recover")
    raft_dir = plan.node_dir(survivor_id) / RAFT_DIR_NAME
    if not raft_dir.is_dir() or not any(raft_dir.iterdir()):
        raise LauncherError(
            f"{survivor_id} cannot be the survivor: {raft_dir} is not there or holds no Raft "
            "state, so there is nothing to recover from. Choose the node with the highest "
            "applied index whose folder is intact."
        )
    if stopping(run_dir):
        raise LauncherError(f"`cluster down` is stopping the cluster in {run_dir}")
    if not running_processes(run_dir, known_node_ids(run_dir)):
        raise LauncherError(
            f"no cluster is running in {run_dir}: none of its recorded processes is alive "
            "(recover works in a running cluster: its Redis and Celery stay)"
        )
    alive = [n.node_id for n in plan.nodes if _gateway_alive(run_dir, n.node_id)]
    if len(alive) > len(plan.nodes) // 2:
        raise LauncherError(
            f"the gateways of {', '.join(alive)} run: a majority of the {len(plan.nodes)} "
            "members, so the cluster has not lost its quorum. recover is for a majority lost "
            "for good; `cluster restart ID` starts a stopped node again and `cluster "
            "remove-node ID` takes one out. Nothing was changed."
        )
    return plan, survivor


def _gateway_alive(run_dir: Path, node_id: str) -> bool:
    record = read_pid_file(run_dir / node_id / "gateway.pid")
    return record is not None and is_alive(record)


def _save_local_state(
    run_dir: Path, plan: ClusterPlan, survivor: NodePlan, secret: str
) -> tuple[backups.BackupHeader, Path]:
    """The survivor's applied state, read without a barrier, checked and saved."""
    from remoting.client import RemotingClientError

    cluster = backups.cluster_name_of(run_dir.name)
    try:
        data = internal.backup(survivor.internal_port, secret, cluster, linearizable=False)
        header = backups.read_backup(data).header
    except (internal.InternalRequestError, RemotingClientError, OSError) as exc:
        raise LauncherError(f"{survivor.node_id} did not give its state: {exc}") from exc
    except backups.BackupError as exc:
        raise LauncherError(f"{survivor.node_id}'s state is not a good backup: {exc}") from exc
    stamp = force.utc_stamp(header.taken_at_ms)
    path = run_dir / f"{BACKUP_PREFIX}{survivor.node_id}-{stamp}{backups.FILE_SUFFIX}"
    try:
        backups.write_backup_file(path, data)
    except backups.BackupError as exc:
        raise LauncherError(f"cannot save {survivor.node_id}'s state: {exc}") from exc
    return header, path


def _retire(plan: ClusterPlan, node: NodePlan, at_ms: int, grace_s: float) -> dict[str, Any]:
    """Stop what still runs of a lost node and rename its folder aside."""
    slots = [s for s in process_slots(plan.run_dir, [node.node_id]) if s.kind in NODE_KINDS]
    live = [r for s in slots if (r := read_pid_file(s.pid_path)) is not None and is_alive(r)]
    killed = [r.name for r in stop_processes(live, grace_s)]
    leftovers = _end_leftovers(slots, grace_s)
    for slot in slots:
        slot.pid_path.unlink(missing_ok=True)
    folder = plan.node_dir(node.node_id)
    moved_to = None
    if folder.exists():
        moved_to = folder.with_name(f"{node.node_id}{REMOVED_SUFFIX}{force.utc_stamp(at_ms)}")
        folder.rename(moved_to)
    return {
        "id": node.node_id,
        "raft_addr": node.raft_addr,
        "stopped": [r.name for r in live],
        "killed": killed,
        "leftovers_ended": leftovers,
        "folder_moved_to": None if moved_to is None else str(moved_to),
    }


def _fresh_raft_folder(
    plan: ClusterPlan,
    survivor: NodePlan,
    header: backups.BackupHeader,
    saved: Path,
    at_ms: int,
    fresh: dict[str, Path],
) -> None:
    """With the survivor stopped: its Raft folder aside, a new one holding the marker."""
    raft_dir = plan.node_dir(survivor.node_id) / RAFT_DIR_NAME
    moved = force.move_aside(raft_dir, at_ms)
    marker = force.ForcedMarker(
        how=force.HOW_LOCAL,
        node=survivor.node_id,
        self_addr=survivor.raft_addr,
        forced_at_ms=at_ms,
        previous_members=header.members,
        index=header.index,
        term=header.term,
        backup_file=str(saved),
        previous_raft_dir=str(moved),
    )
    fresh["moved_to"] = moved
    fresh["marker"] = force.write_marker(raft_dir, marker)


def _wait_commit(survivor: NodePlan, secret: str, timeout_s: float) -> dict[str, Any]:
    """Until the survivor commits a write (a linearizable NODE_STATUS commits a barrier):
    its commit index and term then, and how long it took."""
    from remoting.client import RemotingClientError

    began = time.monotonic()
    deadline = began + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            status = node_status(
                survivor.internal_port, secret, COMMIT_ATTEMPT_TIMEOUT_S, linearizable=True
            )
        except (LauncherError, RemotingClientError, OSError, ValueError) as exc:
            last = str(exc)
            time.sleep(POLL_INTERVAL_S)
            continue
        return {
            "commit_index": status.get("commit_index"),
            "applied_index": status.get("applied_index"),
            "term": status.get("term"),
            "leader": status.get("leader"),
            "members": status.get("members"),
            "after_s": round(time.monotonic() - began, 3),
        }
    raise LauncherError(
        f"{survivor.node_id} runs as a one-member cluster but committed no write within "
        f"{timeout_s:.0f} s (last: {last}); see its gateway.log"
    )
