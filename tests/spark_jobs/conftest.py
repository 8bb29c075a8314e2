"""Shared cast for the Spark job tests: one SparkSession and one hand-built history root.

The history holds five small runs, one per group of metrics, each with its own scenario
name so a test can pick its rows. Every expected number in the tests is worked out by hand
from the rows below.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import HistoryWriter, RunMeta

ROUTE_A = "a:h1:10911:4:4:6"
ROUTE_B = "a:h1:10911:4:4:6,b:h2:10911:4:4:6"
ROUTE_C = "c:h3:10911:4:4:6"
QUEUES_A = "a:0,a:1,a:2,a:3"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one SparkSession of the test run (start-up is slow, so it is shared)."""
    from spark_jobs.session import get_spark

    session = get_spark()
    yield session
    session.stop()


def op(
    op_id: int,
    process: str,
    kind: str,
    topic: str,
    invoke: int,
    complete: int,
    outcome: str = "ok",
    value: str = "",
    broker: str = "",
    extra: str = "{}",
    node: str = "n0",
) -> tuple[Any, ...]:
    """An ``operations`` row (times in ms; the microsecond columns follow from them)."""
    return (
        *(op_id, process, kind, node, topic, invoke, complete, outcome, value, -1, broker, extra),
        invoke * 1_000,
        complete * 1_000,
    )


def _run(
    root: Path,
    run_id: str,
    scenario: str,
    ops: list[tuple[Any, ...]],
    writes: list[tuple[Any, ...]] = (),
    faults: list[tuple[Any, ...]] = (),
    states: list[tuple[Any, ...]] = (),
) -> None:
    meta = RunMeta(run_id=run_id, scenario=scenario, mode="eventual", seed=0, nodes=["n0", "n1"])
    with HistoryWriter(root / run_id, meta, chunk_rows=7) as out:
        for row in ops:
            out.operation(row)
        for row in writes:
            out.write(row)
        for row in faults:
            out.fault(row)
        for row in states:
            out.node_state(row)


def _fresh_run(root: Path) -> None:
    reads = [
        (1, 500, ROUTE_A, "ok"),
        (2, 1050, ROUTE_A, "ok"),
        (3, 1200, ROUTE_B, "ok"),
        (4, 3000, ROUTE_B, "ok"),
        (5, 3500, "z:h9:1:1:1:6", "ok"),
        (6, 4000, "", "not_found"),
    ]
    ops = [
        op(i, "p1", "route_read", "T", t, t + 2, outcome, value) for i, t, value, outcome in reads
    ]
    ops += [
        op(7, "admin", "register", "W", 1500, 1502, "ok", "w"),
        op(8, "admin", "unregister", "W", 2000, 2002, "error", ""),
    ]
    writes = [(0, "T", "a", "register", ROUTE_A, 1), (1000, "T", "b", "register", ROUTE_B, 2)]
    faults = [(1000, 3200, "asymmetric_partition", "n0", json.dumps({"lost": ["b"]}))]
    rounds = {
        0: (ROUTE_A, ROUTE_A),
        5000: (ROUTE_A, ROUTE_B),
        10000: (ROUTE_A, ROUTE_B),
        15000: (ROUTE_B, ROUTE_B),
        20000: (ROUTE_A, ROUTE_B),
    }
    states = [(ts, f"n{n}", "T", values[n], -1) for ts, values in rounds.items() for n in (0, 1)]
    states += [(ts, f"n{n}", "U", ROUTE_C, -1) for ts in rounds for n in (0, 1)]
    _run(root, "r1", "fresh", ops, writes, faults, states)


def _kill_run(root: Path) -> None:
    ops = [
        op(1, "p1", "route_read", "T", 9000, 9002, value=ROUTE_B),
        op(2, "p1", "route_read", "T", 12000, 12002, value=ROUTE_B),
        op(3, "p1", "route_read", "T", 16000, 16002, value=ROUTE_A),
        op(4, "p2", "route_read", "T", 11000, 11002, value=ROUTE_B),
        op(5, "p2", "route_read", "T", 40000, 40002, value=ROUTE_A),
        op(6, "p3", "route_read", "U", 12000, 12002, value=ROUTE_C),
        op(7, "p1", "send", "T", 9000, 9002, broker="b", value="0"),
        op(8, "p1", "send", "T", 12500, 15500, outcome="error", broker="b", value="1"),
        op(9, "p1", "send", "T", 13000, 13002, broker="a", value="1"),
    ]
    writes = [(0, "T", "", "register", ROUTE_B, -1), (10000, "T", "b", "broker_down", ROUTE_A, -1)]
    faults = [(10000, -1, "kill_broker", "b", "{}")]
    rounds = {
        10000: (ROUTE_B, ROUTE_B),
        15000: (ROUTE_A, ROUTE_B),
        20000: (ROUTE_A, ROUTE_A),
        25000: (ROUTE_A, ROUTE_A),
    }
    states = [(ts, f"n{n}", "T", values[n], -1) for ts, values in rounds.items() for n in (0, 1)]
    _run(root, "r2", "kill", ops, writes, faults, states)


def _ownership_run(root: Path) -> None:
    group = json.dumps({"group": "g"})
    allocs = [
        (1, "c1", 100, QUEUES_A),
        (2, "c2", 200, "b:0,b:1,b:2,b:3"),
        (3, "c1", 300, QUEUES_A + ",b:0"),
        (4, "c2", 400, "b:2,b:3"),
    ]
    ops = [op(i, c, "consume_alloc", "T", t, t, value=v, extra=group) for i, c, t, v in allocs]
    _run(root, "r3", "own", ops, writes=[(0, "T", "", "register", ROUTE_B, -1)])


def _latency_run(root: Path) -> None:
    ops = [op(i, "p1", "send", "L", 1000 * i, 1000 * i + i, broker="a") for i in range(1, 101)]
    ops.append(op(101, "p1", "send", "L", 500, 99999, outcome="timeout", broker="a"))
    _run(root, "r4", "lat", ops)


def _checker_run(root: Path) -> None:
    ops = [
        op(1, "w", "register", "X", 0, 10, value="x"),
        op(2, "r", "route_read", "X", 20, 30, value="x"),
        op(3, "w", "register", "Y", 0, 10, value="a"),
        op(4, "w", "register", "Y", 20, 30, value="b"),
        op(5, "r", "route_read", "Y", 40, 50, value="a"),
        op(6, "r", "route_read", "Y", 32, 34, value="b"),
    ]
    _run(root, "r5", "lin", ops)


@pytest.fixture(scope="session")
def history_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root directory with the five hand-built runs."""
    root = tmp_path_factory.mktemp("histories")
    for build in (_fresh_run, _kill_run, _ownership_run, _latency_run, _checker_run):
        build(root)
    return root


@pytest.fixture(scope="session")
def history(spark: Any, history_root: Path) -> Any:
    """The hand-built runs loaded as Spark DataFrames."""
    from spark_jobs.dataset import load_history

    # Cached: every metric test scans the same five runs again.
    loaded = load_history(spark, history_root)
    for frame in (loaded.operations, loaded.writes, loaded.faults, loaded.node_states):
        frame.cache()
    return loaded


def rows_of(frame: Any, scenario: str) -> list[dict[str, Any]]:
    """Collected rows of one scenario as dicts."""
    return [r.asDict(recursive=True) for r in frame.filter(frame.scenario == scenario).collect()]
