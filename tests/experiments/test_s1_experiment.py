"""S1 end to end on real clusters: eventual mode diverges, raft mode does not.

One short run per mode (about 45 s each with boot and tear-down) is shared by the tests.
The raft run reads with ``--read-consistency linearizable``: with the default local reads
a follower may answer the previous route for the few milliseconds between another node's
acknowledgement and its own apply (docs/RAFT.md, "Read consistency"), which a follow-up
read can land in or not, so only linearizable reads make "the raft history is
linearizable" a property of the system rather than of one run's timing.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path

import pytest

from experiment_history.runs import iter_rows
from experiment_history.schema import WRITE_KINDS, is_follow_up
from experiments.config import ExperimentConfig
from experiments.runner import RunOutcome, analyze_runs, run_experiment
from remoting.consistency import CONSISTENCY_LINEARIZABLE, CONSISTENCY_LOCAL
from spark_jobs.checker import LINEARIZABLE, NOT_LINEARIZABLE, check_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FOCUS_TOPIC = "topic-000"
DURATION_S = 16.0


def _run(mode: str, out: Path) -> RunOutcome:
    return run_experiment(
        ExperimentConfig(
            scenario="s1-asymmetric-partition",
            mode=mode,
            out_dir=out,
            seed=11,
            duration_s=DURATION_S,
            brokers=8,
            topics=4,
            producers=2,
            run_id=f"s1-{mode}",
            read_consistency=CONSISTENCY_LINEARIZABLE if mode == "raft" else CONSISTENCY_LOCAL,
        )
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, RunOutcome]]:
    out = tmp_path_factory.mktemp("experiments")
    yield {mode: _run(mode, out) for mode in ("eventual", "raft")}


def _diverged_rounds(run_dir: Path, topic: str) -> list[int]:
    """Sampling rounds (ts) in which the nodes answered ``topic`` differently."""
    rounds: dict[int, set[str]] = collections.defaultdict(set)
    for row in iter_rows(run_dir, "node_states"):
        if row["topic"] == topic:
            rounds[row["ts_ms"]].add(row["value"])
    return sorted(ts for ts, values in rounds.items() if len(values) > 1)


def _verdict(run_dir: Path, topic: str) -> str:
    rows = [r for r in iter_rows(run_dir, "operations") if r["topic"] == topic]
    return check_rows(rows).verdict


def test_eventual_nodes_answer_different_routes_during_the_partition(
    runs: dict[str, RunOutcome],
) -> None:
    diverged = _diverged_rounds(runs["eventual"].run_dir, FOCUS_TOPIC)
    assert len(diverged) >= 3
    assert diverged[-1] - diverged[0] >= 1_000, "the divergence lasts a measurable window"


def test_eventual_route_history_is_not_linearizable(runs: dict[str, RunOutcome]) -> None:
    assert _verdict(runs["eventual"].run_dir, FOCUS_TOPIC) == NOT_LINEARIZABLE


def test_raft_nodes_never_disagree_on_a_committed_route(runs: dict[str, RunOutcome]) -> None:
    assert _diverged_rounds(runs["raft"].run_dir, FOCUS_TOPIC) == []


def _writes_in_fault_window(run_dir: Path) -> collections.Counter[str]:
    """Acknowledged route writes per topic inside the fault window."""
    faults = list(iter_rows(run_dir, "faults"))
    start, end = min(f["start_ms"] for f in faults), max(f["end_ms"] for f in faults)
    return collections.Counter(
        r["topic"]
        for r in iter_rows(run_dir, "operations")
        if r["kind"] in WRITE_KINDS and r["outcome"] == "ok" and start <= r["complete_ms"] <= end
    )


def test_routes_change_inside_the_fault_window_in_both_modes(
    runs: dict[str, RunOutcome],
) -> None:
    """The route churn: a spare broker registers and unregisters while the fault lasts, so
    every topic's register has writes to order (a verdict on one write tests nothing)."""
    for outcome in runs.values():
        assert outcome.summary["notes"]["churn_route_changes"] >= 2
        writes = _writes_in_fault_window(outcome.run_dir)
        topics = {r["topic"] for r in iter_rows(outcome.run_dir, "operations") if r["topic"]}
        assert all(writes[t] >= 2 for t in topics), writes


def test_raft_route_history_is_linearizable(runs: dict[str, RunOutcome]) -> None:
    topics = {r["topic"] for r in iter_rows(runs["raft"].run_dir, "operations") if r["topic"]}
    assert FOCUS_TOPIC in topics
    assert {t: _verdict(runs["raft"].run_dir, t) for t in topics} == dict.fromkeys(
        topics, LINEARIZABLE
    )


def test_both_runs_record_the_partition_and_client_operations(
    runs: dict[str, RunOutcome],
) -> None:
    for outcome in runs.values():
        faults = list(iter_rows(outcome.run_dir, "faults"))
        assert {f["kind"] for f in faults} == {"asymmetric_partition"}
        assert all(f["end_ms"] > f["start_ms"] for f in faults)
        kinds = collections.Counter(r["kind"] for r in iter_rows(outcome.run_dir, "operations"))
        assert kinds["route_read"] > 50 and kinds["send"] > 20 and kinds["consume_alloc"] > 5


def _reads_since_the_write(run_dir: Path) -> list[tuple[str, int, bool, bool]]:
    """Every answered route read as (process, ms since its topic's latest true write,
    whether it returned that write's route, whether another write of the topic was in
    flight while it ran).

    A read that overlaps a write (sent before the read completed, acknowledged after it
    started) may rightly return either value, so its freshness says nothing about the
    nodes: the churn broker's unregistration can follow its registration within the
    follow-up reader's 300 ms."""
    writes: dict[str, list[tuple[int, str]]] = collections.defaultdict(list)
    for row in iter_rows(run_dir, "writes"):
        writes[row["topic"]].append((row["ts_ms"], row["value"] or ""))
    in_flight: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)
    out = []
    operations = list(iter_rows(run_dir, "operations"))
    for row in operations:
        if row["kind"] in WRITE_KINDS:
            in_flight[row["topic"]].append((row["invoke_ms"], row["complete_ms"]))
    for row in operations:
        if row["kind"] != "route_read" or row["outcome"] not in ("ok", "not_found"):
            continue
        before = [w for w in sorted(writes[row["topic"]]) if w[0] <= row["invoke_ms"]]
        if before:
            ts, value = before[-1]
            read = row["value"] if row["outcome"] == "ok" else ""
            overlaps = any(
                start <= row["complete_ms"] and end >= row["invoke_ms"]
                for start, end in in_flight[row["topic"]]
            )
            out.append((row["process"], row["invoke_ms"] - ts, read == value, overlaps))
    return out


def test_readers_look_at_the_other_nodes_right_after_each_acknowledged_write(
    runs: dict[str, RunOutcome],
) -> None:
    for outcome in runs.values():
        reads = _reads_since_the_write(outcome.run_dir)
        soon = [r for r in reads if r[1] < 100]
        assert len(soon) >= 30, (outcome.meta.mode, len(soon))
        assert outcome.summary["notes"]["follow_up"]["writes_followed"] >= 2


def test_raft_followers_answer_an_acknowledged_route_100_ms_after_the_ack(
    runs: dict[str, RunOutcome],
) -> None:
    later = [
        fresh
        for process, since_ms, fresh, overlaps in _reads_since_the_write(runs["raft"].run_dir)
        if is_follow_up(process) and since_ms >= 100 and not overlaps
    ]
    assert len(later) >= 10
    assert sum(later) / len(later) >= 0.9, f"{sum(later)} of {len(later)} fresh"


def test_spark_analysis_reports_the_eventual_divergence(
    runs: dict[str, RunOutcome],
    tmp_path: Path,
) -> None:
    history = tmp_path / "history"
    history.mkdir()
    (history / "s1-eventual").symlink_to(runs["eventual"].run_dir, target_is_directory=True)
    tables = analyze_runs(history, tmp_path / "report")
    divergence = tables["divergence"]
    assert [row["mode"] for row in divergence] == ["eventual"]
    assert divergence[0]["mean_diverged_fraction"] > 0
    assert tables["overall"][0]["verdict"] == NOT_LINEARIZABLE
    assert (tmp_path / "report").is_dir()
