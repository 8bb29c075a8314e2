"""Recovery after quorum loss, the parts without processes (node/force.py): the marker a
forced new cluster leaves in its Raft folder, the refusal of a config whose peers still
name a lost member, the refusal of a lonely first start, the old Raft folder moved aside
(never deleted), and what cannot be forced (eventual mode, no Raft state)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gateway.restore import FORCED_MARKER_FILE
from node import force
from node.config import Endpoint, NodeConfig, Peer, load_node_config
from tests.node.test_config import GOOD

FORCED_AT_MS = 1_796_540_524_399  # 2026-12-06 07:02:04 UTC


@pytest.fixture
def config(tmp_path: Path) -> NodeConfig:
    """n1 of three hosts (10.0.0.1-3), its data folder under ``tmp_path``."""
    path = tmp_path / "node.toml"
    path.write_text(GOOD, encoding="utf-8")
    return load_node_config(path)


def _marker(**changes: object) -> force.ForcedMarker:
    marker = force.ForcedMarker(
        how=force.HOW_RUN_NODE,
        node="n1",
        self_addr="10.0.0.1:7101",
        forced_at_ms=FORCED_AT_MS,
        previous_members=("10.0.0.1:7101", "10.0.0.2:7101", "10.0.0.3:7101"),
        index=1234,
        term=7,
        backup_file="/var/lib/namesrv/force-new-cluster-20261206T070204Z.nsbackup",
        previous_raft_dir="/var/lib/namesrv/raft.before-recover-20261206T070204Z",
    )
    return dataclasses.replace(marker, **changes)  # type: ignore[arg-type]


def test_the_marker_is_written_owner_only_and_reads_back(tmp_path: Path) -> None:
    folder = tmp_path / "raft"

    path = force.write_marker(folder, _marker())

    assert path == folder / FORCED_MARKER_FILE
    assert path.stat().st_mode & 0o777 == 0o600 and folder.stat().st_mode & 0o777 == 0o700
    assert force.read_marker(folder) == _marker()
    assert '"forced_at": "2026-12-06 07:02:04 UTC"' in path.read_text()
    assert _marker().lost_members() == ("10.0.0.2:7101", "10.0.0.3:7101")
    assert force.read_marker(tmp_path / "elsewhere") is None


def test_an_unreadable_marker_is_refused_not_ignored(tmp_path: Path) -> None:
    folder = tmp_path / "raft"
    folder.mkdir()
    (folder / FORCED_MARKER_FILE).write_text('{"how": "x"}')

    with pytest.raises(force.ForceError, match="not a forced-cluster marker"):
        force.read_marker(folder)


def test_peers_that_still_name_a_lost_member_are_refused_with_what_to_do(
    config: NodeConfig,
) -> None:
    force.refuse_previous_members(config)  # no marker: nothing to check
    force.write_marker(force.raft_dir(config), _marker())

    with pytest.raises(force.ForceError) as refused:
        force.refuse_previous_members(config)

    text = str(refused.value)
    assert text.startswith(f"{config.source}: [peers] still names n2 (10.0.0.2:7101), ")
    assert "n3 (10.0.0.3:7101)" in text
    assert "Set [peers] to the new membership: none until add-node adds members" in text
    assert "index 1234, term 7" in text and "2026-12-06 07:02:04 UTC" in text
    assert "\n" not in text
    # Peers set to none, or to a member added since at a new address: it starts.
    force.refuse_previous_members(dataclasses.replace(config, peers=()))
    added = Peer("n4", Endpoint("10.0.0.4", 9876), Endpoint("10.0.0.4", 7101))
    force.refuse_previous_members(dataclasses.replace(config, peers=(added,)))


def test_a_first_start_without_other_members_is_refused(config: NodeConfig) -> None:
    lonely = dataclasses.replace(config, peers=())

    with pytest.raises(force.ForceError, match="raft mode needs the other members listed"):
        force.refuse_lonely_first_start(lonely)

    # From a backup, or on a Raft folder that holds a state: a one-member cluster starts.
    force.refuse_lonely_first_start(dataclasses.replace(lonely, restore_state_file=Path("b")))
    force.refuse_lonely_first_start(config)
    force.raft_dir(config).mkdir(parents=True)
    (force.raft_dir(config) / "raft.journal").write_bytes(b"\0")
    force.refuse_lonely_first_start(lonely)


def test_the_old_raft_folder_is_moved_aside_never_over_another(tmp_path: Path) -> None:
    folder = tmp_path / "raft"
    folder.mkdir()
    (folder / "raft.journal").write_bytes(b"old")

    first = force.move_aside(folder, FORCED_AT_MS)
    folder.mkdir()
    second = force.move_aside(folder, FORCED_AT_MS)

    assert first.name == "raft.before-recover-20261206T070204Z"
    assert second.name == "raft.before-recover-20261206T070204Z.2"
    assert (first / "raft.journal").read_bytes() == b"old" and not folder.exists()


def test_what_cannot_be_forced_is_refused_and_nothing_changes(config: NodeConfig) -> None:
    with pytest.raises(force.ForceError, match="holds no Raft state"):
        force.check_forceable(config)
    eventual = dataclasses.replace(config, mode="eventual", raft=None)
    with pytest.raises(force.ForceError, match="for raft mode"):
        force.check_forceable(eventual)

    assert not config.data_dir.exists()
