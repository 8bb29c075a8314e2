"""Fail when modules of the project import each other, directly or around a longer circle.

``python -m tools.import_cycles`` (run by ``make lint``) builds the import graph of the root
packages named in pyproject's ``[tool.importlinter]`` with grimp (the library under
import-linter), every import counted: top-level, inside functions and under
``if TYPE_CHECKING:``. Each strongly connected group of modules is one cycle; it is listed
with one circle through it, every step with its file, line and statement.

import-linter's own ``acyclic_siblings`` contract compares sibling packages as wholes, so it
misses a package's ``__init__`` in a circle with its own modules and names only the imports
to cut; this check names the circles module by module.
"""

from __future__ import annotations

import itertools
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.machinery import PathFinder
from pathlib import Path

import grimp

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


@dataclass(frozen=True, slots=True)
class Step:
    """One import of a circle: ``importer`` imports ``imported`` at ``path:line``."""

    importer: str
    imported: str
    path: str
    line: int
    statement: str


@dataclass(frozen=True, slots=True)
class Cycle:
    """Modules that all reach each other by imports, and one circle through them."""

    modules: tuple[str, ...]
    circle: tuple[Step, ...]


def root_packages(pyproject: Path = PYPROJECT) -> list[str]:
    """The packages import-linter checks (``[tool.importlinter] root_packages``)."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    return list(config["tool"]["importlinter"]["root_packages"])


def find_cycles(packages: Sequence[str]) -> list[Cycle]:
    """Every import cycle among the modules of ``packages`` (importable from sys.path)."""
    graph = grimp.build_graph(*packages, cache_dir=None)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    groups = [sorted(g) for g in strongly_connected(edges) if len(g) > 1]
    return [Cycle(tuple(g), _circle(graph, edges, g)) for g in sorted(groups)]


def strongly_connected(edges: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """The strongly connected components of a directed graph (Kosaraju, no recursion)."""
    order: list[str] = []
    seen: set[str] = set()
    for start in sorted(edges):
        if start in seen:
            continue
        seen.add(start)
        stack = [(start, iter(sorted(edges[start])))]
        while stack:
            node, pending = stack[-1]
            nxt = next((n for n in pending if n in edges and n not in seen), None)
            if nxt is None:
                order.append(node)
                stack.pop()
            else:
                seen.add(nxt)
                stack.append((nxt, iter(sorted(edges[nxt]))))
    reverse: dict[str, set[str]] = {node: set() for node in edges}
    for node, targets in edges.items():
        for target in targets:
            if target in reverse:
                reverse[target].add(node)
    components: list[set[str]] = []
    assigned: set[str] = set()
    for root in reversed(order):
        if root in assigned:
            continue
        component, todo = set(), [root]
        assigned.add(root)
        while todo:
            node = todo.pop()
            component.add(node)
            fresh = reverse[node] - assigned
            assigned |= fresh
            todo.extend(fresh)
        components.append(component)
    return components


def _circle(
    graph: grimp.ImportGraph, edges: Mapping[str, set[str]], group: Sequence[str]
) -> tuple[Step, ...]:
    """The shortest circle from the group's first module back to itself."""
    start, members = group[0], set(group)
    # Any path between two modules of one component stays inside it.
    paths = [
        graph.find_shortest_chain(importer=nxt, imported=start)
        for nxt in sorted(edges[start] & members)
    ]
    best = min((p for p in paths if p), key=len)
    hops = (start, *best)
    return tuple(_step(graph, a, b) for a, b in itertools.pairwise(hops))


def _step(graph: grimp.ImportGraph, importer: str, imported: str) -> Step:
    details = graph.get_import_details(importer=importer, imported=imported)
    first = min(details, key=lambda d: d["line_number"]) if details else None
    return Step(
        importer,
        imported,
        source_path(importer),
        first["line_number"] if first else 0,
        first["line_contents"].strip() if first else "",
    )


def source_path(module: str) -> str:
    """The file of ``module``, relative to the working directory when under it; found on
    sys.path without importing anything (a package's ``__init__`` may load Django)."""
    root, *rest = module.split(".")
    spec = PathFinder.find_spec(root)
    locations = spec.submodule_search_locations if spec is not None else None
    base = Path(next(iter(locations))).joinpath(*rest) if locations else Path(root, *rest)
    file = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    try:
        return str(file.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(file)


def describe(cycles: Sequence[Cycle]) -> str:
    """The report ``make lint`` prints: each cycle, its modules and one circle."""
    lines = [
        f"{len(cycles)} import cycle(s): modules that import each other, directly or "
        "around a longer circle (imports inside functions and under TYPE_CHECKING count)."
    ]
    for number, cycle in enumerate(cycles, 1):
        lines.append(f"\ncycle {number}: {' <-> '.join(cycle.modules)}")
        lines += [
            f"  {s.importer} -> {s.imported}  ({s.path}:{s.line}: {s.statement})"
            for s in cycle.circle
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Check the packages given (default: pyproject's root packages); 1 when any cycle."""
    packages = list(argv if argv is not None else sys.argv[1:]) or root_packages()
    cycles = find_cycles(packages)
    if cycles:
        print(describe(cycles), file=sys.stderr)
        return 1
    print(f"no import cycles in {', '.join(packages)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
