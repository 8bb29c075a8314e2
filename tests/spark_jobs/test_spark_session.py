"""The code zip ``get_spark`` ships to executors: what it holds, that it is enough on its
own, that it is built deterministically and rebuilt when the code changes."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from spark_jobs import session
from spark_jobs.session import build_code_zip, get_spark, shipped_sources

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _names(paths: list[Path], root: Path) -> set[str]:
    return {path.relative_to(root).as_posix() for path in paths}


def test_the_zip_holds_spark_jobs_and_the_project_modules_it_imports(tmp_path):
    names = _names(shipped_sources(cache_dir=tmp_path), PROJECT_ROOT)
    own = {
        p.relative_to(PROJECT_ROOT).as_posix() for p in (PROJECT_ROOT / "spark_jobs").glob("*.py")
    }
    assert own <= names
    # experiment_history.schema/clients import remoting.model, experiment_history.simulate
    # raftstore.vocab; the report's format is experiment_reports.
    assert {
        "experiment_history/__init__.py",
        "experiment_history/schema.py",
        "experiment_history/runs.py",
        "experiment_history/clients.py",
        "experiment_history/simulate.py",
        "experiment_reports/__init__.py",
        "experiment_reports/report.py",
        "remoting/__init__.py",
        "remoting/model.py",
        "raftstore/__init__.py",
        "raftstore/vocab.py",
    } <= names
    # Only what is imported: not the rest of those packages, no tests, no caches.
    assert "raftstore/commands.py" not in names
    assert "remoting/server.py" not in names
    assert not any(
        name.startswith(("tests/", ".venv/", "run/")) or "__pycache__" in name for name in names
    )
    # spark_jobs.cli parses its arguments with tools.cli: that module alone.
    assert {name for name in names if name.startswith("tools/")} <= {
        "tools/__init__.py",
        "tools/cli.py",
    }
    assert {name.split("/")[0] for name in names} == {
        "spark_jobs",
        "experiment_history",
        "experiment_reports",
        "remoting",
        "raftstore",
        "tools",
    }


def test_every_analysis_module_imports_from_the_zip_alone(tmp_path):
    """What an executor does: import the jobs with only the zip (and site-packages)."""
    code = build_code_zip(cache_dir=tmp_path)
    modules = sorted(
        p.stem for p in (PROJECT_ROOT / "spark_jobs").glob("*.py") if p.stem != "__init__"
    )
    script = (
        "import sys\n"
        f"sys.path.insert(0, {str(code)!r})\n"
        + "".join(f"import spark_jobs.{name}\n" for name in modules)
        + "import experiment_history, experiment_reports, raftstore, remoting\n"
        "outside = [m.__name__ for m in list(sys.modules.values())\n"
        "           if m.__name__.split('.')[0]\n"
        "           in ('spark_jobs', 'experiment_history', 'experiment_reports',\n"
        "               'raftstore', 'remoting')\n"
        "           and not (getattr(m, '__file__', '') or '').startswith(sys.path[0])]\n"
        "print(outside)\n"
    )
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_zip_is_deterministic_and_reused(tmp_path):
    first = build_code_zip(cache_dir=tmp_path / "a")
    second = build_code_zip(cache_dir=tmp_path / "b")
    assert first.name == second.name
    assert first.read_bytes() == second.read_bytes()
    inode = first.stat().st_ino
    assert build_code_zip(cache_dir=tmp_path / "a") == first
    assert first.stat().st_ino == inode  # reused, not written again
    with zipfile.ZipFile(first) as archive:
        assert {info.date_time for info in archive.infolist()} == {session.ZIP_DATE}
        assert archive.namelist() == sorted(archive.namelist())


def test_zips_unused_for_a_week_are_removed_when_a_new_one_is_built(tmp_path):
    cache = tmp_path / "cache"
    current = build_code_zip(cache_dir=cache)
    stale, recent = cache / f"{session.ZIP_PREFIX}0.zip", cache / f"{session.ZIP_PREFIX}1.zip"
    for path in (stale, recent):
        path.write_bytes(b"")
    week_ago = time.time() - session.ZIP_MAX_AGE_S - 60
    os.utime(stale, (week_ago, week_ago))
    os.utime(current, (week_ago, week_ago))
    assert build_code_zip(cache_dir=cache) == current  # reuse marks it used
    assert current.stat().st_mtime > week_ago
    (tmp_path / "src.py").write_text("x = 1\n")
    build_code_zip([tmp_path / "src.py"], root=tmp_path, cache_dir=cache)  # a new zip
    assert not stale.exists()
    assert recent.exists() and current.exists()


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_imports_are_followed_transitively_and_a_changed_import_rebuilds_the_zip(tmp_path):
    root, cache = tmp_path / "proj", tmp_path / "cache"
    _write(root / "app" / "__init__.py", "")
    _write(
        root / "app" / "jobs.py",
        "import json\nfrom .parts import helper\ndef late():\n    import lib.used\n",
    )
    _write(root / "app" / "parts.py", "from lib import deep\nhelper = 1\n")
    _write(root / "lib" / "__init__.py", "")
    _write(root / "lib" / "used.py", "")
    _write(root / "lib" / "deep.py", "from . import deeper\n")
    _write(root / "lib" / "deeper.py", "")
    _write(root / "lib" / "unused.py", "")
    _write(root / "tests" / "__init__.py", "")
    _write(root / "tests" / "test_app.py", "import app.jobs\n")
    expected = {
        "app/__init__.py",
        "app/jobs.py",
        "app/parts.py",
        "lib/__init__.py",
        "lib/used.py",
        "lib/deep.py",
        "lib/deeper.py",
    }
    assert _names(shipped_sources(root, "app", cache_dir=cache), root) == expected

    before = build_code_zip(root=root, cache_dir=cache, sources=None)
    before_names = zipfile.ZipFile(before).namelist()
    # Warm cache: the same answer, now from the cached imports.
    assert _names(shipped_sources(root, "app", cache_dir=cache), root) == expected

    _write(root / "app" / "parts.py", "from lib import deep, unused\nhelper = 2\n")
    assert _names(shipped_sources(root, "app", cache_dir=cache), root) == expected | {
        "lib/unused.py"
    }
    assert (
        build_code_zip(shipped_sources(root, "app", cache_dir=cache), root=root, cache_dir=cache)
        != before
    )
    assert "lib/unused.py" not in before_names


def test_get_spark_takes_verbose_as_a_keyword():
    parameters = inspect.signature(get_spark).parameters
    assert parameters["master"].default is None
    assert parameters["verbose"].kind is inspect.Parameter.KEYWORD_ONLY
    assert parameters["verbose"].default is False
    assert session.QUIET_LOG4J.is_file()


@pytest.mark.slow
def test_the_zip_is_added_once_and_stays_off_the_drivers_path(spark: Any):
    again = get_spark()
    assert again is spark
    includes = spark.sparkContext._python_includes
    shipped = [name for name in includes if name.startswith(session.ZIP_PREFIX)]
    assert len(shipped) == 1, includes
    assert not any(session.ZIP_PREFIX in entry for entry in sys.path)
