"""run_experiment on a fresh checkout: the database it records runs in is migrated
first, instead of failing with Django's "no such table" traceback."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_first_run_of_a_fresh_checkout_finds_its_tables(tmp_path: Path) -> None:
    shared = tmp_path / "shared.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{shared}",
        "NAMESRV_DB_PATH": str(tmp_path / "projection.sqlite3"),
        "NAMESRV_PREPARED_DIR": str(tmp_path / "prepared"),
    }
    # A duration the config refuses: the command stops after preparing its database,
    # before any cluster starts.
    done = subprocess.run(
        [sys.executable, "manage.py", "run_experiment", "broker-kill", "--duration-s", "-1"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "positive duration" in done.stderr
    assert "Traceback" not in done.stderr
    with sqlite3.connect(shared) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    assert "namesrv_app_experimentrun" in tables
