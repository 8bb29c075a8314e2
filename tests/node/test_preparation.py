"""node.preparation: a database or static folder prepared for this code is left alone, a
fresh one is copied from the first one prepared, and a change of what decides the schema
or the files makes the command run again."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from node import preparation, supervise
from node.config import Endpoint, NodeConfig
from node.processes import LOOPBACK, node_env
from tools import ports


@pytest.fixture
def templates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "templates"
    monkeypatch.setenv(preparation.TEMPLATES_DIR_ENV, str(folder))
    return folder


def _migrated(db: Path) -> Path:
    """A database as a migration leaves it: a table and a row (WAL mode, as Django's)."""
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE django_migrations (app TEXT, name TEXT)")
        conn.execute("INSERT INTO django_migrations VALUES ('namesrv_app', '0001_initial')")
    conn.close()
    return db


def _rows(db: Path) -> list[tuple[str, str]]:
    """The migrations a database records."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT app, name FROM django_migrations").fetchall()
    conn.close()
    return rows


def test_a_stamp_holds_for_its_fingerprint_and_its_file_only(tmp_path: Path) -> None:
    db = tmp_path / "namesrv.sqlite3"
    assert not preparation.is_prepared(db, "abc")
    _migrated(db)
    assert not preparation.is_prepared(db, "abc")  # migrated, but by whom: run it
    preparation.stamp(db, "abc")
    assert preparation.is_prepared(db, "abc")
    assert not preparation.is_prepared(db, "abd")  # other code: migrate again
    db.unlink()
    assert not preparation.is_prepared(db, "abc")  # a stamp without its file


def test_a_fresh_database_is_a_copy_of_the_first_one_migrated(
    tmp_path: Path, templates: Path
) -> None:
    first, second = tmp_path / "n1.sqlite3", tmp_path / "n2.sqlite3"
    assert not preparation.database_from_template(second, "projection", "fp")  # none kept yet
    preparation.keep_database(_migrated(first), "projection", "fp", template=True)
    assert preparation.is_prepared(first, "fp")
    assert preparation.database_from_template(second, "projection", "fp")
    assert _rows(second) == [("namesrv_app", "0001_initial")]
    assert preparation.is_prepared(second, "fp")
    # Never over a database that exists, and never from another schema's template.
    assert not preparation.database_from_template(second, "projection", "fp")
    assert not preparation.database_from_template(tmp_path / "n3.sqlite3", "projection", "fp2")
    assert not preparation.database_from_template(tmp_path / "n3.sqlite3", "default", "fp")


def test_a_database_that_held_data_before_it_was_migrated_is_no_template(
    tmp_path: Path, templates: Path
) -> None:
    old = _migrated(tmp_path / "old.sqlite3")
    preparation.keep_database(old, "default", "fp", template=False)
    assert preparation.is_prepared(old, "fp")
    assert not preparation.database_from_template(tmp_path / "new.sqlite3", "default", "fp")


def test_a_static_folder_is_collected_once_then_copied(tmp_path: Path, templates: Path) -> None:
    first, second = tmp_path / "a" / "static", tmp_path / "b" / "static"
    (first / "namesrv").mkdir(parents=True)
    (first / "staticfiles.json").write_text("{}")
    (first / "namesrv" / "console.1234.css").write_text("body{}")
    assert not preparation.static_from_template(second, "fp")
    preparation.keep_static(first, "fp")
    assert preparation.is_prepared(first, "fp")
    assert preparation.static_from_template(second, "fp")
    assert (second / "namesrv" / "console.1234.css").read_text() == "body{}"
    assert preparation.is_prepared(second, "fp")
    third = tmp_path / "c" / "static"
    third.mkdir(parents=True)
    (third / "left.txt").write_text("x")
    assert not preparation.static_from_template(third, "fp")  # holds files: collect there


def test_the_fingerprints_change_with_what_decides_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrations = tmp_path / "namesrv_app" / "migrations"
    static = tmp_path / "namesrv_app" / "static"
    migrations.mkdir(parents=True)
    static.mkdir(parents=True)
    (migrations / "0001_initial.py").write_text("operations = []\n")
    (static / "console.css").write_text("body{}")
    monkeypatch.setattr(preparation, "PROJECT_DIR", tmp_path)
    schema, files = preparation.schema_fingerprint(), preparation.static_fingerprint()
    assert schema == preparation.schema_fingerprint() and schema != files
    (migrations / "0002_more.py").write_text("operations = []\n")
    assert preparation.schema_fingerprint() != schema
    assert preparation.static_fingerprint() == files
    (static / "console.css").write_text("body{color:red}")
    assert preparation.static_fingerprint() != files


def test_only_sqlite_databases_are_stamped() -> None:
    assert preparation.sqlite_file("sqlite:////run/x/shared.sqlite3") == Path(
        "/run/x/shared.sqlite3"
    )
    assert preparation.sqlite_file("postgres://u:p@127.0.0.1:5432/namesrv") is None


def test_run_node_prepares_a_node_once_per_version_of_the_code(tmp_path: Path) -> None:
    """node.supervise, as run_node starts a node twice: the second start migrates and
    collects nothing (no log grows), and the databases are the migrated ones."""
    config = NodeConfig(
        source=tmp_path / "node.toml",
        node_id="n1",
        mode="eventual",
        data_dir=tmp_path / "data",
        remoting=Endpoint(LOOPBACK, ports.free_port()),
        web=Endpoint(LOOPBACK, ports.free_port()),
        internal_port=ports.free_port(),
        web_profile="local",
    )
    supervise.prepare_data_dir(config)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("NAMESRV_", "DATABASE_"))}
    env = node_env(config, clean)
    supervise.collected(config, supervise.collect_static(config, env))
    supervise.migrate(config, env)
    logs = [config.data_dir / "migrate.log", config.data_dir / "collectstatic.log"]
    sizes = [log.stat().st_size for log in logs]
    stamps = sorted(p.name for p in config.data_dir.glob(f"*{preparation.STAMP_SUFFIX}"))
    assert stamps == [
        f"namesrv.sqlite3{preparation.STAMP_SUFFIX}",
        f"shared.sqlite3{preparation.STAMP_SUFFIX}",
        f"static{preparation.STAMP_SUFFIX}",
    ]

    assert supervise.collect_static(config, env) is None
    supervise.migrate(config, env)

    assert [log.stat().st_size for log in logs] == sizes
    for db in ("namesrv.sqlite3", "shared.sqlite3"):
        assert ("namesrv_app", "0001_initial") in _rows(config.data_dir / db)


def test_a_database_another_process_created_meanwhile_is_left_alone(
    tmp_path: Path, templates: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    preparation.keep_database(_migrated(tmp_path / "first.sqlite3"), "default", "fp", template=True)
    db = tmp_path / "shared.sqlite3"
    copy = preparation._copy_database

    def racing(source: Path, target: Path) -> None:
        db.write_bytes(b"the other process's database")  # it won the race
        copy(source, target)

    monkeypatch.setattr(preparation, "_copy_database", racing)
    assert not preparation.database_from_template(db, "default", "fp")
    assert db.read_bytes() == b"the other process's database"
    assert not preparation.is_prepared(db, "fp")  # so it is migrated, as before templates
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".prepared-")) == []
