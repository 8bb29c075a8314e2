"""``--run-dir RUN``: act on the shared database of a local cluster's run folder.

Django opens its databases from the settings this process started with, so a
command given ``--run-dir`` starts itself again with the run folder's shared
database in its environment (``DATABASE_URL=sqlite:///RUN/shared.sqlite3``),
the flag removed. On hosts, the shared database comes from the node's config
(``[database] url``) and the flag is not needed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from django.core.management.base import CommandError, CommandParser

from node.processes import SHARED_DB_FILE_NAME

REEXEC_MARK = "NAMESRV_RUN_DIR_APPLIED"


def add_run_dir_argument(parser: CommandParser) -> None:
    """The ``--run-dir`` flag of a command that writes to the shared database."""
    parser.add_argument(
        "--run-dir", type=Path, default=None, metavar="RUN",
        help="act on the local cluster in RUN (its shared database, so every "
        "node's console and API see the change), e.g. run/local",
    )  # fmt: skip


def shared_database(run_dir: Path) -> Path:
    """The shared database file of ``run_dir``; CommandError when there is none."""
    path = run_dir.expanduser().resolve() / SHARED_DB_FILE_NAME
    if not path.exists():
        raise CommandError(
            f"{run_dir} has no cluster database ({path} is missing): start the cluster "
            f"first (manage.py cluster up --run-dir {run_dir})"
        )
    return path


def apply_run_dir(run_dir: Path | None) -> None:
    """Restart this command on ``run_dir``'s shared database (returns at once without
    ``run_dir`` or once restarted)."""
    if run_dir is None or os.environ.get(REEXEC_MARK) == "1":
        return
    database = shared_database(run_dir)
    argv = _without_run_dir(sys.argv)
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", REEXEC_MARK: "1"}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *argv], env)


def _without_run_dir(argv: list[str]) -> list[str]:
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--run-dir":
            skip = True
        elif not arg.startswith("--run-dir="):
            kept.append(arg)
    return kept
