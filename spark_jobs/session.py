"""The one place a SparkSession is made (local by default, or an existing cluster).

Two things make the jobs run on a stock Spark standalone cluster with no set-up on the
workers, and keep Spark quiet:

* the project's code is shipped: the ``spark_jobs`` package and every project module it
  imports (found statically, see ``shipped_sources``) are zipped into a cache directory and
  added with ``SparkContext.addPyFile``; executors fetch the zip from the driver and put it
  on their Python path;
* Spark's JVM logging goes through ``log4j2-quiet.properties`` (errors only) from JVM
  start-up, unless ``verbose`` is asked for.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import logging
import os
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[2]"
APP_NAME = "namesrv-consistency"

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ROOT_PACKAGE = "spark_jobs"
QUIET_LOG4J = Path(__file__).resolve().with_name("log4j2-quiet.properties")
ZIP_PREFIX = "namesrv-pyfiles-"
IMPORTS_CACHE = "imports-v1.json"
ZIP_MAX_AGE_S = 7 * 24 * 3600
# Every zip entry gets this timestamp, so equal sources give a byte-identical zip.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def _module_file(name: str, root: Path) -> Path | None:
    """The source file of project module ``name`` (a dotted name), or ``None`` if it is not
    a module of one of the project's packages (the standard library, pyarrow, ...)."""
    parts = name.split(".")
    if not parts[0] or not (root / parts[0] / "__init__.py").is_file():
        return None
    base = root.joinpath(*parts)
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _imported_names(source: Path, root: Path) -> set[str]:
    """Dotted names a module may import: its ``import`` statements anywhere in the file
    (also inside functions), each with its parent packages, relative imports resolved."""
    # The package a relative import starts from: ``a.b`` for a/b/c.py and a/b/__init__.py.
    package = source.relative_to(root).parts[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source.read_bytes(), filename=str(source))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            names.add(base)
            # ``from package import name`` imports the submodule ``name`` if there is one.
            names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    expanded: set[str] = set()
    for name in names:
        parts = name.split(".")
        expanded.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return expanded


def shipped_sources(
    root: Path = PROJECT_ROOT, package: str = ROOT_PACKAGE, cache_dir: Path | None = None
) -> list[Path]:
    """The source files executors need: every module of ``package`` plus, transitively,
    every project module they import (``experiment_history``, ``experiment_reports``,
    ``remoting.model`` and ``raftstore.vocab`` today), each with its packages'
    ``__init__.py``. Found by reading
    the import statements, so an ``importlib.import_module`` of a project module would not
    be seen. Tests, ``.venv``, ``run/`` and ``__pycache__`` are never part of it (they
    are not imported packages).

    Parsing takes tens of milliseconds, so each file's imports are cached in
    ``cache_dir`` under its path, mtime and size; a warm call only stats the files.
    """
    cache_file = _cache_dir(cache_dir) / IMPORTS_CACHE
    try:
        cached = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        cached = {}
    if not isinstance(cached, dict):
        cached = {}
    fresh: dict[str, list[Any]] = {}
    pending = sorted(p for p in (root / package).rglob("*.py") if "__pycache__" not in p.parts)
    found: set[Path] = set()
    while pending:
        source = pending.pop()
        if source in found:
            continue
        found.add(source)
        stat = source.stat()
        key, signature = str(source), [stat.st_mtime_ns, stat.st_size]
        entry = cached.get(key)
        if isinstance(entry, list) and len(entry) == 3 and entry[:2] == signature:
            names = entry[2]
        else:
            names = sorted(_imported_names(source, root))
        fresh[key] = [*signature, names]
        for name in names:
            module = _module_file(name, root)
            if module is not None and module not in found:
                pending.append(module)
    # Entries of other checkouts stay; this one's are replaced (dropping removed modules).
    inside = str(root) + os.sep
    merged = {k: v for k, v in cached.items() if not k.startswith(inside)} | fresh
    if merged != cached:
        _write_atomically(cache_file, json.dumps(merged, sort_keys=True).encode())
    return sorted(found)


def _write_atomically(target: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file next to ``target`` and rename it into place, so
    a concurrent reader sees the old file or the new one, never half of one."""
    fd, partial = tempfile.mkstemp(prefix=target.stem, suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def _cache_dir(path: Path | None = None) -> Path:
    """``path`` (default: a per-user directory under the system temp dir), created."""
    if path is None:
        uid = os.getuid() if hasattr(os, "getuid") else 0
        path = Path(tempfile.gettempdir()) / f"namesrv-spark-{uid}"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def build_code_zip(
    sources: Iterable[Path] | None = None, root: Path = PROJECT_ROOT, cache_dir: Path | None = None
) -> Path:
    """Zip ``sources`` (default: ``shipped_sources()``) with paths relative to ``root``.

    The zip is named by a hash of the entries' names and contents and kept in
    ``cache_dir`` (a per-user directory under the system temp dir): the same code gives the
    same file, byte for byte, and an existing one is reused (a new one is written to a
    temporary name and renamed, so concurrent drivers never see half a zip). Changed code
    gives a new name, which also keeps Spark from refusing a second, different file of the
    same name.
    """
    cache_dir = _cache_dir(cache_dir)
    if sources is None:
        sources = shipped_sources(root, cache_dir=cache_dir)
    files = sorted(sources)
    entries = [(path.relative_to(root).as_posix(), path.read_bytes()) for path in files]
    digest = hashlib.sha256()
    for name, data in entries:
        digest.update(name.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
    target = cache_dir / f"{ZIP_PREFIX}{digest.hexdigest()[:16]}.zip"
    if target.is_file():
        os.utime(target)  # its last use, for _prune_zips
        return target
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    _write_atomically(target, buffer.getvalue())
    _prune_zips(cache_dir, keep=target)
    return target


def _prune_zips(cache_dir: Path, keep: Path) -> None:
    """Remove code zips not used for ``ZIP_MAX_AGE_S``: each edit of the code makes one.
    (A driver serves its zip from this path, so one running that long could not hand it
    to executors that join after the removal.)"""
    horizon = time.time() - ZIP_MAX_AGE_S
    for old in cache_dir.glob(f"{ZIP_PREFIX}*.zip"):
        try:
            if old != keep and old.stat().st_mtime < horizon:
                old.unlink()
        except OSError:
            continue


def _ship_code(spark: SparkSession) -> Path:
    """Add the project's code zip to the session's Python files (once per session)."""
    code = build_code_zip()
    context = spark.sparkContext
    if code.name in getattr(context, "_python_includes", []):
        return code
    # addPyFile also puts the zip on the driver's sys.path; the driver keeps importing the
    # project itself, so a package first imported later is never taken from the zip.
    before = list(sys.path)
    context.addPyFile(str(code))
    sys.path[:] = before
    return code


def get_spark(master: str | None = None, *, verbose: bool = False) -> SparkSession:
    """Return the shared SparkSession, creating it on first use.

    ``master`` is a Spark master URL (``spark://host:7077`` for a standalone cluster);
    ``None`` means a local two-core session. For every master, local ones included, the
    project's code is shipped to the executors as a zip (``addPyFile``), so the workers need
    no copy of the project and no PYTHONPATH. The executors start this interpreter
    (``PYSPARK_PYTHON`` defaults to ``sys.executable``; set it to the workers' Python if
    that lives elsewhere): it must have pyspark's Python dependencies (pyarrow), as this
    virtualenv does. The UI and the console progress bar are off because the jobs run in
    tests and batch scripts.

    Unless ``verbose``, Spark's JVM logs only errors, from JVM start-up on (the driver's
    and the executors' log4j2 configuration is ``log4j2-quiet.properties``; an executor on
    a machine without this file at the same path falls back to Spark's defaults, which
    only reach that worker's log files). With ``verbose`` Spark's own defaults apply (WARN
    and up). Parallelism is Spark's (the master's cores); ``spark_jobs.dataset.load_history``
    sets the shuffle partitions from the data. Both ``master`` and ``verbose`` only matter
    when the session is created.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName(APP_NAME)
        .master(master or DEFAULT_MASTER)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
    )
    if not verbose:
        # py4j (the driver's bridge to the JVM) logs each connection at INFO, and at
        # interpreter exit into streams that may already be closed.
        logging.getLogger("py4j").setLevel(logging.WARNING)
        quiet = f"-Dlog4j2.configurationFile={QUIET_LOG4J.as_uri()}"
        builder = builder.config("spark.driver.extraJavaOptions", quiet).config(
            "spark.executor.extraJavaOptions", quiet
        )
    spark = builder.getOrCreate()
    if not verbose:
        spark.sparkContext.setLogLevel("ERROR")
    _ship_code(spark)
    return spark
