"""Starting a new cluster from a backup: the gateway's side (``run_gateway --restore-state``).

Every member of the new cluster must start from the same state and the same empty log,
or their states differ from the first entry on. So:

* **Raft mode.** ``--restore-state FILE`` is honoured only when the node's Raft folder
  is empty: the backup is checked whole (:func:`raftstore.backup.read_backup`) and
  copied into the folder as its *base state* (:data:`BASE_STATE_FILE`, mode 0600,
  written atomically) before PySyncObj opens the folder. At every start, the base state
  (when the folder has one) is the table the log applies on
  (:meth:`~raftstore.raft.RaftReplicator.seed`); a Raft snapshot, once there, replaces it
  as before. A folder that holds anything else (a journal, another base) is refused
  with the reason and nothing starts; the same file again (a restart with the same
  command line) is accepted and changes nothing.
* **Eventual mode.** Honoured only when the node's KV file and config store are empty
  (its table starts empty, so nothing would be mixed); the KV entries and the config
  are saved to them at once, so they outlive a restart as every KV put does.

Restored brokers are not trusted as alive. Their live entries keep the heartbeat time
the backup holds, which is likely older than their timeout, and the first scan would
drop them all at once. Instead, before this node's first scan that proposes anything
(raft: as the leader), it proposes one BROKER_HEARTBEAT per restored entry that nothing
has refreshed since (its time is still the backup's), stamped with this node's clock:
the proposer stamps, as for every command, and apply reads no clock. Each restored
broker therefore has one heartbeat timeout, from when the new cluster can first
expire anything, to register again, and is dropped by the scan like any silent broker
if it does not. A later leader finds the times changed and proposes nothing.

A member added later has no base state: it must be sent a snapshot, never the log from
its start. So each restored raft node commits a barrier (the log then holds at least
three entries) and compacts its log into a snapshot once, right after it starts
(``cluster up --restore`` waits for those snapshots).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

from gateway.clock import Clock
from gateway.config_store import ConfigStoreError, ConfigStoreFile
from gateway.kv_file import KvConfigFile
from gateway.options import GatewayConfigError, GatewayOptions
from raftstore.backup import Backup, BackupError, read_backup_file, write_backup_file
from raftstore.commands import BrokerHeartbeat
from raftstore.raft import RaftReplicator
from raftstore.replicator import MODE_RAFT, ReplicationError, Replicator
from raftstore.results import BrokerAddrInfo
from raftstore.route_table import RouteTable
from remoting.errors import BodyDecodeError

log = logging.getLogger(__name__)

BASE_STATE_FILE = "restored-state.nsbackup"
"""In a raft node's Raft folder: the backup its log applies on."""
FORCED_MARKER_FILE = "forced-new-cluster.json"
"""In a raft node's Raft folder: what recovery after quorum loss forced (node/force.py).
It is written into the new, empty folder before the restore, and it is no state: a
folder holding only it still counts as empty."""
FOLDER_MODE = 0o700
COMPACT_RETRY_S = 1.0
SNAPSHOT_WAIT_S = 60.0
SNAPSHOT_POLL_S = 0.1


@dataclass
class Restored:
    """A node's restored state and what is left to do about it."""

    backup: Backup
    source: Path
    """The file the state was read from (the given backup, or the Raft folder's base)."""
    fresh: bool
    """True when this start restored it (an empty folder); False on a later start."""
    pending: dict[BrokerAddrInfo, int] = field(default_factory=dict)
    """Restored live entries and the heartbeat time the backup gave them."""


def load(options: GatewayOptions) -> Restored | None:
    """The state this gateway starts from when it is a restore (or a restart of one);
    None otherwise. GatewayConfigError, with the reason, when the restore is refused:
    nothing has been started or written then."""
    if options.mode == MODE_RAFT and options.raft is not None:
        return _load_raft(options.raft.data_dir, options.restore_state_file)
    if options.restore_state_file is None:
        return None
    _check_eventual_empty(options)
    backup = _read(options.restore_state_file, "--restore-state")
    return _restored(backup, options.restore_state_file, fresh=True)


def _read(path: Path, what: str) -> Backup:
    try:
        return read_backup_file(path)
    except BackupError as exc:
        raise GatewayConfigError(f"{what}: {exc}; nothing was started") from None


def _restored(backup: Backup, source: Path, *, fresh: bool) -> Restored:
    pending = {
        BrokerAddrInfo(entry.cluster_name, entry.broker_addr): entry.last_update_ms
        for entry in backup.table.live_brokers()
    }
    return Restored(backup, source, fresh, pending)


def _load_raft(folder: Path, given: Path | None) -> Restored | None:
    base = folder / BASE_STATE_FILE
    fresh = False
    if given is not None:
        backup = _read(given, "--restore-state")
        fresh = _install_base(folder, base, given)
    elif base.exists():
        backup = _read(base, "the Raft folder's restored base state")
    else:
        return None
    restored = _restored(backup, base, fresh=fresh)
    header = restored.backup.header
    log.info(
        "starting from the backup of %s (%s mode, node %s, index %d, term %d, taken %s)%s",
        header.cluster,
        header.mode,
        header.node,
        header.index,
        header.term,
        header.summary()["taken_at"],
        " restored into an empty Raft folder" if fresh else "",
    )
    return restored


def _install_base(folder: Path, base: Path, given: Path) -> bool:
    """Copy ``given`` into the empty Raft ``folder`` as its base; True when copied, False
    when the folder already has exactly this base. GatewayConfigError otherwise."""
    data = given.read_bytes()
    present = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    present = [name for name in present if name != FORCED_MARKER_FILE]
    if not present:
        folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        try:
            write_backup_file(base, data)
        except BackupError as exc:
            raise GatewayConfigError(f"--restore-state: {exc}; nothing was started") from None
        return True
    if base.is_file() and base.read_bytes() == data:
        return False  # a restart with the same command line: already restored
    shown = ", ".join(present[:4]) + (", ..." if len(present) > 4 else "")
    raise GatewayConfigError(
        f"--restore-state {given}: refusing to restore into {folder}: it is not empty "
        f"({shown}). A restore starts a new cluster, every member from an empty Raft "
        "folder; start this node without --restore-state to keep its state, or give it "
        "an empty folder. Nothing was started."
    )


def _check_eventual_empty(options: GatewayOptions) -> None:
    """Eventual mode restores only into a node whose saved KV and config are empty."""
    holds = []
    try:
        if options.kv_config_file is not None and KvConfigFile(options.kv_config_file).load():
            holds.append(f"KV entries in {options.kv_config_file}")
        store = options.config_store_file
        if store is not None and ConfigStoreFile(store).load():
            holds.append(f"config updates in {store}")
    except (BodyDecodeError, ConfigStoreError, OSError) as exc:
        holds.append(f"unreadable saved state ({exc})")
    if holds:
        raise GatewayConfigError(
            f"--restore-state: refusing to restore into node {options.node_id}: it holds "
            f"{' and '.join(holds)}. A restore starts from an empty node. Nothing was started."
        )


class RestoredNode:
    """What a restored gateway does after it starts: save (eventual) or compact (raft)
    the restored state, and stamp the restored brokers before its first scan."""

    def __init__(
        self,
        restored: Restored,
        replicator: Replicator,
        clock: Clock,
        options: GatewayOptions,
    ) -> None:
        self.restored = restored
        self._replicator = replicator
        self._clock = clock
        self._options = options
        self._pending = dict(restored.pending)
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def seed(self) -> None:
        """Before the replicator starts: the restored table is the one it starts with."""
        self._replicator.seed(self.restored.backup.table)

    def started(self) -> None:
        """Once the replicator runs: persist (eventual) or compact (raft) in the background."""
        replicator = self._replicator
        if isinstance(replicator, RaftReplicator):
            if not replicator.snapshot_file().exists():
                self._task = asyncio.get_running_loop().create_task(compact(replicator))
        elif self.restored.fresh:
            self._save_eventual()

    async def stop(self) -> None:
        """Stop compacting (a stop before it finished leaves it to the next start)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _save_eventual(self) -> None:
        table = self._replicator.read(lambda t: (t.kv_namespaces(), t.config))
        kv, config = table
        if self._options.kv_config_file is not None and kv:
            KvConfigFile(self._options.kv_config_file).save(kv)
        if self._options.config_store_file is not None:
            ConfigStoreFile(self._options.config_store_file).save(config)

    async def before_scan(self) -> None:
        """Stamp the restored brokers nothing has refreshed, once, before the first scan
        that may expire them (a failure leaves them for the next scan)."""
        if not self._pending:
            return
        async with self._lock:
            if not self._pending:
                return
            pending = self._pending

            def untouched(table: RouteTable) -> list[BrokerAddrInfo]:
                return [
                    key
                    for key, stamped in pending.items()
                    if (entry := table.live_broker(key.cluster_name, key.broker_addr)) is not None
                    and entry.last_update_ms == stamped
                ]

            due = self._replicator.read(untouched)
            now_ms = self._clock.now_ms()
            await asyncio.gather(
                *(
                    self._replicator.propose(BrokerHeartbeat(k.cluster_name, k.broker_addr, now_ms))
                    for k in due
                )
            )
            self._pending = {}
            if due:
                log.info(
                    "%d restored brokers stamped at %d: each is dropped unless it registers "
                    "within its heartbeat timeout",
                    len(due),
                    now_ms,
                )


async def compact(replicator: RaftReplicator) -> None:
    """Commit a barrier, then compact the log into a snapshot, so that a member added
    later is sent the restored state, never the log from its start."""
    while True:
        try:
            await replicator.barrier()
            break
        except ReplicationError as exc:
            log.info("restored state: no barrier yet (%s); trying again", exc)
            await asyncio.sleep(COMPACT_RETRY_S)
    replicator.force_snapshot()
    snapshot = replicator.snapshot_file()
    deadline = asyncio.get_running_loop().time() + SNAPSHOT_WAIT_S
    while not snapshot.exists():
        if asyncio.get_running_loop().time() > deadline:
            log.warning("restored state: no snapshot in %s after %.0f s", snapshot, SNAPSHOT_WAIT_S)
            return
        await asyncio.sleep(SNAPSHOT_POLL_S)
    log.info("restored state compacted into the Raft snapshot %s", snapshot)
