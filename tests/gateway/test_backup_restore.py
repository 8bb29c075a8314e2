"""The gateway's side of backups and restores, without processes (gateway/backups.py and
gateway/restore.py).

* Three real RaftReplicators (PySyncObj over loopback) seeded with one backup's table
  start from the same state; a backup taken on a follower right after a write the
  leader acknowledged holds that write (the barrier's linearizable point), with the
  index and term it was read at; a member added later is sent the restored state.
* ``--restore-state`` goes only into an empty Raft folder (the same file again is
  accepted, anything else refused and nothing written) or an empty eventual node.
* Restored brokers are stamped once, before the first scan, by the proposer's clock,
  and only those nothing refreshed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.backups import take_backup
from gateway.clock import ManualClock
from gateway.kv_file import KvConfigFile
from gateway.options import GatewayConfigError, GatewayOptions, RaftOptions
from gateway.restore import BASE_STATE_FILE, FORCED_MARKER_FILE, RestoredNode, compact, load
from raftstore import backup
from raftstore.commands import ExpireBrokers, PutKV, RegisterBroker
from raftstore.raft import RaftReplicator
from raftstore.replicator import LocalReplicator, NoQuorumError
from raftstore.route_table import RouteTable
from tests.raftstore.cast import ADDR_A0, ADDR_B0, BROKER_A, BROKER_B, register, topics, wrapper
from tests.raftstore.raft_node import InProcessCluster, free_port

BACKED_UP_AT_MS = 1_700_000_000_000
TIMEOUT_MS = 30_000
RESTORED_AT_MS = BACKED_UP_AT_MS + 10 * 24 * 3600 * 1000  # ten days later


def _backed_up_table() -> RouteTable:
    table = RouteTable()
    for addr, name in ((ADDR_A0, BROKER_A), (ADDR_B0, BROKER_B)):
        register(
            table,
            addr=addr,
            name=name,
            broker_id=0,
            topic_table=topics(f"{name}-topic", "Shared"),
            timeout_ms=TIMEOUT_MS,
            now_ms=BACKED_UP_AT_MS,
        )
    table.apply(PutKV("ns", "key", "value"))
    return table


@pytest.fixture
def backup_file(tmp_path: Path) -> Path:
    """An eventual node's backup of the table above (what any restore starts from)."""
    source = LocalReplicator("old", _backed_up_table())
    data = asyncio.run(take_backup(source, "old-cluster", BACKED_UP_AT_MS))
    path = tmp_path / "old.nsbackup"
    backup.write_backup_file(path, data)
    return path


def _raft_options(folder: Path, restore: Path | None) -> GatewayOptions:
    raft = RaftOptions(port=7101, peers=("127.0.0.1:7101",), data_dir=folder, secret="x" * 16)
    return GatewayOptions(node_id="n1", mode="raft", raft=raft, restore_state_file=restore)


# ---------------------------------------------------------------- taking a backup


async def test_an_eventual_backup_is_the_nodes_own_state_and_count() -> None:
    source = LocalReplicator("n3", _backed_up_table())
    await source.propose(PutKV("ns", "later", "too"))

    read = backup.read_backup(await take_backup(source, "here", 123))

    assert (read.header.mode, read.header.node, read.header.term) == ("eventual", "n3", 0)
    assert read.header.index == 1 and read.header.members == ()
    assert read.table.kv_get("ns", "later") == "too"
    assert read.table.digest() == source.read(lambda t: t.digest())


async def test_a_bad_cluster_name_is_refused_before_any_work() -> None:
    with pytest.raises(backup.BackupError, match="cluster name"):
        await take_backup(LocalReplicator("n1"), "no/slashes", 1)


async def test_seeded_raft_members_agree_and_a_follower_backup_holds_every_acked_write(
    tmp_path: Path, backup_file: Path
) -> None:
    restored = backup.read_backup_file(backup_file)
    cluster = InProcessCluster(tmp_path / "raft", propose_timeout_s=3.0)
    for node in cluster.nodes:
        node.seed(backup.read_backup_file(backup_file).table)
    async with cluster:
        statuses = await cluster.converged()
        assert {s.digest for s in statuses} == {restored.table.digest()}
        leader = await cluster.leader()
        follower = await cluster.follower()

        await leader.propose(PutKV("ns", "acked", "on the leader"))
        taken = backup.read_backup(await take_backup(follower, "new", 5))

        assert taken.table.kv_get("ns", "acked") == "on the leader"
        assert taken.table.kv_get("ns", "key") == "value"
        assert taken.header.mode == "raft" and taken.header.node == follower.node_id
        assert taken.header.members == tuple(sorted(cluster.addrs))
        assert taken.header.term == leader.status().term
        assert taken.header.index <= follower.status().applied_index
        assert taken.table.digest() == follower.read(lambda t: t.digest())


async def test_a_member_added_after_the_restore_is_sent_the_restored_state(
    tmp_path: Path, backup_file: Path
) -> None:
    restored = backup.read_backup_file(backup_file)
    cluster = InProcessCluster(tmp_path / "raft", size=2, propose_timeout_s=3.0)
    for node in cluster.nodes:
        node.seed(backup.read_backup_file(backup_file).table)
    async with cluster:
        await asyncio.gather(*(compact(node) for node in cluster.nodes))
        leader = await cluster.leader()
        cluster.addrs.append(f"127.0.0.1:{free_port()}")
        late = cluster.make(2)  # started unseeded, as `cluster add-node` starts one
        cluster.nodes.append(late)
        await late.start()
        await leader.add_node(late.self_addr)

        statuses = await cluster.converged()

        assert late.read(lambda t: t.kv_get("ns", "key")) == "value"
        assert len({s.digest for s in statuses}) == 1
        assert restored.table.live_broker("DefaultCluster", ADDR_A0) is not None


async def test_a_node_without_quorum_gives_its_applied_state_only_when_read_locally(
    tmp_path: Path,
) -> None:
    """Recovery after quorum loss, in process: two of three members stop; the survivor
    refuses a linearizable backup within its propose bound but gives its applied state
    read locally (every acked write in it, the header saying how it was read); a new
    one-member replicator seeded with it, in a Raft folder holding only the forced
    cluster's marker, commits at once and holds the same state."""
    cluster = InProcessCluster(tmp_path / "raft", propose_timeout_s=1.0)
    async with cluster:
        leader = await cluster.leader()
        await leader.propose(PutKV("ns", "acked", "before the loss"))
        await cluster.converged()
        survivor = await cluster.follower()
        await asyncio.gather(*(n.stop() for n in cluster.nodes if n is not survivor))

        with pytest.raises(NoQuorumError):
            await take_backup(survivor, "old", 5)
        data = await take_backup(survivor, "old", 6, linearizable=False)

        taken = backup.read_backup(data)
        assert taken.table.kv_get("ns", "acked") == "before the loss"
        assert not taken.header.linearizable and "without a barrier" in taken.header.source
        assert taken.header.index == survivor.status().applied_index
        assert taken.header.members == tuple(sorted(cluster.addrs))
        digest = survivor.read(lambda t: t.digest())

    saved = tmp_path / "local.nsbackup"
    backup.write_backup_file(saved, data)
    folder = tmp_path / "forced"
    folder.mkdir()
    (folder / FORCED_MARKER_FILE).write_text("{}")
    restored = load(_raft_options(folder, saved))
    assert restored is not None and restored.fresh
    addr = f"127.0.0.1:{free_port()}"
    alone = RaftReplicator("n1", addr, [addr], folder, secret="x" * 16)
    alone.seed(restored.backup.table)
    await alone.start()
    try:
        await asyncio.wait_for(alone.barrier(), 10)
        assert alone.status().members == (addr,)
        assert alone.read(lambda t: t.digest()) == digest
    finally:
        await alone.stop()


# ---------------------------------------------------------------- where a restore may go


def test_a_restore_goes_into_an_empty_raft_folder_and_is_kept_there(
    tmp_path: Path, backup_file: Path
) -> None:
    folder = tmp_path / "raft"

    first = load(_raft_options(folder, backup_file))
    again = load(_raft_options(folder, backup_file))
    later = load(_raft_options(folder, None))

    assert first is not None and first.fresh
    base = folder / BASE_STATE_FILE
    assert base.read_bytes() == backup_file.read_bytes()
    assert base.stat().st_mode & 0o777 == 0o600
    assert again is not None and not again.fresh
    assert later is not None and later.source == base
    assert later.backup.table.digest() == first.backup.table.digest()


def test_a_raft_folder_that_holds_anything_else_is_refused(
    tmp_path: Path, backup_file: Path
) -> None:
    folder = tmp_path / "raft"
    folder.mkdir()
    (folder / "raft.journal").write_bytes(b"\x00" * 16)

    with pytest.raises(GatewayConfigError, match=r"not empty .*raft\.journal.*Nothing was started"):
        load(_raft_options(folder, backup_file))

    assert sorted(p.name for p in folder.iterdir()) == ["raft.journal"]
    assert load(_raft_options(folder, None)) is None


def test_another_backup_into_a_restored_folder_is_refused(
    tmp_path: Path, backup_file: Path
) -> None:
    folder = tmp_path / "raft"
    load(_raft_options(folder, backup_file))
    other = tmp_path / "other.nsbackup"
    data = asyncio.run(take_backup(LocalReplicator("x"), "other", 1))
    backup.write_backup_file(other, data)

    with pytest.raises(GatewayConfigError, match="not empty"):
        load(_raft_options(folder, other))


def test_a_damaged_backup_is_refused_and_nothing_is_written(
    tmp_path: Path, backup_file: Path
) -> None:
    damaged = tmp_path / "damaged.nsbackup"
    data = bytearray(backup_file.read_bytes())
    data[-10] ^= 0xFF
    damaged.write_bytes(bytes(data))
    folder = tmp_path / "raft"

    with pytest.raises(GatewayConfigError, match=r"damaged backup.*nothing was started"):
        load(_raft_options(folder, damaged))

    assert not folder.exists()


def test_an_eventual_node_with_saved_kv_is_refused(tmp_path: Path, backup_file: Path) -> None:
    kv_path = tmp_path / "n1.kvConfig.json"
    options = GatewayOptions(node_id="n1", kv_config_file=kv_path, restore_state_file=backup_file)
    assert load(options) is not None  # no KV file yet: an empty node
    KvConfigFile(kv_path).save({"ns": {"k": "v"}})

    with pytest.raises(GatewayConfigError, match="KV entries"):
        load(options)


# ---------------------------------------------------------------- restored brokers


async def test_restored_brokers_are_stamped_once_before_the_first_scan(
    backup_file: Path,
) -> None:
    restored = load(GatewayOptions(node_id="n1", restore_state_file=backup_file))
    assert restored is not None
    replicator = LocalReplicator("n1")
    clock = ManualClock(RESTORED_AT_MS)
    node = RestoredNode(restored, replicator, clock, GatewayOptions(node_id="n1"))
    node.seed()
    # broker-b registers again before any scan: its own time, left alone.
    replicator.apply_now(
        RegisterBroker(
            cluster_name="DefaultCluster",
            broker_addr=ADDR_B0,
            broker_name=BROKER_B,
            broker_id=0,
            ha_server_addr="",
            now_ms=RESTORED_AT_MS - 5,
            topic_config_wrapper=wrapper(topics(f"{BROKER_B}-topic", "Shared")),
            heartbeat_timeout_ms=TIMEOUT_MS,
        )
    )

    await node.before_scan()
    clock.advance(1)
    await node.before_scan()  # nothing left to stamp

    def last_update(addr: str) -> int | None:
        entry = replicator.read(lambda t: t.live_broker("DefaultCluster", addr))
        return None if entry is None else entry.last_update_ms

    assert last_update(ADDR_A0) == RESTORED_AT_MS
    assert last_update(ADDR_B0) == RESTORED_AT_MS - 5

    def routed(topic: str) -> bool:
        return replicator.read(lambda t: t.pickup_topic_route(topic)) is not None

    # Within one timeout of the stamp the restored broker is served; past it, dropped
    # like any broker that went silent (broker-b by its own, earlier, registration).
    await replicator.propose(ExpireBrokers(now_ms=RESTORED_AT_MS + TIMEOUT_MS - 1))
    assert routed(f"{BROKER_A}-topic") and not routed(f"{BROKER_B}-topic")
    await replicator.propose(ExpireBrokers(now_ms=RESTORED_AT_MS + TIMEOUT_MS + 1))
    assert not routed(f"{BROKER_A}-topic") and not routed("Shared")
