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
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from experiment_history.runs import iter_rows
from experiment_history.schema import (
    KIND_EXPIRE,
    ORIGIN_HARNESS,
    ORIGIN_INFERRED,
    ORIGIN_NODE,
    ORIGINS,
    WRITE_KINDS,
    is_follow_up,
)
from experiments.config import ExperimentConfig
from experiments.runner import CHURN_BROKERS, RunOutcome, analyze_runs, run_experiment
from remoting.consistency import CONSISTENCY_LINEARIZABLE, CONSISTENCY_LOCAL
from spark_jobs.checker import LINEARIZABLE, NOT_LINEARIZABLE, check_rows
from spark_jobs.metrics import SHOWN_VERDICTS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FOCUS_TOPIC = "topic-000"
DURATION_S = 16.0


def _config(mode: str, out: Path) -> ExperimentConfig:
    return ExperimentConfig(
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


def _run(mode: str, out: Path) -> RunOutcome:
    return run_experiment(_config(mode, out))


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


def test_raft_nodes_disagree_only_while_a_write_is_in_flight(
    runs: dict[str, RunOutcome],
) -> None:
    """A sampling round reads the nodes in parallel, each read linearizable, so a write
    that commits while the round runs may be seen by some of its reads and not others:
    that is the only disagreement raft mode may show. Every round whose nodes differ
    overlaps a write of the topic (its reads start at the round's stamp and end within
    the request timeout) and shows no value but that write's and a written one."""
    run_dir = runs["raft"].run_dir
    span_ms = int(_config("raft", run_dir).request_timeout_s * 1000)
    writes = [
        r
        for r in iter_rows(run_dir, "operations")
        if r["topic"] == FOCUS_TOPIC and r["kind"] in WRITE_KINDS
    ]
    written = {w["value"] for w in writes}
    values: dict[int, set[str]] = collections.defaultdict(set)
    for row in iter_rows(run_dir, "node_states"):
        if row["topic"] == FOCUS_TOPIC:
            values[row["ts_ms"]].add(row["value"])
    for ts in _diverged_rounds(run_dir, FOCUS_TOPIC):
        in_flight = [
            w
            for w in writes
            if w["invoke_ms"] <= ts + span_ms
            and w["complete_ms"] >= ts
            and w["value"] in values[ts]
        ]
        assert in_flight, (ts, values[ts])
        assert values[ts] <= written, (ts, values[ts])


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
    """The route churn: two spare brokers register and unregister in turn while the fault
    lasts, so every topic's register has writes to order (a verdict on one write tests
    nothing)."""
    for outcome in runs.values():
        assert outcome.summary["notes"]["churn_route_changes"] >= 2
        writes = _writes_in_fault_window(outcome.run_dir)
        topics = {r["topic"] for r in iter_rows(outcome.run_dir, "operations") if r["topic"]}
        assert all(writes[t] >= 2 for t in topics), writes


def test_every_write_says_where_it_came_from_and_the_churn_never_repeats_a_route(
    runs: dict[str, RunOutcome],
) -> None:
    """Each write has an origin (``operations.origin``); a churn broker starts each time
    with one more queue (``SimBroker.next_incarnation``) and the two of them take turns
    without the churn going back to the warm-up's route, so no two writes of a churned
    topic carry the same route and a read of one names the write it saw."""
    for mode, outcome in runs.items():
        writes = [r for r in iter_rows(outcome.run_dir, "operations") if r["kind"] in WRITE_KINDS]
        assert writes and all(r["origin"] in ORIGINS for r in writes), mode
        for row in writes:
            if json.loads(row["extra"]).get("inferred"):
                assert row["origin"] == ORIGIN_INFERRED, (mode, row)
            elif row["process"] in ("warmup", *CHURN_BROKERS):
                assert row["origin"] == ORIGIN_HARNESS, (mode, row)
            elif "reported_by" in json.loads(row["extra"]):
                assert row["origin"] == ORIGIN_NODE, (mode, row)
        churned: dict[str, list[str]] = collections.defaultdict(list)
        for row in writes:
            if row["process"] in CHURN_BROKERS:
                churned[row["topic"]].append(row["value"])
        assert churned and all(len(v) >= 2 for v in churned.values()), (mode, churned)
        assert all(len(set(v)) == len(v) for v in churned.values()), (mode, churned)
        # Every write of a churned topic, any origin and outcome: no write of the harness
        # (the warm-up's, the churn's) repeats an earlier value, and in raft mode, where
        # no broker expires, no write at all does (spark_jobs.register_zones decides such
        # a topic without a cap). In eventual mode a broker the partition hides from a
        # node expires there, and its next heartbeat round puts back the route it had.
        ordered = sorted(writes, key=lambda r: (r["invoke_us"], r["op_id"]))
        earlier: dict[str, set[str]] = collections.defaultdict(set)
        repeats: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
        for row in ordered:
            if row["value"] in earlier[row["topic"]]:
                repeats[row["topic"]].append((row["process"], row["origin"]))
            earlier[row["topic"]].add(row["value"])
        assert set(earlier) >= set(churned), mode
        assert not [r for rs in repeats.values() for r in rs if r[1] == ORIGIN_HARNESS], (
            mode,
            repeats,
        )
        if mode == "raft":
            assert not repeats, repeats


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


def test_spark_analysis_finds_every_raft_write_traceable_by_its_value(
    runs: dict[str, RunOutcome],
    tmp_path: Path,
) -> None:
    """The churn repeats no route, so the raft run's writes are all distinct per topic:
    ``summary.json``'s ``unique_write_values`` is true for the mode."""
    history = tmp_path / "history"
    history.mkdir()
    (history / "s1-raft").symlink_to(runs["raft"].run_dir, target_is_directory=True)
    tables = analyze_runs(history, tmp_path / "report")
    changes = tables["route_changes"]
    assert changes and all(r["repeated_values"] == 0 for r in changes), changes
    modes = json.loads((tmp_path / "report" / "summary.json").read_text())["modes"]
    assert set(modes) == {"raft"}
    assert modes["raft"]["unique_write_values"] is True


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
    modes = json.loads((tmp_path / "report" / "summary.json").read_text())["modes"]
    eventual = modes["eventual"]
    assert set(modes) == {"eventual"}
    assert {"inferred_writes", "unique_write_values", "unknown_topics"} <= set(eventual)
    inferred = sum(r["inferred_writes"] for r in tables["route_changes"])
    assert eventual["inferred_writes"] == inferred
    # Each eventual node's expiries come from its own journal (NODE_STATUS), as that
    # node's writes, not from the prober's inference.
    expiries = [
        r
        for r in iter_rows(runs["eventual"].run_dir, "operations")
        if r["kind"] == KIND_EXPIRE and r["origin"] == ORIGIN_NODE
    ]
    assert expiries, "the partitioned nodes' scans expired the cut lanes' brokers"
    assert {r["process"] for r in expiries} <= {f"ns-{r['node']}" for r in expiries}
    assert eventual["unknown_topics"] == sum(r["unknown"] for r in tables["linearizability"])
    # The checker's depth: every topic checked, with its operations and time.
    [depth] = tables["checker_depth"]
    assert depth["topics"] == sum(
        r[v] for r in tables["linearizability"] for v in SHOWN_VERDICTS if v in r
    )
    assert 0 < depth["ops_per_topic_median"] <= depth["ops_per_topic_max"] <= depth["ops"]
    assert 0 < depth["check_ms_max"] <= depth["check_ms_total"]
    assert eventual["checker"]["ops"] == depth["ops"]
    [anomalies] = tables["anomalies"]
    assert eventual["anomalies"]["stale_read"] == anomalies["stale_read"]
