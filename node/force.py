"""Recovery after quorum loss (etcd's ``--force-new-cluster``): the per-host steps of
``run_node --force-new-cluster``, the marker they leave, and the check every later
start makes against it.

With a majority of the members gone for good, the survivor refuses every write forever:
a membership change needs the quorum that is gone. Recovery starts the survivor again
as a **new one-member cluster holding its applied state**, reusing what exists:

1. the node's gateway is started from its own config, so it replays its journal up to
   its persisted commit index, waits at most its ``ready_timeout_s`` for a leader that
   will not come, and serves local reads; a node that *does* reach a quorum is refused
   (the cluster is not lost: forcing would split it, and a ``--force-new-cluster`` left
   in a unit file must not re-force a recovered node at every restart);
2. its applied state is read locally, without a barrier (the internal BACKUP with ext
   ``consistency=local``, :mod:`gateway.backups`), and saved as a backup file (0600);
3. the gateway is stopped and the Raft folder moved aside
   (``raft.before-recover-<UTC>``, never deleted);
4. the new, empty Raft folder gets the marker (:class:`ForcedMarker`) and the node starts
   with ``--restore-state`` from the saved file (:mod:`gateway.restore`: accepted only
   into an empty folder; the marker does not count) and its peers overridden to none on
   its command line: a one-member cluster, which elects itself and commits at once.

What can be lost: entries the survivor had not applied, that is those after its
persisted commit index, such as writes the lost majority acknowledged in the last
second. The backup's header gives the index and term the state was taken at.

**The marker** (``forced-new-cluster.json`` in the new Raft folder) says what was forced,
when, by which command, the previous members, and the index and term. At every later
start (:func:`refuse_previous_members`, run by ``run_node`` and by the local launcher's
restarts) a config whose peers still name a previous member is refused: PySyncObj starts
from the configured peers, so a file still listing the dead ones would put the node back
in a membership without a quorum.

Nothing here is raft-applied code: the clocks read stamp file names and the marker.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gateway.restore import FORCED_MARKER_FILE
from node import internal, processes
from node.config import NodeConfig
from node.files import write_secret_file
from raftstore import backup as backups
from raftstore.vocab import MODE_RAFT
from remoting.acl import read_secret_file
from remoting.client import RemotingClientError

MOVED_ASIDE_PREFIX = "raft.before-recover-"
"""The old Raft folder's new name, with the UTC time: kept, never deleted."""
BACKUP_FILE_PREFIX = "force-new-cluster-"
FOLDER_MODE = 0o700
READY_TIMEOUT_S = 120.0
"""Replay, then up to the replicator's own wait for a leader (5 s), then the ready file."""
STOP_GRACE_S = 10.0
POLL_S = 0.2
HOW_RUN_NODE = "run_node --force-new-cluster"
HOW_LOCAL = "cluster recover"


class ForceError(RuntimeError):
    """Recovery refused, or a start refused by the marker; the message says why and what
    to do. Nothing was changed when it is raised before the Raft folder was moved."""


@dataclasses.dataclass(frozen=True, slots=True)
class ForcedMarker:
    """What the marker file holds."""

    how: str
    """The command that forced it (:data:`HOW_RUN_NODE`, :data:`HOW_LOCAL`)."""
    node: str
    self_addr: str
    """This node's Raft address: its identity, the one member it kept."""
    forced_at_ms: int
    previous_members: tuple[str, ...]
    """Every member of the old cluster (the backup's ``members``), this node included."""
    index: int
    """The log index the state was taken at (every entry up to it applied here)."""
    term: int
    backup_file: str
    """The backup the new cluster started from."""
    previous_raft_dir: str
    """Where the old Raft folder was moved."""

    @property
    def forced_at(self) -> str:
        """When, as UTC text."""
        return backups.utc_text(self.forced_at_ms)

    def lost_members(self) -> tuple[str, ...]:
        """The previous members this node left behind."""
        return tuple(m for m in self.previous_members if m != self.self_addr)

    def document(self) -> dict[str, Any]:
        """The marker as JSON values (``forced_at`` is for the reader, not read back)."""
        doc = dataclasses.asdict(self)
        doc["previous_members"] = list(self.previous_members)
        doc["forced_at"] = self.forced_at
        return doc


def utc_stamp(ms: int) -> str:
    """``20261206T071204Z`` for a time in UTC milliseconds (file and folder names)."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return f"{moment:%Y%m%dT%H%M%SZ}"


def now_ms() -> int:
    """The wall clock in UTC milliseconds (names and the marker, never applied state)."""
    return time.time_ns() // 1_000_000


def move_aside(raft_dir: Path, at_ms: int) -> Path:
    """Rename ``raft_dir`` to ``raft.before-recover-<UTC>`` beside it (a ``.N`` suffix
    when that is taken: two recoveries in one second); the new path. Never deletes."""
    stamp = utc_stamp(at_ms)
    target = raft_dir.with_name(MOVED_ASIDE_PREFIX + stamp)
    number = 1
    while target.exists():
        number += 1
        target = raft_dir.with_name(f"{MOVED_ASIDE_PREFIX}{stamp}.{number}")
    raft_dir.rename(target)
    return target


def write_marker(raft_dir: Path, marker: ForcedMarker) -> Path:
    """Create the (new, empty) Raft folder, owner only, and write the marker into it."""
    raft_dir.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    path = raft_dir / FORCED_MARKER_FILE
    write_secret_file(path, json.dumps(marker.document(), indent=2, sort_keys=True) + "\n")
    return path


def read_marker(raft_dir: Path) -> ForcedMarker | None:
    """The marker in ``raft_dir``; None when there is none. ForceError when it cannot be
    read: a guard that cannot be read must not be taken for no guard."""
    path = raft_dir / FORCED_MARKER_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ForceError(f"{path}: cannot read this forced-cluster marker: {exc}") from None
    try:
        return ForcedMarker(
            how=str(doc["how"]),
            node=str(doc["node"]),
            self_addr=str(doc["self_addr"]),
            forced_at_ms=int(doc["forced_at_ms"]),
            previous_members=tuple(str(m) for m in doc["previous_members"]),
            index=int(doc["index"]),
            term=int(doc["term"]),
            backup_file=str(doc["backup_file"]),
            previous_raft_dir=str(doc["previous_raft_dir"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ForceError(f"{path}: not a forced-cluster marker ({exc!r})") from None


def raft_dir(config: NodeConfig) -> Path:
    """The node's Raft folder."""
    return config.data_dir / processes.RAFT_DIR_NAME


def refuse_previous_members(config: NodeConfig) -> None:
    """ForceError when the node's Raft folder holds a marker and ``config``'s peers name
    a member the forced cluster left behind. Nothing else is checked or changed."""
    folder = raft_dir(config)
    marker = read_marker(folder)
    if marker is None:
        return
    lost = set(marker.lost_members())
    named = [p for p in config.peers if p.raft is not None and str(p.raft) in lost]
    if not named:
        return
    listed = ", ".join(f"{p.node_id} ({p.raft})" for p in named)
    raise ForceError(
        f"{config.source}: [peers] still names {listed}, a member of the cluster this node "
        f"left on {marker.forced_at} when `{marker.how}` forced it into a new one-member "
        f"cluster (state taken at index {marker.index}, term {marker.term}; marker "
        f"{folder / FORCED_MARKER_FILE}). Set [peers] to the new membership: none until "
        "add-node adds members, then exactly the members added. Started with the old "
        "peers, the node would be back in a membership without a quorum. (If a host at "
        "that address was since added with add-node as a new member, delete the marker "
        "to drop this check.)"
    )


def refuse_lonely_first_start(config: NodeConfig) -> None:
    """ForceError for a raft config that lists no other member, started on an empty
    Raft folder without ``--restore-state``: a first start that would found a cluster of
    its own, most likely a file with its peers left out. A one-member config starts a
    node that holds a Raft state (after a forced recovery, or the last member left by
    remove-node) or one restored from a backup."""
    if config.mode != MODE_RAFT or config.restore_state_file is not None:
        return
    if [p for p in config.peers if p.node_id != config.node_id]:
        return
    folder = raft_dir(config)
    if folder.is_dir() and any(folder.iterdir()):
        return
    raise ForceError(
        f"{config.source}: [peers]: raft mode needs the other members listed; with none "
        f"this node would found a one-member cluster of its own ({folder} holds no Raft "
        "state to start from). List the members, or start it from a backup "
        "(--restore-state)."
    )


# ------------------------------------------------------------------ run_node's steps


@dataclasses.dataclass(frozen=True, slots=True)
class ForceOutcome:
    """What ``run_node --force-new-cluster`` did before the node starts as usual."""

    config: NodeConfig
    """The config to start from: no peers, ``--restore-state`` the saved state."""
    marker: ForcedMarker
    marker_file: Path
    backup: backups.BackupHeader
    status: dict[str, Any]
    """NODE_STATUS of the replayed node just before its state was read."""

    def summary(self) -> dict[str, Any]:
        """Plain values for the log, the audit entry and ``--json`` readers."""
        return {
            "node": self.marker.node,
            "how": self.marker.how,
            "state": self.backup.summary(),
            "backup_file": self.marker.backup_file,
            "previous_members": list(self.marker.previous_members),
            "lost_members": list(self.marker.lost_members()),
            "previous_raft_dir": self.marker.previous_raft_dir,
            "marker": str(self.marker_file),
            "applied_index": self.status.get("applied_index"),
            "commit_index": self.status.get("commit_index"),
        }


def check_forceable(config: NodeConfig) -> None:
    """ForceError unless ``config`` is a raft node whose Raft folder holds a state."""
    if config.mode != MODE_RAFT or config.raft is None:
        raise ForceError(
            f"{config.source}: --force-new-cluster is for raft mode; an eventual-mode node "
            "has no quorum to lose (each node applies what it hears itself)"
        )
    folder = raft_dir(config)
    if not folder.is_dir() or not any(folder.iterdir()):
        raise ForceError(
            f"--force-new-cluster: {folder} holds no Raft state (no journal, no snapshot): "
            "there is nothing to start a new cluster from. Nothing was changed."
        )


def force_new_cluster(
    config: NodeConfig,
    env: Mapping[str, str],
    *,
    say: Callable[[str], None] = print,
    ready_timeout_s: float = READY_TIMEOUT_S,
) -> ForceOutcome:
    """Steps 1 to 4 of the module's docstring; the config the node then starts from.

    ``env`` is the node's process environment (:func:`node.processes.node_env`). A
    ForceError before the Raft folder is moved leaves everything as it was."""
    check_forceable(config)
    say(f"{config.node_id}: --force-new-cluster: replaying the journal to read this node's state")
    status, data = _read_local_state(config, env, ready_timeout_s)
    try:
        header = backups.read_backup(data).header
    except backups.BackupError as exc:
        raise ForceError(f"the node's own state did not make a good backup: {exc}") from exc
    at_ms = now_ms()
    saved = config.data_dir / f"{BACKUP_FILE_PREFIX}{utc_stamp(at_ms)}{backups.FILE_SUFFIX}"
    try:
        backups.write_backup_file(saved, data)
    except backups.BackupError as exc:
        raise ForceError(f"cannot save the node's state: {exc}. Nothing was changed.") from exc
    folder = raft_dir(config)
    moved = move_aside(folder, at_ms)
    marker = ForcedMarker(
        how=HOW_RUN_NODE,
        node=config.node_id,
        self_addr=config.raft_identity,
        forced_at_ms=at_ms,
        previous_members=header.members,
        index=header.index,
        term=header.term,
        backup_file=str(saved),
        previous_raft_dir=str(moved),
    )
    marker_file = write_marker(folder, marker)
    forced = dataclasses.replace(config, peers=(), restore_state_file=saved)
    if config.cluster_file is None:
        # The consoles' member list of this host follows the new membership.
        processes.write_cluster_document(forced)
    return ForceOutcome(forced, marker, marker_file, header, status)


def _read_local_state(
    config: NodeConfig, env: Mapping[str, str], ready_timeout_s: float
) -> tuple[dict[str, Any], bytes]:
    """Start the gateway from ``config``, refuse a node in contact with a quorum, and
    read its applied state locally; the gateway is stopped again whatever happens."""
    ready = processes.ready_file(config)
    ready.unlink(missing_ok=True)
    log_path = config.data_dir / "gateway.log"
    with open(log_path, "ab") as log:
        gateway = subprocess.Popen(
            processes.gateway_argv(config),
            cwd=processes.PROJECT_DIR,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_ready(gateway, ready, log_path, ready_timeout_s)
        secret = read_secret_file(processes.internal_secret_file(config), "internal secret")
        try:
            status = internal.node_status(config.internal_port, secret)
            _refuse_with_quorum(config, status)
            cluster = backups.cluster_name_of(processes.cluster_file(config).parent.name)
            data = internal.backup(config.internal_port, secret, cluster, linearizable=False)
        except (internal.InternalRequestError, RemotingClientError, OSError) as exc:
            raise ForceError(
                f"the replayed gateway did not give its state: {exc}. Nothing was changed."
            ) from exc
        return status, data
    finally:
        _stop(gateway)


def _wait_ready(
    gateway: subprocess.Popen[bytes], ready: Path, log_path: Path, timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready.exists():
        if gateway.poll() is not None or time.monotonic() > deadline:
            what = "exited" if gateway.poll() is not None else f"not ready after {timeout_s:.0f} s"
            raise ForceError(
                f"the gateway started to replay the journal {what}; see {log_path}. "
                "Nothing was changed."
            )
        time.sleep(POLL_S)


def _refuse_with_quorum(config: NodeConfig, status: Mapping[str, Any]) -> None:
    """A node that found a leader (or has contact with a quorum) is no survivor."""
    if not (status.get("quorum_contact") or status.get("ready")):
        return
    leader = status.get("leader") or "unknown"
    raise ForceError(
        f"{config.node_id} has contact with a quorum (leader {leader}, members "
        f"{', '.join(status.get('members') or ())}): the cluster is not lost, and forcing a "
        "new one would split it in two. Start the node without --force-new-cluster (take it "
        "out of the unit if an earlier recovery left it there). Nothing was changed."
    )


def _stop(gateway: subprocess.Popen[bytes]) -> None:
    if gateway.poll() is not None:
        return
    gateway.terminate()
    try:
        gateway.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        gateway.kill()
        gateway.wait()
