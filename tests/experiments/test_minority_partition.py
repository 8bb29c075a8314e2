"""Minority partition in raft mode, end to end: the Raft traffic goes through the fault
proxy from the gateways' first start (the launcher's --raft-dial), so cutting the last node
needs no restart; the majority keeps (or elects) a leader, and with linearizable reads the
routes stay linearizable while the routes change (the runner's route churn) during the cut.

One short run (about 40 s with boot and tear-down). With the default local reads the cut
node answers from its last applied table, so its readers see routes the majority has
already changed: docs/EXPERIMENTS.md shows that history.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import iter_rows
from experiment_history.schema import WRITE_KINDS
from experiments.config import ExperimentConfig
from experiments.runner import RunOutcome, run_experiment
from spark_jobs.checker import LINEARIZABLE, check_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LISTENING = "(raft) listening on"


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunOutcome]:
    out = tmp_path_factory.mktemp("minority")
    yield run_experiment(
        ExperimentConfig(
            scenario="minority-partition",
            mode="raft",
            out_dir=out,
            seed=4,
            duration_s=10.0,
            brokers=6,
            topics=3,
            producers=1,
            consumer_groups=1,
            run_id="minority-raft",
            read_consistency="linearizable",
        )
    )


def test_the_gateways_dial_their_peers_through_the_proxy_and_never_restart(
    outcome: RunOutcome,
) -> None:
    cluster = json.loads((outcome.run_dir / "cluster" / "cluster.json").read_text())
    members = {n["raft_addr"] for n in cluster["nodes"]}
    for node in cluster["nodes"]:
        assert set(node["raft_dial"]) == members - {node["raft_addr"]}
        assert node["skew_allowance_ms"] == 0
        log = (Path(node["log_dir"]) / "gateway.log").read_text()
        assert log.count(LISTENING) == 1, f"{node['id']} gateway started more than once"
    [fault] = outcome.summary["faults"]
    assert fault["raft_bytes_before"] > 0, "Raft traffic crossed the proxy before the cut"
    assert len(fault["raft_links_cut"]) == 4


def test_the_majority_has_a_leader_and_the_cut_node_is_not_it(outcome: RunOutcome) -> None:
    [fault] = outcome.summary["faults"]
    cut = fault["target"]
    during = outcome.summary["notes"]["raft_states_before_heal"]
    assert during[cut] != "leader"
    assert [n for n, state in during.items() if state == "leader" and n != cut]


def test_the_route_history_stays_linearizable_while_routes_change(outcome: RunOutcome) -> None:
    ops = list(iter_rows(outcome.run_dir, "operations"))
    topics = {r["topic"] for r in ops if r["kind"] == "route_read"}
    assert topics
    [fault] = outcome.summary["faults"]
    inside = [
        r
        for r in ops
        if r["kind"] in WRITE_KINDS
        and r["outcome"] == "ok"
        and fault["start_ms"] <= r["complete_ms"] <= fault["end_ms"]
    ]
    assert {r["topic"] for r in inside} >= topics, "every topic's route changed in the cut"
    verdicts = {t: check_rows([r for r in ops if r["topic"] == t]).verdict for t in topics}
    assert verdicts == dict.fromkeys(topics, LINEARIZABLE)


def test_the_cut_node_refuses_linearizable_reads_instead_of_answering_stale(
    outcome: RunOutcome,
) -> None:
    # Only reads answered before the heal: a read that waits out the cut on its barrier
    # and is answered after the heal, with the majority's value, is a correct answer.
    [fault] = outcome.summary["faults"]
    cut_reads = [
        r
        for r in iter_rows(outcome.run_dir, "operations")
        if r["kind"] == "route_read"
        and r["node"] == fault["target"]
        and fault["start_ms"] + 1_000 <= r["invoke_ms"]
        and r["complete_ms"] <= fault["end_ms"]
    ]
    assert cut_reads, "the clients kept asking the cut node"
    assert all(r["outcome"] not in ("ok", "not_found") for r in cut_reads)


def test_every_answered_read_records_the_node_s_routes_version(outcome: RunOutcome) -> None:
    """Ext ``routesVersion`` reaches the history: every answered read and node sample has a
    version, and one client's reads of one node never see it go backwards."""
    answered = [
        r
        for r in iter_rows(outcome.run_dir, "operations")
        if r["kind"] == "route_read" and r["outcome"] in ("ok", "not_found")
    ]
    assert answered and all(r["version"] >= 0 for r in answered)
    samples = list(iter_rows(outcome.run_dir, "node_states"))
    assert samples and all(s["version"] >= 0 for s in samples)
    by_client_node: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in answered:
        by_client_node.setdefault((r["process"], r["node"]), []).append(r)
    for reads in by_client_node.values():
        reads.sort(key=lambda r: r["invoke_ms"])
        for before, after in itertools.pairwise(reads):
            if before["complete_ms"] <= after["invoke_ms"]:
                assert after["version"] >= before["version"], (before, after)
