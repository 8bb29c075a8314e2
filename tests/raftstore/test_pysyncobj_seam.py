"""The PySyncObj seam: every private name the glue relies on exists in the installed
release, a live node has every attribute it reads, and another release is refused at
start with a message that says which one is needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftstore.raft import RaftReplicator, glue
from raftstore.raft.glue import (
    PYSYNCOBJ_CHECKED,
    PySyncObjMismatch,
    check_pysyncobj,
    installed_version,
    missing_attributes,
    missing_methods,
)
from tests.raftstore.raft_node import CLUSTER_SECRET, free_port


def test_the_installed_release_is_the_checked_one() -> None:
    assert installed_version() == PYSYNCOBJ_CHECKED
    assert missing_methods() == []
    check_pysyncobj()


async def test_a_live_node_has_every_attribute_the_glue_reads(tmp_path: Path) -> None:
    addr = f"127.0.0.1:{free_port()}"
    replicator = RaftReplicator("n1", addr, [addr], tmp_path / "n1", secret=CLUSTER_SECRET)
    await replicator.start()
    try:
        assert replicator._sync is not None
        assert missing_attributes(replicator._sync) == []
    finally:
        await replicator.stop()


def test_another_release_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # The package metadata is outside the project: pretend an upgrade happened.
    monkeypatch.setattr(glue, "installed_version", lambda: "0.3.18")
    with pytest.raises(PySyncObjMismatch, match=r"PySyncObj 0\.3\.18 is installed.*0\.3\.17"):
        check_pysyncobj()


def test_a_renamed_private_method_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    wanted = dict(glue.PRIVATE_METHODS)
    syncobj = next(cls for cls in wanted if cls.__name__ == "SyncObj")
    wanted[syncobj] = (*wanted[syncobj], "_SyncObj__renamedInAnUpgrade")
    monkeypatch.setattr(glue, "PRIVATE_METHODS", wanted)
    assert missing_methods() == ["SyncObj._SyncObj__renamedInAnUpgrade"]
    with pytest.raises(PySyncObjMismatch, match="_SyncObj__renamedInAnUpgrade"):
        check_pysyncobj()
