"""run_gateway's Raft cluster secret: required in raft mode, read from a private file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.management.base import CommandError

from gateway.options import GatewayConfigError
from gateway.parts import build_replicator
from namesrv_app.conf import namesrv_settings
from namesrv_app.management.commands.run_gateway import raft_options

SECRET = "a-cluster-secret-for-the-tests"


def options(**overrides: Any) -> dict[str, Any]:
    return {
        "mode": "raft",
        "node": "n1",
        "raft_port": 7101,
        "raft_peers": "127.0.0.1:7101,127.0.0.1:7102",
        "raft_dial": "",
        "raft_dir": None,
        "raft_secret_file": None,
        "raft_bind_host": None,
        "propose_timeout_s": 3.0,
        "skew_allowance_ms": 5000,
        "failover_lag_bytes_max": 1024,
        **overrides,
    }


def secret_file(tmp_path: Path, text: str = SECRET, mode: int = 0o600) -> Path:
    path = tmp_path / "raft.secret"
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


def test_raft_mode_without_a_secret_does_not_start(settings: Any) -> None:
    settings.NAMESRV = {}

    with pytest.raises(CommandError, match="raft mode needs the cluster secret"):
        raft_options(options(), namesrv_settings())


def test_the_secret_is_read_from_its_file(settings: Any, tmp_path: Path) -> None:
    settings.NAMESRV = {}

    raft = raft_options(options(raft_secret_file=str(secret_file(tmp_path))), namesrv_settings())

    assert raft is not None and raft.secret == SECRET
    assert SECRET not in repr(raft), "the options never print the secret"


def test_a_secret_file_others_can_read_is_refused(settings: Any, tmp_path: Path) -> None:
    settings.NAMESRV = {}
    path = secret_file(tmp_path, mode=0o644)

    with pytest.raises(CommandError, match="readable by others"):
        raft_options(options(raft_secret_file=str(path)), namesrv_settings())


def test_an_empty_secret_file_is_refused(settings: Any, tmp_path: Path) -> None:
    settings.NAMESRV = {}
    path = secret_file(tmp_path, text="")

    with pytest.raises(CommandError, match="is empty"):
        raft_options(options(raft_secret_file=str(path)), namesrv_settings())


def test_the_secret_may_come_from_the_environment_setting(settings: Any) -> None:
    settings.NAMESRV = {"RAFT_SECRET": SECRET}

    raft = raft_options(options(), namesrv_settings())

    assert raft is not None and raft.secret == SECRET


def test_a_short_secret_is_refused_before_anything_binds(settings: Any, tmp_path: Path) -> None:
    settings.NAMESRV = {"RAFT_SECRET": "short"}
    raft = raft_options(options(raft_dir=str(tmp_path)), namesrv_settings())

    with pytest.raises(GatewayConfigError, match="at least 16 characters"):
        build_replicator("n1", "raft", raft=raft)
