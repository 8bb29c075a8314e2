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
from collections.abc import Callable
from pathlib import Path

from django.core.management.base import CommandError, CommandParser

from node.processes import SHARED_DB_FILE_NAME

REEXEC_MARK = "NAMESRV_RUN_DIR_APPLIED"
MAKE_RUN_DIR = Path("run/local")
"""Where ``make run`` keeps its cluster."""


def default_run_dir() -> Path | None:
    """``make run``'s run folder when this shell has no database of its own configured
    and that cluster exists; else None."""
    if os.environ.get("DATABASE_URL") or os.environ.get(REEXEC_MARK) == "1":
        return None
    if not _from_manage_py():
        return None  # called from code (tests, call_command): its database stays
    from django.conf import settings

    folder = Path(settings.BASE_DIR) / MAKE_RUN_DIR
    return folder if (folder / SHARED_DB_FILE_NAME).exists() else None


def chosen_run_dir(given: Path | None, say: Callable[[str], None], what: str) -> Path | None:
    """``--run-dir`` when given, else ``make run``'s cluster when it exists (``say``
    tells the user which, naming ``what`` is written there); None: this shell's own."""
    if given is not None:
        return given
    found = default_run_dir()
    if found is not None:
        say(
            f"writing {what} to {found}'s shared database, so every node sees it "
            "(--run-dir chooses another cluster)"
        )
    return found


def holds_table(table: str, alias: str = "default") -> bool:
    """Whether database ``alias`` has ``table`` (was migrated)."""
    from django.db import connections

    return table in connections[alias].introspection.table_names()


def require_shared_tables(table: str) -> None:
    """CommandError, one line, when the shared database was never migrated (the command
    was run outside a cluster's run folder), instead of a traceback from the query."""
    from django.db import connection

    if holds_table(table):
        return
    name = connection.settings_dict["NAME"]
    raise CommandError(
        f"{name} is not a cluster's database (it has no {table} table): start a cluster "
        "(make run) and give its folder with --run-dir, e.g. --run-dir run/local, or set "
        "DATABASE_URL to the shared database"
    )


def add_run_dir_argument(parser: CommandParser) -> None:
    """The ``--run-dir`` flag of a command that writes to the shared database."""
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=None,
        metavar="RUN",
        help="act on the local cluster in RUN (its shared database, so every "
        "node's console and API see the change), e.g. run/local",
    )


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
    if not _from_manage_py():
        raise CommandError("--run-dir works from the command line (manage.py ...) only")
    argv = _without_run_dir(sys.argv)
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", REEXEC_MARK: "1"}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *argv], env)


def _from_manage_py() -> bool:
    return Path(sys.argv[0]).name in ("manage.py", "raft-namesrv")


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
