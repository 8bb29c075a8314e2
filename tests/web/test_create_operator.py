"""``manage.py create_operator`` as a script runs it: no terminal, the token last."""

from __future__ import annotations

import io
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from namesrv_app.management import run_dir

REPO_ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "correct horse battery staple"


def create_operator(
    db_url: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the command the way a script does: stdin is not a terminal."""
    return subprocess.run(
        [sys.executable, "manage.py", "create_operator", *args],
        cwd=REPO_ROOT,
        env={**os.environ, "DATABASE_URL": db_url, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def migrated(url: str) -> str:
    """``url`` after ``manage.py migrate`` (the shared database's tables)."""
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=REPO_ROOT,
        env={**os.environ, "DATABASE_URL": url},
        check=True,
    )
    return url


@pytest.fixture(scope="module")
def db_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated shared database of its own: the PostgreSQL one the run was given
    (tests/integration/test_postgres_shared_db.py), else a fresh SQLite file."""
    configured = os.environ.get("DATABASE_URL", "")
    if configured.startswith("postgres"):
        return migrated(configured)
    return migrated(f"sqlite:///{tmp_path_factory.mktemp('operator') / 'shared.sqlite3'}")


def test_without_a_terminal_it_says_how_to_give_the_password(db_path: str) -> None:
    done = create_operator(db_path, "alice")
    assert done.returncode != 0
    assert "no terminal to ask for a password" in done.stderr
    assert "Traceback" not in done.stderr


def test_token_alone_makes_an_api_account_and_prints_the_token_last(db_path: str) -> None:
    done = create_operator(db_path, "robot", "--role", "viewer", "--token")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "created robot with role viewer"
    assert len(lines[-1]) == 40 and lines[-1].isalnum()


def test_password_env_and_token_together_and_a_second_token_replaces_the_first(
    db_path: str,
) -> None:
    done = create_operator(
        db_path,
        "otto",
        "--password-env",
        "OTTO_PASSWORD",
        "--token",
        env={"OTTO_PASSWORD": PASSWORD},
    )
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip().splitlines()[-1]
    again = create_operator(
        db_path,
        "otto",
        "--password-env",
        "OTTO_PASSWORD",
        "--token",
        env={"OTTO_PASSWORD": PASSWORD},
    )
    lines = again.stdout.strip().splitlines()
    # Only the hash is stored, so the key cannot be shown again: a new one replaces it.
    assert lines[:2] == [
        "updated otto with role operator",
        "the previous API token of otto no longer works",
    ]
    assert lines[2].startswith("API token of otto, valid until ") and "shown only now" in lines[2]
    assert len(lines[-1]) == 40 and lines[-1] != token


def test_a_weak_password_is_refused_in_one_clear_line_without_a_traceback(db_path: str) -> None:
    weak = create_operator(db_path, "walter", "--password-env", "WEAK", env={"WEAK": "password"})
    assert weak.returncode != 0
    [line] = weak.stderr.strip().splitlines()
    assert line.startswith("CommandError: password refused: ")
    assert "too short" in line and "too common" in line


def test_run_dir_writes_to_the_local_clusters_shared_database(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    migrated(f"sqlite:///{run_dir / 'shared.sqlite3'}")
    elsewhere = tmp_path / "elsewhere.sqlite3"  # what the shell would otherwise use

    done = create_operator(f"sqlite:///{elsewhere}", "carol", "--token", "--run-dir", str(run_dir))

    assert done.returncode == 0, done.stderr
    with sqlite3.connect(run_dir / "shared.sqlite3") as shared:
        rows = shared.execute("SELECT username FROM auth_user WHERE username='carol'").fetchall()
    assert rows == [("carol",)] and not elsewhere.exists()


class Restarted(Exception):
    """``os.execve``, caught: the command restarting itself on the shared database."""


def test_without_run_dir_it_finds_make_runs_cluster_by_itself(
    tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's command after ``make run``, without --run-dir: run/local is found
    (under the checkout, settings.BASE_DIR, here the working directory too) and named."""
    shared = tmp_path / "run" / "local" / "shared.sqlite3"
    shared.parent.mkdir(parents=True)
    shared.touch()
    settings.BASE_DIR = tmp_path
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv(run_dir.REEXEC_MARK, raising=False)
    argv = ["manage.py", "create_operator", "alice", "--password-env", "OPERATOR_PASSWORD"]
    monkeypatch.setattr(sys, "argv", argv)

    def execve(path: str, args: list[str], env: dict[str, str]) -> None:
        raise Restarted(args, env)

    monkeypatch.setattr(run_dir.os, "execve", execve)
    out = io.StringIO()
    with pytest.raises(Restarted) as restarted:
        call_command(*argv[1:], stdout=out)

    args, env = restarted.value.args
    assert args == [sys.executable, *argv]
    assert env["DATABASE_URL"] == f"sqlite:///{shared.resolve()}"
    assert env[run_dir.REEXEC_MARK] == "1"
    assert f"writing the account to {tmp_path / 'run' / 'local'}'s shared database" in (
        out.getvalue()
    )
    shared.unlink()  # no cluster there: this shell's own database stays
    assert run_dir.default_run_dir() is None


def test_run_dir_without_a_cluster_says_so(db_path: str, tmp_path: Path) -> None:
    done = create_operator(db_path, "dave", "--token", "--run-dir", str(tmp_path / "none"))
    assert done.returncode != 0
    assert "has no cluster database" in done.stderr and "cluster up" in done.stderr


def test_a_database_that_is_no_clusters_says_to_give_run_dir_in_one_line(tmp_path: Path) -> None:
    done = create_operator(f"sqlite:///{tmp_path / 'empty.sqlite3'}", "alice", "--token")
    assert done.returncode != 0
    assert "has no auth_user table" in done.stderr
    assert "--run-dir run/local" in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
