"""What pyproject.toml declares and ships, what the locks pin, and what the code imports.

Shared by the packaging tests: the declared-imports check reads the code's imports with
``ast`` (every ``import``, at any depth) and the project's own lists from pyproject.toml,
so a new package or dependency needs no edit here.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

PROJECT_DIR = Path(__file__).resolve().parents[2]
PYPROJECT = PROJECT_DIR / "pyproject.toml"
RUNTIME_LOCK = PROJECT_DIR / "requirements.lock"
DEV_LOCK = PROJECT_DIR / "requirements-dev.lock"

DEV_TREES = ("tests", "bench")
"""Checkout folders that never ship: they may import the ``dev`` extra too."""

DEV_MODULES_IN_RUNTIME_PACKAGES = {
    "tools/import_cycles.py": "make lint's cycle check (grimp); no node imports it",
}
"""Modules of shipped packages that only the tooling runs, with why."""

NOT_FROM_THIS_VENV = {
    "rocketmq": "the interop drivers run in .cache/interop's own venv (tools/interop_setup.py)",
}
"""Imported modules that come from somewhere else than the project's venv, with where."""

_LOCK_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them (``PyYAML`` is ``pyyaml``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _pyproject() -> dict[str, object]:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))


def runtime_requirements() -> list[Requirement]:
    """``[project] dependencies``."""
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    return [Requirement(text) for text in project["dependencies"]]


def dev_requirements() -> list[Requirement]:
    """``[project.optional-dependencies] dev``."""
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    return [Requirement(text) for text in project["optional-dependencies"]["dev"]]


def shipped_packages() -> list[str]:
    """The top-level packages the wheel carries (``[tool.setuptools.packages.find]``)."""
    tool = _pyproject()["tool"]
    assert isinstance(tool, dict)
    patterns = tool["setuptools"]["packages"]["find"]["include"]
    return [p for p in patterns if "*" not in p]


@dataclass(frozen=True, slots=True)
class Pin:
    """One ``name==version`` of a lock, with how many hashes it allows."""

    name: str
    version: str
    hashes: int


def lock_pins(lock: Path) -> dict[str, Pin]:
    """The pins of a ``uv pip compile --generate-hashes`` file, by normalized name."""
    pins: dict[str, Pin] = {}
    current: Pin | None = None
    for line in lock.read_text(encoding="utf-8").splitlines():
        match = _LOCK_PIN.match(line)
        if match:
            current = Pin(normalized(match[1]), match[2], 0)
            pins[current.name] = current
        elif current is not None and line.strip().startswith("--hash=sha256:"):
            current = Pin(current.name, current.version, current.hashes + 1)
            pins[current.name] = current
    return pins


@dataclass(frozen=True, slots=True)
class Import:
    """A top-level module name imported by a file of the checkout, at a line."""

    module: str
    path: str
    line: int


def imports_of(files: Iterable[Path]) -> Iterator[Import]:
    """Every absolute import of ``files``: top-level, in functions, under TYPE_CHECKING."""
    for path in files:
        yield from _imports_of_file(path)


@functools.cache
def _imports_of_file(path: Path) -> tuple[Import, ...]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    where = path.relative_to(PROJECT_DIR).as_posix()
    found = []
    for node in _statements(tree.body):
        if isinstance(node, ast.Import):
            found += [Import(a.name.split(".")[0], where, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(Import(node.module.split(".")[0], where, node.lineno))
    return tuple(found)


def _statements(body: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """Statements at any depth (imports are statements: no need to walk expressions)."""
    for node in body:
        yield node
        for name in _NESTED_BODIES:
            yield from _statements(getattr(node, name, ()))


_NESTED_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def python_files(folder: str) -> list[Path]:
    """The ``.py`` files under a checkout folder."""
    return sorted((PROJECT_DIR / folder).rglob("*.py"))


def local_modules() -> set[str]:
    """Names the checkout itself provides (its packages and ``manage.py``)."""
    names = {p.parent.name for p in PROJECT_DIR.glob("*/__init__.py")}
    return names | {p.stem for p in PROJECT_DIR.glob("*.py")}


def third_party(found: Iterable[Import]) -> list[Import]:
    """The imports that name neither the standard library nor the checkout."""
    own = local_modules() | set(sys.stdlib_module_names) | {"__future__"}
    return [i for i in found if i.module not in own]
