"""A node's databases and static files, prepared only when there is work to do.

Before its processes start, a node needs its databases migrated and its static files
collected. Run every time, the two Django commands cost about half of a ``cluster up``
(``bench/startup.py``), and as much again on every restart, with nothing to do. So:

* **Fingerprints.** :func:`schema_fingerprint` hashes what decides a database's schema
  (the project's migrations, its settings and database router, every installed
  distribution's version and the Python version); :func:`static_fingerprint` what decides
  the collected files (the project's static folder, the settings, the distributions).
* **Stamps.** After a database is migrated, or the static files collected, a stamp file
  beside it (``<file>.prepared``) records the fingerprint. When the stamp still holds it,
  the command is skipped: a restart with the same code migrates and collects nothing. A
  changed migration, setting or package changes the fingerprint, and the command runs.
* **Templates.** The first fresh database of a schema (and the first static folder) is
  kept under ``.cache/prepared/<fingerprint>/`` of the checkout (or the folder
  ``NAMESRV_PREPARED_DIR`` names); a later fresh one is a
  copy of it (SQLite's backup API for databases), stamped like a migrated one. A fresh
  migration writes only what the migrations write, the same for every node, so the copy
  is what migrating would have made.

Only SQLite files are stamped or copied: a shared database on a server (``DATABASE_URL``
of PostgreSQL) is always migrated, since other nodes migrate it too. Anything that goes
wrong with a stamp or a template (a missing folder, a read-only checkout) falls back to
running the command.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from node.processes import PROJECT_DIR

STAMP_SUFFIX = ".prepared"
TEMPLATES_DIR_ENV = "NAMESRV_PREPARED_DIR"
"""Where templates are kept, when not in the checkout's ``.cache/prepared`` (gitignored;
``make clean`` removes it). An empty folder here makes the next fresh node migrate and
collect (``bench/startup.py`` measures that as its baseline)."""
SCHEMA_INPUTS = (
    "namesrv_app/migrations",
    "namesrv_site/settings.py",
    "namesrv_app/db_router.py",
)
STATIC_INPUTS = ("namesrv_app/static", "namesrv_site/settings.py")
SQLITE_URL_PREFIX = "sqlite:///"
DIST_INFO_SUFFIXES = (".dist-info", ".egg-info")


def _files(inputs: Iterable[str]) -> list[Path]:
    found: list[Path] = []
    for name in inputs:
        path = PROJECT_DIR / name
        if path.is_dir():
            found.extend(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        elif path.is_file():
            found.append(path)
    return sorted(found)


def _fingerprint(inputs: Iterable[str]) -> str:
    digest = hashlib.sha256(sys.version.encode())
    for path in _files(inputs):
        digest.update(str(path.relative_to(PROJECT_DIR)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    digest.update(_distributions())
    return digest.hexdigest()[:32]


@functools.cache
def _distributions() -> bytes:
    """Every installed distribution and its version (the third-party apps' migrations and
    static files come with them): the names of the ``*.dist-info`` folders on the path,
    which carry both, listed rather than read."""
    found: set[str] = set()
    for entry in sys.path:
        with contextlib.suppress(OSError):
            found.update(
                name for name in os.listdir(entry or ".") if name.endswith(DIST_INFO_SUFFIXES)
            )
    return "\n".join(sorted(found)).encode()


def schema_fingerprint() -> str:
    """What decides a database's schema, hashed (the module docstring)."""
    return _fingerprint(SCHEMA_INPUTS)


def static_fingerprint() -> str:
    """What decides the collected static files, hashed."""
    return _fingerprint(STATIC_INPUTS)


def sqlite_file(database_url: str) -> Path | None:
    """The file of a ``sqlite:///`` URL; None for a database on a server."""
    if not database_url.startswith(SQLITE_URL_PREFIX):
        return None
    return Path(database_url[len(SQLITE_URL_PREFIX) :])


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + STAMP_SUFFIX)


def is_prepared(path: Path, fingerprint: str) -> bool:
    """True when ``path`` (a database file or a static folder) exists and its stamp
    holds ``fingerprint``: nothing to migrate or collect."""
    try:
        return path.exists() and _stamp(path).read_text(encoding="utf-8") == fingerprint
    except OSError:
        return False


def stamp(path: Path, fingerprint: str) -> None:
    """Record that ``path`` is prepared for ``fingerprint``."""
    _stamp(path).write_text(fingerprint, encoding="utf-8")


def _template(fingerprint: str, name: str) -> Path:
    folder = os.environ.get(TEMPLATES_DIR_ENV) or PROJECT_DIR / ".cache" / "prepared"
    return Path(folder) / fingerprint / name


def _copy_database(source: Path, target: Path) -> None:
    """A consistent copy through SQLite's backup API (a WAL file included)."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


def database_from_template(db: Path, alias: str, fingerprint: str) -> bool:
    """A fresh database ``db`` copied from the template of its schema and stamped; False
    (nothing done) when ``db`` exists or there is no template yet.

    The copy is made beside ``db`` and linked into place only if ``db`` still does not
    exist (``os.link`` fails on an existing name): two processes starting on one file at
    once never write over each other, and the loser migrates the winner's file, as
    before templates (a no-op)."""
    template = _template(fingerprint, f"{alias}.sqlite3")
    if db.exists() or not template.is_file():
        return False
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=db.parent, prefix=".prepared-") as scratch:
            staged = Path(scratch) / db.name
            _copy_database(template, staged)
            os.link(staged, db)
    except (OSError, sqlite3.Error):
        return False
    stamp(db, fingerprint)
    return True


def database_ready(db: Path | None, alias: str, fingerprint: str) -> bool:
    """True when ``db`` needs no migration: prepared for ``fingerprint``, or fresh and
    now a copy of its schema's template. Never for a database on a server (None)."""
    if db is None:
        return False
    return is_prepared(db, fingerprint) or database_from_template(db, alias, fingerprint)


def _keep(source: Path, kept: Path, copy: Callable[[Path, Path], object]) -> None:
    """``source`` copied to the template ``kept`` unless one is there: staged beside it
    and renamed into place, so a reader never sees half a template. A failure leaves
    no template (the next fresh node migrates or collects)."""
    if kept.exists():
        return
    with contextlib.suppress(OSError, sqlite3.Error):
        kept.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=kept.parent) as scratch:
            staged = Path(scratch) / kept.name
            copy(source, staged)
            os.replace(staged, kept)


def keep_database(db: Path, alias: str, fingerprint: str, *, template: bool) -> None:
    """Stamp ``db``, just migrated; with ``template`` (it was fresh: it holds only what
    the migrations wrote) keep it as its schema's template if there is none."""
    stamp(db, fingerprint)
    if template:
        _keep(db, _template(fingerprint, f"{alias}.sqlite3"), _copy_database)


def static_from_template(root: Path, fingerprint: str) -> bool:
    """A fresh static folder ``root`` copied from the template and stamped; False when
    ``root`` holds files already or there is no template yet."""
    template = _template(fingerprint, "static")
    if (root.exists() and any(root.iterdir())) or not template.is_dir():
        return False
    try:
        shutil.copytree(template, root, dirs_exist_ok=True)
    except OSError:
        return False
    stamp(root, fingerprint)
    return True


def keep_static(root: Path, fingerprint: str) -> None:
    """Stamp ``root``, freshly collected; keep it as the template if there is none."""
    stamp(root, fingerprint)
    _keep(root, _template(fingerprint, "static"), shutil.copytree)
