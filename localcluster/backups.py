"""``cluster backup`` and ``cluster up --restore``: the launcher's side of backups.

``cluster backup FILE`` asks a node's gateway for a backup over its internal port (the
BACKUP request, as the launcher reaches nodes for their status), checks every part of
the answer and writes FILE whole or not at all, mode 0600. The backup names the cluster
by its run folder's name, as the consoles of the cluster do.

``cluster up --restore FILE`` checks FILE and the run folder *before anything starts*:
a damaged, truncated or foreign file, or a node folder that already holds a node's state
(a Raft folder, a KV file), is refused with the reason and nothing is started. Then
every gateway is given ``--restore-state FILE`` (gateway/restore.py: each member starts
from the same state and the same empty log), and ``up`` returns once every raft node
has compacted its log into a snapshot holding the restored state, so a node added
afterwards is sent that state.
"""

from __future__ import annotations

import time
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from localcluster.plan import (
    CLUSTER_FILE_NAME,
    MODE_RAFT,
    POLL_INTERVAL_S,
    RAFT_DIR_NAME,
    ClusterPlan,
    LauncherError,
)
from localcluster.run_folder import read_cluster_file, read_secret
from raftstore.backup import (
    Backup,
    BackupError,
    cluster_name_of,
    read_backup,
    read_backup_file,
    write_backup_file,
)

BACKUP_HELP = (
    "save a consistent backup of the cluster's state (routes, brokers, KV, config) to FILE, "
    "mode 0600; raft mode reads it at a linearizable point"
)
RESTORE_HELP = (
    "start a new cluster from this backup (cluster backup, raft-namesrv backup, GET "
    "/api/v1/backup/): every node starts from its state; a damaged or foreign file, or a run "
    "folder that holds a node's state, is refused before anything starts"
)
BACKUP_TIMEOUT_S = 60.0
"""A backup commits a barrier, then copies, compresses and hashes the whole table."""
RESTORED_SNAPSHOT_TIMEOUT_S = 60.0
SNAPSHOT_FILE_NAME = "raft.snapshot"
EVENTUAL_STATE_GLOBS = ("*.kvConfig.json", "*.namesrv.properties")
"""An eventual node's saved state in its folder (KV file, config store)."""


def cluster_backup(run_dir: Path, path: Path, node_id: str | None = None) -> dict[str, Any]:
    """Save a backup of the cluster in ``run_dir`` to ``path``, read from ``node_id`` (by
    default the first node that gives one); the backup's header, its size and file."""
    run_dir = Path(run_dir).resolve()
    cluster_file = run_dir / CLUSTER_FILE_NAME
    if not cluster_file.exists():
        raise LauncherError(f"no cluster in {run_dir} (no {CLUSTER_FILE_NAME}); `cluster up` first")
    nodes = read_cluster_file(cluster_file).get("nodes", [])
    if node_id is not None:
        nodes = [node for node in nodes if node.get("id") == node_id]
        if not nodes:
            raise LauncherError(f"node {node_id!r} is not in {cluster_file}")
    secret = read_secret(run_dir)
    cluster = cluster_name_of(run_dir.name)
    refusals = []
    for node in nodes:
        try:
            data = _ask_backup(int(node["internal_port"]), secret, cluster)
        except LauncherError as exc:
            refusals.append(f"{node['id']}: {exc}")
            continue
        try:
            header = read_backup(data).header
            write_backup_file(Path(path), data)
        except BackupError as exc:
            raise LauncherError(f"{path}: {exc}; nothing was written") from exc
        return {"file": str(path), "bytes": len(data), **header.summary()}
    raise LauncherError("no node gave a backup: " + "; ".join(refusals))


def backup_arguments(parser: ArgumentParser) -> None:
    """``cluster backup``'s own arguments."""
    parser.add_argument("file", type=Path, metavar="FILE", help="where to write the backup")
    parser.add_argument(
        "--from-node",
        metavar="ID",
        default=None,
        help="the node to read it from (default: the first node that gives one)",
    )


def restore_argument(up: ArgumentParser) -> None:
    """``cluster up --restore FILE``."""
    up.add_argument("--restore", type=Path, default=None, metavar="FILE", help=RESTORE_HELP)


def backup_text(saved: dict[str, Any]) -> str:
    """What ``cluster backup`` says it saved."""
    return (
        f"backup of {saved['cluster']} ({saved['mode']}: {saved['source']}) from "
        f"{saved['node']} at index {saved['index']}, term {saved['term']}, taken "
        f"{saved['taken_at']}: {saved['bytes']} bytes written to {saved['file']} (mode 0600)"
    )


def restored_lines(summary: dict[str, Any]) -> list[str]:
    """What ``cluster up --restore`` says it started from (nothing without a restore)."""
    restored = summary.get("restored")
    if not restored:
        return []
    return [
        f"  restored from {restored['file']}: {restored['cluster']} at index "
        f"{restored['index']}, taken {restored['taken_at']} from {restored['node']}"
    ]


def _ask_backup(internal_port: int, secret: str, cluster: str) -> bytes:
    """The BACKUP answer's body of the gateway on ``internal_port``; LauncherError."""
    from node import internal
    from remoting.client import RemotingClientError

    try:
        return internal.backup(internal_port, secret, cluster, timeout_s=BACKUP_TIMEOUT_S)
    except (RemotingClientError, OSError) as exc:
        raise LauncherError(f"gateway on port {internal_port} did not answer: {exc}") from exc
    except internal.InternalRequestError as exc:
        raise LauncherError(str(exc)) from exc


def check_restore(plan: ClusterPlan, path: Path) -> Backup:
    """The backup in ``path`` when a new cluster may start from it in ``plan``'s run
    folder; LauncherError with the reason (nothing started) otherwise."""
    try:
        backup = read_backup_file(Path(path))
    except BackupError as exc:
        raise LauncherError(f"--restore {exc}. Nothing was started.") from exc
    for node in plan.nodes:
        folder = plan.node_dir(node.node_id)
        raft = folder / RAFT_DIR_NAME
        held = sorted(p.name for p in raft.iterdir()) if raft.is_dir() else []
        held = [f"{RAFT_DIR_NAME}/{name}" for name in held]
        held += sorted(p.name for glob in EVENTUAL_STATE_GLOBS for p in folder.glob(glob))
        if held:
            raise LauncherError(
                f"--restore: {folder} holds a node's state ({', '.join(held[:4])}); a restore "
                "starts a new cluster from empty node folders: give it a new --run-dir. "
                "Nothing was started."
            )
    return backup


def restore_argv(path: Path) -> list[str]:
    """What each gateway of a restored cluster is given."""
    return ["--restore-state", str(Path(path).resolve())]


def wait_restored(plan: ClusterPlan, timeout_s: float = RESTORED_SNAPSHOT_TIMEOUT_S) -> None:
    """Raft mode: wait until every node compacted its restored state into its snapshot."""
    if plan.mode != MODE_RAFT:
        return
    deadline = time.monotonic() + timeout_s
    snapshots = [plan.node_dir(n.node_id) / RAFT_DIR_NAME / SNAPSHOT_FILE_NAME for n in plan.nodes]
    while not all(snapshot.exists() for snapshot in snapshots):
        if time.monotonic() > deadline:
            missing = [str(s) for s in snapshots if not s.exists()]
            raise LauncherError(
                f"restored nodes did not write their snapshots within {timeout_s:.0f} s: "
                f"{', '.join(missing)} (see the nodes' gateway.log)"
            )
        time.sleep(POLL_INTERVAL_S)
