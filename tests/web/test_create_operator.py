"""``manage.py create_operator`` as a script runs it: no terminal, the token last."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "correct horse battery staple"


def create_operator(db_path: Path, *args: str, env: dict[str, str] | None = None) -> (
    subprocess.CompletedProcess[str]
):
    """Run the command the way a script does: stdin is not a terminal."""
    return subprocess.run(
        [sys.executable, "manage.py", "create_operator", *args],
        cwd=REPO_ROOT,
        env={**os.environ, "NAMESRV_DB_PATH": str(db_path), **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def db_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated node database of its own."""
    path = tmp_path_factory.mktemp("operator") / "node.sqlite3"
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=REPO_ROOT, env={**os.environ, "NAMESRV_DB_PATH": str(path)}, check=True,
    )  # fmt: skip
    return path


def test_without_a_terminal_it_says_how_to_give_the_password(db_path: Path) -> None:
    done = create_operator(db_path, "alice")
    assert done.returncode != 0
    assert "no terminal to ask for a password" in done.stderr
    assert "Traceback" not in done.stderr


def test_token_alone_makes_an_api_account_and_prints_the_token_last(db_path: Path) -> None:
    done = create_operator(db_path, "robot", "--role", "viewer", "--token")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "created robot with role viewer"
    assert len(lines[-1]) == 40 and lines[-1].isalnum()


def test_password_env_and_token_together(db_path: Path) -> None:
    done = create_operator(
        db_path, "otto", "--password-env", "OTTO_PASSWORD", "--token",
        env={"OTTO_PASSWORD": PASSWORD},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip().splitlines()[-1]
    again = create_operator(
        db_path, "otto", "--password-env", "OTTO_PASSWORD", "--token",
        env={"OTTO_PASSWORD": PASSWORD},
    )  # fmt: skip
    assert again.stdout.strip().splitlines() == ["updated otto with role operator", token]
