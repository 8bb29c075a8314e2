"""The import-cycle check of ``make lint`` (tools/import_cycles.py), on small real packages."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.import_cycles import find_cycles, main, root_packages


def write_package(root: Path, files: dict[str, str]) -> None:
    """Write ``files`` (dotted-free paths under ``root``) as a package tree."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on sys.path to write throwaway packages into."""
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_type_checking_import_back_makes_a_cycle(packages: Path) -> None:
    write_package(
        packages,
        {
            "tc/__init__.py": "",
            "tc/core.py": "from tc.handlers import Handler\n",
            "tc/handlers.py": (
                "from __future__ import annotations\n"
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from tc.core import Core\n"
                "class Handler: ...\n"
            ),
        },
    )
    [cycle] = find_cycles(["tc"])
    assert cycle.modules == ("tc.core", "tc.handlers")
    assert [(s.importer, s.imported, s.line) for s in cycle.circle] == [
        ("tc.core", "tc.handlers", 1),
        ("tc.handlers", "tc.core", 4),
    ]
    assert cycle.circle[1].statement == "from tc.core import Core"
    assert cycle.circle[1].path.endswith("tc/handlers.py")


def test_a_longer_circle_through_an_import_inside_a_function_is_one_cycle(
    packages: Path,
) -> None:
    write_package(
        packages,
        {
            "ring/__init__.py": "",
            "ring/a.py": "import ring.b\n",
            "ring/b.py": "import ring.c\n",
            "ring/c.py": "def late():\n    import ring.a\n",
            "ring/d.py": "import ring.a\n",
        },
    )
    [cycle] = find_cycles(["ring"])
    assert cycle.modules == ("ring.a", "ring.b", "ring.c")
    assert [s.importer for s in cycle.circle] == ["ring.a", "ring.b", "ring.c"]


def test_a_package_init_and_its_own_module_importing_each_other_is_a_cycle(
    packages: Path,
) -> None:
    write_package(
        packages,
        {
            "reexport/__init__.py": "from reexport.names import NAME\nLIMIT = 3\n",
            "reexport/names.py": "from reexport import LIMIT\nNAME = 'n'\n",
        },
    )
    [cycle] = find_cycles(["reexport"])
    assert cycle.modules == ("reexport", "reexport.names")


def test_one_way_packages_pass_and_a_cycle_fails_with_its_statements(
    packages: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_package(
        packages,
        {
            "oneway/__init__.py": "",
            "oneway/low.py": "VALUE = 1\n",
            "oneway/high.py": "from oneway.low import VALUE\n",
            "twoway/__init__.py": "",
            "twoway/x.py": "import twoway.y\n",
            "twoway/y.py": "import twoway.x\n",
        },
    )
    assert main(["oneway"]) == 0
    assert "no import cycles in oneway" in capsys.readouterr().out
    assert main(["oneway", "twoway"]) == 1
    report = capsys.readouterr().err
    assert "cycle 1: twoway.x <-> twoway.y" in report
    assert "twoway/y.py:1: import twoway.x" in report


def test_by_default_it_checks_the_packages_import_linter_checks() -> None:
    packages = root_packages()
    assert {"broker_app", "experiments", "experiment_history", "spark_jobs"} <= set(packages)
