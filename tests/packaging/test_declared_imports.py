"""Every third-party import is declared in pyproject.toml, and the locks pin what it declares.

A module is mapped to the distribution that provides it in this venv
(``importlib.metadata.packages_distributions``): ``yaml`` is PyYAML, ``rest_framework`` is
djangorestframework. The shipped packages may import only ``[project] dependencies``; the
tests and benchmarks also the ``dev`` extra.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from importlib.metadata import packages_distributions

from packaging.requirements import Requirement

from tests.packaging.declared import (
    DEV_LOCK,
    DEV_MODULES_IN_RUNTIME_PACKAGES,
    DEV_TREES,
    NOT_FROM_THIS_VENV,
    PROJECT_DIR,
    RUNTIME_LOCK,
    Import,
    dev_requirements,
    imports_of,
    lock_pins,
    normalized,
    python_files,
    runtime_requirements,
    shipped_packages,
    third_party,
)


def undeclared(found: Iterable[Import], allowed: Sequence[Requirement]) -> list[str]:
    """One line per import whose module no allowed distribution provides."""
    names = {normalized(r.name) for r in allowed}
    providers = packages_distributions()
    problems = []
    for item in found:
        if item.module in NOT_FROM_THIS_VENV:
            continue
        dists = {normalized(d) for d in providers.get(item.module, [])}
        if not dists:
            problems.append(f"{item.path}:{item.line}: {item.module} is not installed")
        elif not dists & names:
            problems.append(
                f"{item.path}:{item.line}: {item.module} (from {', '.join(sorted(dists))})"
            )
    return sorted(set(problems))


def test_the_shipped_packages_import_only_runtime_dependencies() -> None:
    runtime_only = [
        path
        for package in shipped_packages()
        for path in python_files(package)
        if path.relative_to(PROJECT_DIR).as_posix() not in DEV_MODULES_IN_RUNTIME_PACKAGES
    ]
    found = third_party(imports_of(runtime_only))

    assert {"yaml", "cryptography", "asgiref", "django"} <= {i.module for i in found}
    assert undeclared(found, runtime_requirements()) == []


def test_the_tests_benchmarks_and_tooling_import_only_declared_dependencies() -> None:
    files = [path for tree in DEV_TREES for path in python_files(tree)]
    files += [path for package in shipped_packages() for path in python_files(package)]
    found = third_party(imports_of(files))

    assert {"pytest", "hypothesis", "grimp"} <= {i.module for i in found}
    assert undeclared(found, [*runtime_requirements(), *dev_requirements()]) == []


def test_an_import_of_an_undeclared_distribution_is_named_with_its_file_and_line() -> None:
    found = [Import("yaml", "remoting/acl_policy.py", 12), Import("hypothesis", "x.py", 3)]
    declared = [r for r in runtime_requirements() if normalized(r.name) != "pyyaml"]

    assert undeclared(found, declared) == [
        "remoting/acl_policy.py:12: yaml (from pyyaml)",
        "x.py:3: hypothesis (from hypothesis)",
    ]


def test_no_dependency_is_declared_twice() -> None:
    names = [normalized(r.name) for r in (*runtime_requirements(), *dev_requirements())]

    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def test_the_locks_pin_every_declared_dependency_with_hashes_and_agree() -> None:
    runtime, dev = lock_pins(RUNTIME_LOCK), lock_pins(DEV_LOCK)

    for lock, wanted in ((runtime, runtime_requirements()), (dev, dev_requirements())):
        for requirement in wanted:
            pin = lock.get(normalized(requirement.name))
            assert pin is not None, f"{requirement.name} is declared but not locked (make lock)"
            assert requirement.specifier.contains(pin.version), (requirement, pin.version)
    assert all(pin.hashes > 0 for pin in (*runtime.values(), *dev.values()))
    # The dev venv runs the very versions a host installs.
    assert {name: dev[name].version for name in runtime} == {
        name: pin.version for name, pin in runtime.items()
    }
