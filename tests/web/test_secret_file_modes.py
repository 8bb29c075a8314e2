"""A secret file that group or others may read is refused at start (namesrv.E022).

The files: DJANGO_SECRET_KEY_FILE, NAMESRV_INTERNAL_SECRET_FILE, the ACL file
(plain_acl.yml, which holds secret keys), the ACL secret key and the Raft secret.
``manage.py migrate``, which ``run_node`` and ``cluster up`` run before anything
starts, stops on it; ``NAMESRV_ALLOW_READABLE_SECRET_FILES=true`` accepts it for the
files whose readers would (not the ACL secret key or the Raft secret, which their
readers refuse anyway).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

from namesrv_app.checks import check_namesrv_settings

REPO_ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120


def secret_file(folder: Path, name: str, mode: int) -> Path:
    """A random secret in ``folder/name`` with ``mode``."""
    path = folder / name
    path.write_text(secrets.token_urlsafe(32) + "\n", encoding="utf-8")
    path.chmod(mode)
    return path


def loose_files(settings: Any, folder: Path) -> dict[str, Path]:
    """Every kind of secret file, each open to group or others, in the settings."""
    files = {
        "DJANGO_SECRET_KEY_FILE": secret_file(folder, "django.secret", 0o644),
        "NAMESRV_INTERNAL_SECRET_FILE": secret_file(folder, "internal.secret", 0o640),
        "NAMESRV_ACL_FILE": secret_file(folder, "plain_acl.yml", 0o604),
        "NAMESRV_ACL_SECRET_KEY_FILE": secret_file(folder, "admin.secret", 0o660),
        "NAMESRV_RAFT_SECRET_FILE": secret_file(folder, "raft.secret", 0o644),
    }
    read_by_settings = ("DJANGO_SECRET_KEY_FILE", "NAMESRV_INTERNAL_SECRET_FILE")
    settings.NAMESRV_SECRET_FILES = {name: str(files[name]) for name in read_by_settings}
    settings.NAMESRV = {
        **settings.NAMESRV,
        "ACL_FILE": str(files["NAMESRV_ACL_FILE"]),
        "ACL_SECRET_KEY_FILE": str(files["NAMESRV_ACL_SECRET_KEY_FILE"]),
        "RAFT_SECRET_FILE": str(files["NAMESRV_RAFT_SECRET_FILE"]),
    }
    return files


def reported(settings: Any) -> dict[str, str]:
    """The variable named by each namesrv.E022 error, with the error's text and hint."""
    errors = [e for e in check_namesrv_settings() if e.id == "namesrv.E022"]
    return {e.msg.partition("=")[0]: f"{e.msg} {e.hint}" for e in errors}


def test_every_secret_file_open_to_group_or_others_is_reported_with_its_mode(
    settings: Any, tmp_path: Path
) -> None:
    files = loose_files(settings, tmp_path)
    errors = reported(settings)
    assert set(errors) == set(files)
    django_key = files["DJANGO_SECRET_KEY_FILE"]
    assert errors["DJANGO_SECRET_KEY_FILE"].startswith(
        f"DJANGO_SECRET_KEY_FILE={django_key} is open to group or others (mode 0644)"
    )
    assert f"chmod 600 {django_key}" in errors["DJANGO_SECRET_KEY_FILE"]
    assert "(mode 0604)" in errors["NAMESRV_ACL_FILE"]


def test_owner_only_files_pass(settings: Any, tmp_path: Path) -> None:
    for path in loose_files(settings, tmp_path).values():
        path.chmod(0o600)
    assert reported(settings) == {}


def test_the_allowance_covers_only_the_files_whose_readers_accept_them(
    settings: Any, tmp_path: Path
) -> None:
    loose_files(settings, tmp_path)
    settings.NAMESRV_ALLOW_READABLE_SECRET_FILES = True
    assert set(reported(settings)) == {"NAMESRV_ACL_SECRET_KEY_FILE", "NAMESRV_RAFT_SECRET_FILE"}


def test_migrate_refuses_to_start_with_a_readable_secret_key_in_one_clear_line(
    tmp_path: Path,
) -> None:
    key_file = secret_file(tmp_path, "django.secret", 0o644)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("NAMESRV_", "DJANGO_"))}
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={
            **clean,
            "DJANGO_SECRET_KEY_FILE": str(key_file),
            "DATABASE_URL": f"sqlite:///{tmp_path / 'shared.sqlite3'}",
            "NAMESRV_DB_PATH": str(tmp_path / "projection.sqlite3"),
        },
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    [line] = [row for row in done.stderr.splitlines() if "namesrv.E022" in row]
    assert f"DJANGO_SECRET_KEY_FILE={key_file} is open to group or others (mode 0644)" in line
    assert not (tmp_path / "shared.sqlite3").exists() or _tables(tmp_path) == []


def _tables(folder: Path) -> list[str]:
    import sqlite3

    with sqlite3.connect(folder / "shared.sqlite3") as db:
        return [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
