"""``raft-namesrv node --config F --restore-state FILE``: the per-host restore (docs/DEPLOY.md,
"Backup and restore") hands the checked file to the node's gateway, and a damaged one
stops the node before anything starts."""

from __future__ import annotations

import asyncio
import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from gateway.backups import take_backup
from raftstore.backup import write_backup_file
from raftstore.replicator import LocalReplicator
from tests.node.test_config import GOOD


@pytest.fixture
def node_file(tmp_path: Path) -> Path:
    path = tmp_path / "node.toml"
    path.write_text(GOOD, encoding="utf-8")
    return path


@pytest.fixture
def backup_file(tmp_path: Path) -> Path:
    path = tmp_path / "old.nsbackup"
    write_backup_file(path, asyncio.run(take_backup(LocalReplicator("n1"), "old", 1)))
    return path


def test_the_gateway_is_given_the_checked_backup(node_file: Path, backup_file: Path) -> None:
    out = StringIO()

    call_command(
        "run_node",
        "--config",
        str(node_file),
        "--restore-state",
        str(backup_file),
        "--check",
        stdout=out,
    )

    gateway = json.loads(out.getvalue())["gateway"]
    assert gateway[gateway.index("--restore-state") + 1] == str(backup_file.resolve())


def test_a_damaged_backup_stops_the_node_before_it_starts(
    node_file: Path, backup_file: Path
) -> None:
    data = bytearray(backup_file.read_bytes())
    data[-1] ^= 0x01
    backup_file.write_bytes(bytes(data))

    with pytest.raises(CommandError, match=r"damaged backup.*nothing was started"):
        call_command("run_node", "--config", str(node_file), "--restore-state", str(backup_file))
